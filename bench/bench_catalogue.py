"""The catalogue's answer-position patching against full-sequence patching on SmolLM2, the same pairs.

===============  ===================================================================================
variant          what runs (every head patched alone, on the same solved subject-verb pairs)
===============  ===================================================================================
``full``         ``analyses.circuits.exact.exact_patching``: per layer, the clean run's cached input
                 to that layer run over the whole sequence with the layer's heads' patched copies
                 stacked (the circuits' exact patching; the reference of the ratio). Patching one
                 position costs the same: the run after the patch is the whole sequence either way.
``answer_row``   ``analyses.catalogue.patching.answer_patching``: the prefix's keys and values cached
                 once, per layer only the answer row run from that layer (stacked the same way), and
                 only the two unembedding rows the logit difference reads.
===============  ===================================================================================

Every round runs both once, in an order rotated from round to round; the table reports the median
ratio full / answer_row and the median seconds per pair. Run it on an idle machine.

Usage::

    .venv/bin/python bench/bench_catalogue.py                 # 16 pairs, 3 rounds
    .venv/bin/python bench/bench_catalogue.py --pairs 4 --rounds 1   # smoke
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task", default="subject_verb")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    import models
    from analyses.catalogue.patching import answer_patching
    from analyses.circuits.exact import exact_patching
    from analyses.circuits.tasks import circuit_task

    model = models.load("smollm2").eval()
    task = circuit_task(model, args.task, n=2 * args.pairs, seed=0, min_pairs=1)
    pairs = task.pairs[: args.pairs]
    variants = {
        "full": lambda: exact_patching(model, pairs, batch_size=16),
        "answer_row": lambda: answer_patching(model, pairs, batch_size=16),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in names[r % 2 :] + names[: r % 2]:
            t0 = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
    ratios = [f / a for f, a in zip(times["full"], times["answer_row"])]
    print(
        f"SmolLM2, {len(pairs)} {args.task} pairs of {pairs.clean.shape[1]} tokens, {args.threads} threads, "
        f"{args.rounds} rounds, {platform.processor() or platform.machine()}"
    )
    print("| variant | s per pair (median) |")
    print("|---|---|")
    for name in names:
        print(f"| {name} | {statistics.median(times[name]) / len(pairs):.2f} |")
    print(f"\nfull / answer_row: median {statistics.median(ratios):.1f}x (range {min(ratios):.1f}-{max(ratios):.1f})")


if __name__ == "__main__":
    main()
