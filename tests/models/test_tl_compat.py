"""TransformerLens idioms, run unchanged on our model and on TransformerLens's ``TransformerBridge``
side by side (issue 12).

Each test writes what a TransformerLens user writes (the Main Demo / Exploratory Analysis idioms:
``to_tokens``, ``to_str_tokens``, ``run_with_cache`` and the ``ActivationCache`` methods, stacked
weights and ``FactoredMatrix`` circuits, ``transformer_lens.patching``, ``generate``) once, as a
function of the model, and calls it on both. Where both run fp32 eager attention on the same token
tensor the numbers must be bitwise equal (SmolLM2, a tiny Llama); the tiny GPT-2 is compared within
1e-5, because Hugging Face's GPT-2 multiplies through ``Conv1D`` (``addmm``) and we through
``F.linear``, which round differently. Greedy generations are compared with Hugging Face's own
``generate`` token for token. Where our hooks deliberately differ from the bridge (documented in
``test_bridge_parity.py`` and docs/hooks.md) the test shows the difference.

Findings (transformer_lens 4.3, transformers 5.24): on SmolLM2 every idiom gives bitwise the
bridge's numbers. The bridge's ``generate`` with its KV cache (its default) drifts from Hugging
Face's greedy output after a few tokens (SmolLM2, tiny Llama, tiny GPT-2); with
``use_past_kv_cache=False`` it agrees. Ours agrees with Hugging Face with and without the cache.

The second tier (issue 25): ``return_type="both"``, ``loss_per_token``,
``get_full_resid_decomposition`` (with ``accumulated_bias``), ``utilities.get_attention_mask`` on a
left-padded batch, ``utilities.test_prompt``, ``get_token_position``, the tokenizer's Hugging Face
attributes. Same tolerances: bitwise on SmolLM2 and the tiny Llama (ours on its eager path, as
the bridge runs Hugging Face eager), 1e-5 on the tiny GPT-2. Findings: none of these is wrong on
the bridge; its per-token loss writes -0.0 at padded pairs (ours 0.0; they compare equal), and on
both ``get_attention_mask(tokenizer, tokens, prepend_bos)`` after ``to_tokens(...,
padding_side="left")`` masks nothing, because it assumes the tokenizer's side ("right") unless told.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch
import transformer_lens
from transformer_lens import FactoredMatrix, patching

import models
from interp.hooks import UnknownHookError
from models.weights import WeightEditError

ATOL = 1e-5
IOI_CLEAN = [
    "When Mary and John went to the store, John gave a drink to",
    "When Tom and James went to the park, James gave a ball to",
]
IOI_CORRUPT = [
    "When Mary and John went to the store, Mary gave a drink to",
    "When Tom and James went to the park, Tom gave a ball to",
]
GEN_PROMPTS = [
    "Once upon a time, there was a little robot who",
    "def fibonacci(n):\n    ",
    "The three primary colours are",
    "The capital of France is",
]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality of two float tensors (same shape and dtype)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)


# --------------------------------------------------------------------------------------------------
# The idioms, written once, run on either model


def cache_idioms(model, tokens: torch.Tensor, answer: str, wrong: str, layer: int = 3) -> dict:
    """What the Exploratory Analysis Demo does with a cache: a pattern by short name, per-head
    results, the residual stream decomposed and accumulated, the final norm applied to a stack, and
    direct logit attribution of each head to ``answer`` minus ``wrong`` at the last position."""
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
        out = {
            "cache": cache,
            "logits": logits,
            "pattern": cache["pattern", layer],
            "resid_last": cache["resid_post", -1],
        }
        out["heads"], out["head_labels"] = cache.stack_head_results(layer=-1, return_labels=True)
        out["decomposed"], out["decomposed_labels"] = cache.decompose_resid(layer=-1, return_labels=True)
        out["accumulated"], out["accumulated_labels"] = cache.accumulated_resid(
            layer=-1, incl_mid=True, apply_ln=True, return_labels=True
        )
        out["decomposed_ln"] = cache.apply_ln_to_stack(out["decomposed"], layer=-1)
        answer_tokens = torch.tensor([model.to_single_token(answer)] * tokens.shape[0])
        wrong_tokens = torch.tensor([model.to_single_token(wrong)] * tokens.shape[0])
        out["head_dla"] = cache.logit_attrs(out["heads"][:, :, -1], answer_tokens, wrong_tokens, pos_slice=-1)
        out["component_dla"] = cache.logit_attrs(out["decomposed"][:, :, -1], answer_tokens, wrong_tokens, pos_slice=-1)
    return out


STACKED = ("W_Q", "W_O", "W_in", "W_out", "W_E", "W_U")


def weight_idioms(model, names=STACKED) -> dict:
    """Stacked weights and circuits: ``model.W_Q`` [layer, head, d_model, d_head], ``model.OV`` and
    ``model.QK`` as ``FactoredMatrix``."""
    with torch.no_grad():
        out = {name: getattr(model, name) for name in names}
        out["OV"], out["QK"] = model.OV, model.QK
        out["OV_norm"] = model.OV[-1, 1].norm()
        out["QK_eig"] = model.QK[1, 0].eigenvalues
    return out


def patching_idiom(model, clean: torch.Tensor, corrupted: torch.Tensor, answer: int, wrong: int, heads) -> torch.Tensor:
    """Activation patching of chosen heads' ``z`` from the clean run into the corrupted one, with
    ``transformer_lens.patching`` on the model itself; the metric is the logit difference."""

    def metric(logits):
        return (logits[:, -1, answer] - logits[:, -1, wrong]).mean()

    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
        return patching.generic_activation_patch(
            model,
            corrupted,
            clean_cache,
            metric,
            patch_setter=patching.layer_head_vector_patch_setter,
            activation_name="z",
            index_df=pd.DataFrame(heads, columns=["layer", "head"]),
        )


# --------------------------------------------------------------------------------------------------
# SmolLM2: tokens


def test_to_tokens_is_a_token_tensor_with_transformer_lens_semantics(smollm2, smollm2_bridge):
    ours, bridge = smollm2, smollm2_bridge
    text = IOI_CLEAN[0]
    tokens = ours.to_tokens(text)
    assert tokens.dtype == torch.long and tokens.shape == (1, len(ours.tokenizer.hf(text)["input_ids"]))
    # our default adds no BOS (Hugging Face's, and the analyses', tokenisation); prepend_bos=True
    # gives the bridge's default, <|im_start|> first
    assert tokens[0].tolist() == ours.tokenizer.hf(text)["input_ids"]
    assert torch.equal(tokens, bridge.to_tokens(text, prepend_bos=False))
    assert torch.equal(ours.to_tokens(text, prepend_bos=True), bridge.to_tokens(text))
    assert ours.to_tokens(text, prepend_bos=True)[0, 0].item() == ours.tokenizer.hf.bos_token_id
    for side in ("right", "left"):  # a batch, padded with the pad id on either side
        a = ours.to_tokens(["Rain fell.", text], padding_side=side)
        assert torch.equal(a, bridge.to_tokens(["Rain fell.", text], prepend_bos=False, padding_side=side))
        assert (a == ours.tokenizer.pad_token_id).sum() > 0
    # the same ids as the word-aligning tokeniser the analyses use, and as a text forward pass
    assert torch.equal(ours.to_words(text).input_ids, tokens)
    with torch.no_grad():
        assert torch.equal(ours(text), ours(tokens))
    # strings per token, single tokens, decoding
    for bos in (False, True):
        assert ours.to_str_tokens(text, prepend_bos=bos) == bridge.to_str_tokens(text, prepend_bos=bos)
    assert ours.to_str_tokens(text)[:3] == ["When", " Mary", " and"]
    assert ours.to_str_tokens(tokens) == ours.to_str_tokens(text)
    assert ours.to_str_tokens([text, "Rain"]) == [ours.to_str_tokens(text), ours.to_str_tokens("Rain")]
    assert ours.to_single_token(" Mary") == bridge.to_single_token(" Mary")
    with pytest.raises(AssertionError, match="not a single token"):
        ours.to_single_token(" Mary and John")
    assert ours.to_string(tokens[0]) == bridge.to_string(tokens[0]) == text
    assert ours.to_string(tokens) == [text]
    with pytest.raises(TypeError, match="to_words"):
        ours.to_tokens([["The", "cat"]])


def test_to_tokens_truncates_to_the_context():
    from tests.factories import planted_model

    model = planted_model()  # a word tokenizer, n_ctx 16
    text = " ".join(["the cat sleeps ."] * 6)  # 24 words
    assert model.to_tokens(text).shape == (1, model.cfg.n_ctx)
    assert model.to_tokens(text, truncate=False).shape == (1, 24)
    assert model.to_tokens(text)[0].tolist() == model.to_tokens(text, truncate=False)[0, :16].tolist()


# --------------------------------------------------------------------------------------------------
# SmolLM2: the cache


@pytest.fixture(scope="module")
def smollm2_idioms(smollm2, smollm2_bridge):
    tokens = smollm2_bridge.to_tokens(IOI_CLEAN)  # the same token tensor for both: with <|im_start|>
    assert tokens.shape[0] == 2 and (tokens != smollm2.tokenizer.pad_token_id).all(), "prompts of one length"
    ours = cache_idioms(smollm2, tokens, " Mary", " John")
    theirs = cache_idioms(smollm2_bridge, tokens, " Mary", " John")
    return tokens, ours, theirs


def test_cache_idioms_match_the_bridge_bitwise(smollm2_idioms, smollm2):
    tokens, ours, theirs = smollm2_idioms
    assert isinstance(ours["cache"], transformer_lens.ActivationCache)
    n, h = smollm2.cfg.n_layers, smollm2.cfg.n_heads
    assert ours["heads"].shape == (n * h, *tokens.shape, smollm2.cfg.d_model)
    assert ours["head_labels"] == theirs["head_labels"] and ours["head_labels"][h + 2] == "L1H2"
    assert ours["decomposed_labels"] == theirs["decomposed_labels"]
    assert ours["accumulated_labels"] == theirs["accumulated_labels"]
    assert ours["head_dla"].shape == (n * h, tokens.shape[0])
    differ = [
        k
        for k in ("logits", "pattern", "resid_last", "heads", "decomposed", "accumulated", "decomposed_ln")
        + ("head_dla", "component_dla")
        if not _same(ours[k], theirs[k])
    ]
    assert not differ, f"not bitwise equal to the bridge: {differ}"
    # the idioms compute what they say: the heads of a layer plus b_O (none here) are its attn_out,
    # and the components sum to the final residual
    cache = ours["cache"]
    layer3 = ours["heads"][3 * h : 4 * h].sum(0)
    assert (layer3 - cache["attn_out", 3]).abs().max() <= 1e-4 * cache["attn_out", 3].abs().max()
    resid = cache["resid_post", n - 1]
    assert (ours["decomposed"].sum(0) - resid).abs().max() <= 1e-5 * resid.abs().max() * n
    # a head that matters: the largest |DLA| is far from zero (the comparison above can fail)
    assert ours["head_dla"].abs().max() > 0.5


def test_where_our_hooks_differ_from_the_bridge(smollm2_idioms, smollm2):
    """SmolLM2 (RoPE) adds no position embedding to the residual: our ``hook_pos_embed`` holds zeros
    (documented) and is left out of ``decompose_resid``, as the bridge has no such hook; and
    ``ln*.hook_normalized`` is after the norm's weight in ours, before it in the bridge's."""
    _, ours, theirs = smollm2_idioms
    c_ours, c_theirs = ours["cache"], theirs["cache"]
    assert "hook_pos_embed" in c_ours and "hook_pos_embed" not in c_theirs
    assert not c_ours["hook_pos_embed"].any() and "pos_embed" not in ours["decomposed_labels"]
    w = smollm2.blocks[3].ln1.w.detach()
    normalized_ours, normalized_theirs = c_ours["normalized", 3, "ln1"], c_theirs["normalized", 3, "ln1"]
    assert (normalized_ours - normalized_theirs).abs().max() > 0.1
    assert _same(normalized_theirs * w, normalized_ours)


def test_the_cache_still_behaves_like_a_dict(smollm2):
    tokens = smollm2.to_tokens("The cat sleeps")
    name = "blocks.2.attn.hook_pattern"
    with torch.no_grad():
        out, cache = smollm2.run_with_cache(tokens)
        out_d, as_dict = smollm2.run_with_cache(tokens, return_cache_object=False)
    assert type(as_dict) is dict and torch.equal(out, out_d)
    assert name in cache and "blocks.2.attn.hook_patern" not in cache and ("pattern", 2) in cache
    assert set(cache.keys()) == set(as_dict) == set(smollm2.hook_names()) == set(cache) == set(dict(cache))
    assert len(cache) == len(as_dict) and all(torch.equal(v, as_dict[k]) for k, v in cache.items())
    assert cache.get(name) is cache[name] and cache.get("nope") is None and cache.get("nope", 3) == 3
    assert torch.equal(cache[name], cache["pattern", 2]) and torch.equal(cache[name], cache["pattern", -28])
    # names_filter, device, remove_batch_dim
    with torch.no_grad():
        _, few = smollm2.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_z"), device="cpu")
        _, one = smollm2.run_with_cache(tokens, names_filter=[name], remove_batch_dim=True, exact=True)
    assert set(few) == {f"blocks.{l}.attn.hook_z" for l in range(smollm2.cfg.n_layers)}
    assert few["z", 0].device.type == "cpu"
    assert not one.has_batch_dim and torch.equal(one[name], cache[name][0])


def test_a_misspelt_key_suggests_the_near_names(smollm2):
    with torch.no_grad():
        _, cache = smollm2.run_with_cache(smollm2.to_tokens("The cat"), names_filter=lambda n: "attn" in n)
    with pytest.raises(UnknownHookError, match=r"hook_patern.*did you mean blocks\.0\.attn\.hook_pattern") as e:
        cache["blocks.0.attn.hook_patern"]
    assert isinstance(e.value, KeyError)  # what TransformerLens code catches
    with pytest.raises(UnknownHookError, match=r"did you mean blocks\.3\.attn\.hook_pattern"):
        cache["patern", 3]
    with pytest.raises(UnknownHookError, match="names filter"):  # a real hook, filtered out
        cache["resid_pre", 3]


# --------------------------------------------------------------------------------------------------
# SmolLM2: weights and circuits


def test_stacked_weights_and_circuits_match_the_bridge(smollm2, smollm2_bridge):
    ours, theirs = weight_idioms(smollm2), weight_idioms(smollm2_bridge)
    cfg = smollm2.cfg
    assert ours["W_Q"].shape == (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head)
    for name in ("W_Q", "W_O", "W_in", "W_out", "W_E", "W_U", "OV_norm", "QK_eig"):
        assert _same(ours[name], theirs[name]), name
    for name in ("OV", "QK"):
        assert isinstance(ours[name], FactoredMatrix)
        assert _same(ours[name].A, theirs[name].A) and _same(ours[name].B, theirs[name].B), name
    # grouped-query attention: W_K / W_V expanded to the query heads (TransformerLens's
    # HookedTransformer), _W_K / _W_V grouped (what the bridge calls W_K / W_V)
    with torch.no_grad():
        assert smollm2.W_K.shape == (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.d_head)
        assert _same(smollm2._W_K, smollm2_bridge.W_K) and _same(smollm2._W_V, smollm2_bridge.W_V)
        assert smollm2_bridge.W_K.shape[1] == cfg.kv_heads == 3
        assert _same(smollm2.W_K[:, 5], smollm2_bridge.W_K[:, 5 // 3]) and _same(smollm2.W_V[:, 8], smollm2.W_V[:, 6])
        assert _same(smollm2.W_K[4, 7], smollm2.blocks[4].attn.W_K[7 // 3])
        assert _same(smollm2.QK[4, 7].AB, smollm2.W_Q[4, 7] @ smollm2.blocks[4].attn.W_K[2].T)
        assert _same(smollm2.W_gate, smollm2_bridge.W_gate)
    # where they differ: missing biases are zeros here (HookedTransformer), an error on the bridge;
    # W_pos is None for RoPE here (as the per-block convention), an error on the bridge
    with torch.no_grad():
        assert smollm2.b_Q.shape == (cfg.n_layers, cfg.n_heads, cfg.d_head) and not smollm2.b_Q.any()
        assert smollm2._b_K.shape == (cfg.n_layers, 3, cfg.d_head) and not smollm2.b_O.any()
    with pytest.raises(AttributeError):
        _ = smollm2_bridge.b_Q
    assert smollm2.W_pos is None


def test_stacked_weights_are_copies_and_per_block_views_still_edit(smollm2):
    stacked = smollm2.W_Q
    before = smollm2.blocks[0].attn.W_Q[0, 0, 0].item()
    stacked[0, 0, 0, 0] = before + 1.0  # a copy: the model is unchanged
    assert smollm2.blocks[0].attn.W_Q[0, 0, 0].item() == before
    with pytest.raises(WeightEditError, match="no_grad"):  # the per-block views keep their guard
        smollm2.blocks[0].attn.W_Q[0].zero_()


def test_cfg_has_the_fields_transformer_lens_reads(smollm2, tiny):
    cfg = smollm2.cfg
    assert (cfg.n_key_value_heads, cfg.normalization_type, cfg.model_name) == (3, "RMS", "smollm2")
    assert (cfg.positional_embedding_type, cfg.attn_only, cfg.final_rms, cfg.gated_mlp) == ("rotary", False, True, True)
    assert cfg.device == smollm2.W_E.device and cfg.dtype == torch.float32
    assert tiny.cfg.n_key_value_heads is None and tiny.cfg.normalization_type == "LN"
    # not fields: the config's dict round trip and equality are unchanged
    assert "device" not in cfg.to_dict() and models.Config.from_dict(cfg.to_dict()) == cfg
    double = models.Transformer(tiny.cfg).double()
    assert double.cfg.dtype == torch.float64 and tiny.cfg.dtype == torch.float32  # each model its own
    assert double.cfg == tiny.cfg


TEXT = "When Mary and John went to the store"


@pytest.mark.parametrize("name", ["smollm2", "minilm"])
def test_cfg_tokenizer_fields_say_what_to_tokens_does(request, name):
    """``cfg.default_prepend_bos``: whether ``to_tokens(text)`` is ``to_tokens(text, prepend_bos=True)``;
    ``cfg.tokenizer_prepends_bos``: whether the tokenizer's own start token is there unless
    ``prepend_bos=False`` drops it; ``cfg.default_padding_side``: the side ``to_tokens`` pads on. Read
    from the model's tokenizer when asked (a change to it shows), not fields: the config's dict round
    trip and equality are unchanged."""
    model = request.getfixturevalue(name)
    cfg = model.cfg
    default, with_bos, without = (model.to_tokens(TEXT, prepend_bos=p) for p in (None, True, False))
    assert cfg.default_prepend_bos == torch.equal(default, with_bos)
    assert cfg.tokenizer_prepends_bos == (not torch.equal(default, without))
    assert cfg.default_padding_side == model.tokenizer.padding_side == "right"
    assert cfg.tokenizer_name == model.tokenizer.hf.name_or_path
    assert (cfg.use_attn_result, cfg.use_split_qkv_input, cfg.use_attn_in, cfg.use_hook_mlp_in) == (True,) * 4
    assert cfg.per_layer_num_key_value_heads is None and not cfg.rmsnorm_uses_offset
    assert cfg.rotary_base == (cfg.rope_theta if cfg.positional == "rope" else None)
    for field in ("default_prepend_bos", "tokenizer_prepends_bos", "default_padding_side", "use_split_qkv_input"):
        assert field not in cfg.to_dict()
    assert models.Config.from_dict(cfg.to_dict()) == cfg
    bare = models.Transformer(cfg).cfg  # no tokenizer: token ids only
    assert (bare.default_prepend_bos, bare.tokenizer_prepends_bos, bare.tokenizer_name) == (False, None, None)
    assert cfg.tokenizer_prepends_bos is not None  # the bare copy did not unbind the model's own
    if name == "smollm2":  # no BOS by default (docs/hooks.md, "Tokens"); a tokenizer told otherwise
        assert (cfg.default_prepend_bos, cfg.tokenizer_prepends_bos) == (False, False)
        model.tokenizer.prepend_bos, model.tokenizer.padding_side = True, "left"
        try:
            assert cfg.default_prepend_bos and cfg.default_padding_side == "left"
        finally:
            model.tokenizer.prepend_bos, model.tokenizer.padding_side = None, "right"
    else:  # [CLS] first, the tokenizer's own
        assert (cfg.default_prepend_bos, cfg.tokenizer_prepends_bos) == (True, True)


def test_transformer_lens_induction_loss_runs_on_our_model(smollm2):
    """``transformer_lens.evals.induction_loss`` reads ``cfg.default_prepend_bos`` (False on SmolLM2:
    the random tokens are left as they are) and equals the loss computed by hand on the same tokens:
    the mean next-token loss over the second copy of each repeated random sequence, past its first
    token. Sane: an induction head model predicts the copy (a small loss) and not the random first
    half (about log(vocab))."""
    from transformer_lens import evals

    batch, n = 2, 20
    torch.manual_seed(7)
    theirs = evals.induction_loss(smollm2, batch_size=batch, subseq_len=n, device="cpu")
    torch.manual_seed(7)
    first = torch.randint(100, 20000, (batch, n))  # induction_loss's own draw
    tokens = torch.cat([first, first], dim=1)
    with torch.no_grad():
        logits = smollm2(tokens)
    loss = -logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]  # [batch, 2n - 1]
    mine = loss[:, n + 1 :].mean()
    torch.testing.assert_close(theirs, mine)
    random_half = loss[:, : n - 1].mean()
    assert mine < 2.5 < 8.0 < random_half, (mine, random_half)
    # told to prepend the BOS, it writes the tokenizer's BOS id over the first token
    torch.manual_seed(7)
    with_bos = evals.induction_loss(smollm2, batch_size=batch, subseq_len=n, prepend_bos=True, device="cpu")
    tokens[:, 0] = smollm2.tokenizer.bos_token_id
    with torch.no_grad():
        logits = smollm2(tokens)
    loss = -logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    torch.testing.assert_close(with_bos, loss[:, n + 1 :].mean())


# --------------------------------------------------------------------------------------------------
# SmolLM2: patching and generation


@pytest.mark.slow
def test_patching_takes_our_model_directly_and_matches_the_bridge(smollm2, smollm2_bridge):
    clean, corrupted = smollm2_bridge.to_tokens(IOI_CLEAN), smollm2_bridge.to_tokens(IOI_CORRUPT)
    assert clean.shape == corrupted.shape
    mary, john = smollm2.to_single_token(" Mary"), smollm2.to_single_token(" John")
    heads = [(0, 0), (9, 4), (14, 8), (20, 4), (29, 0)]
    smollm2.exact = True  # the bridge runs HF eager attention; ours must too, to match it bitwise
    try:
        ours = patching_idiom(smollm2, clean, corrupted, mary, john, heads)
    finally:
        smollm2.exact = False
    theirs = patching_idiom(smollm2_bridge, clean, corrupted, mary, john, heads)
    assert ours.shape == (len(heads),) and _same(ours, theirs)
    with torch.no_grad():
        base = smollm2(corrupted)
    unpatched = (base[:, -1, mary] - base[:, -1, john]).mean()
    assert (ours - unpatched).abs().max() > 1e-3  # some head's patch moved the metric


@pytest.mark.slow
def test_greedy_generation_equals_hugging_face_token_for_token(smollm2, hf_smollm2):
    """With our KV cache (the default): two prompts x 12 new tokens, each equal to Hugging Face's
    greedy ``generate`` (which stops at EOS as ours does), both running the full 12; one given as
    token ids, one as text (tokenised as ``to_tokens`` does, text out decodes the same tokens)."""
    hf_model, _ = hf_smollm2
    n = 12
    for prompt, as_text in ((GEN_PROMPTS[0], True), (GEN_PROMPTS[1], False)):
        ids = smollm2.to_tokens(prompt)
        ref = hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
        assert ref.shape[1] - ids.shape[1] == n  # no early EOS: every step is compared
        got = smollm2.generate(prompt if as_text else ids, max_new_tokens=n, do_sample=False, return_type="tokens")
        assert torch.equal(got, ref), f"{prompt!r}: ours {got.tolist()} vs HF {ref.tolist()}"
    # text in, text out: the same continuation, decoded (one step: the prompt and one new token)
    text = smollm2.generate(GEN_PROMPTS[0], max_new_tokens=1, do_sample=False)
    first = ref_of(hf_model, smollm2, GEN_PROMPTS[0], 1)
    assert text == smollm2.tokenizer.hf.decode(first[0], skip_special_tokens=True) and text.startswith(GEN_PROMPTS[0])


def ref_of(hf_model, model, prompt, n, **kw):
    ids = model.to_tokens(prompt)
    return hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False, **kw)


@pytest.mark.slow
def test_generation_without_the_cache_batched_and_on_the_bridge(smollm2, hf_smollm2, smollm2_bridge):
    hf_model, tok = hf_smollm2
    prompt = GEN_PROMPTS[1]
    ids = smollm2.to_tokens(prompt)
    n = 6
    no_cache = smollm2.generate(ids, max_new_tokens=n, do_sample=False, use_past_kv_cache=False)
    assert torch.equal(no_cache, ref_of(hf_model, smollm2, prompt, n))
    # the bridge without its KV cache gives the same tokens (with it, it drifts: see the docstring)
    bridge = smollm2_bridge.generate(ids, max_new_tokens=n, do_sample=False, use_past_kv_cache=False, verbose=False)
    assert torch.equal(bridge, no_cache)
    # several texts: left-padded with a mask, as Hugging Face pads them for generation
    texts = [GEN_PROMPTS[2], GEN_PROMPTS[1]]  # 5 and 7 tokens
    got = smollm2.generate(texts, max_new_tokens=4, do_sample=False, return_type="tokens")
    enc = tok(texts, padding=True, padding_side="left", return_tensors="pt")
    assert (enc["attention_mask"] == 0).any()  # the batch is padded
    assert torch.equal(got, hf_model.generate(**enc, max_new_tokens=4, do_sample=False))
    # sampling is TransformerLens's sample_logits: seeded, repeatable, and it stops where asked
    torch.manual_seed(0)
    a = smollm2.generate(prompt, max_new_tokens=3, temperature=0.7, top_k=20)
    torch.manual_seed(0)
    b = smollm2.generate(prompt, max_new_tokens=3, temperature=0.7, top_k=20)
    assert a == b and a.startswith(prompt)


# --------------------------------------------------------------------------------------------------
# SmolLM2: the second tier (issue 25): losses, the full residual decomposition, padded batches


def second_tier_idioms(
    model, tokens: torch.Tensor, layer: int = 4, answer: str = " Mary", wrong: str = " John"
) -> dict:
    """What a TransformerLens user writes in their second week: logits and loss in one call, the
    loss per token, the residual stream decomposed into every head, neuron (or MLP), the
    embeddings and the biases, with and without the final norm, and neuron-level direct logit
    attribution through ``project_output_onto``."""
    out = {}
    with torch.no_grad():
        out["logits"], out["loss"] = model(tokens, return_type="both")
        out["per_token"] = model(tokens, return_type="loss", loss_per_token=True)
        out["both_cached"], cache = model.run_with_cache(tokens, return_type="both")
        out["cache"] = cache
        out["full"], out["full_labels"] = cache.get_full_resid_decomposition(expand_neurons=False, return_labels=True)
        out["full_ln"] = cache.get_full_resid_decomposition(expand_neurons=False, apply_ln=True, pos_slice=-1)
        out["neurons"], out["neuron_labels"] = cache.get_full_resid_decomposition(
            layer, mlp_input=True, pos_slice=-1, return_labels=True
        )
        direction = model.tokens_to_residual_directions(answer) - model.tokens_to_residual_directions(wrong)
        out["neuron_dla"] = cache.get_full_resid_decomposition(
            expand_neurons=True, apply_ln=True, pos_slice=-1, project_output_onto=direction
        )
        out["bias"] = model.accumulated_bias(layer, mlp_input=True)
    return out


@pytest.fixture(scope="module")
def smollm2_second_tier(smollm2, smollm2_bridge):
    tokens = smollm2_bridge.to_tokens(IOI_CLEAN)  # the same token tensor for both: with <|im_start|>
    smollm2.exact = True  # the bridge runs HF eager attention; ours must too, to match it bitwise
    try:
        ours = second_tier_idioms(smollm2, tokens)
    finally:
        smollm2.exact = False
    return tokens, ours, second_tier_idioms(smollm2_bridge, tokens)


def test_losses_match_the_bridge_bitwise(smollm2_second_tier, smollm2):
    tokens, ours, theirs = smollm2_second_tier
    batch, pos = tokens.shape
    assert ours["logits"].shape == (batch, pos, smollm2.cfg.d_vocab) and ours["loss"].shape == ()
    assert ours["per_token"].shape == (batch, pos - 1)  # position p predicts token p + 1
    differ = [k for k in ("logits", "loss", "per_token") if not _same(ours[k], theirs[k])]
    assert not differ, f"not bitwise equal to the bridge: {differ}"
    (logits, loss), (logits_b, loss_b) = ours["both_cached"], theirs["both_cached"]
    assert _same(logits, logits_b) and _same(loss, loss_b) and _same(loss, ours["loss"])
    # what the numbers mean: the loss is the mean of the per-token losses, each the negative log
    # probability of the next token
    assert (ours["per_token"].mean() - ours["loss"]).abs() <= 1e-6 * ours["loss"]
    logp = ours["logits"].log_softmax(-1)
    assert _same(ours["per_token"][1, 5], -logp[1, 5, tokens[1, 6]])


def test_full_resid_decomposition_matches_the_bridge_bitwise(smollm2_second_tier, smollm2):
    tokens, ours, theirs = smollm2_second_tier
    cfg = smollm2.cfg
    n, h = cfg.n_layers, cfg.n_heads
    # every head, every layer's MLP, the token embedding and the biases (SmolLM2 has none: zeros)
    assert ours["full_labels"] == theirs["full_labels"]
    assert ours["full_labels"][:2] == ["L0H0", "L0H1"] and ours["full_labels"][-3:] == [
        f"{n - 1}_mlp_out",
        "embed",
        "bias",
    ]
    assert ours["full"].shape == (n * h + n + 2, *tokens.shape, cfg.d_model)
    assert ours["neuron_labels"] == theirs["neuron_labels"] and ours["neuron_labels"][h * 5] == "L0N0"
    assert ours["neuron_dla"].shape == (n * h + n * cfg.d_mlp + 2, tokens.shape[0])
    differ = [k for k in ("full", "full_ln", "neurons", "neuron_dla", "bias") if not _same(ours[k], theirs[k])]
    assert not differ, f"not bitwise equal to the bridge: {differ}"
    assert not ours["bias"].any()
    # the components add up to the residual stream they decompose (here: what the unembedding
    # reads, and layer 4's MLP input at the last position)
    cache = ours["cache"]
    resid = cache["resid_post", n - 1]
    assert (ours["full"].sum(0) - resid).abs().max() <= 1e-5 * resid.abs().max() * n
    mid = cache["resid_mid", 4][:, -1]
    assert (ours["neurons"].sum(0) - mid).abs().max() <= 1e-5 * mid.abs().max() * n
    assert ours["neuron_dla"].abs().max() > 0.1  # some component moves the Mary-John logit difference


def test_accumulated_bias_sums_the_output_biases():
    from tests.factories import TINY, randomized, tiny_config

    model = randomized(tiny_config(**TINY["gpt2_like"]), seed=3)  # b_O and b_out in every block
    blocks = model.blocks
    with torch.no_grad():
        assert not model.accumulated_bias(0).any()
        assert _same(model.accumulated_bias(1), blocks[0].attn.b_O + blocks[0].mlp.b_out)
        assert _same(
            model.accumulated_bias(1, mlp_input=True), blocks[0].attn.b_O + blocks[0].mlp.b_out + blocks[1].attn.b_O
        )
        assert _same(model.accumulated_bias(1, include_mlp_biases=False), blocks[0].attn.b_O + 0)
    n = model.cfg.n_layers
    with pytest.raises(ValueError, match=f"layer={n + 1}; use 0..{n}"):
        model.accumulated_bias(n + 1)
    with pytest.raises(ValueError, match="with mlp_input"):
        model.accumulated_bias(n, mlp_input=True)


def test_accumulated_bias_refuses_a_post_norm_model(minilm):
    with pytest.raises(ValueError, match="post-norm"):
        minilm.accumulated_bias(2)


def test_attention_mask_of_a_left_padded_batch_as_on_the_bridge(smollm2, smollm2_bridge):
    """``utilities.get_attention_mask(model.tokenizer, tokens, prepend_bos)`` reads the tokenizer's
    ``padding_side``: "right" on both unless set. After ``to_tokens(..., padding_side="left")`` the
    call as written therefore masks nothing, on both (TransformerLens's semantics: say the side, or
    set ``model.tokenizer.padding_side``, which ``to_tokens`` then follows too)."""
    from transformer_lens import utilities

    texts = [IOI_CLEAN[0], "Rain fell."]
    ours, bridge = smollm2, smollm2_bridge
    tokens = ours.to_tokens(texts, padding_side="left", prepend_bos=True)
    assert torch.equal(tokens, bridge.to_tokens(texts, padding_side="left"))
    assert ours.tokenizer.padding_side == bridge.tokenizer.padding_side == "right"
    literal = utilities.get_attention_mask(ours.tokenizer, tokens, True)
    assert torch.equal(literal, utilities.get_attention_mask(bridge.tokenizer, tokens, True)) and literal.all()
    mask = utilities.get_attention_mask(ours.tokenizer, tokens, True, padding_side="left")
    assert torch.equal(mask, utilities.get_attention_mask(bridge.tokenizer, tokens, True, padding_side="left"))
    n_pad = tokens.shape[1] - len(ours.to_tokens(texts[1], prepend_bos=True)[0])
    assert mask[1, :n_pad].eq(0).all() and mask[1, n_pad:].eq(1).all() and mask[0].eq(1).all()
    # the tokenizer's padding side, set as TransformerLens users set it
    try:
        for model in (ours, bridge):
            model.tokenizer.padding_side = "left"
        assert torch.equal(ours.to_tokens(texts, prepend_bos=True), tokens)
        assert torch.equal(utilities.get_attention_mask(ours.tokenizer, tokens, True), mask)
        assert torch.equal(utilities.get_attention_mask(bridge.tokenizer, tokens, True), mask)
    finally:
        for model in (ours, bridge):
            model.tokenizer.padding_side = "right"
    with pytest.raises(ValueError, match="padding_side='middle'"):
        ours.tokenizer.padding_side = "middle"
    # the padded batch with its mask: the padded row's per-token loss is the row's own (positions
    # follow the mask on both), 0 at the pads, and ours equals the bridge's
    ours.exact = True
    try:
        with torch.no_grad():
            per_token = ours(tokens, attention_mask=mask, return_type="loss", loss_per_token=True)
            alone = ours(tokens[1:, n_pad:], return_type="loss", loss_per_token=True)
    finally:
        ours.exact = False
    with torch.no_grad():
        per_token_b = bridge(tokens, attention_mask=mask, return_type="loss", loss_per_token=True)
    assert torch.equal(per_token, per_token_b)  # -0.0 (theirs) equals 0.0 (ours) at the pads
    assert not per_token[1, :n_pad].any()
    # batched against alone: a different matmul shape, so float rounding (the first tier's 1e-5
    # scaled to losses of about 10)
    assert (per_token[1, n_pad:] - alone[0]).abs().max() <= 1e-4


def test_more_second_week_idioms_as_on_the_bridge(smollm2, smollm2_bridge, capsys):
    from transformer_lens import utilities

    ours, bridge = smollm2, smollm2_bridge
    text = IOI_CLEAN[0]
    for model in (ours, bridge):
        utilities.test_prompt(text, "Mary", model, prepend_bos=True, top_k=3)
    printed = capsys.readouterr().out.split("Tokenized prompt")
    assert len(printed) == 3 and printed[1] == printed[2] and "Rank:" in printed[1]
    tokens = bridge.to_tokens(text)
    assert ours.to_str_tokens(IOI_CLEAN, prepend_bos=True) == bridge.to_str_tokens(IOI_CLEAN)
    assert ours.get_token_position(" John", tokens, mode="last") == bridge.get_token_position(
        " John", tokens, mode="last"
    )
    assert ours.get_token_position(" John", text) == bridge.get_token_position(" John", text, prepend_bos=False) == 3
    with pytest.raises(AssertionError, match="does not occur"):
        ours.get_token_position(" Paris", text)
    assert ours.to_single_str_token(tokens[0, 2].item()) == bridge.to_single_str_token(tokens[0, 2].item()) == " Mary"
    # the tokenizer: what is not the toolkit's own is the Hugging Face tokenizer's
    for name in ("eos_token", "vocab_size", "bos_token_id", "pad_token_id"):
        assert getattr(ours.tokenizer, name) == getattr(bridge.tokenizer, name), name
    assert ours.tokenizer.batch_decode(tokens) == bridge.tokenizer.batch_decode(tokens)
    # (the bridge's Hugging Face tokenizer is set to add the BOS, as its to_tokens does; ours is
    # the tokenizer as Hugging Face loads it, as our to_tokens tokenises: docs/hooks.md, BOS)
    mary = ours.to_single_token(" Mary")
    assert ours.tokenizer.encode(" Mary") == [mary] and bridge.tokenizer.encode(" Mary") == [
        bridge.tokenizer.bos_token_id,
        mary,
    ]
    with pytest.raises(TypeError, match=r"tokenizer\.hf\(texts, \.\.\.\)"):
        ours.tokenizer([text], return_tensors="pt")
    with pytest.raises(AttributeError, match="nor its Hugging Face tokenizer"):
        _ = ours.tokenizer.no_such_thing
    # names filters as lambdas, in the cache and in fwd_hooks
    seen = []
    with torch.no_grad():
        _, cache = ours.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_resid_post"))
        ours.run_with_hooks(
            tokens,
            fwd_hooks=[(lambda name: name.endswith("attn.hook_pattern"), lambda t, hook: seen.append(hook.name))],
        )
    assert len(cache) == ours.cfg.n_layers and len(seen) == ours.cfg.n_layers


# --------------------------------------------------------------------------------------------------
# A KV cache on tiny models: incremental logits equal full-sequence logits


@pytest.mark.parametrize("key", ["gpt2_like", "llama_like", "qwen_like"])
def test_kv_cache_continues_the_sequence_exactly(key):
    from tests.factories import tiny_batch, tiny_model

    model = tiny_model(key)
    tokens, mask = tiny_batch(model.cfg)
    mask[1, 6:] = 1  # generation continues rows on the right: left padding only
    with torch.no_grad():
        full = model(tokens, attention_mask=mask)
        cache = models.transformer.KVCache(model.cfg.n_layers)
        first = model(tokens[:, :5], attention_mask=mask[:, :5], past_kv_cache=cache)
        rest = [model(tokens[:, t : t + 1], past_kv_cache=cache) for t in range(5, tokens.shape[1])]
    steps = torch.cat([first, *rest], dim=1)
    real = mask.bool()
    assert (steps - full)[real].abs().max() <= ATOL
    assert cache.length == tokens.shape[1] and cache.layers[0].k.shape[2] == tokens.shape[1]
    # and generation with the cache equals generation without it
    with torch.no_grad():
        a = model.generate(tokens, attention_mask=mask, max_new_tokens=6, do_sample=False, stop_at_eos=False)
        b = model.generate(
            tokens, attention_mask=mask, max_new_tokens=6, do_sample=False, stop_at_eos=False, use_past_kv_cache=False
        )
    assert torch.equal(a, b) and a.shape == (3, tokens.shape[1] + 6)


def test_generate_refuses_what_it_cannot_do(minilm, tiny):
    with pytest.raises(ValueError, match="causal model with an LM head"):
        minilm.generate("The cat")
    with pytest.raises(ValueError, match="no EOS"):
        tiny.generate(torch.tensor([[1, 2, 3]]))
    from tests.factories import planted_model

    with pytest.raises(ValueError, match="no tokens.*prepend_bos"):
        planted_model(attention="causal").to_tokens("")


# --------------------------------------------------------------------------------------------------
# MiniLM: the idioms that apply to an encoder


def test_minilm_encoder_idioms(minilm, minilm_bridge):
    texts = ["The cat sleeps on the warm mat.", "Rain fell."]
    tokens = minilm.to_tokens(texts)
    assert torch.equal(tokens, minilm_bridge.to_tokens(texts))  # [CLS] ... [SEP], [PAD] on the right
    assert torch.equal(
        minilm.to_tokens(texts[0], prepend_bos=False), minilm_bridge.to_tokens(texts[0], prepend_bos=False)
    )
    assert minilm.to_str_tokens(texts[0]) == minilm_bridge.to_str_tokens(texts[0])
    # a padded tensor without its mask is refused, not silently attended to
    with pytest.raises(ValueError, match="padding id 0.*attention_mask"):
        minilm(tokens)
    mask = (tokens != minilm.cfg.pad_token_id).long()
    with torch.no_grad():
        _, ours = minilm.run_with_cache(tokens, attention_mask=mask)
        _, theirs = minilm_bridge.run_with_cache(tokens, attention_mask=mask)
    real = mask.bool()
    q_real = real[:, None, :, None].expand_as(ours["pattern", 2])
    assert _same(ours["pattern", 2][q_real], theirs["pattern", 2][q_real])
    heads_ours, labels = ours.stack_head_results(return_labels=True)
    heads_theirs, labels_theirs = theirs.stack_head_results(return_labels=True)
    assert labels == labels_theirs and _same(heads_ours[:, real], heads_theirs[:, real])
    assert _same(ours.accumulated_resid()[:, real], theirs.accumulated_resid()[:, real])
    encoder = ("W_Q", "W_O", "W_in", "W_out", "W_E")  # no W_U: an encoder (the bridge's MLM head is untrained)
    weights_ours, weights_theirs = weight_idioms(minilm, encoder), weight_idioms(minilm_bridge, encoder)
    for name in (*encoder, "OV_norm", "QK_eig"):
        assert _same(weights_ours[name], weights_theirs[name]), name
    with torch.no_grad():
        assert _same(minilm.W_pos, minilm_bridge.W_pos) and _same(minilm.b_Q, minilm_bridge.b_Q)
    # ours: to_single_token reads the word without [CLS]/[SEP]; the bridge's cannot (they make it 3 tokens)
    assert minilm.to_single_token("cat") == tokens[0, 2].item()
    with pytest.raises(AssertionError):
        minilm_bridge.to_single_token("cat")


def test_minilm_where_post_norm_differs(minilm, minilm_bridge):
    """Post-norm: the heads' results plus b_O are our ``hook_attn_out`` (the sublayer's output),
    while the bridge's ``hook_attn_out`` is ``LN1(resid_pre + attn_out)``. The "apply the norm to a
    stack" idioms assume a pre-norm residual stream that is the sum of its components; on MiniLM it
    is not, so ours refuse with the reason (the bridge returns numbers without meaning)."""
    tokens = minilm.to_tokens("The cat sleeps on the warm mat.")
    with torch.no_grad():
        _, ours = minilm.run_with_cache(tokens)
        _, theirs = minilm_bridge.run_with_cache(tokens)
    h = minilm.cfg.n_heads
    heads = ours.stack_head_results()
    for cache, close in ((ours, True), (theirs, False)):
        summed = heads[2 * h : 3 * h].sum(0) + minilm.blocks[2].attn.b_O.detach()
        assert ((summed - cache["attn_out", 2]).abs().max() <= ATOL) == close
    with pytest.raises(ValueError, match="post-norm"):
        ours.accumulated_resid(apply_ln=True)
    with pytest.raises(ValueError, match="post-norm"):
        ours.apply_ln_to_stack(heads, layer=3)
    assert theirs.accumulated_resid(apply_ln=True).shape == ours.accumulated_resid().shape
    # decompose_resid's components do not add up to the residual on a post-norm model
    decomposed = theirs.decompose_resid()
    assert (decomposed.sum(0) - theirs["resid_post", -1]).abs().max() > 1.0


# --------------------------------------------------------------------------------------------------
# Tiny Hugging Face models, ours and the bridge on the same folder


def _tiny_folder(kind: str, tmp_path):
    import transformers

    from tests.factories import tiny_hf_llama_config, word_tokenizer

    v = 97
    if kind == "gpt2":
        cfg, cls = (
            transformers.GPT2Config(vocab_size=v, n_embd=32, n_layer=2, n_head=4, n_positions=64),
            transformers.GPT2LMHeadModel,
        )
    else:
        cfg = tiny_hf_llama_config(v, tie_word_embeddings=False)
        cls = transformers.LlamaForCausalLM
    torch.manual_seed(0)
    cfg._attn_implementation = "eager"
    hf = cls(cfg).eval()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in hf.parameters():  # perturbed, so zero biases or unit norms hide nothing
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    folder = tmp_path / kind
    hf.save_pretrained(str(folder))
    word_tokenizer().hf.save_pretrained(str(folder))  # the bridge boots only with a tokenizer
    return folder, hf


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_tiny_models_side_by_side(kind, tmp_path):
    from transformer_lens.model_bridge import TransformerBridge

    folder, hf = _tiny_folder(kind, tmp_path)
    ours = models.load(str(folder))
    bridge = TransformerBridge.boot_transformers(str(folder), device="cpu", dtype=torch.float32).eval()
    tokens = torch.randint(1, 97, (2, 10), generator=torch.Generator().manual_seed(2))
    a, b = cache_idioms(ours, tokens, "cat", "dog", layer=1), cache_idioms(bridge, tokens, "cat", "dog", layer=1)
    exact = kind == "llama"  # GPT-2: Conv1D (addmm) on their side, F.linear on ours
    for k in ("logits", "pattern", "resid_last", "heads", "decomposed", "accumulated", "decomposed_ln") + (
        "head_dla",
        "component_dla",
    ):
        same = _same(a[k], b[k]) if exact else (a[k] - b[k]).abs().max() <= ATOL
        assert same, (kind, k, (a[k] - b[k]).abs().max().item())
    assert a["decomposed_labels"] == b["decomposed_labels"]
    assert ("pos_embed" in a["decomposed_labels"]) == (kind == "gpt2")  # learned positions are a component
    wa, wb = weight_idioms(ours), weight_idioms(bridge)
    for k in ("W_Q", "W_O", "W_in", "W_out", "W_E", "W_U"):
        assert _same(wa[k], wb[k]), (kind, k)
    assert (wa["OV"].AB - wb["OV"].AB).abs().max() == 0 and (wa["QK"].AB - wb["QK"].AB).abs().max() == 0
    if kind == "gpt2":
        with torch.no_grad():
            assert _same(ours.W_pos, bridge.W_pos) and _same(ours.b_Q, bridge.b_Q) and _same(ours.b_out, bridge.b_out)
    # the second tier: losses, the full residual decomposition with the accumulated biases (GPT-2
    # has b_O and b_out: the "bias" component is not zero there), neuron-level attribution
    ours.exact = True  # the bridge runs HF eager attention
    try:
        a = second_tier_idioms(ours, tokens, layer=1, answer="cat", wrong="dog")
    finally:
        ours.exact = False
    b = second_tier_idioms(bridge, tokens, layer=1, answer="cat", wrong="dog")
    assert a["full_labels"] == b["full_labels"] and a["neuron_labels"] == b["neuron_labels"]
    assert ("pos_embed" in a["full_labels"]) == (kind == "gpt2")
    assert _same(a["bias"], b["bias"]) and bool(a["bias"].any()) == (kind == "gpt2")
    for k in ("logits", "loss", "per_token", "full", "full_ln", "neurons", "neuron_dla"):
        same = _same(a[k], b[k]) if exact else (a[k] - b[k]).abs().max() <= ATOL
        assert same, (kind, k, (a[k] - b[k]).abs().max().item())
    resid = a["cache"]["resid_post", 1]
    assert (a["full"].sum(0) - resid).abs().max() <= ATOL * resid.abs().max()
    # TransformerLens's all-heads patching function on both
    clean, corrupted = tokens, torch.randint(1, 97, (2, 10), generator=torch.Generator().manual_seed(3))
    results = []
    for m in (ours, bridge):
        with torch.no_grad():
            _, cache = m.run_with_cache(clean)
            results.append(
                patching.get_act_patch_attn_head_out_all_pos(m, corrupted, cache, lambda lg: lg[:, -1, 5].mean())
            )
    assert results[0].shape == (2, 4) and (results[0] - results[1]).abs().max() <= ATOL
    # greedy generation: Hugging Face's, token for token (with and without our KV cache)
    prompt = tokens[:1, :4]
    ref = hf.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=10,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )
    for use_cache in (True, False):
        got = ours.generate(prompt, max_new_tokens=10, do_sample=False, stop_at_eos=False, use_past_kv_cache=use_cache)
        assert torch.equal(got, ref), (kind, use_cache, got.tolist(), ref.tolist())


def test_generate_and_the_kv_cache_live_in_models_generate():
    import models.generate
    import models.tl_api

    # the TransformerLens API binds the module's function as its method and re-exports the cache
    assert models.Transformer.generate is models.generate.generate
    assert models.tl_api.KVCache is models.generate.KVCache is models.KVCache
