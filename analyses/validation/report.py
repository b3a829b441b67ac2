"""The causal-validation report: ``validation.csv``, ``unlabelled.csv``, ``validation.md`` and
``validation.json`` (which labels table it tested: path and SHA-256, so a validation of an older
``heads.csv`` can be told apart from one of the current table; ``interp summary`` checks it)."""

from __future__ import annotations

import json
from pathlib import Path

from analyses.validation.verdicts import VERDICTS
from interp.display import md_table
from interp.io import atomic_write

__all__ = [
    "report_markdown",
    "write_outputs",
    "OUTPUTS",
    "RECORD",
    "POWERED_OUTPUTS",
    "powered_markdown",
    "write_powered",
]

OUTPUTS = ("validation.csv", "unlabelled.csv", "validation.md", "validation.json")
RECORD = "validation.json"


def report_markdown(result, labels_source: str, labels_sha256: str | None = None) -> str:
    t, info = result.table, result.info
    counts = t["verdict"].value_counts().reindex(list(VERDICTS), fill_value=0)
    sha = f" (sha256 `{labels_sha256}`)" if labels_sha256 else ""
    lines = [
        f"## Causal validation of head labels: {info['model']}",
        "",
        f"Labels: {labels_source}{sha}. Ablation: **{info['ablation']}** of `hook_z`, one head at a time, "
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
        "Benjamini-Hochberg within each role over its 8 best labels by probe score (a family fixed before "
        "any ablation; the other labels have no q), for a false-discovery reading; *pattern only* = no "
        "measurable effect either way; *inconclusive* = the rest.",
        "",
        "### Metrics",
        "",
    ]
    for m, d in info["metrics"].items():
        acc = info.get("clean_accuracy", {}).get(m)
        extra = f", clean held-out probe accuracy {acc:.2f}" if acc is not None else ""
        lines.append(f"- `{m}`: {d} (clean mean {info['clean'][m]:.3g}{extra})")
    show = t[
        [
            "layer",
            "head",
            "role",
            "metric",
            "effect",
            "ci_low",
            "ci_high",
            "null_mean",
            "null_std",
            "z",
            "p_value",
            "q_value",
            "p_value_layer",
            "verdict",
        ]
    ]
    lines += ["", "### Labelled heads", "", md_table(show)]
    lines += ["### Heads with large effects and no label for that behaviour", ""]
    u = result.unlabelled
    lines.append(md_table(u.drop(columns=["model"]).head(20), empty="(none)"))
    if info["n_null"] < info.get("n_heads_total", info["n_null"]):
        lines.append("Only evaluated heads (labelled ones and the random null sample) can appear here.\n")
    return "\n".join(lines) + "\n"


def write_outputs(
    result, out_dir, labels_source: str = "given", labels_path: str | None = None, labels_sha256: str | None = None
) -> dict:
    """Write the four files into ``out_dir`` (each atomically; ``interp validate`` commits them as
    a set). ``labels_path``/``labels_sha256``: the labels CSV read, recorded in validation.json and
    validation.md. Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in OUTPUTS}
    info = result.info
    record = {
        "model": info.get("model"),
        "labels": labels_path,
        "labels_sha256": labels_sha256,
        "labels_source": labels_source,
        "n_labels": int(len(result.table)),
        **{k: info.get(k) for k in ("ablation", "seed", "n_prompts", "n_null", "alpha")},
    }
    atomic_write(paths["validation.csv"], result.table.to_csv(index=False))
    atomic_write(paths["unlabelled.csv"], result.unlabelled.to_csv(index=False))
    atomic_write(paths["validation.md"], report_markdown(result, labels_source, labels_sha256))
    atomic_write(paths[RECORD], json.dumps(record, indent=2, default=str) + "\n")
    return paths


POWERED_OUTPUTS = ("powered.csv", "groups.csv", "accuracy.csv", "powered.md", "powered.json")


def powered_markdown(result, labels_source: str, seconds: float | None = None) -> str:
    """The report section of ``validate_powered``: the model's own accuracy per task, the group
    ablations and the single labelled heads."""
    info, t, g = result.info, result.table, result.groups
    took = f" It took {seconds:.0f} s ({info['ablated_prompt_runs']} ablated prompt runs)." if seconds else ""
    sinks = ", ".join(f"{r}: {c}" for r, c in info["sinks_left_out"].items()) or "none"
    lines = [
        f"## Powered causal validation: {info['model']}",
        "",
        f"Labels: {labels_source}. Ablation: **{info['ablation']}** of `hook_z`; up to {info['n']} prompts per "
        f"metric that the model solves (seed {info['seed']}); single heads against a layer-matched null of "
        f"{info['n_null']} heads (drawn from the labelled heads' layers, none labelled with the role), groups "
        f"against {info['n_group_null']} random groups with one head from each member's layer.{took} "
        f"Sink labels left out (background, not a behaviour): {sinks}.",
        "",
        "Rule: *validated* = the 95% bootstrap interval of the effect is above 0, the effect is at least "
        f"`min_effect`, and p (+1 corrected, against the layer-matched null) is at most {info['alpha']}.",
        "",
        "### The model's own accuracy per task (prompts it gets wrong are dropped)",
        "",
        md_table(result.accuracy, empty="(prompts given)"),
        "### Group ablation: all labelled heads of a role at once",
        "",
        md_table(g.drop(columns=["model"]), empty="(no role with two or more labelled heads)"),
        "### Single labelled heads",
        "",
        md_table(t.drop(columns=["model"])),
    ]
    counts = t["verdict"].value_counts().to_dict()
    lines.append("Single-head verdicts: " + (", ".join(f"{k}: {v}" for k, v in counts.items()) or "none") + ".")
    return "\n".join(lines) + "\n"


def write_powered(result, out_dir, labels_source: str = "given", labels_sha256: str | None = None, seconds=None):
    """Write ``POWERED_OUTPUTS`` into ``out_dir`` (each atomically). Returns {name: path}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in POWERED_OUTPUTS}
    record = dict(result.info, labels_source=labels_source, labels_sha256=labels_sha256, seconds=seconds)
    atomic_write(paths["powered.csv"], result.table.to_csv(index=False))
    atomic_write(paths["groups.csv"], result.groups.to_csv(index=False))
    atomic_write(paths["accuracy.csv"], result.accuracy.to_csv(index=False))
    atomic_write(paths["powered.md"], powered_markdown(result, labels_source, seconds))
    atomic_write(paths["powered.json"], json.dumps(record, indent=2, default=str) + "\n")
    return paths
