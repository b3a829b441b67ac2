"""Attribution-patching benchmark on SmolLM2: our node-level EAP against TransformerLens 4.3's
node-level ``attribution_patch`` on its ``TransformerBridge`` over the same weights, and our
EAP-IG (m steps) and edge-level EAP as multiples of our node EAP.

=============  =====================================================================================
variant        what runs (on the same pairs)
=============  =====================================================================================
``ours_eap``   ``analyses.circuits.node_scores(model, pairs)``: one corrupted forward, one clean
               forward + backward per batch (the reference of every ratio)
``tl_eap``     ``node_scores(bridge, pairs)``: TransformerLens's ``attribution_patch`` (node
               granularity), one pair at a time, as it runs
``ours_ig``    ``node_scores(model, pairs, method="eap-ig", steps=m)``: m forward + backward
``ours_edges`` ``edge_scores(model, pairs)``: EAP over every writer -> reader edge (split inputs)
=============  =====================================================================================

Time: every round runs each variant once, in an order rotated from round to round; each time is
divided by ``ours_eap``'s time in the same round, and the table reports the median ratio (and its
range) and the median seconds per pair. Peak memory: each variant runs once more in a fresh
subprocess, which samples its RSS every 2 ms and reports the peak minus the RSS after loading.

Usage::

    .venv/bin/python bench/bench_circuits.py                          # 32 pairs x 24 tokens, 5 rounds
    .venv/bin/python bench/bench_circuits.py --pairs 4 --seq 12 --rounds 1 --no-memory   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# as `interp circuit` runs (analyses/cli/circuit.py): spinning OpenMP threads collapse on a shared machine
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402
from analyses.circuits import Pairs, edge_scores, node_scores  # noqa: E402

VARIANTS = ("ours_eap", "tl_eap", "ours_ig", "ours_edges")


def make_pairs(vocab: int, n: int, seq: int, seed: int = 0) -> Pairs:
    """Random token pairs differing at one position; the answer is read at the last position."""
    gen = torch.Generator().manual_seed(seed)
    clean = torch.randint(100, vocab, (n, seq), generator=gen)
    corrupted = clean.clone()
    corrupted[:, seq // 2] = torch.randint(100, vocab, (n,), generator=gen)
    return Pairs(clean, corrupted, right=clean[:, seq // 2], wrong=corrupted[:, seq // 2], position=[seq - 1] * n)


def load(with_bridge: bool):
    model = models.load("smollm2").eval()
    bridge = None
    if with_bridge:
        from transformer_lens.model_bridge import TransformerBridge

        bridge = TransformerBridge.boot_transformers(
            str(models.smollm2_hf_dir()), device="cpu", dtype=torch.float32
        ).eval()
    return model, bridge


def runner(variant: str, model, bridge, pairs: Pairs, args):
    if variant == "ours_eap":
        return lambda: node_scores(model, pairs, batch_size=args.batch)
    if variant == "tl_eap":
        return lambda: node_scores(bridge, pairs)
    if variant == "ours_ig":
        return lambda: node_scores(model, pairs, method="eap-ig", steps=args.steps, batch_size=args.batch)
    return lambda: edge_scores(model, pairs, batch_size=args.batch)


def time_rounds(args, model, bridge, pairs: Pairs) -> dict[str, dict]:
    variants = [v for v in VARIANTS if v in args.variants]
    fns = {v: runner(v, model, bridge, pairs, args) for v in variants}
    for fn in fns.values():  # warm-up
        fn()
    seconds: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants) :] + variants[: r % len(variants)]
        for v in order:
            start = time.perf_counter()
            fns[v]()
            seconds[v].append(time.perf_counter() - start)
    out = {}
    for v in variants:
        ratios = [t / ref for t, ref in zip(seconds[v], seconds["ours_eap"])]
        out[v] = {
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "seconds_per_pair": statistics.median(seconds[v]) / len(pairs),
        }
    return out


def _rss_mb() -> float:
    """This process's resident set now (Linux /proc; the getrusage peak would be loading's)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def child(args) -> None:
    """One variant, once, in this fresh process: peak RSS above the loaded models, in MB, sampled
    every 2 ms by a thread (``ru_maxrss`` cannot say it: loading the weights peaks higher than any
    variant, so the lifetime peak stays the load's)."""
    import threading

    model, bridge = load(args.child == "tl_eap")
    pairs = make_pairs(model.cfg.d_vocab, args.pairs, args.seq)
    before = _rss_mb()
    peak, done = [before], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_mb())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    runner(args.child, model, bridge, pairs, args)()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    peak[0] = max(peak[0], _rss_mb())
    print(json.dumps({"variant": args.child, "peak_mb": peak[0] - before, "seconds": seconds}))


def memory(args) -> dict[str, float]:
    out = {}
    for v in args.variants:
        cmd = [sys.executable, __file__, "--child", v, "--pairs", str(args.pairs), "--seq", str(args.seq)]
        cmd += ["--batch", str(args.batch), "--steps", str(args.steps), "--threads", str(args.threads)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=True)
        out[v] = json.loads(result.stdout.strip().splitlines()[-1])["peak_mb"]
    return out


def markdown(times: dict[str, dict], peaks: dict[str, float], args) -> str:
    lines = [
        f"SmolLM2-135M, {args.pairs} pairs x {args.seq} tokens, batch {args.batch}, EAP-IG m = {args.steps}, "
        f"{args.rounds} rounds, {args.threads} threads, {platform.processor() or platform.machine()}",
        "",
        "| variant | x ours_eap (median, range) | s / pair | peak RSS above load (MB) |",
        "|---|---|---|---|",
    ]
    for v, t in times.items():
        peak = f"{peaks[v]:.0f}" if v in peaks else "-"
        ratio = f"{t['ratio']:.2f} ({t['ratio_min']:.2f}-{t['ratio_max']:.2f})"
        lines.append(f"| {v} | {ratio} | {t['seconds_per_pair']:.3f} | {peak} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--seq", type=int, default=24)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5, help="EAP-IG interpolation steps (m)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--no-memory", action="store_true", help="skip the per-variant subprocess memory runs")
    ap.add_argument("--memory-only", action="store_true", help="only the per-variant subprocess memory runs")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.child:
        child(args)
        return 0
    if "ours_eap" not in args.variants:
        args.variants = ["ours_eap", *args.variants]
    if args.memory_only:
        peaks = memory(args)
        print("\n".join(f"| {v} | {mb:.0f} |" for v, mb in peaks.items()))
        return 0
    model, bridge = load("tl_eap" in args.variants)
    pairs = make_pairs(model.cfg.d_vocab, args.pairs, args.seq)
    times = time_rounds(args, model, bridge, pairs)
    peaks = {} if args.no_memory else memory(args)
    table = markdown(times, peaks, args)
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
