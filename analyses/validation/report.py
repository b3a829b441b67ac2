"""The causal-validation report: ``validation.csv``, ``unlabelled.csv``, ``validation.md`` and
``validation.json`` (which labels table it tested: path and SHA-256, so a validation of an older
``heads.csv`` can be told apart from one of the current table; ``interp summary`` checks it)."""

from __future__ import annotations

import json
from pathlib import Path

from analyses.validation.verdicts import VERDICTS
from interp.io import atomic_write, md_table

__all__ = ["report_markdown", "write_outputs", "OUTPUTS", "RECORD"]

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
