"""Bad input and faults on the model side, second round (issue 24): each is refused with one line
naming what was wrong and what would be right, or warned about, instead of passing silently.

Hook returns of another shape, dtype or device (item 9); sliding windows (item 10; a mask since issue 25); generate's
arguments and context, checked before any forward pass (item 12 and the weak items); words lost
to [UNK] or changed by normalisation (item 13); to_tokens of an int or bytes; folders that ask
for custom code (item 4), hold pickled weights, an unsupported architecture, scaled RoPE or NaN
weights; and transformers' progress bar, silenced while the toolkit loads.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings

import pytest
import torch
import transformers

import models
from interp.hooks import HookReturnError
from models.loading import UnsupportedModelError
from tests.factories import planted_model, run_unblocking_fifo, tiny_batch, tiny_hf_llama_config, tiny_model

V = 97


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text, text
    return text


# --------------------------------------------------------------------------------------------------
# Item 9: a hook's return must have its input's shape, dtype and device


BAD_RETURNS = {
    "fewer positions": ("blocks.0.hook_resid_pre", lambda x, hook: x[:, :1]),
    "one head dropped": ("blocks.1.attn.hook_z", lambda x, hook: x[:, :, :-1]),
    "transposed pattern": ("blocks.0.attn.hook_pattern", lambda x, hook: x.transpose(1, 2)[:, :, :2]),
    "another dtype": ("blocks.0.mlp.hook_post", lambda x, hook: x.double()),
    "another device": ("blocks.0.hook_attn_out", lambda x, hook: x.to("meta")),
    "not a tensor": ("hook_embed", lambda x, hook: (x,)),
}


@pytest.mark.parametrize("case", sorted(BAD_RETURNS))
def test_a_hook_returning_another_shape_dtype_or_device_is_refused_naming_the_hook(case):
    model = tiny_model("llama_like")
    tokens, mask = tiny_batch(model.cfg)
    name, fn = BAD_RETURNS[case]
    with torch.no_grad(), pytest.raises(HookReturnError) as info:
        model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(name, fn)])
    message = _one_line(info.value)
    assert name in message
    if case != "not a tensor":
        given = list(model.run_with_cache(tokens, attention_mask=mask, names_filter=name)[1][name].shape)
        assert str(given) in message  # its input's shape, and what came back
        assert "returned shape [" in message


def test_a_hook_returning_a_tensor_like_its_input_is_used():
    model = tiny_model("gpt2_like")
    tokens, mask = tiny_batch(model.cfg)
    with torch.no_grad():
        plain = model(tokens, attention_mask=mask)
        doubled = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("hook_embed", lambda x, hook: 2 * x)])
        same = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("hook_embed", lambda x, hook: x)])
    assert not torch.equal(plain, doubled) and torch.equal(plain, same)


# --------------------------------------------------------------------------------------------------
# Item 12 and the weak items: generate's arguments, checked before any forward pass


def _counted(model):
    calls = []
    model.add_hook("hook_embed", lambda x, hook: calls.append(1))
    return calls


BAD_GENERATE = [
    (dict(temperature=-1.0), ValueError, "temperature"),
    (dict(temperature=math.nan), ValueError, "temperature"),
    (dict(temperature=math.inf), ValueError, "temperature"),
    (dict(temperature="hot"), TypeError, "temperature"),
    (dict(top_p=0.0), ValueError, "top_p"),
    (dict(top_p=1.5), ValueError, "top_p"),
    (dict(top_p=math.nan), ValueError, "top_p"),
    (dict(top_k=0), ValueError, "top_k"),
    (dict(top_k=-3), ValueError, "top_k"),
    (dict(top_k=2.5), TypeError, "top_k"),
    (dict(max_new_tokens=2.5), TypeError, "max_new_tokens"),
    (dict(max_new_tokens="5"), TypeError, "max_new_tokens"),
    (dict(max_new_tokens=True), TypeError, "max_new_tokens"),
    (dict(max_new_tokens=-1), ValueError, "max_new_tokens"),
    (dict(freq_penalty=math.nan), ValueError, "freq_penalty"),
    (dict(max_new_tokens=40), ValueError, "n_ctx=32"),  # 5 prompt tokens + 40 > 32
]


@pytest.mark.parametrize("kwargs, error, named", BAD_GENERATE, ids=[str(k) for k, _, _ in BAD_GENERATE])
def test_generate_refuses_bad_arguments_before_any_forward_pass(kwargs, error, named):
    model = tiny_model("llama_like")
    calls = _counted(model)
    with pytest.raises(error, match=named) as info:
        model.generate(torch.tensor([[1, 2, 3, 4, 5]]), stop_at_eos=False, **kwargs)
    _one_line(info.value)
    assert not calls, "a forward pass ran before the refusal"
    model.reset_hooks()


# Issue 41 item 9: a prompt that is not a text or token ids (before: torch's "Could not infer dtype
# of NoneType", an IndexError for 12, a forward pass for float or out-of-vocabulary ids)
BAD_PROMPTS = {
    "None": (None, TypeError, "got None (NoneType)"),
    "an int": (12, TypeError, "got 12 (int)"),
    "bytes": (b"The keys", TypeError, "got b'The keys' (bytes)"),
    "a 0-d tensor": (torch.tensor(12), ValueError, "got shape ()"),
    "a 3-d tensor": (torch.ones(1, 2, 3, dtype=torch.long), ValueError, "got shape (1, 2, 3)"),
    "a ragged list": ([[1, 2], [3]], ValueError, "torch cannot read this list as ids"),
    "float ids": (torch.tensor([1.0, 2.0]), TypeError, "integer ids"),
    "ids past the vocabulary": ([1, 10**6], ValueError, "must lie in 0..49"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROMPTS))
def test_generate_refuses_a_prompt_that_is_neither_text_nor_ids_before_any_forward_pass(case):
    prompt, error, named = BAD_PROMPTS[case]
    model = tiny_model("llama_like")
    calls = _counted(model)
    with pytest.raises(error, match=re.escape(named)) as info:
        model.generate(prompt, max_new_tokens=2, stop_at_eos=False)
    _one_line(info.value)
    assert not calls, "a forward pass ran before the refusal"
    model.reset_hooks()


def test_generate_up_to_the_context_still_runs():
    """The longest generation that fits: the model reads n_ctx tokens (the last new one is never
    read back); one more is refused."""
    model = tiny_model("llama_like")
    prompt = torch.tensor([[1, 2, 3, 4, 5]])
    fits = model.cfg.n_ctx - prompt.shape[1] + 1
    out = model.generate(prompt, max_new_tokens=fits, do_sample=False, stop_at_eos=False)
    assert out.shape == (1, model.cfg.n_ctx + 1)
    with pytest.raises(ValueError, match=f"max_new_tokens <= {fits}"):
        model.generate(prompt, max_new_tokens=fits + 1, do_sample=False, stop_at_eos=False)


def test_temperature_zero_is_greedy_and_sampling_arguments_in_range_run():
    model = tiny_model("llama_like")
    prompt = torch.tensor([[1, 2, 3]])
    greedy = model.generate(prompt, max_new_tokens=4, do_sample=False, stop_at_eos=False)
    assert torch.equal(model.generate(prompt, max_new_tokens=4, temperature=0, stop_at_eos=False), greedy)
    torch.manual_seed(0)
    out = model.generate(prompt, max_new_tokens=3, temperature=0.5, top_k=1, top_p=1.0, stop_at_eos=False)
    assert torch.equal(out, greedy[:, :6])  # top_k=1 is greedy whatever the temperature


def test_to_tokens_refuses_an_int_and_bytes_naming_the_accepted_types():
    model = planted_model(attention="causal")
    with pytest.raises(TypeError, match="str or a list of str, got int"):
        model.to_tokens(123)
    with pytest.raises(TypeError, match="got bytes.*decode"):
        model.to_tokens(b"the cat sleeps")
    assert model.to_tokens(["the cat sleeps"]).shape[0] == 1


# --------------------------------------------------------------------------------------------------
# Item 13: words lost to [UNK] or changed by normalisation are counted, warned about, refused when all


@pytest.fixture(scope="module")
def minilm_tokenizer():
    return models.Tokenizer(transformers.AutoTokenizer.from_pretrained(str(models.minilm_dir())))


def test_japanese_on_minilm_reports_lost_and_changed_words_in_one_warning(minilm_tokenizer):
    with pytest.warns(models.LostWordsWarning) as record:
        batch = minilm_tokenizer(["猫 が 魚 を 食べた", "The cat sleeps."])
    assert len(record) == 1  # one warning per call, not per word
    message = str(record[0].message)
    assert "2 lost to the unknown token" in message and "'猫'" in message and "changed" in message
    assert batch.lost == [[True, False, True, False, False], [False] * 4]
    assert batch.changed[0][1] is True  # が became か (accents stripped)
    assert batch.changed[1] == [False] * 4  # lower-casing is not a change
    assert (batch.n_lost, batch.n_changed) == (2, sum(batch.changed[0]))


def test_plain_english_gives_no_warning(minilm_tokenizer):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch = minilm_tokenizer(["The cat sleeps on the mat."])
    assert batch.n_lost == batch.n_changed == 0


def test_a_sentence_whose_every_word_is_lost_is_refused(minilm_tokenizer):
    with pytest.raises(ValueError, match=r"text 1 .*every word is unknown") as info:
        minilm_tokenizer(["The cat sleeps.", "猫 魚"])
    _one_line(info.value)


# --------------------------------------------------------------------------------------------------
# Loading: custom code, pickles, unsupported architectures, scaled RoPE, NaN weights, sliding windows


def _tiny_llama_folder(tmp_path, name="llama", **overrides):
    cfg = tiny_hf_llama_config(V, **overrides)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(cfg).eval()
    folder = tmp_path / name
    hf.save_pretrained(str(folder))
    return folder, hf


def _edit_config(folder, **changes):
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


def test_a_folder_asking_for_its_own_code_loads_the_standard_architecture_and_runs_none(tmp_path):
    folder, hf = _tiny_llama_folder(tmp_path)
    marker = tmp_path / "ran"
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (folder / "configuration_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.Evil"}
    _edit_config(folder, auto_map=auto_map)
    with pytest.warns(UserWarning, match="never runs a folder's code.*'llama'"):
        model = models.load(str(folder))
    assert not marker.exists()
    tokens = torch.randint(0, V, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (model(tokens) - hf(tokens).logits).abs().max() <= 1e-5
    # a custom architecture the toolkit has no standard counterpart for: refused, nothing run
    _edit_config(folder, model_type="evil")
    with pytest.raises(UnsupportedModelError, match="'evil' is not supported") as info:
        models.load(str(folder))
    _one_line(info.value)
    assert not marker.exists()


class _Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickled_weights_are_refused_in_one_line_and_never_unpickled(tmp_path):
    import pickle

    folder, _ = _tiny_llama_folder(tmp_path)
    for f in folder.glob("*.safetensors"):
        f.unlink()
    marker = tmp_path / "unpickled"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": _Planted(str(marker))}))
    with pytest.raises(models.CheckpointError, match="pytorch_model.bin, a pickle.*safetensors only") as info:
        models.load(str(folder))
    _one_line(info.value)
    assert not marker.exists()


def test_an_unsupported_architecture_is_one_short_line_naming_it_and_the_supported_ones(tmp_path):
    folder = tmp_path / "t5"
    transformers.T5Config(vocab_size=V, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_heads=2).save_pretrained(
        str(folder)
    )
    with pytest.raises(ValueError, match="'t5' is not supported") as info:
        models.load(str(folder))
    message = _one_line(info.value)
    # one line naming every one of the 22+ supported types, and the folder
    assert len(message) < 500 and "llama" in message and "bert" in message and "gpt_neox" in message


def test_scaled_rope_is_a_value_error_naming_the_architecture(tmp_path):
    folder, _ = _tiny_llama_folder(tmp_path, rope_scaling={"rope_type": "proportional", "factor": 2.0})
    with pytest.raises(ValueError, match="llama rope_scaling type 'proportional' is not supported.*'llama3'") as info:
        models.load(str(folder))
    _one_line(info.value)
    assert isinstance(info.value, NotImplementedError)  # what it was before, for callers that catch that


def test_nan_or_inf_weights_load_with_a_warning_naming_the_tensor(tmp_path):
    folder, hf = _tiny_llama_folder(tmp_path)
    with torch.no_grad():
        hf.model.layers[1].mlp.up_proj.weight[0, 0] = float("nan")
    hf.save_pretrained(str(folder))
    with pytest.warns(UserWarning, match=r"'blocks\.1\.mlp\.in_weight' holds NaN or inf.*fused attention"):
        model = models.load(str(folder))
    assert torch.isnan(model.blocks[1].mlp.in_weight).any()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_non_finite_check_finds_one_bad_value_anywhere(bad, dtype):
    from models.loading import _warn_non_finite

    big = torch.finfo(dtype).max
    clean = {"a": torch.tensor([[big, -big], [0.0, 1.0]], dtype=dtype), "empty": torch.zeros(0, 3, dtype=dtype)}
    clean["ids"] = torch.arange(4)  # not floating point: never checked
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_non_finite(clean, "clean")  # the largest finite values are finite; an empty tensor is no error
    for where in range(4):
        state = {**clean, "b": torch.ones(2, 2, dtype=dtype)}
        state["b"].view(-1)[where] = bad
        with pytest.warns(UserWarning, match=r"there: tensor 'b' holds NaN or inf") as record:
            _warn_non_finite(state, "there")
        assert len(record) == 1 and "'a'" not in str(record[0].message)


def test_loading_draws_no_random_init_and_returns_a_plain_transformer(tmp_path):
    """The loaders build the model without GPT-2's random init (every tensor is overwritten by the
    weights), nor does the check of config.json against the weights (a model on the meta device):
    the global RNG is where it was, and the model is a plain Transformer."""
    folder, hf = _tiny_llama_folder(tmp_path)
    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    model = models.load(str(folder))
    assert torch.equal(torch.rand(3), expected)
    assert type(model) is models.Transformer
    assert torch.equal(model.W_E, hf.model.embed_tokens.weight)
    saved = models.save_checkpoint(model, tmp_path / "ckpt")
    torch.manual_seed(1)
    again = models.load(str(saved))
    assert torch.equal(torch.rand(3), expected)
    assert type(again) is models.Transformer
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())


def test_loading_shows_no_progress_bar_and_restores_the_setting(tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    folder, _ = _tiny_llama_folder(tmp_path)
    capfd.readouterr()
    hf_logging.enable_progress_bar()
    models.load(str(folder))
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "%|" not in err, err
    assert hf_logging.is_progress_bar_enabled()


def _windowed(tmp_path, kind, **window):
    common = dict(
        vocab_size=V,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    if kind == "qwen2":
        cfg, cls = transformers.Qwen2Config(**common, **window), transformers.Qwen2ForCausalLM
    else:
        cfg, cls = transformers.MistralConfig(**common, **window), transformers.MistralForCausalLM
    torch.manual_seed(0)
    cfg._attn_implementation = "eager"
    hf = cls(cfg).eval()
    folder = tmp_path / kind
    hf.save_pretrained(str(folder))
    return models.load(str(folder)), hf


@pytest.mark.parametrize(
    "kind, window, layer_types",
    [
        ("qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=0), ("sliding", "sliding")),
        ("qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=1), ("full", "sliding")),
        ("qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=2), None),  # no layer
        ("qwen2", dict(use_sliding_window=False, sliding_window=4, max_window_layers=0), None),  # off
        ("mistral", dict(sliding_window=4), ("sliding", "sliding")),
    ],
)
def test_a_sliding_window_is_masked_as_hugging_face_masks_it_and_no_longer_caps_the_context(
    tmp_path, kind, window, layer_types
):
    """Issue 25: the window is a mask of the sliding layers (which ones, as Hugging Face's config
    derives them), not a cap on n_ctx: inputs three times the window run and give HF's logits
    bitwise on the eager path (tests/models/test_families.py checks both paths and padding)."""
    model, hf = _windowed(tmp_path, kind, **window)
    assert model.cfg.n_ctx == 64 and model.cfg.layer_types == layer_types
    assert model.cfg.sliding_window == (4 if layer_types else None)
    long = torch.randint(0, V, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(model(long, exact=True), hf(long).logits)


# --------------------------------------------------------------------------------------------------
# Issue 41: hostile model folders. config.json checked against the weights' headers before anything
# is built (item 5), special files (item 6), one line for what transformers and tokenizers reject
# (item 7 and model_type null), and a folder without a tokenizer saying what to add.


def _never_built(monkeypatch):
    """transformers' from_pretrained, which allocates the model config.json describes, must not be reached."""

    def built(*args, **kwargs):
        raise AssertionError("the model was built before config.json was checked against the weights")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", built)


LYING_CONFIGS = {
    # 8192 over 32-wide weights: gigabytes allocated before the refusal, before
    "hidden_size": (dict(hidden_size=8192, head_dim=2048), ["'lm_head.weight'", "(97, 32)", "(97, 8192)"]),
    # a million layers: built for ever, before
    "num_hidden_layers": (dict(num_hidden_layers=1_000_000), ["num_hidden_layers=1000000", "weights hold 2"]),
    # 16 heads of 8 over weights of 4: o_proj 128 columns where the weights have 32
    "num_attention_heads": (dict(num_attention_heads=16, head_dim=8), ["o_proj.weight'", "(32, 32)", "(32, 128)"]),
}


@pytest.mark.parametrize("case", sorted(LYING_CONFIGS))
def test_a_config_that_lies_about_the_weights_is_refused_before_the_model_is_built(tmp_path, monkeypatch, case):
    changes, named = LYING_CONFIGS[case]
    folder, _ = _tiny_llama_folder(tmp_path)
    _edit_config(folder, **changes)
    _never_built(monkeypatch)
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert all(n in message for n in named), message


def test_a_config_asking_for_more_experts_than_the_weights_hold_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """Mixtral's weights name each expert's w1, w2, w3; transformers fuses them into one tensor per
    layer under another name, so no shape is compared by name. Before: num_local_experts=1000000
    passed the header check and from_pretrained tried to allocate gigabytes (killed for memory)."""
    from models.tiny import save_tiny

    folder, _ = save_tiny("mixtral", tmp_path / "mixtral")
    _edit_config(folder, num_local_experts=1_000_000)
    _never_built(monkeypatch)
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert str(folder) in message and "parameters, its weights hold" in message
    assert "experts.gate_up_proj" in message and "(1000000, " in message


# config.json values transformers fails on with another exception than ValueError (a traceback, before)
UNBUILDABLE_CONFIGS = {
    "num_attention_heads 0": (dict(num_attention_heads=0), "ZeroDivisionError"),
    "num_key_value_heads 0": (dict(num_key_value_heads=0), "ZeroDivisionError"),
    "head_dim 0": (dict(head_dim=0), "ZeroDivisionError"),
    "unknown hidden_act": (dict(hidden_act="nope"), "KeyError: 'nope'"),
    "pad_token_id past the vocabulary": (dict(pad_token_id=10**6), "Padding_idx must be within num_embeddings"),
}


@pytest.mark.parametrize("case", sorted(UNBUILDABLE_CONFIGS))
def test_a_config_transformers_cannot_build_is_one_line_naming_config_json(tmp_path, case):
    changes, named = UNBUILDABLE_CONFIGS[case]
    folder, _ = _tiny_llama_folder(tmp_path)
    _edit_config(folder, **changes)
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert str(folder) in message and "config.json" in message and named in message


def _special(path, kind):
    path.unlink()
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    else:
        os.mkfifo(path)


def _load_guarded(folder, path):
    """models.load in a thread (``run_unblocking_fifo``): the test fails instead of hanging on a FIFO."""
    outcome, hung = run_unblocking_fifo(lambda: models.load(str(folder)), path)
    assert not hung, f"loading a folder whose {path.name} is a FIFO hung"
    return outcome


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo"])
@pytest.mark.parametrize("name", ["config.json", "interp_config.json"])
def test_a_config_that_is_a_device_or_a_fifo_is_refused_in_one_line(tmp_path, kind, name):
    if name == "config.json":
        folder, _ = _tiny_llama_folder(tmp_path)
    else:
        folder = models.save_checkpoint(tiny_model("llama_like"), tmp_path / "ckpt")
    _special(folder / name, kind)
    outcome = _load_guarded(folder, folder / name)
    assert "error" in outcome and isinstance(outcome["error"], ValueError), outcome
    message = _one_line(outcome["error"])
    assert str(folder / name) in message and "not a regular file" in message


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_a_config_larger_than_any_config_is_refused_before_it_is_read(tmp_path, name):
    """model.safetensors.index.json (a sharded model's map, read whole by transformers): before, not capped."""
    folder, _ = _tiny_llama_folder(tmp_path)
    if name == "model.safetensors.index.json":  # sharded: transformers reads the map to find the shards
        (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    with open(folder / name, "a+b") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB of nothing
    with pytest.raises(ValueError, match=name) as info:
        models.load(str(folder))
    assert "17,825,792 bytes" in _one_line(info.value)


def test_a_tokenizer_the_library_rejects_is_an_error_naming_the_file(tmp_path):
    """Before: a KeyError traceback from transformers for one broken file, and a folder whose
    tokenizer failed otherwise loaded without one, silently. Now: one line naming the file."""
    folder, _ = _tiny_llama_folder(tmp_path)
    (folder / "tokenizer.json").write_text('{"model": {"type": "Nope"}}')
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert "tokenizer.json" in message and "cannot be read" in message and str(folder) in message


def _llama_folder_with_a_tokenizer(tmp_path):
    from models import bpe

    folder = tmp_path / "llama"
    transformers.LlamaForCausalLM(tiny_hf_llama_config(300)).save_pretrained(str(folder))
    bpe.train_bpe(["the keys to the cabinet are on the table"] * 4, vocab_size=300).save(folder)
    assert models.load(str(folder)).tokenizer is not None
    return folder


def test_tokenizer_settings_without_a_vocabulary_are_refused_not_dropped(tmp_path):
    """Before: a folder holding tokenizer_config.json (and special_tokens_map.json) but no vocabulary
    loaded without a tokenizer, silently."""
    folder = _llama_folder_with_a_tokenizer(tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert str(folder) in message and "tokenizer_config.json" in message and "no vocabulary" in message


@pytest.mark.parametrize("name", ["tokenizer_config.json", "special_tokens_map.json"])
def test_a_broken_tokenizer_settings_file_is_the_file_named(tmp_path, name):
    """Before: the message named tokenizer.json, which was intact."""
    folder = _llama_folder_with_a_tokenizer(tmp_path)
    (folder / name).write_text('{"model_max_length": 512,')
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert f"{folder / name} is not valid JSON" in message and "line 1 column" in message


def test_tokenizer_settings_larger_than_any_are_refused_before_they_are_read(tmp_path):
    folder = _llama_folder_with_a_tokenizer(tmp_path)
    with open(folder / "special_tokens_map.json", "wb") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB of nothing, read whole by transformers
    with pytest.raises(ValueError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert str(folder / "special_tokens_map.json") in message and "17,825,792 bytes" in message


def test_a_checkpoint_whose_tokenizer_is_broken_is_an_error_naming_the_file(tmp_path, minilm):
    model = tiny_model("bert_like")
    model.tokenizer = minilm.tokenizer  # the tokenizer's files are saved beside the weights
    folder = models.save_checkpoint(model, tmp_path / "ckpt")
    (folder / "tokenizer.json").write_text("[1, 2")
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    assert "tokenizer.json" in _one_line(info.value)


def test_heads_that_do_not_divide_the_width_are_one_line(tmp_path):
    folder, _ = _tiny_llama_folder(tmp_path)
    _edit_config(folder, num_attention_heads=5)
    with pytest.raises(ValueError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert "config.json" in message and "hidden size (32) is not a multiple" in message


def test_model_type_null_names_model_type_and_the_supported_ones(tmp_path):
    folder, _ = _tiny_llama_folder(tmp_path)
    _edit_config(folder, model_type=None)
    with pytest.raises(UnsupportedModelError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert "model_type None is not supported" in message and "llama," in message
    assert "update" not in message.lower()


def test_running_out_of_memory_while_building_is_one_line(tmp_path, monkeypatch):
    folder, _ = _tiny_llama_folder(tmp_path)

    def no_memory(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:116] . DefaultCPUAllocator: not enough memory: "
            "you tried to allocate 17179869184 bytes.\nException raised from ..."
        )

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_memory)
    with pytest.raises(models.CheckpointError) as info:
        models.load(str(folder))
    message = _one_line(info.value)
    assert str(folder) in message and "not enough memory" in message and "17179869184" in message


def test_a_folder_model_without_a_tokenizer_says_which_files_to_add(tmp_path):
    folder, _ = _tiny_llama_folder(tmp_path)
    model = models.load(str(folder))
    assert model.tokenizer is None
    with pytest.raises(ValueError) as info:
        model("The keys to the cabinet")
    message = _one_line(info.value)
    assert "pass token ids" in message and "tokenizer.json" in message and "tokenizer_config.json" in message


@pytest.mark.parametrize("command", ["probe", "validate"])
def test_a_command_given_a_folder_model_without_a_tokenizer_says_which_files_to_add(tmp_path, capsys, command):
    """Before: "pass tokenizer= (a models.Tokenizer ...)", a Python argument no command takes."""
    from analyses.cli import main

    folder, _ = _tiny_llama_folder(tmp_path)
    capsys.readouterr()  # save_pretrained's progress bar
    assert main([command, "--model", str(folder), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"interp {command}: "), lines
    assert "no tokenizer attached" in lines[0] and "tokenizer.json" in lines[0] and "model folder" in lines[0]
