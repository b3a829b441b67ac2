"""Half precision and devices (issue 16, part 3): ``models.load(name, dtype=..., device=...)``.

The parity rule, fixed before measuring: run a model in bf16 (fp16) on a few real sentences and take
its output's error against the fp32 output (SmolLM2's logits, MiniLM's final hidden state, real
positions only), as the largest and as the mean absolute difference. Do the same for Hugging Face's
own model loaded in that dtype (``from_pretrained(dtype=...)``). Ours must be within 2x of Hugging
Face's on both measures, on both paths: our fused path against HF's SDPA attention, our eager path
(``exact=True``) against HF's eager attention. The fp32 reference is HF eager in fp32, which our
fp32 eager path equals bitwise (test_parity_hf.py).

Measured on this machine (torch 2.13 CPU, transformers 5.24), ours / HF, max and mean: on every
model, dtype and path the two errors are equal (ratio 1.00): our half-precision forward runs Hugging
Face's operations in Hugging Face's order (RMSNorm and softmax in fp32, RoPE angles in fp32, cos/sin
cast to the model's dtype).
"""

from __future__ import annotations

import copy

import pytest
import torch

import models
from models.loading import minilm_dir, smollm2_hf_dir

SENTENCES = ["The keys to the cabinet are on the table.", "Dogs bark.", "She said that he would come."]
HALF = [torch.bfloat16, torch.float16]


def _hf_half(name, dtype):
    import transformers

    folder = minilm_dir() if name == "minilm" else smollm2_hf_dir()
    auto = transformers.AutoModel if name == "minilm" else transformers.AutoModelForCausalLM
    return auto.from_pretrained(str(folder), dtype=dtype, attn_implementation="eager").eval()


def _hf_out(name, hf_model, batch, implementation):
    kwargs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    if name == "minilm":
        kwargs["token_type_ids"] = batch.token_type_ids
    hf_model.set_attn_implementation(implementation)
    try:
        with torch.no_grad():
            out = hf_model(**kwargs)
    finally:
        hf_model.set_attn_implementation("eager")
    return (out.logits if name == "smollm2" else out.last_hidden_state).float()


def _ours_out(model, batch, exact):
    with torch.no_grad():
        out = model(
            batch.input_ids, attention_mask=batch.attention_mask, token_type_ids=batch.token_type_ids, exact=exact
        )
    return out.float()


@pytest.fixture(scope="module", params=["minilm", "smollm2"])
def reference(request):
    """(name, our fp32 model, the batch, HF's fp32 eager output)."""
    name = request.param
    ours = request.getfixturevalue(name)
    hf_model, _ = request.getfixturevalue(f"hf_{name}")
    batch = ours.to_words(SENTENCES)
    return name, ours, batch, _hf_out(name, hf_model, batch, "eager")


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_half_precision_within_twice_hf_error(reference, dtype):
    name, ours32, batch, ref = reference
    real = batch.attention_mask.bool()
    if name == "minilm":
        ours = models.load("minilm", dtype=dtype)  # the loader's path
    else:
        ours = copy.deepcopy(ours32).to(dtype)  # the same conversion, without reading SmolLM2 again
    assert ours.cfg.dtype == dtype and all(p.dtype == dtype for p in ours.parameters())
    hf = _hf_half(name, dtype)
    report = []
    for exact, implementation in ((False, "sdpa"), (True, "eager")):
        err_ours = (_ours_out(ours, batch, exact) - ref)[real].abs()
        err_hf = (_hf_out(name, hf, batch, implementation) - ref)[real].abs()
        assert torch.isfinite(err_ours).all() and torch.isfinite(err_hf).all()
        assert err_hf.max() > 0, "HF's half-precision model must differ from fp32 (else the rule tests nothing)"
        for what, a, b in (("max", err_ours.max(), err_hf.max()), ("mean", err_ours.mean(), err_hf.mean())):
            report.append(f"{implementation} {what}: ours {a:.3g}, HF {b:.3g}")
            assert a <= 2 * b, f"{name} {dtype} {implementation}: {what} error {a:.3g} > 2 x HF's {b:.3g}"
    del hf


def test_half_model_keeps_the_fp32_parts_hf_keeps(smollm2):
    """RoPE's frequencies stay fp32 after ``.to(bf16)``; hooks see the model's dtype; the loss is fp32."""
    model = copy.deepcopy(smollm2).to(torch.bfloat16)
    assert model.rope_inv_freq.dtype == torch.float32
    torch.testing.assert_close(model.rope_inv_freq, smollm2.rope_inv_freq, rtol=0, atol=0)
    tokens = model.to_tokens("The cat sleeps on the mat.")
    with torch.no_grad():
        loss, cache = model.run_with_cache(
            tokens, return_type="loss", names_filter=lambda n: n.endswith(("q", "pattern"))
        )
        loss32 = smollm2(tokens, return_type="loss")
    assert loss.dtype == torch.float32 and abs(loss.item() - loss32.item()) < 0.1
    assert cache["blocks.0.attn.hook_rot_q"].dtype == torch.bfloat16
    assert cache["blocks.0.attn.hook_pattern"].dtype == torch.bfloat16


def test_load_checks_dtype_and_device():
    from models.loading import resolve_device, resolve_dtype

    assert resolve_dtype("bf16") is torch.bfloat16 and resolve_dtype("torch.float16") is torch.float16
    assert resolve_dtype(None) is torch.float32 and resolve_dtype(torch.bfloat16) is torch.bfloat16
    with pytest.raises(ValueError, match=r"dtype 'fp8' is not supported; use one of .*bf16"):
        resolve_dtype("fp8")
    with pytest.raises(ValueError, match="torch.int8 is not supported; use torch.float32, torch.bfloat16"):
        models.load("minilm", dtype=torch.int8)
    with pytest.raises(ValueError, match="'gpu0' is not a torch device"):
        models.load("minilm", device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU"):
            resolve_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def test_cli_dtype_option(tmp_path, capsys, monkeypatch):
    """``--dtype`` reaches ``models.load`` (one shared argument helper); a bad name is refused by
    argparse with the choices."""
    from analyses.cli import main

    loaded = []
    real_load = models.load

    def spy(*args, **kwargs):
        loaded.append(real_load(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr(models, "load", spy)
    assert main(["tour", "--model", "minilm", "--out", str(tmp_path), "--dtype", "fp16", "--layer", "1"]) == 0
    assert (tmp_path / "pattern_L1H0.png").stat().st_size > 0
    assert [m.cfg.dtype for m in loaded] == [torch.float16]
    assert "Transformer('minilm'" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["validate", "--model", "minilm", "--out", str(tmp_path / "v"), "--dtype", "int8"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "'int8' is not a supported dtype; use float32, bfloat16, float16" in err
