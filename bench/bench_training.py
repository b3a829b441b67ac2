"""Benchmark: training throughput per positional scheme, and how one forward pass grows with length.

    python bench/bench_training.py [--threads 1] [--steps 8] [--max-len 4096] \
        [--plot docs/positional_forward_scaling.png]

1. Throughput: the positional study's "full" model (2 layers, d_model 128, 4 heads, vocab 2048,
   context 128) trains on random tokens, batch 16 x 128; tokens per second per scheme, with the
   ratio to learned positions side by side (the same run, so machine load cancels roughly). Each
   scheme is timed on both attention paths, step by step in alternation: the fused path (training's
   default: no hook reads the pattern) and the eager path (``exact=True``, what every step ran before
   the fused path existed); "fused speed-up" = eager s/step / fused s/step.
2. Scaling: one forward pass of a model where attention dominates (1 layer, d_model 64, 2 heads,
   d_mlp 128, vocab 256) at lengths 128..max_len. The exponent k of time ~ n^k is fitted on the
   log-log points, over all lengths and over the long ones (n >= 1024). Per token the projections
   and MLP cost O(d_model^2) and attention O(n * d_model): attention takes over once n >> 12
   d_model, and from there the whole forward is O(n^2).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from analyses.positional import BUDGETS, SCHEMES  # noqa: E402
from interp.io import atomic_save  # noqa: E402
from models.training import Trainer  # noqa: E402


def throughput(steps: int, batch: int) -> list[dict]:
    b = BUDGETS["full"]
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, b.vocab_size, (200_000,), generator=gen)
    rows = []
    for scheme in SCHEMES:
        trainers = {}
        for exact in (False, True):
            model = models.Transformer(b.model_config(scheme, b.vocab_size), seed=0)
            model.exact = exact
            tc = b.train.replace(batch_size=batch, steps=2 * steps + 4, warmup_steps=1, eval_windows=2, threads=None)
            trainers[exact] = Trainer(model, ids, ids[:10_000], tc)
            for _ in range(2):  # warm-up: allocator, first-call overheads
                trainers[exact].train_step()
        times = {False: [], True: []}
        for _ in range(steps):  # alternating, so load that comes and goes hits both paths alike
            for exact, trainer in trainers.items():
                t0 = time.perf_counter()
                trainer.train_step()
                times[exact].append(time.perf_counter() - t0)
        med = statistics.median(times[False])
        rows.append(
            {
                "scheme": scheme,
                "s_per_step": med,
                "tokens_per_s": batch * b.n_ctx / med,
                "eager_s_per_step": statistics.median(times[True]),
                "fused_speedup": statistics.median(times[True]) / med,
            }
        )
    base = rows[0]["tokens_per_s"]
    for r in rows:
        r["vs_learned"] = r["tokens_per_s"] / base
    return rows


@torch.no_grad()
def forward_scaling(lengths: list[int], repeats: int) -> list[dict]:
    cfg = models.Config(
        d_model=64,
        n_layers=1,
        n_heads=2,
        d_head=32,
        d_mlp=128,
        d_vocab=256,
        n_ctx=max(lengths),
        positional="none",
        tie_embeddings=True,
        name="scaling",
    )
    model = models.Transformer(cfg, seed=0).eval()
    gen = torch.Generator().manual_seed(0)
    rows = []
    for n in lengths:
        tokens = torch.randint(0, 256, (1, n), generator=gen)
        model(tokens)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(tokens)
            times.append(time.perf_counter() - t0)
        rows.append({"n": n, "ms_per_forward": 1000 * min(times)})
    return rows


def fit_exponent(rows: list[dict], min_n: int = 0) -> float:
    pts = [(r["n"], r["ms_per_forward"]) for r in rows if r["n"] >= min_n]
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def plot(rows: list[dict], path: Path, k_all: float, k_long: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    sns.lineplot(data=df, x="n", y="ms_per_forward", marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (tokens)")
    ax.set_ylabel("one forward pass (ms, best of repeats)")
    ax.set_title(f"time ~ n^k: k = {k_all:.2f} overall, {k_long:.2f} for n >= 1024")
    fig.tight_layout()
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--plot", default=None, help="write the log-log plot here (PNG)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s)")

    print(f"\nTraining throughput (study model, batch {args.batch} x 128, median of {args.steps} steps)")
    print(f"{'scheme':<12}{'s/step':>10}{'tokens/s':>12}{'vs learned':>12}{'eager s/step':>14}{'fused speed-up':>16}")
    for r in throughput(args.steps, args.batch):
        print(
            f"{r['scheme']:<12}{r['s_per_step']:>10.3f}{r['tokens_per_s']:>12.0f}{r['vs_learned']:>12.2f}"
            f"{r['eager_s_per_step']:>14.3f}{r['fused_speedup']:>16.2f}"
        )

    lengths = [n for n in (128, 256, 512, 1024, 2048, 4096, 8192) if n <= args.max_len]
    rows = forward_scaling(lengths, args.repeats)
    k_all, k_long = fit_exponent(rows), fit_exponent(rows, 1024)
    print("\nOne forward pass vs length (1 layer, d_model 64, 2 heads)")
    print(f"{'n':>6}{'ms':>12}{'ratio to n/2':>14}{'ns per n^2':>12}")
    for prev, r in zip([None] + rows[:-1], rows):
        ratio = "" if prev is None else f"{r['ms_per_forward'] / prev['ms_per_forward']:.2f}"
        per = 1e6 * r["ms_per_forward"] / r["n"] ** 2  # rises when the n x n tensors leave the caches
        print(f"{r['n']:>6}{r['ms_per_forward']:>12.2f}{ratio:>14}{per:>12.2f}")
    print(
        f"\nfitted exponent k (time ~ n^k): all lengths {k_all:.2f}; n >= 1024: {k_long:.2f}  "
        "(O(n^2) attention: k -> 2)"
    )
    if args.plot:
        plot(rows, Path(args.plot), k_all, k_long)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
