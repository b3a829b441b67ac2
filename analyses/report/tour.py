"""The tour of a model: its hooks and their shapes, and one attention pattern as a PNG (``interp tour``)."""

from __future__ import annotations

from pathlib import Path

import torch

from interp.display import figure_label
from interp.io import atomic_save
from interp.names import act_name

DEFAULT_TEXT = "The cat sleeps because it is tired."


def hook_shapes(model, text: str = DEFAULT_TEXT):
    """A pandas DataFrame, one row per hook point: name, shape on ``text``, documented axes."""
    import pandas as pd

    with torch.no_grad():
        _, cache = model.run_with_cache(text)
    documented = dict(model.hook_table())
    rows = [
        {"hook": name, "shape": tuple(cache[name].shape), "axes": documented.get(name, "")}
        for name in model.hook_names()
        if name in cache
    ]
    return pd.DataFrame(rows)


def plot_pattern(model, text: str, layer: int, head: int, path: Path) -> Path:
    """Save one head's attention pattern on ``text`` as a PNG (seaborn heatmap), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    batch = model.to_words([text])
    name = act_name(layer, "attn.hook_pattern")
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.input_ids, attention_mask=batch.attention_mask, names_filter=name)
    pattern = cache[name][0, head].float().cpu().numpy()  # numpy has no bf16; a GPU tensor is copied
    labels = [figure_label(t) for t in batch.tokens[0]]
    fig, ax = plt.subplots(figsize=(1 + 0.45 * len(labels), 0.8 + 0.4 * len(labels)))
    sns.heatmap(
        pattern,
        xticklabels=labels,
        yticklabels=labels,
        cmap="viridis",
        vmin=0,
        vmax=1,
        square=True,
        ax=ax,
        cbar_kws={"label": "attention weight"},
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(figure_label(f"{model.cfg.name}: layer {layer} head {head}"))
    fig.tight_layout()
    try:
        return atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    finally:
        plt.close(fig)
