"""``interp tour``: the model, its hooks and their shapes, and one attention pattern as a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="minilm", help="minilm (default), smollm2, or a checkpoint folder")
    p.add_argument("--out", default="out/tour", help="folder for the PNG")
    p.add_argument("--text", default=None, help="input text (default: a short English sentence)")
    p.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    p.add_argument("--head", type=int, default=0)


def run(args) -> int:
    import models
    from analyses.report.tour import DEFAULT_TEXT, hook_shapes, plot_pattern

    text = DEFAULT_TEXT if args.text is None else args.text
    model = models.load(args.model)
    layer = model.cfg.n_layers // 2 if args.layer is None else args.layer
    if not 0 <= layer < model.cfg.n_layers or not 0 <= args.head < model.cfg.n_heads:
        raise SystemExit(f"layer must be in 0..{model.cfg.n_layers - 1} and head in 0..{model.cfg.n_heads - 1}")
    table = hook_shapes(model, text)
    out = Path(args.out)
    png = plot_pattern(model, text, layer, args.head, out / f"pattern_L{layer}H{args.head}.png")
    print(model)
    print(f"{len(model.hook_names())} hook points; block 0 on {text!r}:")
    first = table[~table.hook.str.startswith("blocks.") | table.hook.str.startswith("blocks.0.")]
    print(first.to_string(index=False))
    print(f"pattern of layer {layer} head {args.head} saved to {png}")
    return 0
