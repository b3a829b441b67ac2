"""W_Q/W_K and W_V/W_O rotations: property tests on random small configs, negative controls, and
the real models."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import models
from analyses.invariance import conditioning as cond
from analyses.invariance import interpretation as interp
from analyses.invariance import rotation as rot
from analyses.invariance.common import U32, U64, generator
from tests.factories import tiny_config

FAST = settings(max_examples=15, deadline=None)


@st.composite
def small_models(draw, positional=("none", "learned", "rope")):
    kv = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2]))
    d_head = draw(st.sampled_from([4, 8]))
    cfg = tiny_config(
        n_layers=draw(st.integers(1, 2)),
        n_heads=kv * group,
        n_kv_heads=kv,
        d_head=d_head,
        d_model=16,
        d_mlp=32,
        attn_bias=draw(st.booleans()),
        attn_out_bias=draw(st.booleans()),
        positional=draw(st.sampled_from(positional)),
        attention=draw(st.sampled_from(["causal", "bidirectional"])),
    )
    seed = draw(st.integers(0, 1000))
    m = models.Transformer(cfg, seed=seed).double().eval()
    with torch.no_grad():  # O(1) scores and non-zero biases, so that every term matters
        for b in m.blocks:
            b.attn.q_weight.mul_(20)
            b.attn.k_weight.mul_(20)
            for bias in (b.attn.q_bias, b.attn.k_bias, b.attn.v_bias):
                if bias is not None:
                    bias.copy_(torch.randn(bias.shape, generator=generator(seed), dtype=bias.dtype))
    tokens = torch.randint(0, cfg.d_vocab, (1, 10), generator=generator(seed))
    return m, tokens, seed


def tol(m):
    """fp64, a few matrix products per layer of inner length <= d_model: 100 * d_model * n_layers * u64."""
    return 100 * m.cfg.d_model * m.cfg.n_layers * U64


def outputs(m, tokens):
    return rot.observe(m, tokens)


def err(a, b, q):
    return max(rot.relerr(x, y) for x, y in zip(a[q], b[q]))


def guard(m, tokens, ref):
    """A different input must change scores and output by far more than the tolerance."""
    other = (tokens + 7) % m.cfg.d_vocab
    o = outputs(m, other)
    assert err(o, ref, "scores") > 1e4 * tol(m)
    assert err(o, ref, "output") > 1e4 * tol(m)


@FAST
@given(case=small_models(), seed=st.integers(0, 1000))
def test_qk_rotation_keeps_scores_patterns_outputs(case, seed):
    m, tokens, _ = case
    ref = outputs(m, tokens)
    guard(m, tokens, ref)
    kind = "rope_planes" if m.cfg.positional == "rope" else "general"
    new = outputs(rot.transform_heads(m, rot.qk_orthogonal(m.cfg, generator(seed), kind)), tokens)
    for q in ("scores", "patterns", "output"):
        assert err(new, ref, q) < tol(m), q


@FAST
@given(case=small_models(), seed=st.integers(0, 1000))
def test_vo_rotation_keeps_outputs_and_non_orthogonal_breaks(case, seed):
    m, tokens, _ = case
    ref = outputs(m, tokens)
    good = outputs(rot.transform_heads(m, rot.vo_orthogonal(m.cfg, generator(seed))), tokens)
    assert err(good, ref, "output") < tol(m)
    bad = outputs(
        rot.transform_heads(m, rot.vo_orthogonal(m.cfg, generator(seed), orthogonal=False, cond=10.0)), tokens
    )
    assert err(bad, ref, "output") > 1e4 * tol(m)


@FAST
@given(case=small_models(positional=("none", "learned")), seed=st.integers(0, 1000), log_cond=st.floats(0, 3))
def test_invertible_a_with_inverse_transpose_keeps_scores(case, seed, log_cond):
    m, tokens, _ = case
    ref = outputs(m, tokens)
    cond = 10**log_cond
    new = outputs(rot.transform_heads(m, rot.qk_invertible(m.cfg, generator(seed), cond)), tokens)
    assert err(new, ref, "scores") < tol(m) * cond
    bad = outputs(
        rot.transform_heads(m, rot.qk_invertible(m.cfg, generator(seed), 10.0, inverse_transpose=False)), tokens
    )
    assert err(bad, ref, "scores") > 1e4 * tol(m)


@FAST
@given(case=small_models(), seed=st.integers(0, 1000))
def test_rotating_w_q_alone_breaks(case, seed):
    m, tokens, _ = case
    ref = outputs(m, tokens)
    new = outputs(rot.transform_heads(m, rot.q_only(m.cfg, generator(seed))), tokens)
    assert err(new, ref, "scores") > 1e4 * tol(m)


@FAST
@given(case=small_models(positional=("rope",)), seed=st.integers(0, 1000))
def test_general_rotation_does_not_commute_with_rope(case, seed):
    m, tokens, _ = case
    ref = outputs(m, tokens)
    new = outputs(rot.transform_heads(m, rot.qk_orthogonal(m.cfg, generator(seed), "general")), tokens)
    assert err(new, ref, "scores") > 1e4 * tol(m)


def test_rope_plane_rotation_commutes_with_rotary_matrices():
    from models.transformer import apply_rope, rope_cos_sin, rope_inv_freq

    for interleaved, rotary_dim in ((False, None), (True, None), (False, 4)):
        cfg = tiny_config(positional="rope", d_head=8, rope_interleaved=interleaved, rotary_dim=rotary_dim)
        r = rot.rope_plane_rotation(cfg, generator(0))
        assert torch.allclose(r @ r.T, torch.eye(8, dtype=torch.float64), atol=1e-14)
        cos, sin = rope_cos_sin(cfg, torch.arange(5)[None], rope_inv_freq(cfg))
        x = torch.randn(5, 8, dtype=torch.float64)
        lhs = apply_rope(cfg, x @ r, cos[0].double(), sin[0].double())
        rhs = apply_rope(cfg, x, cos[0].double(), sin[0].double()) @ r
        assert (lhs - rhs).abs().max() < 1e-13
        general = rot.random_orthogonal(8, generator(1))
        lhs = apply_rope(cfg, x @ general, cos[0].double(), sin[0].double())
        rhs = apply_rope(cfg, x, cos[0].double(), sin[0].double()) @ general
        assert (lhs - rhs).abs().max() > 1e-3


@FAST
@given(seed=st.integers(0, 1000), positional=st.sampled_from(["none", "rope"]))
def test_gqa_rotation_must_be_shared_by_the_group(seed, positional):
    cfg = tiny_config(n_heads=4, n_kv_heads=2, d_head=8, d_model=16, positional=positional)
    m = models.Transformer(cfg, seed=seed).double().eval()
    with torch.no_grad():
        for b in m.blocks:
            b.attn.q_weight.mul_(20)
            b.attn.k_weight.mul_(20)
    tokens = torch.randint(0, cfg.d_vocab, (1, 10), generator=generator(seed))
    ref = outputs(m, tokens)
    kind = "rope_planes" if positional == "rope" else "general"
    shared = outputs(rot.transform_heads(m, rot.qk_orthogonal(cfg, generator(seed), kind)), tokens)
    assert err(shared, ref, "scores") < tol(m)
    split = outputs(rot.transform_heads(m, rot.qk_split_group(cfg, generator(seed), kind)), tokens)
    assert err(split, ref, "scores") > 1e4 * tol(m)
    split_vo = outputs(rot.transform_heads(m, rot.vo_orthogonal(cfg, generator(seed), split_group=True)), tokens)
    assert err(split_vo, ref, "output") > 1e4 * tol(m)


def test_apply_spec_refuses_to_edit_the_model_itself(tiny):
    with pytest.raises(ValueError, match="pass a copy"):
        rot.apply_spec(tiny, tiny, {})


def test_transform_heads_rejects_wrong_head_count(tiny):
    spec = {"q": [torch.eye(8, dtype=torch.float64).expand(3, 8, 8)] * tiny.cfg.n_layers}
    with pytest.raises(ValueError, match="3 matrices for 4 heads"):
        rot.transform_heads(tiny, spec)


def test_interpretation_table_on_real_head(minilm):
    t = interp.interpretation_table(minilm, layer=2, head=5)
    assert t.passed.all(), t
    by = t.set_index("quantity")
    # the factors change by O(1), the products not at all
    assert by.loc["W_Q entries (the per-dimension query directions)", "change_orthogonal"] > 0.1
    assert by.loc["W_QK = W_Q W_K^T (FactoredMatrix.AB)", "change_invertible"] < 1e-10


@pytest.mark.parametrize(
    "name, module", [("conditioning_sweep", "conditioning"), ("interpretation_table", "interpretation")]
)
def test_moved_names_still_answer_from_rotation_with_a_warning(name, module):
    import importlib

    with pytest.warns(DeprecationWarning, match=f"moved to analyses.invariance.{module}.{name}"):
        old = getattr(rot, name)
    assert old is getattr(importlib.import_module(f"analyses.invariance.{module}"), name)
    with pytest.raises(AttributeError, match="no_such_name"):
        rot.no_such_name  # noqa: B018


def test_model_checks_on_minilm_agree_and_leave_model_unchanged(minilm):
    before = {k: v.clone() for k, v in minilm.state_dict().items()}
    df = rot.model_rotation_checks(minilm, fp64=False)
    assert df.passed.all(), df[~df.passed]
    assert set(df.expected) == {"holds", "breaks"}
    for k, v in minilm.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_a_qk_rotation_on_minilm_keeps_its_output_only_with_the_biases_rotated(minilm):
    """MiniLM's attention has biases: the score (x W_Q + b_Q)(x W_K + b_K)^T is unchanged by W_Q, W_K
    -> W_Q R, W_K R only when b_Q, b_K -> b_Q R, b_K R too (``apply_spec`` rotates both; docs/hooks.md)."""
    from analyses.invariance.common import model_tokens

    assert minilm.blocks[0].attn.b_Q is not None and minilm.blocks[0].attn.b_Q.abs().max() > 0.1
    tokens = model_tokens(minilm)
    spec = rot.qk_orthogonal(minilm.cfg, torch.Generator().manual_seed(0))
    rotated = rot.transform_heads(minilm, spec)
    weights_only = rot.transform_heads(minilm, spec)
    with torch.no_grad():
        for block, src in zip(weights_only.blocks, minilm.blocks):
            block.attn.b_Q, block.attn.b_K = src.attn.b_Q.detach(), src.attn.b_K.detach()
        clean, both, alone = minilm(tokens), rotated(tokens), weights_only(tokens)

    def change(out):
        return float((out - clean).abs().max() / clean.abs().max())

    assert change(both) < 1e-5  # measured 2.6e-7 (float32)
    assert change(alone) > 0.05  # measured 0.17: the unrotated biases break the scores


def test_rope_and_gqa_checks_on_smollm2(smollm2):
    from analyses.invariance.common import first_layers, model_tokens

    before = smollm2.blocks[0].attn.q_weight.clone()
    m = first_layers(smollm2, 4)  # SmolLM2's real first four layers: the checks are per layer
    df = rot.model_rotation_checks(m, model_tokens(m, n_tokens=8), fp64=False)
    assert df.passed.all(), df[~df.passed]
    general = df[df.quantity.str.contains("general orthogonal R")]
    assert len(general) and (general.expected == "breaks").all()
    assert (df.quantity.str.contains("kv group")).sum() >= 3
    assert torch.equal(smollm2.blocks[0].attn.q_weight, before)


def test_conditioning_error_grows_with_cond_and_stays_within_bound(minilm):
    sweep = cond.conditioning_sweep(minilm, conds=(1.0, 1e3, 1e6), layers=[0, 3])
    assert (sweep.normalized_error <= sweep.bound).all()
    f32 = sweep[sweep.dtype == "float32"].sort_values("cond")
    assert f32.relative_error.iloc[-1] > 100 * f32.relative_error.iloc[0]
    assert (sweep[sweep.dtype == "float64"].relative_error.values < f32.relative_error.values * 1e-6).all()
    neg = cond.conditioning_negative(minilm)
    assert neg.passed.all() and neg.value.iloc[0] > 100 * neg.tolerance.iloc[0]


# -- QK-norm (Qwen3, Gemma 3): what a W_Q/W_K change may still preserve ---------------------------------


def _qk_norm_model(kind="head", trained_scales=True, seed=0):
    """A tiny RoPE model with Gemma's (1 + w) QK-norm; ``trained_scales``: w random (a learned scale
    that differs between the two dimensions of a rotary plane), else w = 0 (every scale 1)."""
    from analyses.invariance.common import tiny_model

    m = tiny_model(
        "rope",
        attention="causal",
        qk_norm=kind,
        norm="rmsnorm",
        norm_offset=1.0,
        norm_scale_fp32=True,
        n_kv_heads=2,
        seed=seed,
    )
    if trained_scales:
        gen = generator(seed + 1)
        with torch.no_grad():
            for b in m.blocks:
                b.attn.q_norm_w.copy_(0.5 * torch.randn(b.attn.q_norm_w.shape, generator=gen))
                b.attn.k_norm_w.copy_(0.5 * torch.randn(b.attn.k_norm_w.shape, generator=gen))
    return m


@pytest.mark.parametrize("kind", ["head", "full"])
def test_qk_norm_checks_hold_and_their_negative_controls_break(kind):
    m = _qk_norm_model(kind)
    df = rot.model_rotation_checks(m, fp64=True)
    assert df.passed.all(), df[~df.passed][["quantity", "value", "tolerance", "expected"]]
    holds = df[df.expected == "holds"].quantity
    assert holds.str.contains("a sign per rotary plane").any() and holds.str.contains("W_Q c").any()
    breaks = df[df.expected == "breaks"].quantity
    # the rotation that RoPE alone allows no longer holds under a learned QK-norm scale
    assert breaks.str.contains("inside each rotary plane").any()
    assert breaks.str.contains("uneven positive diagonal").any()


def test_plane_rotation_breaks_only_through_the_norm_scale():
    """The same plane rotation, measured directly: it keeps the scores when every QK-norm scale is
    equal, and breaks them (by far more than round-off) when the learned scales differ. The norm
    computes in fp32 even in an fp64 model (as Hugging Face's Gemma RMSNorm does), so the first
    bound is fp32 round-off of a d_head-term mean, not fp64's."""
    tokens = torch.randint(0, 100, (1, 10), generator=generator(0))
    errors = {}
    for trained in (False, True):
        m = _qk_norm_model(trained_scales=trained).double()
        spec = rot.qk_orthogonal(m.cfg, generator(3), "rope_planes")
        ref = rot.observe(m, tokens)
        errors[trained] = err(rot.observe(rot.transform_heads(m, spec), tokens), ref, "scores")
    assert errors[False] < 10 * m.cfg.d_head * U32 and errors[True] > 1e-2, errors


def test_qk_norm_scaling_holds_to_eps_and_needs_the_norm():
    """W_Q c changes nothing a QK-norm model computes beyond the eps term, and changes the scores of
    the same model without QK-norm by the factor c (so the symmetry is the norm's)."""
    tokens = torch.randint(0, 100, (1, 10), generator=generator(0))
    m = _qk_norm_model().double()
    spec = rot.qk_scale(m.cfg, generator(5))
    ref = rot.observe(m, tokens)
    bound = m.cfg.n_layers * rot.qk_scale_eps_bound(m, tokens)
    assert err(rot.observe(rot.transform_heads(m, spec), tokens), ref, "scores") <= bound + tol(m)
    plain = models.Transformer(m.cfg.replace(qk_norm="none"), seed=0).double().eval()
    plain.load_state_dict({k: v for k, v in m.state_dict().items() if "norm_w" not in k}, strict=True)
    ref = rot.observe(plain, tokens)
    assert err(rot.observe(rot.transform_heads(plain, spec), tokens), ref, "scores") > 0.5


def test_norm_commuting_rotation_commutes_with_rope_and_the_scale():
    m = _qk_norm_model()
    cfg = m.cfg
    gq, gk = rot.qk_norm_scales(m, 0)
    assert gq.shape == (cfg.n_heads, cfg.d_head) and gk.shape == (cfg.kv_heads, cfg.d_head)
    free = {models.rope_planes(cfg)[0]}  # pretend the first plane is free: a real rotation there
    r = rot.norm_commuting_rotation(cfg, generator(2), free)
    assert torch.allclose(r @ r.T, torch.eye(cfg.d_head, dtype=torch.float64), atol=1e-14)
    i, j = models.rope_planes(cfg)[0]
    assert r[i, j] != 0  # the free plane rotates
    rest = [d for d in range(cfg.d_head) if d not in (i, j)]
    sub = r[rest][:, rest]
    assert torch.equal(sub, torch.diag(torch.diagonal(sub))) and set(torch.diagonal(sub).abs().tolist()) == {1.0}
    for a, b in models.rope_planes(cfg)[1:]:  # a sign per plane: both dimensions share it
        assert r[a, a] == r[b, b]
