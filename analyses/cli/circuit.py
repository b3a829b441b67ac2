"""``interp circuit --model smollm2 --task subject_verb --out DIR``: which heads and connections carry
a behaviour (attribution patching, EAP and EAP-IG, at node and edge level), and how faithful the
circuits they select are, against random and pattern-label circuits and exact patching.

Writes the files in ``analyses.circuits.OUTPUTS``, committed as a set when the run ends:
tasks.csv (the model's accuracy on the asked task, the only one whose pairs are built; a task it
does not solve is reported and not analysed, exit status 1), nodes.csv, edges.csv,
faithfulness.csv, summary.csv, faithfulness.png, circuit.png, report.md and circuit.json.
``--task`` is checked before the model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analyses.cli.common import (
    add_force_argument,
    add_model_arguments,
    add_seed_argument,
    load_model,
    positive_int,
    share,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from analyses.tasks import TASKS  # light: no torch

    add_model_arguments(parser, causal=True)
    parser.add_argument("--task", required=True, help=f"{', '.join(TASKS[:-1])} or {TASKS[-1]}")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--n",
        type=positive_int,
        default=240,
        help="pairs generated for the task (default 240; a quarter held out for faithfulness)",
    )
    parser.add_argument("--methods", default="eap,eap-ig", help="attribution methods, comma-separated (eap, eap-ig)")
    parser.add_argument("--steps", type=positive_int, default=5, help="EAP-IG interpolation steps (default 5)")
    parser.add_argument("--no-edges", action="store_true", help="node level only (skip edge attribution)")
    parser.add_argument("--top-edges", type=positive_int, default=200, help="edges kept per method in edges.csv")
    parser.add_argument(
        "--labels",
        default="auto",
        help="the pattern-label baseline: heads.csv from `interp probe` of this model, 'patterns' (induction "
        "and previous-token heads read off attention patterns), 'none', or 'auto' (patterns where the "
        "task's role is one of those; default)",
    )
    parser.add_argument("--n-random", type=positive_int, default=10, help="random circuits per size (default 10)")
    parser.add_argument("--no-exact", action="store_true", help="skip exact per-head patching (the ground truth)")
    parser.add_argument(
        "--exact-pairs", type=int, default=32, help="discovery pairs exact patching runs on (default 32; 0: all)"
    )
    parser.add_argument("--no-edge-curve", action="store_true", help="score edges but skip the edge-level curve")
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.add_argument(
        "--min-accuracy", type=share, default=None, help="accuracy the task needs, in [0, 1] (default 0.7)"
    )
    parser.add_argument(
        "--min-pairs", type=positive_int, default=None, help="solved pairs the task needs (default 100)"
    )
    add_seed_argument(parser)
    add_force_argument(parser)


def _check(args: argparse.Namespace) -> list[str]:
    from analyses.circuits.attribution import METHODS
    from analyses.tasks import check_task

    check_task(args.task)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"--methods {args.methods!r}: use a comma-separated list of {', '.join(METHODS)}")
    if args.exact_pairs < 0:
        raise ValueError(f"--exact-pairs must be >= 0 (0: every discovery pair), got {args.exact_pairs}")
    return methods


def run(args: argparse.Namespace) -> int:
    from interp.io import output_dir

    methods = _check(args)  # before the model is loaded
    if args.labels not in ("auto", "none", "patterns"):
        from analyses.validation import read_labels

        read_labels(args.labels)  # a bad table fails now, not after the attribution
    import analyses.circuits as circuits

    kw = {k: v for k, v in (("min_accuracy", args.min_accuracy), ("min_pairs", args.min_pairs)) if v is not None}
    with output_dir(args.out, circuits.OUTPUTS, command="interp circuit", what="--out", force=args.force) as tmp:
        result = circuits.run(
            load_model(args, causal=True), args.task, n=args.n, seed=args.seed, methods=methods, steps=args.steps,
            edges=not args.no_edges, n_top_edges=args.top_edges, labels=args.labels, n_random=args.n_random,
            batch_size=args.batch_size, exact=not args.no_exact, exact_pairs=args.exact_pairs or None,
            edge_curve=not args.no_edge_curve, all_tasks=False, progress=True, **kw,
        )  # fmt: skip
        circuits.write(result, tmp)
    out = Path(args.out) / "report.md"
    if not result.task.solved:
        sys.stdout.write(f"interp circuit: {args.task} not analysed: {result.task.why_not()}; report: {out}\n")
        return 1
    best = ", ".join(f"{r.method} ({r.level}) CPR {r.cpr:.3f} CMD {r.cmd:.3f}" for r in result.summary.itertuples())
    edges = result.info.get("edges", "scored")
    skipped = "" if args.no_edges or edges == "scored" else f"; edges skipped: {edges}"
    sys.stdout.write(f"interp circuit: {args.task} on {result.model_name}: {best}{skipped}; report: {out}\n")
    return 0
