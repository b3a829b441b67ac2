"""``interp validate``: causal validation of head labels by ablation.

Writes ``DIR/validation.csv`` (one row per labelled head and role), ``DIR/unlabelled.csv`` (heads
with large effects and no label tied to the metric) and ``DIR/validation.md`` (a report section).

Budget (2 CPU cores): a model with at most 100 heads (MiniLM: 72) is swept completely: every head
ablated, every other head in the null; its probes use 32 prompts per family (half train the
probe). A larger one (SmolLM2: 270 heads, ~0.5 s per forward pass of the default prompts) gets a
sampled null: ``--n-null 20`` random heads from all layers plus ``--n-layer-null 2`` random heads of
each labelled layer, and at most ``--max-heads-per-role 4`` best-scoring labelled heads per role.
One forward pass per evaluated head over all prompts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SMALL_MODEL_HEADS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="minilm", help="minilm, smollm2 or a model folder (default: minilm)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--labels",
        default=None,
        help="heads.csv from `interp probe` (default: probe now), or 'patterns': previous-token "
        "and induction heads read off attention patterns (pattern_labels)",
    )
    parser.add_argument(
        "--n", type=int, default=None, help="prompts per family (default: 8 causal, 32 encoder: probes need the data)"
    )
    parser.add_argument("--ablation", default="mean", choices=["zero", "mean", "resample"])
    parser.add_argument(
        "--n-null", type=int, default=None, help="random heads in the null (default: all for small models, else 20)"
    )
    parser.add_argument(
        "--n-layer-null", type=int, default=None, help="random heads per labelled layer (default: all / 2)"
    )
    parser.add_argument(
        "--max-heads-per-role",
        type=int,
        default=None,
        help="validate the best N labelled heads per role (default: all / 4)",
    )
    parser.add_argument("--probe-n", type=int, default=60, help="items per relation when labels are recomputed")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    import pandas as pd

    import models
    from analyses import validation as V
    from analyses.validation.report import write_outputs
    from interp.view import view

    model = models.load(args.model).eval()
    n_heads = model.cfg.n_layers * model.cfg.n_heads
    small = n_heads <= SMALL_MODEL_HEADS
    v = view(model)
    causal = v.causal and v.lm_head
    n = args.n or (8 if causal else 32)
    n_null = args.n_null if args.n_null is not None else (None if small else 20)
    n_layer_null = args.n_layer_null if args.n_layer_null is not None else (None if small else 2)
    cap = args.max_heads_per_role if args.max_heads_per_role is not None else (None if small else 4)
    if args.labels == "patterns":
        labels, source = (
            V.pattern_labels(model, seed=args.seed),
            "previous-token and induction heads from patterns (`pattern_labels`)",
        )
    elif args.labels:
        path = Path(args.labels)
        if not path.is_file():
            raise SystemExit(f"--labels {path}: no such file (expected the heads.csv written by `interp probe`)")
        labels, source = pd.read_csv(path), f"read from `{path}`"
    else:
        from analyses.heads import probe_heads

        labels, source = (
            probe_heads(model, n=args.probe_n, seed=args.seed),
            f"recomputed (`probe_heads`, n={args.probe_n})",
        )
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
    )
    result.info["n_heads_total"] = n_heads
    write_outputs(result, args.out, source)
    return 0
