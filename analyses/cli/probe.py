"""``interp probe``: classify every head of a model and write the head-probing report.

    interp probe --model minilm --out runs/minilm
    interp probe --model smollm2 --out runs/smollm2 --n 150
    interp probe --model path/to/checkpoint --out runs/mine --conllu my_treebank.conllu

Writes DIR/heads.csv, DIR/report.md, DIR/report.html (self-contained) and the PNG figures.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

DEFAULT_N = 100  # items per relation: ~2 min for minilm, a few minutes for smollm2 on 2 CPU cores


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="minilm", help="minilm (default), smollm2, or a model/checkpoint folder")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"items per relation (default {DEFAULT_N})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sources",
        default="generated",
        help="comma-separated data sources: generated (default), winobias, spacy, xsum",
    )
    parser.add_argument("--conllu", default=None, help="a CoNLL-U treebank: its nsubj arcs become subject-verb items")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...)")
    parser.add_argument("--no-null", action="store_true", help="skip the randomly initialised null model")
    parser.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates (default 200)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (Holm), default 0.05")


def _items(args):
    from analyses.data import load_items

    try:
        return load_items(n=args.n, seed=args.seed, sources=args.sources, conllu=args.conllu)
    except ValueError as e:
        raise SystemExit(f"interp probe: {e}") from None


def run(args) -> int:
    import torch

    import models
    from analyses import heads
    from analyses.heads import report

    t0 = time.perf_counter()
    with torch.no_grad():  # scoped: run() is also called in-process (tests, notebooks)
        model = models.load(args.model, device=args.device)
        items = _items(args)
        if model.tokenizer is not None:
            # a byte-level BPE can merge two punctuation words of real text into one token, leaving
            # a word without a token: word-level scores cannot be defined there, so drop and say so
            from analyses.data import keep_tokenizable

            kept = keep_tokenizable(items, model.tokenizer)
            if len(kept) < len(items):
                sys.stderr.write(
                    f"interp probe: dropped {len(items) - len(kept)} of {len(items)} sentences "
                    f"in which a word got no token of its own under {model.cfg.name}'s tokenizer\n"
                )
            items = kept
        df = heads.probe_items(
            model,
            items,
            n_repeat=max(20, min(args.n, 200)),
            seed=args.seed,
            null_model=not args.no_null,
            n_boot=args.n_boot,
            alpha=args.alpha,
            batch_size=args.batch_size,
            progress=True,
        )
        examples = heads.example_patterns(model, df)
    command = "interp probe " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else None
    paths = report.write_report(df, Path(args.out), examples=examples, command=command)
    n_lab = int(df["label"].sum())
    sys.stdout.write(
        f"{model.cfg.name}: {len(items)} sentences, {n_lab} labels; wrote {paths['report.md'].parent} "
        f"(heads.csv, report.md, report.html) in {time.perf_counter() - t0:.0f} s\n"
    )
    return 0
