"""Edge circuits on SmolLM2, one forward pass per circuit (``patch_edges``, how the edge-level curve ran
before) against circuits stacked along the batch axis (``patch_edges_stacked``, how it runs now).

The same random edge circuits (``--circuits`` of each of MIB's sizes below the whole graph, over
SmolLM2's edges) on the same pairs, stacked one size per pass as the curve stacks them;
every round runs both variants, in an order alternating from round to round, and the table reports
the median ratio one-by-one / stacked and the median seconds per circuit and pair.

Usage::

    .venv/bin/python bench/bench_edge_curve.py                  # 8 pairs x 12 tokens, 4 circuits x 9 sizes, 3 rounds
    .venv/bin/python bench/bench_edge_curve.py --pairs 2 --circuits 1 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from analyses.circuits import Pairs, edge_graph, random_circuits  # noqa: E402
from analyses.circuits.faithfulness import MIB_PROPORTIONS  # noqa: E402
from analyses.circuits.patching import patch_edges, patch_edges_stacked  # noqa: E402
from analyses.circuits.runner import STACK_ROWS  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--seq", type=int, default=12)
    ap.add_argument("--circuits", type=int, default=4, help="random circuits per size (9 sizes: MIB's below 1)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    model = models.load("smollm2").eval()
    gen = torch.Generator().manual_seed(0)
    clean = torch.randint(100, model.cfg.d_vocab, (args.pairs, args.seq), generator=gen)
    corrupted = clean.clone()
    corrupted[:, args.seq // 2] = torch.randint(100, model.cfg.d_vocab, (args.pairs,), generator=gen)
    pairs = Pairs(clean, corrupted, right=clean[:, 1], wrong=clean[:, 2], position=[args.seq - 1] * args.pairs)
    edges = edge_graph(model).edges()
    # the curve's circuits: for each of MIB's sizes below the whole graph, ``--circuits`` random ones
    sizes = [max(1, int(p * len(edges))) for p in MIB_PROPORTIONS if p < 1]
    keeps = [random_circuits(edges, k, args.circuits, seed=k) for k in sizes]
    group = max(1, STACK_ROWS // args.pairs)

    def one_by_one() -> None:
        for same_size in keeps:
            for keep in same_size:
                patch_edges(model, pairs, keep)

    def stacked() -> None:  # as the edge-level curve runs them: one size per pass
        for same_size in keeps:
            for start in range(0, len(same_size), group):
                patch_edges_stacked(model, pairs, same_size[start : start + group])

    fns = {"one_by_one": one_by_one, "stacked": stacked}
    for fn in fns.values():
        fn()  # warm-up
    seconds: dict[str, list[float]] = {v: [] for v in fns}
    for r in range(args.rounds):
        for v in list(fns)[:: 1 if r % 2 == 0 else -1]:
            t = time.perf_counter()
            fns[v]()
            seconds[v].append(time.perf_counter() - t)
    ratios = [a / b for a, b in zip(seconds["one_by_one"], seconds["stacked"])]
    unit = len(sizes) * args.circuits * args.pairs
    out = {
        "pairs": args.pairs, "seq": args.seq, "circuits_per_size": args.circuits, "sizes": sizes, "rounds": args.rounds,
        "circuits_per_pass": group, "threads": torch.get_num_threads(),
        "ratio_one_by_one_over_stacked": statistics.median(ratios), "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ms_per_circuit_pair": {v: 1000 * statistics.median(s) / unit for v, s in seconds.items()},
    }  # fmt: skip
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
