"""Benchmark of pattern reduction at long context: peak memory and time of the head probe's pattern
reducers over one window of real text, with the eager attention in query blocks and without.

    python bench/bench_longctx.py                                  # SmolLM2, 1024 / 4096 / 8192 tokens
    python bench/bench_longctx.py --lengths 1024 4096 --block 256 --out /tmp/longctx.md

What runs: the probe's own per-layer reducers (``analyses.heads.probe._LayerScores``: every token
role, i.e. local / previous / next / self, the sink, sep_eos, punctuation, delimiter and broad, on
every head of every layer) as hooks on ``blocks.{l}.attn.hook_pattern``, over one window of
``n`` tokens of real English (``analyses.longctx.text.long_windows``: shuffled BoolQ passages)
after the sink token. Not ``probe_items`` itself: its sentence pipeline aligns words of short
sentences and scores word relations, which long windows do not have; the reducers, the hooks and
the forward are the probe's.

Each configuration (length x blocks) runs in a fresh subprocess, so runs do not share a
high-water mark. Three memory figures per run, all RSS from ``/proc/self/status``: after loading
the model; before the forward (the model plus the batch's token plan, whose construction has
[pos, pos] temporaries: ``analyses.heads.scoring.token_plan``); and the forward's own peak (the
high-water mark is reset with ``/proc/self/clear_refs`` just before it). The unblocked run at
8,192 tokens needs about 7 GB (a layer's scores, the masked scores and the pattern, 2.4 GB each):
it is skipped, with a message, where the machine has less memory available than the estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the current RSS (Linux >= 4.0)


def _available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def child(model_name: str, n: int, block: int | None, seed: int) -> dict:
    import torch

    import models
    from analyses.heads.adapter import adapt
    from analyses.heads.design import _tests
    from analyses.heads.engine import _Batch, _LayerScores, _query_blocks, _RepeatBatch
    from analyses.heads.roles import SET_ROLES
    from analyses.heads.scoring import token_plan
    from analyses.longctx.text import long_windows

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    model = models.load(model_name)
    adapter = adapt(model)
    loaded = _status_mb("VmRSS")
    hf = adapter.tokenizer.hf
    sink = hf.convert_tokens_to_ids("<|endoftext|>")
    window = long_windows(hf, n - 1, 1, seed)[0]
    ids = torch.tensor([[sink, *window]])
    # the token roles only (relations need word-aligned sentences); token sets: the sink at 0 and the
    # punctuation tokens (the delimiter set adds nothing else: no special token follows the sink)
    tests = [t for t in _tests([], True, 0, 0.05, 0.1, ("exclude",), ("attention",)) if t.kind == "token"]
    text = hf.convert_ids_to_tokens(ids[0].tolist())
    sets = torch.zeros(1, n, len(SET_ROLES), dtype=torch.bool)
    sets[0, 0, SET_ROLES.index("attention_sink")] = True
    punct = torch.tensor([t.strip("Ġ") in {".", ",", ";", ":", "!", "?"} for t in text])
    sets[0, :, SET_ROLES.index("punctuation")] = punct
    sets[0, :, SET_ROLES.index("delimiter")] = punct
    batch = _RepeatBatch(ids)
    st = _Batch(kind="sentences", batch=batch, token=token_plan(batch.attention_mask, True, sets))
    layers = _LayerScores(adapter, tests)
    L, H = adapter.n_layers, adapter.n_heads
    scores, mass = torch.zeros(1, len(tests), L, H), torch.zeros(1, len(tests), L, H)
    layers.begin(st, scores, mass, torch.zeros(1, len(tests), L, H))
    before = _status_mb("VmRSS")
    _reset_peak()
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.inference_mode(), _query_blocks(adapter, block):
        adapter.forward(batch, layers.hooks)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    layers.end()
    forward_peak = _status_mb("VmHWM")
    process_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # clear_refs leaves it alone
    sink_share = scores[0, [t.role for t in tests].index("attention_sink")].mean().item()
    return {
        "n": n,
        "block": block,
        "rss_loaded_mb": loaded,
        "rss_before_forward_mb": before,
        "forward_peak_rss_mb": forward_peak,
        "forward_extra_mb": forward_peak - before,
        "process_peak_rss_mb": process_peak,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "mean_sink_score": sink_share,
        "threads": torch.get_num_threads(),
    }


def _need_mb(n: int, block: int | None, n_heads: int = 9) -> float:
    """A rough estimate of the forward's extra memory: three float32 [head, rows, n] tensors at once
    (the scores, the masked scores, the pattern), rows = n unblocked or the block."""
    rows = n if block is None else min(block, n)
    return 3 * n_heads * rows * n * 4 / 2**20


def run_child(model: str, n: int, block: int | None, seed: int) -> dict:
    cmd = [sys.executable, __file__, "--child", model, str(n), str(block or 0), str(seed)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode == -9:  # SIGKILL: the kernel's out-of-memory killer, on a machine short of memory
        return {"n": n, "block": block, "skipped": "killed by SIGKILL (out of memory?) during the forward"}
    if out.returncode != 0:
        raise RuntimeError(f"child {n} tokens, block {block} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: list[dict]) -> str:
    head = ["tokens", "blocks", "RSS loaded", "before forward", "forward peak", "forward extra", "process peak"]
    lines = ["| " + " | ".join(head + ["wall (s)", "CPU (s)"]) + " |", "|---:|---|" + "---:|" * 7]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['n']} | {r['block'] or 'none'} | skipped: {r['skipped']} |" + " |" * 6)
            continue
        mb = [r[k] for k in ("rss_loaded_mb", "rss_before_forward_mb", "forward_peak_rss_mb", "forward_extra_mb")]
        mb.append(r["process_peak_rss_mb"])
        cells = [str(r["n"]), str(r["block"] or "none"), *(f"{x:.0f}" for x in mb)]
        cells += [f"{r['seconds']:.1f}", f"{r['cpu_seconds']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n(memory in MB, RSS)"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        model, n, block, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) or None, int(sys.argv[5])
        print(json.dumps(child(model, n, block, seed)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--block", type=int, default=256, help="query rows per block (the blocked runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--margin-mb", type=float, default=2048, help="memory left free besides the estimate")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = ap.parse_args()
    rows = []
    for n in args.lengths:
        for block in (args.block, None):
            need = _need_mb(n, block) + 1500  # + the model, the batch and the rest of the forward
            avail = _available_mb()
            if need + args.margin_mb > avail:
                msg = f"needs ~{need / 1024:.1f} GB, {avail / 1024:.1f} GB available"
                print(f"skipping {n} tokens, blocks {block or 'none'}: {msg}", file=sys.stderr)
                rows.append({"n": n, "block": block, "skipped": msg})
                continue
            r = run_child(args.model, n, block, args.seed)
            print(json.dumps(r), file=sys.stderr)
            rows.append(r)
    md = table(rows)
    print(md)
    if args.out:
        args.out.write_text(md + "\n")


if __name__ == "__main__":
    main()
