"""``interp invariance --model NAME --out DIR``: every invariance check on one model.

Writes DIR/invariance.csv (one row per check: model, check, quantity, value, tolerance, expected,
passed, ...), per-analysis CSVs, DIR/invariance.md with PNG figures, and a self-contained
DIR/invariance.html: the files of ``analyses.invariance.OUTPUTS``, committed as a set when the run
ends (``analyses.invariance.run``, then ``write``). Exit status 0 when every measurement agrees with
theory, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analyses.cli.common import (
    add_force_argument,
    add_model_arguments,
    add_seed_argument,
    add_text_argument,
    load_model,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    add_text_argument(parser)
    parser.add_argument("--n-tokens", type=int, default=16, help="at most this many tokens of input (default 16)")
    add_seed_argument(parser)
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    add_force_argument(parser)


def run(args: argparse.Namespace) -> int:
    if args.text is not None and not args.text.strip():
        raise ValueError("--text is empty; give a sentence, or leave --text out for the default one")
    if args.n_tokens < 4:
        raise ValueError(f"--n-tokens must be at least 4 (permutations need movable tokens), got {args.n_tokens}")
    from analyses.invariance import OUTPUTS  # after the checks: it imports torch
    from interp.io import output_dir

    with output_dir(args.out, OUTPUTS, command="interp invariance", what="--out", force=args.force) as tmp:
        t = _invariance(args, tmp)
    n_ok = int(t.passed.sum())
    sys.stdout.write(
        f"{n_ok} of {len(t)} invariance measurements agree with theory; report: {Path(args.out) / 'invariance.md'}\n"
    )
    for r in t[~t.passed].itertuples():
        sys.stdout.write(
            f"  DISAGREES: {r.check}: {r.quantity} value={r.value:.3g} tolerance={r.tolerance:.3g} "
            f"expected {r.expected}\n"
        )
    return 0 if n_ok == len(t) else 1


def _invariance(args, tmp: Path):
    from analyses import invariance

    model = load_model(args)  # --threads: set and restored around every command by main()
    result = invariance.run(model, text=args.text, n_tokens=args.n_tokens, seed=args.seed, progress=True)
    invariance.write(result, tmp, figures=not args.no_figures)
    return result.table
