"""``interp agreement --model smollm2 --task subject_verb,ioi,pronoun_gender --n 200 --out DIR``: does
what a head attends to (its attention to the task's target word, in the predictive and the
retrospective reading) agree in rank with what it does (its exact activation-patching effect on the
same pairs)? ``analyses.circuits.agreement``; docs/agreement.md.

Writes the files in ``analyses.circuits.agreement.OUTPUTS``, committed as a set when the run ends:
tasks.csv (each task's accuracy; a task the model does not solve is listed and skipped), heads.csv,
summary.csv, agreement.md and agreement.json. Exit status 1 when no task is solved. The tasks are
checked before the model is loaded."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analyses.cli.common import (
    add_force_argument,
    add_model_arguments,
    add_seed_argument,
    comma_list,
    load_model,
    positive_int,
    share,
)

TASKS = ("subject_verb", "ioi", "pronoun_gender")  # analyses.circuits.agreement.AGREEMENT_TASKS (no torch here)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, causal=True)
    parser.add_argument(
        "--task", type=comma_list, default=list(TASKS), help=f"comma-separated, of {', '.join(TASKS)} (default: all)"
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--n", type=positive_int, default=200, help="pairs generated per task (default 200; the solved kept)"
    )
    parser.add_argument(
        "--n-boot", type=positive_int, default=2000, help="bootstrap resamples over pairs (default 2000)"
    )
    parser.add_argument(
        "--top", type=positive_int, default=5, help="the top-k heads compared by score and by effect (5)"
    )
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument(
        "--min-accuracy", type=share, default=None, help="accuracy a task needs, in [0, 1] (default 0.7)"
    )
    parser.add_argument("--min-pairs", type=positive_int, default=None, help="solved pairs a task needs (default 20)")
    add_seed_argument(parser)
    add_force_argument(parser)


def _check(args: argparse.Namespace) -> None:
    bad = [t for t in args.task if t not in TASKS]
    if bad:
        raise ValueError(f"--task {','.join(bad)}: the agreement tasks are {', '.join(TASKS)}")
    for name, least in (("n", 2), ("n_boot", 10), ("top", 1), ("batch_size", 1)):
        if getattr(args, name) < least:
            raise ValueError(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(args, name)}")


def run(args: argparse.Namespace) -> int:
    from interp.io import output_dir

    _check(args)  # before the model is loaded
    import analyses.circuits.agreement as agreement

    kw = {k: v for k, v in (("min_accuracy", args.min_accuracy), ("min_pairs", args.min_pairs)) if v is not None}
    with output_dir(args.out, agreement.OUTPUTS, command="interp agreement", what="--out", force=args.force) as tmp:
        result = agreement.run(
            load_model(args, causal=True), args.task, n=args.n, seed=args.seed, n_boot=args.n_boot, top=args.top,
            batch_size=args.batch_size, progress=True, **kw,
        )  # fmt: skip
        agreement.write(result, tmp)
    out = Path(args.out) / "agreement.md"
    if not len(result.summary):
        sys.stdout.write(f"interp agreement: no task solved on {result.model_name}; report: {out}\n")
        return 1
    said = "; ".join(
        f"{r.task} ({r.reading}, n={r.n_pairs}) rho {r.rho:.2f} [{r.rho_low:.2f}, {r.rho_high:.2f}], "
        f"top-{args.top} overlap {r.top_overlap}"
        for r in result.summary.itertuples()
    )
    sys.stdout.write(f"interp agreement: {result.model_name}: {said}; report: {out}\n")
    return 0
