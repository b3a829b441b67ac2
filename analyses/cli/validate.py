"""``interp validate``: causal validation of head labels by ablation.

Writes ``DIR/validation.csv`` (one row per labelled head and role), ``DIR/unlabelled.csv`` (heads
with large effects and no label tied to the metric), ``DIR/validation.md`` (a report section) and
``DIR/validation.json`` (the labels file read and its SHA-256): the files in ``OWNS``, committed as
a set when the run ends. ``--labels FILE`` (a file or a pipe, ``--labels <(...)``) is read and
checked (columns layer, head, role, label true/false) before the model is loaded; a table whose
``model`` column names another model than the one validated is refused (exit 2, naming both).

Every model is swept completely: every head is ablated once (one forward pass over all prompts,
started from the ablated layer's cached input where the model allows it, since nothing below that
layer changes), every other head forms the null (72 heads for MiniLM, 270 for SmolLM2, so p can
reach 1/(n_heads + 1)), and every labelled head is validated. Encoder probes use 32 prompts per
family (half train the probe), a causal LM 8. ``--n-null``, ``--n-layer-null`` and
``--max-heads-per-role`` sample fewer heads for a quicker run.

``--powered`` (causal LMs; its own command, too long for the main job): ``validate_powered``, up to
``--n`` (default 120) prompts per metric that the model solves, its accuracy measured first, the
labelled non-sink heads against a layer-matched null of ``--n-null`` (default 30) heads and every
role's group ablation against as many random same-layer groups. Writes ``POWERED_OUTPUTS``
(powered.csv, groups.csv, accuracy.csv, powered.md, powered.json) instead.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import add_force_argument, add_model_arguments, add_seed_argument, add_worker_arguments
from analyses.workers import run_with_workers

OWNS = ("validation.csv", "unlabelled.csv", "validation.md", "validation.json")


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
        "--n", type=int, default=None, help="prompts per family (default: 8 causal, 32 encoder: probes need the data)"
    )
    parser.add_argument("--ablation", default="mean", choices=["zero", "mean", "resample"])
    parser.add_argument("--n-null", type=int, default=None, help="random heads in the null (default: every head)")
    parser.add_argument("--n-layer-null", type=int, default=None, help="random heads per labelled layer (default: all)")
    parser.add_argument(
        "--max-heads-per-role",
        type=int,
        default=None,
        help="validate the best N labelled heads per role (default: all)",
    )
    parser.add_argument("--probe-n", type=int, default=60, help="items per relation when labels are recomputed")
    parser.add_argument(
        "--powered",
        action="store_true",
        help="the powered run (causal LMs): many solved prompts per metric, layer-matched nulls, group ablations",
    )
    parser.add_argument("--alpha", type=float, default=0.05)
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
    if args.powered:
        from analyses.validation.report import POWERED_OUTPUTS

        run_with_workers(args, "interp validate --powered", POWERED_OUTPUTS, _compute_powered, _write_powered, table)
        return 0
    run_with_workers(args, "interp validate", OWNS, _compute, _write, table)
    return 0


def _labels_for(args, model, table) -> tuple:
    """(the labels table, where it came from): read, read off patterns, or recomputed."""
    from analyses import validation as V

    if args.labels == "patterns":
        return V.pattern_labels(
            model, seed=args.seed
        ), "previous-token and induction heads from patterns (`pattern_labels`)"
    if table is not None:
        return table, f"read from `{args.labels}`"
    from analyses.heads import probe_heads

    return probe_heads(model, n=args.probe_n, seed=args.seed), f"recomputed (`probe_heads`, n={args.probe_n})"


def _compute_powered(world, args, table) -> tuple | None:
    """The powered validation, on rank 0 only (it is not sharded)."""
    import models
    from analyses import validation as V
    from analyses.validation.prompts import is_lm

    if not world.is_main:
        return None
    model = models.load(args.model, dtype=args.dtype).eval()
    if not is_lm(model):
        raise ValueError(f"--powered needs a causal LM with an LM head (e.g. smollm2); {args.model} is not one")
    labels, source = _labels_for(args, model, table)
    result = V.validate_powered(
        model,
        labels,
        n=args.n or 120,
        seed=args.seed,
        ablation=args.ablation,
        n_null=args.n_null or 30,
        n_group_null=args.n_null or 30,
        max_heads_per_role=args.max_heads_per_role,
        alpha=args.alpha,
    )
    return result, source


def _write_powered(args, tmp: Path, computed: tuple, t0: float, table=None) -> None:
    import time

    from analyses.validation.report import write_powered

    result, source = computed
    sha = table.attrs["sha256"] if table is not None else None
    write_powered(result, tmp, source, labels_sha256=sha, seconds=time.perf_counter() - t0)


def _compute(world, args, table) -> tuple | None:
    """The validation on one worker (``world``: ``interp.distributed.World``; the sweep over heads is
    sharded); rank 0 returns (result, source), the other workers None."""
    import models
    from analyses import validation as V
    from interp.view import view

    model = models.load(args.model, dtype=args.dtype).eval()
    n_heads = model.cfg.n_layers * model.cfg.n_heads
    v = view(model)
    causal = v.causal and v.lm_head
    n = args.n or (8 if causal else 32)
    # the null is every head of the model (each head is ablated once anyway), so p can reach
    # 1/(n_heads + 1); every labelled head is validated
    n_null, n_layer_null, cap = args.n_null, args.n_layer_null, args.max_heads_per_role
    labels, source = _labels_for(args, model, table)
    result = V.validate(
        model,
        labels,
        n=n,
        seed=args.seed,
        ablation=args.ablation,
        n_null=n_null,
        n_layer_null=n_layer_null,
        max_heads_per_role=cap,
        alpha=args.alpha,
        model_name=v.name,
        world=world,
    )
    if not world.is_main:
        return None
    result.info["n_heads_total"] = n_heads
    return result, source


def _write(args, tmp: Path, computed: tuple, t0: float, table=None) -> None:
    from analyses.validation.report import write_outputs

    result, source = computed
    write_outputs(
        result,
        tmp,
        source,
        labels_path=args.labels if table is not None else None,
        labels_sha256=table.attrs["sha256"] if table is not None else None,
    )
