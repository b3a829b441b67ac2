#!/usr/bin/env bash
# Device check (issue 16): with a CUDA GPU, check the fused path and half precision against Hugging
# Face on it and time the forward pass against Hugging Face; without one, say so plainly and exit 0
# (the project never needs a GPU; the same claims are tested on CPU by tests/models/test_parity_hf.py,
# test_fastpath.py and test_dtype.py).
#
#   bash bench/device_check.sh                     # report to stdout (markdown)
#   OUT=docs/device_check.md bash bench/device_check.sh   # also write it there (atomically)
#   DEVICE=cpu ROUNDS=1 SHORT=2x16 LONG=32 bash bench/device_check.sh   # smoke-run the same code on CPU
#
# On the GPU, for MiniLM and SmolLM2 in fp32, bf16 and fp16 (about 3-5 minutes on one recent GPU):
#   1. parity: our fused path vs Hugging Face SDPA and our eager path (exact=True) vs Hugging Face
#      eager, same dtype, same device (largest difference on real positions; 0 means bitwise); in
#      bf16/fp16 the 2x rule of test_dtype.py (our error against fp32 within 2x of Hugging Face's);
#   2. timing: forward passes at SHORT = 32 x 64 (both models) and 1 x LONG (SmolLM2, default 2048), medians of
#      ROUNDS (default 5) after a warm-up, torch.cuda.synchronize around each: HF eager, HF SDPA, ours
#      fused, ours exact, ours caching every hook, ours caching the patterns; ratios to HF.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ -z "${DEVICE:-}" ]; then
    if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
        echo "device_check: no CUDA GPU is visible to torch $("$PY" -c 'import torch; print(torch.__version__)') here;" \
            "nothing ran. CPU parity: pytest tests/models/test_parity_hf.py tests/models/test_fastpath.py" \
            "tests/models/test_dtype.py; CPU speed: python bench/bench_forward.py."
        exit 0
    fi
    DEVICE=cuda
fi
export DEVICE ROUNDS=${ROUNDS:-5} SHORT=${SHORT:-32x64} LONG=${LONG:-2048} OUT=${OUT:-}

"$PY" - <<'EOF'
import os, statistics, sys, time
from pathlib import Path

import torch

sys.path.insert(0, os.getcwd())
import models  # noqa: E402
from interp.io import atomic_write  # noqa: E402
from models.loading import minilm_dir, smollm2_hf_dir  # noqa: E402

DEV, ROUNDS, LONG = torch.device(os.environ["DEVICE"]), int(os.environ["ROUNDS"]), int(os.environ["LONG"])
SHORT = tuple(int(x) for x in os.environ["SHORT"].split("x"))
SENTENCES = ["The keys to the cabinet are on the table.", "Dogs bark.", "She said that he would come."]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
lines = [f"# Device check: {torch.cuda.get_device_name(DEV) if DEV.type == 'cuda' else DEV}, torch {torch.__version__}", ""]


def hf_model(name, dtype):
    import transformers

    folder = minilm_dir() if name == "minilm" else smollm2_hf_dir()
    auto = transformers.AutoModel if name == "minilm" else transformers.AutoModelForCausalLM
    return auto.from_pretrained(str(folder), dtype=dtype, attn_implementation="eager").to(DEV).eval()


def hf_out(name, m, kw, impl):
    m.set_attn_implementation(impl)
    with torch.no_grad():
        out = m(**kw, **({"use_cache": False} if name == "smollm2" else {}))
    return (out.logits if name == "smollm2" else out.last_hidden_state).float()


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize(DEV)


def timed(fn):
    with torch.no_grad():
        fn()
        ts = []
        for _ in range(ROUNDS):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


lines += ["## Parity (largest abs difference on real positions; 0 = bitwise)", "",
          "| model | dtype | fused vs HF SDPA | eager vs HF eager | error vs fp32, ours / HF (fused) | (eager) | 2x rule |",
          "|---|---|---:|---:|---:|---:|---|"]
timing = ["## Forward time (median of ROUNDS, ms; ratio to HF in brackets)", "",
          "| model | dtype | tokens | HF eager | HF SDPA | ours fused | ours exact | ours, every hook | ours, patterns |",
          "|---|---|---|---:|---:|---:|---:|---:|---:|"]
ok = True
for name in ("minilm", "smollm2"):
    ref = None
    for dname, dtype in DTYPES.items():
        ours = models.load(name, device=DEV, dtype=dtype)
        hf = hf_model(name, dtype)
        b = ours.to_words(SENTENCES)
        real = b.attention_mask.bool().to(DEV)
        kw = dict(input_ids=b.input_ids.to(DEV), attention_mask=b.attention_mask.to(DEV))
        if name == "minilm":
            kw["token_type_ids"] = b.token_type_ids.to(DEV)
        with torch.no_grad():
            mine = {e: ours(kw["input_ids"], attention_mask=kw["attention_mask"], token_type_ids=kw.get("token_type_ids"), exact=e).float() for e in (False, True)}
        theirs = {False: hf_out(name, hf, kw, "sdpa"), True: hf_out(name, hf, kw, "eager")}
        diff = {e: (mine[e] - theirs[e])[real].abs().max().item() for e in (False, True)}
        if dtype == torch.float32:
            ref = theirs[True]
            row = f"| {name} | {dname} | {diff[False]:.3g} | {diff[True]:.3g} | | | |"
        else:
            err = {e: ((mine[e] - ref)[real].abs().max().item(), (theirs[e] - ref)[real].abs().max().item()) for e in (False, True)}
            rule = all(a <= 2 * h for a, h in err.values())
            ok &= rule
            row = (f"| {name} | {dname} | {diff[False]:.3g} | {diff[True]:.3g} | {err[False][0]:.3g} / {err[False][1]:.3g} "
                   f"| {err[True][0]:.3g} / {err[True][1]:.3g} | {'met' if rule else '**not met**'} |")
        lines.append(row)
        for batch, seq in (SHORT,) + (((1, LONG),) if name == "smollm2" else ()):
            gen = torch.Generator().manual_seed(0)
            ids = torch.randint(1000, ours.cfg.d_vocab - 100, (batch, seq), generator=gen).to(DEV)
            hkw = {"use_cache": False} if name == "smollm2" else {}

            def hf_run(impl):
                hf.set_attn_implementation(impl)
                return lambda: hf(input_ids=ids, **hkw)

            t = {
                "hf": timed(hf_run("eager")),
                "sdpa": timed(hf_run("sdpa")),
                "fused": timed(lambda: ours(ids)),
                "exact": timed(lambda: ours(ids, exact=True)),
            }
            if seq <= 512:  # a cache of every hook at 2048 tokens holds 30 x [9, 2048, 2048] patterns and more
                t["all"] = timed(lambda: ours.run_with_cache(ids))
                t["pat"] = timed(lambda: ours.run_with_cache(ids, names_filter=lambda n: n.endswith("hook_pattern")))

            def cell(k, ref_key):
                return f"{1000 * t[k]:.1f} ({t[k] / t[ref_key]:.2f}x)" if k in t else "-"

            timing.append(
                f"| {name} | {dname} | {batch} x {seq} | {1000 * t['hf']:.1f} | {cell('sdpa', 'hf')} | "
                f"{cell('fused', 'sdpa')} vs SDPA | {cell('exact', 'hf')} | {cell('all', 'hf')} | {cell('pat', 'hf')} |"
            )
        del ours, hf
        if DEV.type == "cuda":
            torch.cuda.empty_cache()

text = "\n".join(lines + [""] + timing) + "\n"
sys.stdout.write(text)
if os.environ.get("OUT"):
    atomic_write(Path(os.environ["OUT"]), text)
sys.exit(0 if ok else 1)
EOF
