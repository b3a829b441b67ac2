"""Parity with TransformerLens's ``TransformerBridge``, hook by hook, on both real models.

The bridge wraps the Hugging Face model itself (eager attention, fp32, CPU), so it is a second,
independent implementation of the same computation with the same hook names. Where the two agree on
what a hook means, every layer must agree within 1e-5 absolute (in practice every one of them
is bitwise equal: max |diff| 0.0, on SmolLM2 too, whose residual stream reaches 2.4e4). Where they
disagree on meaning, a test below pins the difference down with numbers and shows that our value is the consistent one.

What the investigation found (2-3 short sentences, fp32, CPU, transformer_lens 4.3):

=====================================  ===============================================================
hook                                   finding
=====================================  ===============================================================
resid_pre/post, q, k, v, rot_q/rot_k,  agree, bitwise, both models, every layer (real tokens)
pattern, z, mlp pre/post, mlp_out,
ln*.hook_scale, hook_pos_embed
attn_out, resid_mid (Llama)            agree, bitwise
logits (SmolLM2)                       agree, bitwise
hook_attn_scores (BERT)                bridge holds the post-softmax pattern (rows sum to 1), ours
                                       the scaled pre-softmax scores; softmax(ours) == our pattern
hook_attn_scores (Llama)               agree on allowed entries; masked entries are -inf in ours
                                       and HF's additive mask (about -3.4e38) in the bridge
hook_attn_out (BERT, post-LN)          bridge: ln1(resid_pre + attn_out), i.e. our resid_mid; ours
                                       is the attention sublayer's own output (= the bridge's own
                                       ``attn.o.hook_out``)
hook_resid_mid (BERT, post-LN)         bridge: resid_mid + mlp_out (the input of ln2); ours is
                                       the stream the MLP reads (= the bridge's ``hook_mlp_in``)
hook_embed (BERT)                      bridge: the embedding LayerNorm's output (= resid_pre of
                                       block 0); ours the token embedding W_E[tokens] (= the
                                       bridge's own ``embed.hook_out``); on Llama they agree
ln*.hook_normalized                    bridge: before the affine weight/bias ((x - mean) / scale);
                                       ours after it (TransformerLens v1 ``LayerNorm`` convention,
                                       the value the next sublayer reads, = bridge ``ln*.hook_out``;
                                       v1's ``RMSNorm`` and the folded ``LNPre`` put it before the
                                       weight, as the bridge now does everywhere)
logits (MiniLM)                        not comparable: the bridge boots ``BertForMaskedLM`` whose MLM
                                       head is absent from the checkpoint (randomly initialised);
                                       MiniLM is an encoder, ours returns the final hidden state
=====================================  ===============================================================

Padding: the batch is right-padded. Positions of padded tokens differ by design (ours follow the
mask, Hugging Face counts every slot), so comparisons use the real tokens (query rows) only;
padded keys get exactly zero weight in both.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformer_lens.model_bridge  # noqa: F401  a dependency: never skip silently

from models.loading import minilm_dir, smollm2_hf_dir

TEXTS = ["The cat sleeps on the warm mat.", "He saw the baby and smiled at her.", "Rain fell."]
ATOL = 1e-5
EPS32 = torch.finfo(torch.float32).eps


# --------------------------------------------------------------------------------------------------
# Fixtures: boot each bridge once, run both models once on the same padded batch


def _run_both(ours_model, bridge):
    batch = ours_model.to_words(TEXTS)
    ids, mask = batch.input_ids, batch.attention_mask
    assert not mask.all(), "the test batch should contain padding"
    with torch.no_grad():
        our_out, ours = ours_model.run_with_cache(ids, attention_mask=mask)
        their_out, theirs = bridge.run_with_cache(ids, attention_mask=mask, return_cache_object=False)
    return dict(ids=ids, real=mask.bool(), our_out=our_out, ours=ours, their_out=their_out, theirs=dict(theirs))


@pytest.fixture(scope="session")
def minilm_run(minilm, minilm_bridge):
    return _run_both(minilm, minilm_bridge)


@pytest.fixture(scope="session")
def smollm2_folder():
    """The plain Hugging Face folder for SmolLM2 that ``models.loading.smollm2_hf_dir`` makes once
    from the GGUF: config without its quantisation marker (``quantization_config``, which would send
    ``from_pretrained`` back to the GGUF path), the dequantised fp32 weights, the tokenizer."""
    import json

    folder = smollm2_hf_dir()
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())
    return folder


@pytest.fixture(scope="session")
def smollm2_run(smollm2, smollm2_folder, smollm2_bridge):
    return _run_both(smollm2, smollm2_bridge)


def _rows(t: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Keep real tokens: [batch, pos, ...] -> [n_real, ...]; [batch, head, query_pos, key_pos]
    -> [n_real_queries, head, key_pos]."""
    if t.ndim == 4 and t.shape[2] == t.shape[3] == real.shape[1]:
        t = t.transpose(1, 2)
    return t[real]


def _max_diff(a, b, real) -> float:
    a, b = _rows(a, real), _rows(b, real)
    assert a.shape == b.shape, f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}"
    return (a - b).abs().max().item()


def _check_pairs(run, pairs, n_layers):
    """pairs: (our hook name, bridge hook name), with {l} for the layer. Every layer must agree."""
    bad = []
    for ours_name, their_name in pairs:
        layers = range(n_layers) if "{l}" in ours_name else [None]
        for l in layers:
            o, t = ours_name.format(l=l), their_name.format(l=l)
            d = _max_diff(run["ours"][o], run["theirs"][t], run["real"])
            if not d <= ATOL:
                bad.append(f"{o} vs bridge {t}: max |diff| {d:.3g}")
    assert not bad, "hooks disagree:\n" + "\n".join(bad)


# --------------------------------------------------------------------------------------------------
# Where the two agree on meaning: every layer within 1e-5 (bitwise in practice)

COMMON = [
    ("blocks.{l}.hook_resid_pre", "blocks.{l}.hook_resid_pre"),
    ("blocks.{l}.ln1.hook_scale", "blocks.{l}.ln1.hook_scale"),
    ("blocks.{l}.attn.hook_q", "blocks.{l}.attn.hook_q"),
    ("blocks.{l}.attn.hook_k", "blocks.{l}.attn.hook_k"),
    ("blocks.{l}.attn.hook_v", "blocks.{l}.attn.hook_v"),
    ("blocks.{l}.attn.hook_pattern", "blocks.{l}.attn.hook_pattern"),
    ("blocks.{l}.attn.hook_z", "blocks.{l}.attn.hook_z"),
    ("blocks.{l}.ln2.hook_scale", "blocks.{l}.ln2.hook_scale"),
    ("blocks.{l}.mlp.hook_pre", "blocks.{l}.mlp.hook_pre"),
    ("blocks.{l}.mlp.hook_post", "blocks.{l}.mlp.hook_post"),
    ("blocks.{l}.hook_mlp_out", "blocks.{l}.hook_mlp_out"),
    ("blocks.{l}.hook_resid_post", "blocks.{l}.hook_resid_post"),
]


def test_minilm_agreeing_hooks_match_every_layer(minilm_run, minilm):
    pairs = COMMON + [
        ("hook_embed", "embed.hook_out"),  # the bridge's top-level hook_embed means something else
        ("hook_pos_embed", "hook_pos_embed"),  # (RoPE models: the bridge has no hook_pos_embed)
        ("hook_token_type_embed", "token_type_embed.hook_out"),
        ("ln_embed.hook_scale", "embed_ln.hook_scale"),
        # the bridge's own sublayer outputs carry the meaning of our attn_out / resid_mid
        ("blocks.{l}.hook_attn_out", "blocks.{l}.attn.o.hook_out"),
        ("blocks.{l}.hook_resid_mid", "blocks.{l}.hook_mlp_in"),
        ("blocks.{l}.ln1.hook_normalized", "blocks.{l}.ln1.hook_out"),
        ("blocks.{l}.ln2.hook_normalized", "blocks.{l}.ln2.hook_out"),
    ]
    _check_pairs(minilm_run, pairs, minilm.cfg.n_layers)
    # the encoder's output (our final hidden state) is what the bridge feeds its MLM head
    d = _max_diff(minilm_run["our_out"], minilm_run["theirs"]["mlm_head.hook_in"], minilm_run["real"])
    assert d <= ATOL, f"final hidden state differs by {d:.3g}"


def test_smollm2_agreeing_hooks_match_every_layer(smollm2_run, smollm2):
    """GQA: hook_k / hook_v are [batch, pos, kv_head=3, d_head=64] in both; rot_q / rot_k are after
    RoPE in both (same rotate-half layout, positions 0..n-1 on real tokens of a right-padded batch)."""
    k = smollm2_run["ours"]["blocks.0.attn.hook_k"]
    assert k.shape[2] == smollm2.cfg.kv_heads == 3 and smollm2_run["theirs"]["blocks.0.attn.hook_k"].shape == k.shape
    pairs = COMMON + [
        ("hook_embed", "hook_embed"),
        ("blocks.{l}.attn.hook_rot_q", "blocks.{l}.attn.hook_rot_q"),
        ("blocks.{l}.attn.hook_rot_k", "blocks.{l}.attn.hook_rot_k"),
        ("blocks.{l}.hook_attn_out", "blocks.{l}.hook_attn_out"),
        ("blocks.{l}.hook_resid_mid", "blocks.{l}.hook_resid_mid"),
        ("blocks.{l}.mlp.hook_pre_linear", "blocks.{l}.mlp.hook_pre_linear"),
        ("blocks.{l}.ln1.hook_normalized", "blocks.{l}.ln1.hook_out"),
        ("blocks.{l}.ln2.hook_normalized", "blocks.{l}.ln2.hook_out"),
        ("ln_final.hook_scale", "ln_final.hook_scale"),
        ("ln_final.hook_normalized", "ln_final.hook_out"),
    ]
    _check_pairs(smollm2_run, pairs, smollm2.cfg.n_layers)
    # RoPE really rotated something: rot_q differs from q past position 0
    q, rq = smollm2_run["ours"]["blocks.0.attn.hook_q"], smollm2_run["ours"]["blocks.0.attn.hook_rot_q"]
    assert (q[:, 1:] - rq[:, 1:]).abs().max() > 1e-2
    d = _max_diff(smollm2_run["our_out"], smollm2_run["their_out"], smollm2_run["real"])
    assert d <= ATOL, f"logits differ by {d:.3g}"


# --------------------------------------------------------------------------------------------------
# Where they differ in meaning


def test_minilm_attn_scores_bridge_holds_the_pattern(minilm_run, minilm):
    """On BERT the bridge's ``hook_attn_scores`` is the post-softmax pattern: it equals its own
    (and our) ``hook_pattern`` bitwise, its rows sum to 1 and it has no negative entry. Ours holds
    the scaled pre-softmax scores (on the test batch: -22..28 in layer 0, -3..7 in layer 5), and
    ``softmax(our scores) == our pattern``; so ours is the one that matches the name and
    TransformerLens's documented meaning ("scaled, masked, pre-softmax")."""
    ours, theirs, real = minilm_run["ours"], minilm_run["theirs"], minilm_run["real"]
    for l in range(minilm.cfg.n_layers):
        s = ours[f"blocks.{l}.attn.hook_attn_scores"]
        p = ours[f"blocks.{l}.attn.hook_pattern"]
        tb = theirs[f"blocks.{l}.attn.hook_attn_scores"]
        assert _max_diff(tb, p, real) == 0.0, "the bridge's attn_scores are its pattern"
        assert _max_diff(tb, theirs[f"blocks.{l}.attn.hook_pattern"], real) == 0.0
        assert _max_diff(F.softmax(s, dim=-1), p, real) <= ATOL
        # ours are scores, not probabilities: negative values and values above 1 occur
        assert _rows(s, real).min() < -1 and _rows(s, real)[torch.isfinite(_rows(s, real))].max() > 1
        assert (_rows(tb, real) >= 0).all() and (_rows(tb, real).sum(-1) - 1).abs().max() < 1e-5
        # padded keys get exactly zero weight in both
        pad_keys = ~real[:, None, None, :].expand_as(p)
        assert p[pad_keys].abs().max() == 0 and tb[pad_keys].abs().max() == 0


def test_minilm_attn_out_bridge_includes_residual_and_norm(minilm_run, minilm):
    """On post-LN BERT the bridge's ``hook_attn_out`` is ``LN1(resid_pre + attn_out)``: bitwise our
    ``hook_resid_mid``, not the attention output (max |difference| to ours: 12 to 30 per layer).
    Ours is the sublayer's own output: it equals ``sum_h z[h] @ W_O[h] + b_O`` computed from the
    bridge's (identical) z, and the bridge's own ``attn.o.hook_out``; and
    ``LN1(resid_pre + our attn_out)`` reproduces both models' resid_mid. The bridge's
    ``hook_resid_mid`` in turn is ``resid_mid + mlp_out`` (the input of LN2), not the stream the
    MLP reads (max |difference| to ours: 16 to 195 per layer), while ours equals the bridge's
    ``hook_mlp_in``."""
    ours, theirs, real = minilm_run["ours"], minilm_run["theirs"], minilm_run["real"]
    for l in range(minilm.cfg.n_layers):
        blk = minilm.blocks[l]
        a_ours, a_theirs = ours[f"blocks.{l}.hook_attn_out"], theirs[f"blocks.{l}.hook_attn_out"]
        mid, pre = ours[f"blocks.{l}.hook_resid_mid"], ours[f"blocks.{l}.hook_resid_pre"]
        assert _max_diff(a_theirs, mid, real) == 0.0
        assert _max_diff(a_theirs, a_ours, real) > 1.0, "a real difference in meaning, not round-off"
        with torch.no_grad():
            from_z = torch.einsum("bphd,hdm->bpm", theirs[f"blocks.{l}.attn.hook_z"], blk.attn.W_O) + blk.attn.b_O
            normed = F.layer_norm(pre + a_ours, (minilm.cfg.d_model,), blk.ln1.w, blk.ln1.b, minilm.cfg.eps)
        # einsum sums heads in another order than HF's single GEMM: observed <= 1.6e-6 (< 1e-5)
        assert _max_diff(from_z, a_ours, real) <= ATOL
        assert _max_diff(normed, mid, real) <= ATOL
        mlp_out = ours[f"blocks.{l}.hook_mlp_out"]
        assert _max_diff(theirs[f"blocks.{l}.hook_resid_mid"], mid + mlp_out, real) <= ATOL
        assert _max_diff(theirs[f"blocks.{l}.hook_resid_mid"], mid, real) > 1.0


def test_minilm_hook_embed_bridge_is_after_embedding_norm(minilm_run, minilm):
    """The bridge's top-level ``hook_embed`` on BERT is the embedding LayerNorm's output (word +
    position + token type, normalised), bitwise block 0's resid_pre; ours is the token embedding
    ``W_E[tokens]`` exactly, as in TransformerLens (and as the bridge's own ``embed.hook_out``)."""
    ours, theirs, real = minilm_run["ours"], minilm_run["theirs"], minilm_run["real"]
    ids = minilm_run["ids"]
    assert torch.equal(ours["hook_embed"], minilm.W_E.detach()[ids])
    assert _max_diff(theirs["hook_embed"], ours["blocks.0.hook_resid_pre"], real) == 0.0
    assert _max_diff(theirs["hook_embed"], ours["hook_embed"], real) > 1.0
    with torch.no_grad():
        summed = ours["hook_embed"] + ours["hook_pos_embed"] + ours["hook_token_type_embed"]
        normed = F.layer_norm(summed, (minilm.cfg.d_model,), minilm.ln_embed.w, minilm.ln_embed.b, minilm.cfg.eps)
    assert _max_diff(normed, ours["blocks.0.hook_resid_pre"], real) <= ATOL


@pytest.mark.parametrize("model_name", ["minilm", "smollm2"])
def test_hook_normalized_bridge_is_before_the_affine_weight(model_name, request):
    """The bridge's ``ln*.hook_normalized`` is ``(x - mean) / scale`` (LayerNorm) or ``x / scale``
    (RMSNorm), before the weight and bias; ours is after them (the TransformerLens v1 ``LayerNorm``
    convention, and the value the next sublayer actually reads: bitwise the bridge's
    ``ln*.hook_out``). Converting theirs with ``* w + b`` gives ours: bitwise for RMSNorm (the
    same ops), within a few fp32 ulps for LayerNorm, where Hugging Face runs the fused
    ``F.layer_norm`` kernel and the bridge computes the mean, the rsqrt and the affine step
    separately: each of the three roundings is within eps/2 of an intermediate no larger than the
    largest |value| (~30 on MiniLM), so the difference is a few eps * max|value|. Observed on
    MiniLM: at most 9.5e-6 (~2.7 eps * 30); the bound used is 16 eps * max|value| (~5.7e-5), still
    five orders of magnitude below the difference in meaning (3 to 11 before conversion)."""
    run, model = request.getfixturevalue(f"{model_name}_run"), request.getfixturevalue(model_name)
    ours, theirs, real = run["ours"], run["theirs"], run["real"]
    norms = [f"blocks.{l}.{ln}" for l in range(model.cfg.n_layers) for ln in ("ln1", "ln2")]
    norms += ["ln_final"] if model.ln_final is not None else []
    for name in norms:
        ln = model.get_submodule(name)
        o, t = ours[f"{name}.hook_normalized"], theirs[f"{name}.hook_normalized"]
        with torch.no_grad():
            converted = t * ln.w + (0 if ln.b is None else ln.b)
        assert _max_diff(o, t, real) > 0.1, f"{name}: a difference in meaning, not round-off"
        bound = 0.0 if ln.b is None else 16 * EPS32 * _rows(o, real).abs().max().item()
        d = _max_diff(converted, o, real)
        assert d <= bound, f"{name}: bridge normalized * w + b differs from ours by {d:.3g} (bound {bound:.3g})"


def test_smollm2_attn_scores_masked_entries(smollm2_run, smollm2):
    """On Llama both hold the scaled pre-softmax scores and agree bitwise on every allowed entry.
    Masked entries (the causal upper triangle and padded keys) are ``-inf`` in ours and Hugging
    Face's additive mask in the bridge (finite, about ``finfo(float32).min`` = -3.4e38): both
    softmax to exactly zero, but only ``-inf`` says "masked" unambiguously and survives adding a
    bias or a scale. ``softmax(our scores) == our pattern`` on every layer."""
    ours, theirs, real = smollm2_run["ours"], smollm2_run["theirs"], smollm2_run["real"]
    n = real.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    allowed = causal[None, None] & real[:, None, None, :]
    for l in range(smollm2.cfg.n_layers):
        s, tb = ours[f"blocks.{l}.attn.hook_attn_scores"], theirs[f"blocks.{l}.attn.hook_attn_scores"]
        p = ours[f"blocks.{l}.attn.hook_pattern"]
        q_real = real[:, None, :, None].expand_as(s)  # padded queries sit at other positions by design
        a = allowed.expand_as(s) & q_real
        assert (s[a] - tb[a]).abs().max() <= ATOL
        masked = ~allowed.expand_as(s) & q_real
        assert torch.isneginf(s[masked]).all()
        assert torch.isfinite(tb[masked]).all() and tb[masked].max() < -1e30
        assert _max_diff(F.softmax(s, dim=-1), p, real) <= ATOL


def test_minilm_bridge_logits_come_from_an_untrained_head(minilm_run):
    """MiniLM is a sentence encoder: its checkpoint has no masked-LM head (only ``pooler.*`` beyond
    the encoder), yet the bridge boots ``BertForMaskedLM``, whose ``cls.predictions`` head is then
    randomly initialised. Its logits (``hook_unembed``) are therefore not a property of the model
    and are not compared; ours returns the final hidden state for encoders, which matches the
    bridge's ``mlm_head.hook_in`` (checked above)."""
    from safetensors import safe_open

    with safe_open(str(minilm_dir() / "model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert not any(k.startswith("cls.") for k in keys), "the checkpoint now ships an MLM head: compare logits"
    assert "unembed.hook_out" in minilm_run["theirs"]
    assert minilm_run["our_out"].shape[-1] == 384  # hidden state, not vocabulary logits
