"""QK attribution's output set: ``OUTPUTS``, ``write`` and the figure (``qk_figure``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analyses.qk.run import QKResult
from interp.display import md_table, png_bytes
from interp.io import atomic_write, write_set

__all__ = ["OUTPUTS", "write", "qk_figure", "qk_markdown"]

OUTPUTS = ("qk_heads.csv", "qk_components.csv", "qk_cells.csv", "qk_check.csv", "qk_prompts.csv", "qk.png", "qk.md",
           "qk.json")  # fmt: skip


def qk_figure(result: QKResult, top: int = 6) -> bytes:
    """Per head (rows) and side (query, key: columns), the ``top`` components of the score
    difference by |mean term|, with their 95% bootstrap intervals over prompts."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    heads = result.heads[["layer", "head"]].drop_duplicates().itertuples(index=False)
    heads = list(heads)
    fig, axes = plt.subplots(len(heads), 2, figsize=(9, 1.0 + 0.38 * top * len(heads)), squeeze=False)
    comp = result.components
    for r, (layer, head) in enumerate(heads):
        for c, side in enumerate(("query", "key")):
            ax = axes[r][c]
            d = comp[(comp["layer"] == layer) & (comp["head"] == head) & (comp["quantity"] == "difference")
                     & (comp["side"] == side) & (comp["rank"] <= top)].sort_values("rank", ascending=False)  # fmt: skip
            y = np.arange(len(d))
            err = np.vstack([d["mean"] - d["ci_low"], d["ci_high"] - d["mean"]])
            ax.barh(y, d["mean"], xerr=err, color=np.where(d["mean"] > 0, "#2ca02c", "#d62728"), alpha=0.8)
            ax.set_yticks(y, d["component"])
            ax.axvline(0, color="black", lw=0.6)
            ax.set_title(f"L{layer}H{head}: {side} side", fontsize=9)
            ax.tick_params(labelsize=8)
            if r == len(heads) - 1:
                ax.set_xlabel(f"term of score({result.info['target']}) - score({result.info['params']['other']})")
    fig.suptitle(f"Why the heads attend: {result.model_name}, {result.task}", fontsize=10)
    fig.tight_layout()
    out = png_bytes(fig)
    plt.close(fig)
    return out


def qk_markdown(result: QKResult) -> str:
    """qk.md: what was split, the heads, their top components and cells, the frozen-scale check."""
    info, p = result.info, result.info["params"]
    lines = [
        f"## Why the heads attend: {result.model_name}, {result.task}",
        "",
        f"Each head's pre-softmax score of the answer position (the row the catalogue and the circuits patch) on "
        f"the {info['target']} is split exactly into (query-side component) x (key-side component) terms, with "
        "every norm's scale frozen at its value in the run (analyses/qk/attribution.py); `difference` is "
        f"score({info['target']}) - score(rival), the rival being {p['other']!r}. {info['n_prompts']} solved prompts "
        f"(accuracy {info['accuracy']:.3f}); intervals: 95% bootstrap over prompts. Components: `input` (token "
        "embedding), `a<l>.h<h>` (a head's output), `m<l>` (an MLP's output), `bias` (every constant).",
        "",
        "### Heads",
        "",
        md_table(result.heads.drop(columns=["model"])),
        "`target_wins`: the share of prompts where the head's score on the target beats the rival's. `max_error`: "
        "the largest |sum of terms - the model's score| (float rounding of the split).",
        "",
        "### Top components of the difference",
        "",
    ]
    comp = result.components
    top = comp[(comp["quantity"] == "difference") & (comp["rank"] <= 5)]
    lines += [md_table(top.drop(columns=["model", "quantity"])), "### Top cells of the difference", ""]
    cells = result.cells[(result.cells["quantity"] == "difference") & (result.cells["rank"] <= 5)]
    lines += [md_table(cells.drop(columns=["model", "quantity"])), "![qk](qk.png)", ""]
    if len(result.check):
        lines += [
            "### What freezing the scales leaves out",
            "",
            "The head's top score component on each side (by |mean term| in each batch; the most common one is "
            "shown) removed from the stream its layer reads, at that "
            "position only; `predicted` is minus its term (frozen scales), `measured` the model's score change "
            "(means over prompts; `median_ratio` measured / predicted per prompt).",
            "",
            md_table(result.check.drop(columns=["model"])),
        ]
    lines += [f"Time: {info['seconds']:.0f} s.", ""]
    return "\n".join(lines)


def _files(result: QKResult) -> dict[str, str | bytes]:
    return {
        "qk_heads.csv": result.heads.to_csv(index=False),
        "qk_components.csv": result.components.to_csv(index=False),
        "qk_cells.csv": result.cells.to_csv(index=False),
        "qk_check.csv": result.check.to_csv(index=False),
        "qk_prompts.csv": result.prompts.to_csv(index=False),
        "qk.png": qk_figure(result),
        "qk.md": qk_markdown(result),
        "qk.json": json.dumps(result.info, indent=2, default=str) + "\n",
    }


def _write_files(result: QKResult, folder: str | Path) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in _files(result).items():
        atomic_write(out / name, data)


def write(result: QKResult, folder: str | Path, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``). Returns ``folder``."""
    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command="interp qk", force=force)


def read_heads(folder: str | Path) -> pd.DataFrame | None:
    """A written run's ``qk_heads.csv`` (None where the folder has none)."""
    path = Path(folder) / "qk_heads.csv"
    return pd.read_csv(path) if path.is_file() else None
