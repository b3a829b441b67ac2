"""``interp validate``: causal validation of head labels by ablation.

Writes ``DIR/validation.csv`` (one row per labelled head and role), ``DIR/unlabelled.csv`` (heads
with large effects and no label tied to the metric) and ``DIR/validation.md`` (a report section).

Budget (2 CPU cores): a model with at most 100 heads (MiniLM: 72) is swept completely: every head
ablated, every other head in the null; its probes use 32 prompts per family (half train the probe). A larger one (SmolLM2: 270 heads, ~0.5 s per forward pass of
the default prompts) gets a sampled null: ``--n-null 20`` random heads from all layers plus
``--n-layer-null 2`` random heads of each labelled layer, and at most ``--max-heads-per-role 4``
best-scoring labelled heads per role. One forward pass per evaluated head over all prompts.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from analyses.report import atomic_write

SMALL_MODEL_HEADS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="minilm", help="minilm, smollm2 or a model folder (default: minilm)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--labels", default=None,
                        help="heads.csv from `interp probe` (default: probe now), or 'patterns': previous-token "
                             "and induction heads read off attention patterns (pattern_labels)")
    parser.add_argument("--n", type=int, default=None, help="prompts per family (default: 8 causal, 32 encoder: probes need the data)")
    parser.add_argument("--ablation", default="mean", choices=["zero", "mean", "resample"])
    parser.add_argument("--n-null", type=int, default=None, help="random heads in the null (default: all for small models, else 20)")
    parser.add_argument("--n-layer-null", type=int, default=None, help="random heads per labelled layer (default: all / 2)")
    parser.add_argument("--max-heads-per-role", type=int, default=None, help="validate the best N labelled heads per role (default: all / 4)")
    parser.add_argument("--probe-n", type=int, default=60, help="items per relation when labels are recomputed")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)


def _fmt(x) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return f"{x:.3g}" if abs(x) < 1e4 else f"{x:.3e}"
    return str(x)


def markdown_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)\n"
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def report_markdown(result, labels_source: str) -> str:
    from analyses import validation as V

    t, info = result.table, result.info
    counts = t["verdict"].value_counts().reindex(list(V.VERDICTS), fill_value=0)
    lines = [
        f"## Causal validation of head labels: {info['model']}",
        "",
        f"Labels: {labels_source}. Ablation: **{info['ablation']}** of `hook_z`, one head at a time, "
        f"{info['n_prompts']} prompts (seed {info['seed']}), {info['n_heads_evaluated']} heads evaluated, "
        f"null of {info['n_null']} random heads from all layers"
        + (f", at most {info['max_heads_per_role']} labelled heads per role" if info["max_heads_per_role"] else "")
        + ".",
        "",
        "Verdicts: " + ", ".join(f"{k}: {v}" for k, v in counts.items()) + f" (of {len(t)} labelled head-roles).",
        "",
        "Rule: *validated* = the effect (clean score - ablated score, higher score = better behaviour) has a "
        "95% bootstrap interval above 0, is at least `min_effect`, and its empirical p-value against random "
        f"heads (+1 corrected) is at most {info['alpha']} (smallest attainable: 1/(n_null+1)); `q_value` is "
        "Benjamini-Hochberg over the labelled rows, for a false-discovery reading; *pattern only* = no "
        "measurable effect either way; *inconclusive* = the rest.",
        "",
        "### Metrics",
        "",
    ]
    for m, d in info["metrics"].items():
        acc = info.get("clean_accuracy", {}).get(m)
        extra = f", clean held-out probe accuracy {acc:.2f}" if acc is not None else ""
        lines.append(f"- `{m}`: {d} (clean mean {info['clean'][m]:.3g}{extra})")
    show = t[["layer", "head", "role", "metric", "effect", "ci_low", "ci_high", "null_mean", "null_std", "z",
              "p_value", "q_value", "p_value_layer", "verdict"]]
    lines += ["", "### Labelled heads", "", markdown_table(show)]
    lines += ["### Heads with large effects and no label for that behaviour", ""]
    u = result.unlabelled
    lines.append(markdown_table(u.drop(columns=["model"]).head(20)) if not u.empty else "(none)\n")
    if info["n_null"] < info.get("n_heads_total", info["n_null"]):
        lines.append("Only evaluated heads (labelled ones and the random null sample) can appear here.\n")
    return "\n".join(lines) + "\n"


def write_outputs(result, out_dir, labels_source: str = "given") -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"validation.csv": out / "validation.csv", "unlabelled.csv": out / "unlabelled.csv",
             "validation.md": out / "validation.md"}
    atomic_write(paths["validation.csv"], result.table.to_csv(index=False))
    atomic_write(paths["unlabelled.csv"], result.unlabelled.to_csv(index=False))
    atomic_write(paths["validation.md"], report_markdown(result, labels_source))
    return paths


def run(args) -> int:
    import models
    from analyses import validation as V

    model = models.load(args.model).eval()
    n_heads = model.cfg.n_layers * model.cfg.n_heads
    small = n_heads <= SMALL_MODEL_HEADS
    causal = V._is_causal(model) and V._has_lm_head(model)
    n = args.n or (8 if causal else 32)
    n_null = args.n_null if args.n_null is not None else (None if small else 20)
    n_layer_null = args.n_layer_null if args.n_layer_null is not None else (None if small else 2)
    cap = args.max_heads_per_role if args.max_heads_per_role is not None else (None if small else 4)
    if args.labels == "patterns":
        labels, source = V.pattern_labels(model, seed=args.seed), "previous-token and induction heads from patterns (`pattern_labels`)"
    elif args.labels:
        path = Path(args.labels)
        if not path.is_file():
            raise SystemExit(f"--labels {path}: no such file (expected the heads.csv written by `interp probe`)")
        labels, source = pd.read_csv(path), f"read from `{path}`"
    else:
        from analyses.heads import probe_heads

        labels, source = probe_heads(model, n=args.probe_n, seed=args.seed), f"recomputed (`probe_heads`, n={args.probe_n})"
    result = V.validate(model, labels, n=n, seed=args.seed, ablation=args.ablation, n_null=n_null,
                        n_layer_null=n_layer_null, max_heads_per_role=cap, alpha=args.alpha,
                        model_name=getattr(model.cfg, "name", args.model))
    result.info["n_heads_total"] = n_heads
    write_outputs(result, args.out, source)
    return 0
