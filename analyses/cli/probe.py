"""``interp probe``: classify every head of a model and write the head-probing report.

    interp probe --model minilm --out runs/minilm
    interp probe --model smollm2 --out runs/smollm2 --n 150
    interp probe --model path/to/checkpoint --out runs/mine --sources conllu=my_treebank.conllu
    interp probe --model smollm2 --out runs/text --sources text=my_sentences.txt,generated

Writes DIR/heads.csv, DIR/report.md, DIR/report.html (self-contained, interactive: see
``analyses.report.page``), DIR/examples.json (every head's attention on a few example sentences, for the
page) and the PNG figures (role_map.png, heatmaps.png, pattern_<role>.png): the files in
``analyses.heads.OUTPUTS``, committed as a set when the run ends (``interp.io.output_dir``); anything else
in DIR (``invariance/``, ``validation/``) is left alone. The work is ``analyses.heads.run`` and
``analyses.heads.write``; this module parses the arguments.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from analyses.cli.common import (
    add_deprecated_alias,
    add_force_argument,
    add_model_arguments,
    add_seed_argument,
    add_worker_arguments,
    positive_int,
)
from analyses.workers import run_with_workers

DEFAULT_N = 100  # items per relation: ~2 min for minilm, a few minutes for smollm2 on 2 CPU cores


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"items per relation (default {DEFAULT_N})")
    add_seed_argument(parser)
    parser.add_argument(
        "--sources",
        default=None,
        help="comma-separated data sources: generated, pairs, winobias, spacy, xsum, sonnets, ioi (causal models: "
        "the IOI prompts, read predictively), and your own files "
        "conllu=FILE (a CoNLL-U treebank: its nsubj arcs) and text=FILE (plain text, one sentence a line, "
        "parsed by spaCy: silver arcs); default: generated, or only your files where --conllu/--text-file or "
        "a FILE source is given. Every run also adds --n random token sequences (20 to 200) repeated once, for "
        "the duplicate-token and induction roles, your files' runs too",
    )
    parser.add_argument(
        "--weighting",
        default="attention,norm",
        help="attention weightings to score: attention (the pattern) and norm (Kobayashi et al. 2020: "
        "||a v W_O||); default both, attention first",
    )
    parser.add_argument(
        "--n-for",
        action="append",
        default=[],
        metavar="KEY=N",
        help="items for one relation, one source, or RELATION:SOURCE, overriding --n (repeatable; "
        "e.g. anaphora=2500 winobias=300)",
    )
    parser.add_argument(
        "--conllu", default=None, help="a CoNLL-U treebank: its nsubj arcs become subject-verb items (= conllu=FILE)"
    )
    parser.add_argument(
        "--text-file",
        dest="text",
        default=None,
        metavar="FILE",
        help="plain text, one sentence a line, parsed by spaCy (= text=FILE)",
    )
    add_deprecated_alias(parser, "--text", "--text-file", dest="text")
    parser.add_argument(
        "--examples",
        default=None,
        metavar="FILE",
        help="your sentences for the report page's head detail, one a line (default: four built-in ones)",
    )
    parser.add_argument("--no-null", action="store_true", help="skip the randomly initialised null model")
    parser.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates (default 200)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--query-block",
        type=positive_int,
        default=None,
        metavar="ROWS",
        help="reduce each layer's pattern ROWS query rows at a time (the toolkit's own models): memory "
        "ROWS x n per layer instead of n x n, for long texts of your own (--sources text=FILE); the scores "
        "are the same sums (default: whole patterns)",
    )
    parser.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (Holm), default 0.05")
    add_worker_arguments(parser)
    add_force_argument(parser)


def _n_for(args) -> dict[str, int]:
    n_for = {}
    for spec in args.n_for:
        relation, sep, value = spec.partition("=")
        if not sep or not value.strip().isdigit() or int(value) <= 0:
            raise ValueError(f"--n-for {spec!r}: expected RELATION=N with N a positive integer")
        n_for[relation.strip()] = int(value)
    return n_for


def _sources(args) -> list[str]:
    """--sources, checked; without it "generated", unless the user gave a file of their own."""
    from analyses.data import parse_sources

    if args.sources is not None:
        return parse_sources(args.sources)
    return [] if (args.conllu or args.text) else ["generated"]


def _items(args):
    from analyses.data import load_items

    return load_items(
        n=args.n, seed=args.seed, sources=_sources(args), conllu=args.conllu, n_for=_n_for(args), text=args.text
    )


def run(args) -> int:
    from analyses.heads import OUTPUTS

    _n_for(args)  # a malformed --n-for or --sources fails here, before any worker starts or --out is touched
    _sources(args)
    message = run_with_workers(args, "interp probe", OUTPUTS, _compute, _write)
    if message:
        sys.stdout.write(message)
    return 0


def _compute(world, args):
    """The probe on one worker (``world``: ``interp.distributed.World``): ``analyses.heads.run``;
    rank 0 returns its ``ProbeResult`` for ``_write``, the other workers None."""
    from analyses import heads

    items = _items(args)  # before the model: a bad --conllu or --sources fails at once
    if world.is_main:
        _say_left_out(items)
    mine = _example_sentences(args.examples) if world.is_main else None  # a pipe is read once, here
    res = heads.run(
        args.model,
        items,
        n=args.n,
        seed=args.seed,
        null_model=not args.no_null,
        n_boot=args.n_boot,
        alpha=args.alpha,
        batch_size=args.batch_size,
        weighting=[w.strip() for w in args.weighting.split(",") if w.strip()],
        device=args.device,
        dtype=args.dtype,
        world=world,
        example_sentences=mine,
        query_block=args.query_block,
    )
    if res.n_dropped and world.is_main:
        sys.stderr.write(
            f"interp probe: dropped {res.n_dropped} of {len(items)} sentences "
            f"in which a word got no token of its own under {res.name}'s tokenizer\n"
        )
    if (res.words.get("lost") or res.words.get("changed")) and world.is_main:
        sys.stderr.write(
            f"interp probe: {res.words['lost']} of {res.words['words']} words lost to the unknown token and "
            f"{res.words['changed']} changed by normalisation under {res.name}'s tokenizer\n"
        )
    return res if world.is_main else None


def _say_left_out(items) -> None:
    """One stderr line per text file (``--sources text=FILE``) whose lines did not all give an item:
    which lines, and why (the report's data section says the same)."""
    from analyses.data import left_out_lines
    from analyses.heads.report import left_out_text

    for path, f in left_out_lines(items).items():
        if f["left_out"]:
            sys.stderr.write(
                f"interp probe: {path}: {len(f['left_out'])} of {f['n_lines']} sentences give no subject-verb "
                f"item and are left out: {left_out_text(f['left_out'])}\n"
            )


def _example_sentences(path) -> list[str] | None:
    """--examples FILE: one sentence a line (blank lines skipped), or None for the built-in ones."""
    if path is None:
        return None
    from interp.io import decode_text, readable_input

    p = readable_input(path, "--examples file", "a text file, one sentence a line")
    lines = [line.strip() for line in decode_text(p.read_bytes(), p).splitlines()]
    sentences = [line for line in lines if line]
    if not sentences:
        raise ValueError(f"--examples {path}: no sentence in it; expected one sentence a line")
    return sentences


def _write(args, tmp: Path, result, t0: float) -> str:
    """Rank 0's ``ProbeResult`` into the open output set: ``analyses.heads.write``, then the page."""
    from analyses import heads
    from analyses.report import page

    command = "interp probe " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else None
    heads.write(result, tmp, command=command)
    page.write_page(tmp)  # report.html: the explorer, the labelled heads, data and method
    df = result.heads
    n_lab = int(df["label"].sum())
    workers = f" on {df.attrs['workers']} workers" if df.attrs.get("workers", 1) > 1 else ""
    return (
        f"{result.name}: {result.n_items} sentences, {n_lab} labels{workers}; wrote {args.out} "
        f"(heads.csv, report.md, report.html) in {time.perf_counter() - t0:.0f} s\n"
    )
