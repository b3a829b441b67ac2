"""``interp validate``: causal validation of head labels by ablation.

Writes ``DIR/validation.csv`` (one row per labelled head and role), ``DIR/unlabelled.csv`` (heads
with large effects and no label tied to the metric), ``DIR/validation.md`` (a report section) and
``DIR/validation.json`` (the labels file read and its SHA-256): the files of
``analyses.validation.OUTPUTS``, committed as a set when the run ends. ``--labels FILE`` (a file or
a pipe, ``--labels <(...)``) is read and checked (columns layer, head, role, label true/false)
before the model is loaded; a table whose ``model`` column names another model than the one
validated is refused (exit 2, naming both).

Every model is swept completely: every head is ablated once (one forward pass over all prompts,
started from the ablated layer's cached input where the model allows it, since nothing below that
layer changes), every other head forms the null (72 heads for MiniLM, 270 for SmolLM2, so p can
reach 1/(n_heads + 1)), and every labelled head is validated. Encoder probes use 32 prompts per
family (half train the probe), a causal LM 8. ``--n-null``, ``--n-layer-null`` and
``--max-heads-per-role`` sample fewer heads for a quicker run.

``--powered`` (causal LMs; its own command, too long for the main job): ``run_powered``, up to
``--n`` (default 120) prompts per metric that the model solves, its accuracy measured first, the
labelled non-sink heads against a layer-matched null of ``--n-null`` (default 30) heads and every
role's group ablation against as many random same-layer groups. Writes ``POWERED_OUTPUTS``
(powered.csv, groups.csv, accuracy.csv, powered.md, powered.json) instead.

This module parses the flags; loading the model, picking the sizes and getting the labels is
``analyses.validation.job``'s (``run_named``, ``run_powered_named``), writing is ``write`` /
``write_powered``'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import (
    add_force_argument,
    add_model_arguments,
    add_seed_argument,
    add_worker_arguments,
    positive_int,
    probability,
)
from analyses.workers import run_with_workers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--labels",
        default=None,
        help="heads.csv from `interp probe` of this model, a file or a pipe (default: probe now), or "
        "'patterns': previous-token and induction heads read off attention patterns (pattern_labels)",
    )
    parser.add_argument(
        "--n",
        type=positive_int,
        default=None,
        help="prompts per family (default: 8 causal, 32 encoder: probes need the data; --powered: 120 per metric)",
    )
    parser.add_argument("--ablation", default="mean", choices=["zero", "mean", "resample"])
    parser.add_argument(
        "--n-null",
        type=positive_int,
        default=None,
        help="random heads in the null (default: every head; --powered: 30); p cannot go below 1/(n_null + 1), "
        "so fewer than 1/alpha - 1 (19 at alpha 0.05) can validate no head (a warning says so)",
    )
    parser.add_argument(
        "--n-layer-null", type=positive_int, default=None, help="random heads per labelled layer (default: all)"
    )
    parser.add_argument(
        "--max-heads-per-role",
        type=positive_int,
        default=None,
        help="validate the best N labelled heads per role (default: all)",
    )
    parser.add_argument(
        "--probe-n", type=positive_int, default=60, help="items per relation when labels are recomputed"
    )
    parser.add_argument(
        "--powered",
        action="store_true",
        help="the powered run (causal LMs): many solved prompts per metric, layer-matched nulls, group ablations",
    )
    parser.add_argument(
        "--alpha",
        type=probability,
        default=0.05,
        help="significance level of a head's p against the null, strictly between 0 and 1 (default 0.05)",
    )
    add_seed_argument(parser)
    add_worker_arguments(parser)
    add_force_argument(parser)


def run(args) -> int:
    import sys

    from analyses import validation as V
    from interp import distributed

    table = None
    if args.labels and args.labels != "patterns":
        table = V.read_labels(args.labels)  # checked before the model is loaded (and before any worker starts)
        if not table["label"].any() and distributed.is_main_process():
            sys.stderr.write(f"interp validate: warning: no row of {args.labels} has label true; nothing to validate\n")
    n_null = 30 if args.powered and args.n_null is None else args.n_null  # the powered run's default null
    floor = V.p_floor_problem(n_null, args.alpha)
    if floor and distributed.is_main_process():  # after the refusals: a refused input gets its one line only
        given = "" if args.n_null is not None else " (the default)"
        sys.stderr.write(f"interp validate: warning: --n-null {n_null}{given}: {floor}\n")
    if args.powered:
        run_with_workers(args, "interp validate --powered", V.POWERED_OUTPUTS, _compute_powered, _write_powered, table)
        return 0
    run_with_workers(args, "interp validate", V.OUTPUTS, _compute, _write, table)
    return 0


def _options(args, table) -> dict:
    """The flags both runs of ``analyses.validation.job`` take; the labels as it takes them (the
    table read, "patterns", or None)."""
    return dict(
        labels=table if table is not None else args.labels,
        labels_path=args.labels,
        dtype=args.dtype,
        device=args.device,
        n=args.n,
        probe_n=args.probe_n,
        seed=args.seed,
        ablation=args.ablation,
        max_heads_per_role=args.max_heads_per_role,
        alpha=args.alpha,
    )


def _compute_powered(world, args, table):
    """The powered validation, on rank 0 only (it is not sharded)."""
    from analyses.validation import job

    if not world.is_main:
        return None
    return job.run_powered_named(args.model, n_null=args.n_null, **_options(args, table))


def _write_powered(args, tmp: Path, result, t0: float, table=None) -> None:
    import time

    from analyses import validation as V

    V.write_powered(result, tmp, seconds=time.perf_counter() - t0)


def _compute(world, args, table):
    """The validation on one worker (``world``: ``interp.distributed.World``; the sweep over heads is
    sharded); rank 0 returns the result, the other workers None."""
    from analyses.validation import job

    opts = _options(args, table)
    return job.run_named(args.model, world=world, n_null=args.n_null, n_layer_null=args.n_layer_null, **opts)


def _write(args, tmp: Path, result, t0: float, table=None) -> None:
    from analyses import validation as V

    V.write(result, tmp)
