"""Forward-pass benchmark: our Transformer against Hugging Face (eager and SDPA attention) and
TransformerLens's TransformerBridge, on the same weights and the same batch.

For each real model (``minilm``, ``smollm2``, ``gemma3``) it times, under ``torch.no_grad``:

=================  ===============================================================================
variant            what runs
=================  ===============================================================================
``hf``             the Hugging Face model, eager attention (``use_cache=False`` for causal LMs)
``hf_sdpa``        the same Hugging Face model with SDPA attention, Hugging Face's default
``ours``           our forward, no hooks: the fused path (``scaled_dot_product_attention``)
``ours_exact``     our forward, no hooks, ``exact=True``: the eager path
``ours_all``       ``run_with_cache`` with every hook point cached (``attn.hook_result``, the reader
                   inputs and the norms' ``hook_scale`` are computed from tensors the cache holds
                   when first read: ``interp.hooks.LazyCacheDict``)
``ours_all_read``  ``ours_all``, then every ``attn.hook_result`` read (what a user who reads them
                   all pays)
``ours_pat``       ``run_with_cache(names_filter=...hook_pattern)``: attention patterns only
``ours_nores``     ``run_with_cache`` of every hook but ``attn.hook_result``: the bridge's hook set
                   (it has no per-head result), and TransformerLens's default (``use_attn_result``
                   off); ``hook_result`` materialises [batch, pos, head, d_model], ``head`` times
                   the size of ``hook_attn_out``
``bridge``         ``TransformerBridge`` forward, no hooks
``bridge_all``     the bridge's ``run_with_cache``, every hook point
``bridge_pat``     the bridge's ``run_with_cache``, patterns only
=================  ===============================================================================

After the rounds, the cache of one ``ours_all`` call is measured: the bytes its tensors hold right
after the run (each storage once) and once every entry has been read (what a cache that computed
everything in the forward pass holds).

Every round runs each variant once, in an order rotated from round to round, and each time is
divided by the ``hf`` time (and the ``hf_sdpa`` time) of the same round; the table reports the
median of those per-round ratios (and their range). Interleaving matters on a shared machine:
load that comes and goes hits all variants of a round alike instead of whichever happened to run
during it.

Usage::

    .venv/bin/python bench/bench_forward.py                      # both models, 32 x 64 tokens
    .venv/bin/python bench/bench_forward.py --models minilm --rounds 11 --out docs/bench.md
    .venv/bin/python bench/bench_forward.py --models smollm2 --batch 1 --seq 2048 --rounds 3 \
        --variants hf_sdpa ours ours_exact                       # long context

Targets: no hooks (fused) <= 1.05x Hugging Face SDPA; full cache <= 1.3x and patterns only <= 1.1x
Hugging Face eager (caching patterns runs the eager path); the eager path without hooks <= 1.05x
Hugging Face eager.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm  # noqa: E402

from interp.io import atomic_write  # noqa: E402
from models.loading import _hf_load, from_hf, gemma3_hf_dir, minilm_dir, smollm2_hf_dir  # noqa: E402

# variant -> (reference, target ratio)
TARGETS = {
    "ours": ("hf_sdpa", 1.05),
    "ours_exact": ("hf", 1.05),
    "ours_all": ("hf", 1.3),
    "ours_nores": ("hf", 1.3),
    "ours_pat": ("hf", 1.1),
}
VARIANTS = [
    "hf",
    "hf_sdpa",
    "ours",
    "ours_exact",
    "ours_all",
    "ours_all_read",
    "ours_nores",
    "ours_pat",
    "bridge",
    "bridge_all",
    "bridge_pat",
]
LABELS = {
    "hf": "Hugging Face eager forward",
    "hf_sdpa": "Hugging Face SDPA forward (HF's default)",
    "ours": "ours, forward, no hooks (fused)",
    "ours_exact": "ours, forward, no hooks, exact=True (eager)",
    "ours_all": "ours, run_with_cache, all hooks",
    "ours_all_read": "ours, run_with_cache, all hooks, then every attn.hook_result read",
    "ours_pat": "ours, run_with_cache, patterns only",
    "ours_nores": "ours, run_with_cache, all hooks but attn.hook_result",
    "bridge": "bridge, forward, no hooks",
    "bridge_all": "bridge, run_with_cache, all hooks",
    "bridge_pat": "bridge, run_with_cache, patterns only",
}


def is_pattern(name: str) -> bool:
    return name.endswith("hook_pattern")


def not_result(name: str) -> bool:
    return not name.endswith("hook_result")


def read_results(run: tuple) -> tuple:
    """Read every per-head result of a cache (computing the lazy ones)."""
    _, cache = run
    for name in list(cache.keys()):
        if name.endswith("hook_result"):
            cache[name]
    return run


# --------------------------------------------------------------------------------------------------
# Models


def load_all(name: str, with_bridge: bool = True):
    """(hf_model, hf_sdpa, ours, bridge) on identical weights, all fp32, eval, CPU (bridge None
    unless asked for)."""
    import copy

    folder = {"minilm": minilm_dir, "smollm2": smollm2_hf_dir, "gemma3": gemma3_hf_dir}[name]()
    hf_model, tok = _hf_load(str(folder))
    ours = from_hf(hf_model, tok, name=name)  # copies of the HF tensors: the same weights
    hf_sdpa = copy.deepcopy(hf_model)
    hf_sdpa.set_attn_implementation("sdpa")
    bridge = None
    if with_bridge:
        from transformer_lens.model_bridge import TransformerBridge

        bridge = TransformerBridge.boot_transformers(str(folder), device="cpu", dtype=torch.float32).eval()
    return hf_model, hf_sdpa, ours, bridge


def make_batch(vocab: int, batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    """Random ordinary token ids (skipping the low ids, where special tokens live)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(1000, vocab - 100, (batch, seq), generator=gen)


def variants(name: str, hf_model, hf_sdpa, ours, bridge, ids: torch.Tensor) -> dict[str, Callable[[], object]]:
    causal = name != "minilm"
    hf_kw = {"use_cache": False} if causal else {}
    return {
        "hf": lambda: hf_model(input_ids=ids, **hf_kw),
        "hf_sdpa": lambda: hf_sdpa(input_ids=ids, **hf_kw),
        "ours": lambda: ours(ids),
        "ours_exact": lambda: ours(ids, exact=True),
        "ours_all": lambda: ours.run_with_cache(ids),
        "ours_all_read": lambda: read_results(ours.run_with_cache(ids)),
        "ours_pat": lambda: ours.run_with_cache(ids, names_filter=is_pattern),
        "ours_nores": lambda: ours.run_with_cache(ids, names_filter=not_result),
        "bridge": lambda: bridge(ids),
        "bridge_all": lambda: bridge.run_with_cache(ids, return_cache_object=False),
        "bridge_pat": lambda: bridge.run_with_cache(ids, names_filter=is_pattern, return_cache_object=False),
    }


def cache_megabytes(cache) -> tuple[float, float, int]:
    """(MB the cache's tensors hold now, MB once every entry is read, entries not computed yet) for
    a ``run_with_cache`` cache; each storage counted once (cached views share their base's)."""
    from interp.hooks import _Pending

    def held(values) -> float:
        storages = {}
        for v in values:
            if isinstance(v, torch.Tensor):
                storages[v.untyped_storage().data_ptr()] = v.untyped_storage().nbytes()
        return sum(storages.values()) / 2**20

    raw = cache.cache_dict
    pending = sum(isinstance(v, _Pending) for v in dict.values(raw))
    now = held(dict.values(raw))
    return now, held(raw.values()), pending  # values() computes the pending entries


# --------------------------------------------------------------------------------------------------
# Timing


def time_rounds(fns: dict[str, Callable[[], object]], rounds: int, desc: str) -> dict[str, dict[str, list[float]]]:
    """Each round runs every variant once, the order rotated by one each round (so no variant is
    always first or always after the heaviest one). Returns, per variant, the wall-clock seconds
    and the process CPU seconds (all threads) of each round."""
    names = list(fns)
    times = {n: {"wall": [], "cpu": []} for n in names}
    with torch.no_grad():
        for n in names:  # warm-up: allocator, lazy init, first-call paths
            fns[n]()
        gc.collect()
        for r in tqdm(range(rounds), desc=desc, unit="round"):
            order = names[r % len(names) :] + names[: r % len(names)]
            for n in order:
                c0, t0 = time.process_time(), time.perf_counter()
                out = fns[n]()
                times[n]["wall"].append(time.perf_counter() - t0)
                times[n]["cpu"].append(time.process_time() - c0)
                del out
                gc.collect()  # free the cache outside the timed region
    return times


def summarise(times: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Median per-round ratio to ``hf`` (and its range), for wall-clock and for CPU time, and the
    median per-round ratio to ``hf_sdpa`` when it was timed (``sdpa_ratio``)."""
    out = {}
    for n, kinds in times.items():
        out[n] = {}
        for kind, ts in kinds.items():
            ratios = [t / h for t, h in zip(ts, times["hf"][kind])]
            out[n][kind] = dict(
                median_s=statistics.median(ts), ratio=statistics.median(ratios), lo=min(ratios), hi=max(ratios)
            )
            if "hf_sdpa" in times:
                sdpa = [t / h for t, h in zip(ts, times["hf_sdpa"][kind])]
                out[n][kind]["sdpa_ratio"] = statistics.median(sdpa)
    return out


def markdown(results: dict[str, dict[str, dict]], args) -> str:
    lines = [
        f"Batch {args.batch} x {args.seq} tokens, {args.threads} threads, {args.rounds} interleaved rounds, "
        "fp32, CPU, `torch.no_grad`. Ratio = median over rounds of (variant time / HF eager time in "
        "the same round), for wall-clock time and for process CPU time (all threads; steadier on a "
        "shared machine); range = min..max of the per-round CPU ratios; 'CPU vs SDPA' = the same CPU "
        "ratio to HF's SDPA forward. 'vs bridge' = our CPU ratio / the bridge's for the same job. 'met' "
        "judges the CPU ratio to the target's reference (wall ratio in brackets when it disagrees).",
        "",
        "| model | variant | median wall (ms) | wall ratio | median CPU (ms) | CPU ratio | CPU range | CPU vs SDPA "
        "| vs bridge | target | met |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    bridge_of = {"ours": "bridge", "ours_all": "bridge_all", "ours_nores": "bridge_all", "ours_pat": "bridge_pat"}
    for model, res in results.items():
        for n in VARIANTS:
            if n not in res:
                continue
            w, c = res[n]["wall"], res[n]["cpu"]
            b = bridge_of.get(n)
            vs = f"{c['ratio'] / res[b]['cpu']['ratio']:.2f}x" if b in res else ""
            sdpa = f"{c['sdpa_ratio']:.3f}x" if "sdpa_ratio" in c else ""
            met, target_s = "", ""
            if n in TARGETS and (TARGETS[n][0] != "hf_sdpa" or "sdpa_ratio" in c):
                ref, target = TARGETS[n]
                key = "sdpa_ratio" if ref == "hf_sdpa" else "ratio"
                target_s = f"<= {target}x {'HF SDPA' if ref == 'hf_sdpa' else 'HF eager'}"
                met = "yes" if c[key] <= target else "**no**"
                if (w[key] <= target) != (c[key] <= target):
                    met += f" (wall: {'yes' if w[key] <= target else 'no'})"
            lines.append(
                f"| {model} | {LABELS[n]} | {1000 * w['median_s']:.0f} | {w['ratio']:.3f}x | "
                f"{1000 * c['median_s']:.0f} | {c['ratio']:.3f}x | {c['lo']:.2f}..{c['hi']:.2f} | {sdpa} | {vs} | "
                f"{target_s} | {met} |"
            )
    return "\n".join(lines)


def machine_line(threads: int) -> str:
    try:
        load = os.getloadavg()
        load_s = f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}"
    except OSError:
        load_s = "load average unknown"
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, torch {torch.__version__} "
        f"with {threads} threads, Python {platform.python_version()}; {load_s} at the end of the run"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "smollm2"], choices=["minilm", "smollm2", "gemma3"])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--variants", nargs="+", default=VARIANTS, choices=VARIANTS, help="subset to time (hf is always timed)"
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown table to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    results, memory = {}, {}
    for name in args.models:
        hf_model, hf_sdpa, ours, bridge = load_all(name, with_bridge=any(v.startswith("bridge") for v in args.variants))
        ids = make_batch(ours.cfg.d_vocab, args.batch, args.seq)
        fns = variants(name, hf_model, hf_sdpa, ours, bridge, ids)
        fns = {n: f for n, f in fns.items() if n == "hf" or n in args.variants}
        results[name] = summarise(time_rounds(fns, args.rounds, desc=name))
        if "ours_all" in args.variants:
            with torch.no_grad():
                memory[name] = cache_megabytes(ours.run_with_cache(ids)[1])
        del hf_model, hf_sdpa, ours, bridge, fns
        gc.collect()

    table = markdown(results, args)
    if memory:
        table += "\n\n| model | full cache held after the run (MB) | after every entry is read (MB) | "
        table += "entries computed on read |\n|---|---:|---:|---:|"
        for name, (now, read, pending) in memory.items():
            table += f"\n| {name} | {now:.0f} | {read:.0f} | {pending} |"
    table += "\n\nMachine: " + machine_line(args.threads) + "\n"
    print(table)
    if args.out is not None:
        atomic_write(args.out, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
