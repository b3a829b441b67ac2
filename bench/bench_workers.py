"""Benchmark of sharded runs (``interp.distributed``): the probe and the validation on 1 vs N worker
processes on this machine, speed-up and peak memory per worker.

    python bench/bench_workers.py                                   # minilm probe, 1 vs 2 workers, 3 rounds
    python bench/bench_workers.py --task validate --model smollm2 --rounds 3
    python bench/bench_workers.py --n 10 --rounds 1                 # a smoke run (seconds of work)

Each round runs every worker count once (the order rotates between rounds). Inside each run the
workers load the model, wait at a barrier, and then time their share of the work (``work_s``: the
probe or validation call, merge included, the slowest worker); ``wall_s`` is the whole launch as the
caller sees it (process start, imports and model loading included). The table gives medians over
rounds, the speed-up of ``work_s`` against 1 worker measured in the same rounds, and the largest
peak RSS of any worker (``ru_maxrss``; each worker is its own process). The 1-worker run uses all the
threads given (``--threads``, default: every core), N workers share them (threads // N each), so the
comparison is at equal cores. The scaling model for N GPUs is in docs/scaling.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SOURCES = "generated,winobias,spacy,xsum,sonnets"  # the main job's probe data


def _share(world, task: str, model_name: str, n: int, seed: int) -> list[dict]:
    """One worker's run: load, wait for all, time the sharded call; every worker's figures, gathered."""
    import resource

    import pandas as pd
    import torch

    import models
    from analyses import heads
    from analyses import validation as V
    from analyses.data import keep_tokenizable, load_items

    with torch.no_grad():
        model = models.load(model_name)
        if task == "probe":
            items = keep_tokenizable(load_items(n=n, seed=seed, sources=SOURCES), model.tokenizer)
            kw = dict(n_repeat=heads.n_repeat_for(n), seed=seed, weighting=("attention", "norm"), world=world)
        else:
            labels = pd.DataFrame(
                [dict(layer=0, head=h, role="previous_token", score=1.0, label=True) for h in range(2)]
            )
        world.wait_all("the start of the timed work")
        cpu0, t0 = time.process_time(), time.perf_counter()
        if task == "probe":
            heads.probe_items(model, items, **kw)
        else:
            V.run(model, labels, n=n, seed=seed, world=world)
        work, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB
    return world.gather(dict(rank=world.rank, work_s=work, cpu_s=cpu, peak_mib=peak, threads=torch.get_num_threads()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["probe", "validate"], default="probe")
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--n", type=int, default=None, help="items per relation (probe, default 100) or prompts (validate)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="threads in all (split between workers)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    args = ap.parse_args()

    import torch

    from interp.distributed import launch

    torch.set_num_threads(args.threads)
    n = args.n or (100 if args.task == "probe" else 16)
    runs: dict[int, list[dict]] = {w: [] for w in args.workers}
    for r in range(args.rounds):
        order = args.workers[r % len(args.workers) :] + args.workers[: r % len(args.workers)]
        for w in order:
            t0 = time.perf_counter()
            figures = launch(_share, args.task, args.model, n, args.seed, workers=w, timeout=1800)
            wall = time.perf_counter() - t0
            runs[w].append(
                dict(
                    wall_s=wall,
                    work_s=max(f["work_s"] for f in figures),
                    cpu_s=sum(f["cpu_s"] for f in figures),
                    peak_mib=max(f["peak_mib"] for f in figures),
                    threads=figures[0]["threads"],
                )
            )
            print(f"round {r + 1}: {w} worker(s): work {runs[w][-1]['work_s']:.1f} s, wall {wall:.1f} s", flush=True)
    base = statistics.median(x["work_s"] for x in runs[args.workers[0]])
    lines = [
        f"{args.task} on {args.model}, n={n}, {args.threads} threads in all, {args.rounds} rounds (medians)",
        "",
        "| workers | threads each | work s | speed-up | wall s | CPU s (all workers) | peak RSS per worker MiB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w, xs in runs.items():
        med = {k: statistics.median(x[k] for x in xs) for k in ("work_s", "wall_s", "cpu_s", "peak_mib")}
        lines.append(
            f"| {w} | {xs[0]['threads']} | {med['work_s']:.1f} | {base / med['work_s']:.2f}x | {med['wall_s']:.1f} "
            f"| {med['cpu_s']:.1f} | {med['peak_mib']:.0f} |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        from interp.io import atomic_write

        atomic_write(args.out, table)


if __name__ == "__main__":
    main()
