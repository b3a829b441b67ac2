"""``interp tour``: the model, its hooks and their shapes, and one attention pattern as a PNG."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

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

    batch = model.to_tokens([text])
    name = f"blocks.{layer}.attn.hook_pattern"
    with torch.no_grad():
        _, cache = model.run_with_cache(batch.input_ids, attention_mask=batch.attention_mask, names_filter=name)
    pattern = cache[name][0, head].numpy()
    labels = [t.replace("Ġ", "_") for t in batch.tokens[0]]
    fig, ax = plt.subplots(figsize=(1 + 0.45 * len(labels), 0.8 + 0.4 * len(labels)))
    sns.heatmap(pattern, xticklabels=labels, yticklabels=labels, cmap="viridis", vmin=0, vmax=1, square=True, ax=ax,
                cbar_kws={"label": "attention weight"})
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(f"{model.cfg.name}: layer {layer} head {head}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".png", dir=path.parent)
    os.close(fd)
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm", help="minilm (default), smollm2, or a checkpoint folder")
    p.add_argument("--out", default="out/tour", help="folder for the PNG")
    p.add_argument("--text", default=DEFAULT_TEXT)
    p.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    p.add_argument("--head", type=int, default=0)


def run(args) -> int:
    import models

    model = models.load(args.model)
    layer = model.cfg.n_layers // 2 if args.layer is None else args.layer
    if not 0 <= layer < model.cfg.n_layers or not 0 <= args.head < model.cfg.n_heads:
        raise SystemExit(f"layer must be in 0..{model.cfg.n_layers - 1} and head in 0..{model.cfg.n_heads - 1}")
    table = hook_shapes(model, args.text)
    out = Path(args.out)
    png = plot_pattern(model, args.text, layer, args.head, out / f"pattern_L{layer}H{args.head}.png")
    print(model)
    print(f"{len(model.hook_names())} hook points; block 0 on {args.text!r}:")
    first = table[~table.hook.str.startswith("blocks.") | table.hook.str.startswith("blocks.0.")]
    print(first.to_string(index=False))
    print(f"pattern of layer {layer} head {args.head} saved to {png}")
    return 0
