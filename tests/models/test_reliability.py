"""Nothing lost, nothing silently wrong: the model-side items of issue 13.

1. ``forward``, ``run_with_cache`` and ``run_with_hooks`` work under ``torch.inference_mode()`` and
   give bitwise the values they give under ``torch.no_grad()``.
2. A Hugging Face folder whose weights lack a tensor, hold an extra one or a misshapen one is refused
   with an error naming the tensor (transformers would fill the gap with random values).
3. Text input with ``attention_mask=`` is refused (the tokenizer builds the mask); a mask or token
   types of the wrong shape name both shapes.
4. An [UNK] token that stands for a word (an emoji in MiniLM's WordPiece) belongs to that word.
5. One-line messages, one parametrised test: truncated weights, a corrupt or incomplete
   ``interp_config.json``, a lone surrogate, token types out of range, a weight view edited while
   autograd records.
"""

from __future__ import annotations

import json
import re

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

import models
from interp.alignment import split_words, word_attention
from models.weights import WeightEditError
from tests.factories import tiny_batch, tiny_model

# ---- 1. inference mode ----------------------------------------------------------------------------


def _edit_result(value, hook):  # in place: the model must notice and use the edited head outputs
    value[:, :, 1] = 0.0


def _edit_scale(value, hook):  # in place on the norm's divisor
    value.mul_(1.5)


def _replace_pattern(value, hook):  # a new tensor
    return value.flip(-1)


def _three_ways(model, tokens, **kw):
    """(forward, run_with_cache with every hook, run_with_hooks with in-place and replacing edits)."""
    n = model.cfg.n_layers
    hooks = [
        (f"blocks.{n - 1}.attn.hook_result", _edit_result),
        (f"blocks.{n - 1}.ln1.hook_scale", _edit_scale),
        ("blocks.0.attn.hook_pattern", _replace_pattern),
    ]
    plain = model(tokens, exact=True, **kw)  # the eager path, which caching the patterns runs
    out, cache = model.run_with_cache(tokens, **kw)
    edited = model.run_with_hooks(tokens, fwd_hooks=hooks, **kw)
    return plain, out, dict(cache.items()) if hasattr(cache, "items") else cache, edited


def _assert_inference_mode_same_as_no_grad(model, tokens, **kw):
    with torch.no_grad():
        ref = _three_ways(model, tokens, **kw)
    with torch.inference_mode():
        got = _three_ways(model, tokens, **kw)
    for a, b in zip(ref[:2] + ref[3:], got[:2] + got[3:]):
        assert torch.equal(a, b)
    assert set(ref[2]) == set(got[2]) and len(ref[2]) == len(model.hook_dict)
    for name in ref[2]:
        assert torch.equal(ref[2][name], got[2][name]), name
    # the edits took effect under both modes (the test would pass vacuously otherwise)
    assert not torch.equal(got[0], got[3])
    assert torch.equal(got[0], got[1])  # caching alone changes nothing


@pytest.mark.parametrize("key", ["gpt2_like", "bert_like", "llama_like"])
def test_inference_mode_tiny(key):
    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    _assert_inference_mode_same_as_no_grad(model, tokens, attention_mask=mask)
    _assert_inference_mode_same_as_no_grad(model, tokens[0])


def test_inference_mode_minilm(minilm):
    _assert_inference_mode_same_as_no_grad(minilm, ["The keys to the cabinet are here.", "A cat sleeps."])


def test_inference_mode_smollm2(smollm2):
    _assert_inference_mode_same_as_no_grad(smollm2, "The keys to the cabinet are")


def test_inference_mode_minilm_cache(minilm):
    """The same on MiniLM (the session's model: ``models.load("minilm")`` converts it the same
    way, without reading it again), forward and the whole cache, on a text with an [UNK]."""
    model = minilm
    text = "Emoji 🐈 and words."
    with torch.no_grad():
        ref, ref_cache = model.run_with_cache(text)
    with torch.inference_mode():
        out, cache = model.run_with_cache(text)
        plain = model(text, exact=True)
    assert torch.equal(ref, out) and torch.equal(ref, plain)
    assert all(torch.equal(ref_cache[k], cache[k]) for k in model.hook_dict)


# ---- 2. Hugging Face folders with missing, extra or misshapen weights -----------------------------


def _save_hf(kind: str, folder):
    common = dict(vocab_size=61, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    torch.manual_seed(0)
    if kind == "bert":
        hf = transformers.BertModel(transformers.BertConfig(**common, max_position_embeddings=40))
    else:
        cfg = transformers.LlamaConfig(
            **common, num_key_value_heads=2, max_position_embeddings=40, tie_word_embeddings=False
        )
        hf = transformers.LlamaForCausalLM(cfg)
    hf.save_pretrained(str(folder))
    return folder / "model.safetensors"


TARGET = {"bert": "encoder.layer.1.attention.self.query.weight", "llama": "model.layers.1.self_attn.q_proj.weight"}


def _rewrite(weights, change):
    state = load_file(str(weights))
    change(state)
    save_file(state, str(weights), metadata={"format": "pt"})


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_hf_folder_missing_tensor(tmp_path, kind):
    weights = _save_hf(kind, tmp_path / kind)
    _rewrite(weights, lambda s: s.pop(TARGET[kind]))
    with pytest.raises(models.CheckpointError, match=re.escape(repr(TARGET[kind])) + ".*random"):
        models.load(str(tmp_path / kind))


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_hf_folder_misshapen_tensor(tmp_path, kind):
    weights = _save_hf(kind, tmp_path / kind)
    _rewrite(weights, lambda s: s.__setitem__(TARGET[kind], torch.zeros(31, 32)))
    with pytest.raises(models.CheckpointError) as err:
        models.load(str(tmp_path / kind))
    msg = str(err.value)
    assert TARGET[kind] in msg and "(31, 32)" in msg and "(32, 32)" in msg and "\n" not in msg


@pytest.mark.parametrize("kind", ["bert", "llama"])
def test_hf_folder_unexpected_tensor(tmp_path, kind):
    weights = _save_hf(kind, tmp_path / kind)
    extra = TARGET[kind].replace("weight", "extra")
    _rewrite(weights, lambda s: s.__setitem__(extra, torch.zeros(3)))
    with pytest.raises(models.CheckpointError, match=re.escape(repr(extra))):
        models.load(str(tmp_path / kind))


def test_hf_folder_of_another_bert_task_still_loads(tmp_path):
    """A BertForMaskedLM folder (no pooler, a ``cls.*`` head) holds every tensor the encoder uses:
    it loads, and computes what Hugging Face's encoder computes on the same folder."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(
        vocab_size=61,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=40,
    )
    transformers.BertForMaskedLM(cfg).save_pretrained(str(tmp_path / "mlm"))
    model = models.load(str(tmp_path / "mlm"))
    hf = transformers.BertModel.from_pretrained(str(tmp_path / "mlm"), attn_implementation="eager").eval()
    tokens = torch.randint(0, 61, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(tokens, exact=True), hf(tokens).last_hidden_state)


# ---- 3. masks with text, masks and token types of the wrong shape ---------------------------------


def test_text_with_attention_mask_is_refused(minilm):
    with pytest.raises(ValueError, match=r"attention_mask=.*text.*pass token ids"):
        minilm("The cat sleeps.", attention_mask=torch.tensor([[1, 1, 1, 0, 0, 0]]))
    with pytest.raises(ValueError, match=r"token_type_ids=.*text.*pass token ids"):
        minilm(["The cat sleeps."], token_type_ids=torch.zeros(1, 6, dtype=torch.long))
    # the route the message points to honours the mask
    batch = minilm.to_words("The cat sleeps.")
    mask = batch.attention_mask.clone()
    mask[0, -2:] = 0
    with torch.no_grad():
        assert not torch.equal(minilm(batch.input_ids, attention_mask=mask), minilm(batch.input_ids))


@pytest.mark.parametrize(
    "tokens_shape,mask_shape", [((2, 5), (2, 4)), ((2, 5), (5,)), ((2, 5), (2, 1, 5)), ((5,), (4,))]
)
def test_token_mask_of_wrong_shape_names_both_shapes(tiny, tokens_shape, mask_shape):
    tokens = torch.zeros(tokens_shape, dtype=torch.long)
    batched = tokens_shape if len(tokens_shape) == 2 else (1, *tokens_shape)
    given = mask_shape if len(tokens_shape) == 2 else (1, *mask_shape)
    with pytest.raises(ValueError, match=re.escape(str(given)) + ".*" + re.escape(str(batched))):
        tiny(tokens, attention_mask=torch.ones(mask_shape, dtype=torch.long))


def test_mask_values_other_than_zero_and_one_are_refused(tiny):
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, 0] = 2
    with pytest.raises(ValueError, match=r"only 1.*and 0.*\[1, 2\]"):
        tiny(torch.zeros(2, 5, dtype=torch.long), attention_mask=mask)


def test_token_types_of_wrong_shape_name_both_shapes():
    model = tiny_model("bert_like")
    with pytest.raises(ValueError, match=re.escape("(2, 4)") + ".*" + re.escape("(2, 5)")):
        model(torch.zeros(2, 5, dtype=torch.long), token_type_ids=torch.zeros(2, 4, dtype=torch.long))


# ---- 4. [UNK] tokens belong to their word ---------------------------------------------------------


UNK_ITEMS = ["I love 🐈 and 🍕!", [["I", "love", "🐈", "and", "🍕", "!"]], "naïve 👍🏽 ok 🇫🇷 fine"]


@pytest.mark.parametrize("item", UNK_ITEMS)
def test_unk_token_belongs_to_its_word(minilm, item):
    batch = minilm.to_words(item)
    tokens, align, words = batch.tokens[0], batch.token_to_word[0], batch.words[0]
    unk = [t for t, tok in enumerate(tokens) if tok == minilm.tokenizer.hf.unk_token]
    assert unk, "the test needs [UNK] tokens"
    for t in unk:
        assert align[t] >= 0, f"[UNK] at token {t} lost its word"
        assert not words[align[t]].isascii()  # the emoji, not a neighbour
    # every word has a token, so word-level attention covers the sentence
    assert sorted(set(w for w in align if w >= 0)) == list(range(len(words)))
    _, cache = minilm.run_with_cache(batch.input_ids, names_filter="blocks.0.attn.hook_pattern")
    word_att = word_attention(cache["blocks.0.attn.hook_pattern"][0], align, len(words))
    assert word_att.shape[-1] == len(words)
    # special tokens stay outside the words
    for t, tok in enumerate(tokens):
        if tok in ("[CLS]", "[SEP]"):
            assert align[t] == -1


def test_literal_unk_text_and_bpe_specials_stay_outside_words(minilm, smollm2):
    batch = minilm.to_words("a [UNK] b")
    assert batch.token_to_word[0][batch.tokens[0].index("[UNK]")] == -1
    batch = smollm2.to_words("I love <|endoftext|> 🐈")
    assert batch.token_to_word[0][batch.tokens[0].index("<|endoftext|>")] == -1


def test_split_words_keeps_emoji_sequences_and_combining_marks():
    words, spans = split_words("cafe\u0301 👍🏽 👨\u200d👩\u200d👧 🇫🇷🇩🇪 1\ufe0f\u20e3 don't")
    assert words == ["cafe\u0301", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "🇩🇪", "1\ufe0f\u20e3", "don't"]


# ---- 5. one-line messages -------------------------------------------------------------------------


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _checkpoint(tmp_path):
    return models.save_checkpoint(tiny_model("gpt2_like"), tmp_path / "ckpt")


def case_truncated_checkpoint_weights(tmp_path, request):
    folder = _checkpoint(tmp_path)
    _truncate(folder / "model.safetensors")
    return (lambda: models.load(str(folder))), models.CheckpointError, [str(folder / "model.safetensors"), "truncated"]


def case_truncated_hf_weights(tmp_path, request):
    weights = _save_hf("bert", tmp_path / "bert")
    _truncate(weights)
    return (lambda: models.load(str(tmp_path / "bert"))), models.CheckpointError, [str(weights), "truncated"]


def case_corrupt_interp_config(tmp_path, request):
    folder = _checkpoint(tmp_path)
    path = folder / "interp_config.json"
    path.write_text(path.read_text()[:50])
    return (lambda: models.load(str(folder))), models.CheckpointError, [str(path), "not valid JSON", "line"]


def case_interp_config_missing_keys(tmp_path, request):
    folder = _checkpoint(tmp_path)
    path = folder / "interp_config.json"
    meta = json.loads(path.read_text())
    del meta["format_version"]
    path.write_text(json.dumps(meta))
    return (lambda: models.load(str(folder))), models.CheckpointError, [str(path), "'format_version'"]


def case_interp_config_missing_config_fields(tmp_path, request):
    folder = _checkpoint(tmp_path)
    path = folder / "interp_config.json"
    meta = json.loads(path.read_text())
    del meta["config"]["d_head"], meta["config"]["n_ctx"]
    path.write_text(json.dumps(meta))
    return (lambda: models.load(str(folder))), models.CheckpointError, [str(path), "'d_head'", "'n_ctx'"]


def case_lone_surrogate(tmp_path, request):
    minilm = request.getfixturevalue("minilm")
    return (lambda: minilm("a\ud800b")), ValueError, ["surrogate", "'\\ud800'", "character 1"]


def case_lone_surrogate_in_words(tmp_path, request):
    minilm = request.getfixturevalue("minilm")
    return (lambda: minilm.to_words([["ok"], ["a\udfffb"]])), ValueError, ["text 1", "surrogate"]


def case_token_types_out_of_range(tmp_path, request):
    minilm = request.getfixturevalue("minilm")
    batch = minilm.to_words("The cat sleeps.")
    types = torch.full_like(batch.input_ids, 2)
    return (lambda: minilm(batch.input_ids, token_type_ids=types)), ValueError, ["token_type_ids", "0..1", "max 2"]


def case_token_types_without_token_type_embeddings(tmp_path, request):
    model = tiny_model("llama_like")
    tokens = torch.zeros(1, 4, dtype=torch.long)
    return (lambda: model(tokens, token_type_ids=torch.ones_like(tokens))), ValueError, ["no token types", "all 0"]


def case_weight_view_edit_in_grad_mode(tmp_path, request):
    model = tiny_model("llama_like")
    return (lambda: model.blocks[0].attn.W_Q[0].zero_()), WeightEditError, ["W_Q", "torch.no_grad()"]


def case_weight_view_setitem_in_grad_mode(tmp_path, request):
    model = tiny_model("gpt2_like")
    return (lambda: model.blocks[1].mlp.W_in.__setitem__(0, 0.0)), WeightEditError, ["W_in", "torch.no_grad()"]


CASES = {
    f.__name__[len("case_") :]: f
    for f in [
        case_truncated_checkpoint_weights,
        case_truncated_hf_weights,
        case_corrupt_interp_config,
        case_interp_config_missing_keys,
        case_interp_config_missing_config_fields,
        case_lone_surrogate,
        case_lone_surrogate_in_words,
        case_token_types_out_of_range,
        case_token_types_without_token_type_embeddings,
        case_weight_view_edit_in_grad_mode,
        case_weight_view_setitem_in_grad_mode,
    ]
}


@pytest.mark.parametrize("case", list(CASES))
def test_clear_one_line_message(case, tmp_path, request):
    call, kind, needles = CASES[case](tmp_path, request)
    with pytest.raises(kind) as err:
        call()
    msg = str(err.value)
    assert "\n" not in msg, msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_checkpoint_errors_are_value_errors():
    assert issubclass(models.CheckpointError, ValueError)
    assert issubclass(WeightEditError, RuntimeError)  # what torch raised before


def test_weight_views_edit_under_no_grad_and_keep_gradients():
    """The documented editing path works, and reading a view in grad mode still carries gradients."""
    model = tiny_model("llama_like")
    tokens = torch.arange(6)
    attn = model.blocks[0].attn
    before = model(tokens).detach()
    with torch.no_grad():
        attn.W_Q[0].zero_()
        model.blocks[1].mlp.W_out[:, 0] = 0.0
    assert torch.equal(attn.q_weight[: model.cfg.d_head], torch.zeros(model.cfg.d_head, model.cfg.d_model))
    assert not torch.equal(model(tokens).detach(), before)
    (attn.W_K**2).sum().backward()
    assert torch.equal(attn.k_weight.grad, 2 * attn.k_weight.detach())
    product = attn.W_Q[0] @ attn.W_K[0].T
    assert type(product) is torch.Tensor  # results of computations are plain tensors
