"""The causal-validation report: ``validation.csv``, ``unlabelled.csv`` and ``validation.md``."""

from __future__ import annotations

from pathlib import Path

from analyses.validation.run import VERDICTS
from interp.io import atomic_write, md_table

__all__ = ["report_markdown", "write_outputs"]


def report_markdown(result, labels_source: str) -> str:
    t, info = result.table, result.info
    counts = t["verdict"].value_counts().reindex(list(VERDICTS), fill_value=0)
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


def write_outputs(result, out_dir, labels_source: str = "given") -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "validation.csv": out / "validation.csv",
        "unlabelled.csv": out / "unlabelled.csv",
        "validation.md": out / "validation.md",
    }
    atomic_write(paths["validation.csv"], result.table.to_csv(index=False))
    atomic_write(paths["unlabelled.csv"], result.unlabelled.to_csv(index=False))
    atomic_write(paths["validation.md"], report_markdown(result, labels_source))
    return paths
