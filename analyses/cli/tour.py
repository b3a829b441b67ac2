"""``interp tour``: the model, its hooks and their shapes, and one attention pattern as a PNG.

Owns one file per run, DIR/pattern_L<layer>H<head>.png; PNGs of other heads from earlier tours
stay."""

from __future__ import annotations

import argparse
from pathlib import Path

from analyses.cli.common import add_force_argument, add_model_arguments, add_text_argument, load_model


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--out", default="out/tour", help="folder for the PNG")
    add_text_argument(p)
    p.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    p.add_argument("--head", type=int, default=0)
    add_force_argument(p)


def run(args) -> int:
    from interp.io import check_out, output_lock, staged_dir, undo_created

    if args.text is not None and not args.text.strip():
        raise ValueError("--text is empty; give a sentence, or leave --text out for the default one")
    with undo_created(args.out):  # a failed run leaves no new empty --out
        out = check_out(args.out, "--out")
        with output_lock(out, "interp tour"):
            from analyses.report.tour import DEFAULT_TEXT, hook_shapes, plot_pattern

            text = DEFAULT_TEXT if args.text is None else args.text
            model = load_model(args)
            layer = model.cfg.n_layers // 2 if args.layer is None else args.layer
            if not 0 <= layer < model.cfg.n_layers or not 0 <= args.head < model.cfg.n_heads:
                raise ValueError(
                    f"--layer {layer} --head {args.head}: expected layer 0..{model.cfg.n_layers - 1} "
                    f"and head 0..{model.cfg.n_heads - 1}"
                )
            table = hook_shapes(model, text)
            name = f"pattern_L{layer}H{args.head}.png"
            with staged_dir(out, [name], "interp tour", force=args.force) as tmp:
                plot_pattern(model, text, layer, args.head, tmp / name)
    print(model)
    print(f"{len(model.hook_names())} hook points; block 0 on {text!r}:")
    first = table[~table.hook.str.startswith("blocks.") | table.hook.str.startswith("blocks.0.")]
    print(first.to_string(index=False))
    print(f"pattern of layer {layer} head {args.head} saved to {Path(out) / name}")
    return 0
