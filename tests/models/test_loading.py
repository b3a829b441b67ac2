"""Loading Hugging Face folders and the toolkit's own checkpoints (issue 2).

Hugging Face models are tiny, randomly initialised (every tensor perturbed, so zero biases or unit
norm weights cannot hide a conversion mistake) and saved with ``save_pretrained`` to a temp folder;
``models.load(folder)`` must then compute what the Hugging Face model computes: logits, every hidden
state and every attention pattern, on a right-padded batch, real positions compared.
"""

from __future__ import annotations

import pytest
import torch
import transformers

import models
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
