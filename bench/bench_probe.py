"""Benchmark of the head probe: peak memory against the number of sentences, and the cost of probing
against a plain forward pass over the same batches.

    python bench/bench_probe.py                      # minilm, memory at 1000 and 4000 sentences
    python bench/bench_probe.py --model smollm2 --sizes 1000 4000 --ratio-n 128 --repeats 3

Memory: each size runs in a fresh subprocess (peak RSS from ``resource.getrusage`` covers torch's
allocations, which ``tracemalloc`` does not see). Statistics are reduced inside the pattern hooks
batch by batch, so the peak should not grow with the number of sentences.
Cost: in one process, interleaved repeats of (plain forward over the batches, full probe over the
same sentences), medians; the plain forward includes tokenisation, like the probe.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _items(n: int, seed: int = 0):
    from analyses import data

    k = -(-n // 3)
    items = data.generate_subject_verb(k, seed) + data.generate_anaphora(k, seed) + data.generate_delimiter(k, seed)
    return items[:n]


def _forward_only(model, items, batch_size: int) -> None:
    import torch

    from analyses.heads import adapt

    adapter = adapt(model)
    with torch.inference_mode():
        for i in range(0, len(items), batch_size):
            batch = adapter.tokenizer.words([list(it.words) for it in items[i : i + batch_size]])
            adapter.forward(batch, [])


def _probe(model, items, batch_size: int):
    from analyses.heads import probe_items

    return probe_items(model, items, n_repeat=0, null_model=False, batch_size=batch_size, weighting=("attention",))


def child(model_name: str, n: int, batch_size: int) -> dict:
    import torch

    import models

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    model = models.load(model_name)
    items = _items(n)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t = time.perf_counter()
    df = _probe(model, items, batch_size)
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"n": n, "peak_rss_mb": peak, "rss_before_probe_mb": before, "seconds": seconds, "rows": len(df)}


def ratio(model_name: str, n: int, batch_size: int, repeats: int) -> dict:
    import torch

    import models

    model = models.load(model_name)
    items = _items(n)
    _forward_only(model, items[:batch_size], batch_size)  # warm-up
    _probe(model, items[:batch_size], batch_size)
    fwd, prb, fwd_cpu, prb_cpu = [], [], [], []
    for _ in range(repeats):  # interleaved, so drifts in machine load hit both alike
        t, c = time.perf_counter(), time.process_time()
        _forward_only(model, items, batch_size)
        fwd.append(time.perf_counter() - t)
        fwd_cpu.append(time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        _probe(model, items, batch_size)
        prb.append(time.perf_counter() - t)
        prb_cpu.append(time.process_time() - c)
    f, p = statistics.median(fwd), statistics.median(prb)
    fc, pc = statistics.median(fwd_cpu), statistics.median(prb_cpu)
    # CPU time (all threads of this process) is less disturbed by other jobs than wall time
    return {
        "n": n,
        "forward_s": f,
        "probe_s": p,
        "ratio": p / f,
        "forward_all": fwd,
        "probe_all": prb,
        "forward_cpu_s": fc,
        "probe_cpu_s": pc,
        "cpu_ratio": pc / fc,
        "forward_cpu_all": fwd_cpu,
        "probe_cpu_all": prb_cpu,
        "threads": torch.get_num_threads(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000])
    ap.add_argument("--ratio-n", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        sys.stdout.write(json.dumps(child(args.model, args.child, args.batch_size)) + "\n")
        return 0
    mem = []
    for n in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--model", args.model, "--child", str(n), "--batch-size", str(args.batch_size)],
            capture_output=True,
            text=True,
            check=True,
        )
        mem.append(json.loads(out.stdout.strip().splitlines()[-1]))
    r = ratio(args.model, args.ratio_n, args.batch_size, args.repeats)
    lines = [
        f"model {args.model}, batch size {args.batch_size}",
        "",
        "| sentences | peak RSS (MB) | RSS before probe (MB) | probe time (s) |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {m['n']} | {m['peak_rss_mb']:.0f} | {m['rss_before_probe_mb']:.0f} | {m['seconds']:.1f} |" for m in mem
    ]
    lines += [
        "",
        f"cost over {r['n']} sentences, median of {args.repeats} interleaved repeats: plain forward "
        f"{r['forward_s']:.2f} s, probe {r['probe_s']:.2f} s, ratio {r['ratio']:.2f}x "
        f"(forward runs {[round(x, 2) for x in r['forward_all']]}, "
        f"probe runs {[round(x, 2) for x in r['probe_all']]}); "
        f"CPU time: forward {r['forward_cpu_s']:.2f} s, probe {r['probe_cpu_s']:.2f} s, ratio {r['cpu_ratio']:.2f}x",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps({"memory": mem, "ratio": r}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
