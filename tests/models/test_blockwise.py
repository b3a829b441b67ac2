"""Attention patterns in query blocks (``models.blockwise.pattern_blocks``): blockwise scores, pattern
and z against the full eager path for every positional scheme, with and without padding, on a
sliding-window family and with a soft-cap; the hooks' view of the blocks (``hook.query_rows``,
edits); the reducers and the probe on blocks.

Equality. Each layer is compared on the same inputs: the blocked run's q, k and v are replaced, by
hooks, with the full run's, so the only difference left is the blocking. Softmax rows are
independent and the masks, ALiBi and the soft-cap are elementwise, so a block row differs from the
full row only where the matrix product of a block of query rows sums in another order than the
product of all rows. On this CPU that happens for tiny heads (d_head 8: a few ulps) and not for
d_head 64 (SmolLM2's), where blocks are bitwise equal to the full path end to end (the second test).
The bound (u = 2^-24, gamma_n = n u / (1 - n u), Higham's dot-product bound: any summation order of
n products is within gamma_n sum |x_i y_i| of the exact sum, so two orders are within twice that):

* scores: |s_b - s_f| <= 2 gamma_{d+3} (scale sum_l |q_il k_jl| + |alibi_ij|) (+ 10 u cap with a
  soft-cap): the dot product, the scale, the ALiBi subtraction, and the soft-cap's three roundings
  and tanh's (<= 2 ulp) error, each side;
* pattern: with eps_i the largest score bound of row i, |p_b - p_f| <= max(p_b, p_f) (expm1(2 eps_i)
  + 2 gamma_{K+4}) (1 + 2 gamma_{K+4}): a softmax's inputs moved by <= eps move each weight by a
  factor within e^{+-2 eps}, and each computed softmax is within gamma_{K+4} (exp's ulps, the sum of
  K keys, the subtraction of the max and the division) of its exact value;
* z = pattern @ v over K keys: |z_b - z_f| <= sum_j |p_b - p_f|_ij |v_j| + gamma_K sum_j
  (p_b + p_f)_ij |v_j|.

A wrong mask slice or a wrong ALiBi slice moves weights by O(1) and fails it (the mutant tests).
"""

from __future__ import annotations

import math

import pytest
import torch

import models
from analyses import heads
from analyses.heads import roles as head_roles
from analyses.heads import scoring
from interp.hooks import QueryRows
from interp.reducers import RowBlocks
from models.blockwise import pattern_blocks
from models.masks import Masks
from models.transformer import Attention
from tests.factories import TINY, planted_items, planted_model, randomized, tiny_batch, tiny_config

U = 2.0**-24


def gamma(n: int) -> float:
    return n * U / (1 - n * U)


# every positional scheme of models.config (learned, sinusoidal, rope plain / partial interleaved,
# alibi, none), causal and bidirectional, GQA, plus a sliding-window family and a soft-capped one
FAMILIES = dict(TINY)
FAMILIES["sliding"] = dict(
    positional="rope", norm="rmsnorm", mlp="gated", act="silu", n_kv_heads=2, sliding_window=3,
    layer_types=("sliding", "full"),
)  # fmt: skip
FAMILIES["softcap_alibi"] = dict(positional="alibi", attn_softcap=2.0)

WATCHED = ("hook_rot_q", "hook_rot_k", "hook_v", "hook_attn_scores", "hook_pattern", "hook_z")


def _family(key: str, **overrides) -> models.Transformer:
    return randomized(tiny_config(**{**FAMILIES[key], **overrides}))


def _runs(model, tokens, mask, rows: int):
    """(full, blocked): per layer, the full run's q, k, v, scores, pattern and z; the blocked run's
    scores and pattern (blocks concatenated) and z, computed from the full run's q, k and v."""
    full: dict = {}

    def keep(x, hook):
        full[hook.name] = x.clone()

    names = [n for n in model.hook_names() if n.endswith(WATCHED)]
    model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(n, keep) for n in names])
    blocked: dict = {}
    seen: dict = {}

    def same_inputs(x, hook):  # the full run's q, k, v: only the blocking differs
        return full[hook.name].clone()

    def gather(x, hook):
        if hook.name.endswith("hook_z"):
            blocked[hook.name] = x.clone()
            return
        seen.setdefault(hook.name, []).append(hook.query_rows)
        blocked.setdefault(hook.name, []).append(x.clone())

    hooks = [(n, same_inputs if n.endswith(WATCHED[:3]) else gather) for n in names]
    with pattern_blocks(model, rows):
        model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=hooks)
    n = tokens.shape[1]
    for name, got in seen.items():  # every block reported, in order, covering the rows once
        starts = list(range(0, n, rows))
        assert got == [QueryRows(s, min(s + rows, n), n) for s in starts], name
    blocked = {k: (torch.cat(v, dim=2) if isinstance(v, list) else v) for k, v in blocked.items()}
    return full, blocked


def _excess(model, full: dict, blocked: dict) -> dict:
    """Per layer and quantity, the largest |blocked - full| minus its bound (<= 0: within it), and
    -inf / zero agreement of the masked entries."""
    cfg = model.cfg
    out = {}
    for layer in range(cfg.n_layers):
        pre = f"blocks.{layer}.attn."
        attn = model.blocks[layer].attn
        q = full[pre + "hook_rot_q"].double().transpose(1, 2)  # [batch, head, pos, d_head]
        k = attn._repeat_kv(full[pre + "hook_rot_k"].transpose(1, 2)).double()
        v = attn._repeat_kv(full[pre + "hook_v"].transpose(1, 2)).double()
        s_f, s_b = full[pre + "hook_attn_scores"], blocked[pre + "hook_attn_scores"]
        p_f, p_b = full[pre + "hook_pattern"].double(), blocked[pre + "hook_pattern"].double()
        z_f, z_b = full[pre + "hook_z"].double(), blocked[pre + "hook_z"].double()
        finite = torch.isfinite(s_f)
        a = cfg.scale * torch.matmul(q.abs(), k.abs().transpose(2, 3))
        if cfg.positional == "alibi":
            b, n = q.shape[0], q.shape[2]
            pos = torch.arange(n).expand(b, n) if full.get("_positions") is None else full["_positions"]
            a = a + attn._alibi_bias(pos, torch.float64).abs()
        bound_s = 2 * gamma(cfg.d_head + 3) * a
        if cfg.attn_softcap is not None:
            bound_s = bound_s + 10 * U * cfg.attn_softcap
        diff_s = torch.where(finite, (s_b.double() - s_f.double()).abs(), torch.zeros_like(a))
        eps = torch.where(finite, bound_s, torch.zeros_like(a)).amax(-1, keepdim=True)
        g = 2 * gamma(k.shape[2] + 4)
        bound_p = torch.maximum(p_b, p_f) * (torch.expm1(2 * eps) + g) * (1 + g)
        dp = (p_b - p_f).abs()
        bound_z = torch.matmul(dp, v.abs()) + gamma(k.shape[2]) * torch.matmul(p_b + p_f, v.abs())
        out[layer] = {
            "scores": (diff_s - bound_s).max().item(),
            "pattern": (dp - bound_p).max().item(),
            "z": ((z_b - z_f).abs().transpose(1, 2) - bound_z).max().item(),
            "zeros": torch.equal(p_f == 0, p_b == 0),
            "masked": torch.equal(torch.isneginf(s_f), torch.isneginf(s_b)),
        }
    return out


def _positions(mask):
    return None if mask is None else (mask.long().cumsum(-1) - 1).clamp(min=0)


@pytest.mark.parametrize("rows", [1, 2, 4])
@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "left+right padding"])
@pytest.mark.parametrize("key", sorted(FAMILIES))
def test_blocks_equal_the_full_pattern_within_the_bound(key, padded, rows):
    model = _family(key)
    tokens, mask = tiny_batch(model.cfg)  # row 1 right-padded, row 2 left-padded
    mask = mask if padded else None
    full, blocked = _runs(model, tokens, mask, rows)
    full["_positions"] = _positions(mask)
    for layer, got in _excess(model, full, blocked).items():
        assert got["masked"], f"{key} layer {layer}: the masked (-inf) scores differ"
        assert got["zeros"], f"{key} layer {layer}: the zero weights (masked keys, empty rows) differ"
        for what in ("scores", "pattern", "z"):
            assert got[what] <= 0, f"{key} layer {layer} {what}: exceeds its bound by {got[what]:.3g}"


@pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="the bitwise claim is about MKL's CPU kernels")
@pytest.mark.parametrize("rows", [128, 100])
@pytest.mark.parametrize("key", ["llama_like", "alibi", "gpt2_like", "sliding"])
def test_blocks_are_bitwise_at_head_width_64(key, rows):
    """SmolLM2's head width: blocks of 128 or 100 rows of 520 give the full path's bits, end to end."""
    overrides = dict(d_model=128, n_heads=4, d_head=64, n_ctx=600, d_vocab=100)
    if key == "sliding":
        overrides["sliding_window"] = 150
    model = _family(key, **overrides)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 100, (2, 520), generator=gen)
    mask = torch.ones(2, 520, dtype=torch.long)
    mask[0, 480:] = 0
    mask[1, :37] = 0
    full: dict = {}

    def keep(x, hook):
        full[hook.name] = x.clone()

    names = [n for n in model.hook_names() if n.endswith(("hook_attn_scores", "hook_pattern", "hook_z"))]
    logits = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(n, keep) for n in names])
    got: dict = {}

    def gather(x, hook):
        got.setdefault(hook.name, []).append(x.clone())

    with pattern_blocks(model, rows):
        logits_b = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[(n, gather) for n in names])
    for name in names:
        parts = got[name]
        assert len(parts) == (1 if name.endswith("hook_z") else math.ceil(520 / rows))
        assert torch.equal(torch.cat(parts, dim=2), full[name]), name
    assert torch.equal(logits_b, logits)


def _mask_from_row_zero(monkeypatch):
    """A mutant: every block takes the masks' first rows (the slice forgets the block's start)."""
    original = Masks.rows

    def mutant(self, rows):
        if rows is not None:
            rows = slice(0, rows.stop - rows.start)
        return original(self, rows)

    monkeypatch.setattr(Masks, "rows", mutant)


def _alibi_from_row_zero(monkeypatch):
    """A mutant: the ALiBi bias of every block is the first rows' bias."""
    original = Attention._alibi_bias

    def mutant(self, positions, dtype, rows=None):
        if rows is not None:
            rows = slice(0, rows.stop - rows.start)
        return original(self, positions, dtype, rows)

    monkeypatch.setattr(Attention, "_alibi_bias", mutant)


@pytest.mark.parametrize(
    "key, mutate",
    [("llama_like", _mask_from_row_zero), ("sliding", _mask_from_row_zero), ("alibi", _alibi_from_row_zero)],
)
def test_a_wrong_slice_fails_the_equality(key, mutate, monkeypatch):
    model = _family(key)
    tokens, mask = tiny_batch(model.cfg)
    mutate(monkeypatch)
    full, blocked = _runs(model, tokens, mask, 2)
    full["_positions"] = _positions(mask)
    layer0 = _excess(model, full, blocked)[0]
    assert not layer0["masked"] or not layer0["zeros"] or layer0["pattern"] > 0.01


def test_an_edited_block_takes_effect():
    """A hook that returns an edited block (every row on key 0) and one that edits in place: z is
    then v of key 0 in every row, exactly (a one-hot row sums exact zeros)."""
    model = _family("llama_like")
    tokens, _ = tiny_batch(model.cfg)
    values: dict = {}

    def keep_v(x, hook):
        values["v"] = x.clone()

    def first_key(x, hook):
        out = torch.zeros_like(x)
        out[..., 0] = 1.0
        return out

    def first_key_in_place(x, hook):
        x.zero_()
        x[..., 0] = 1.0

    for edit in (first_key, first_key_in_place):
        zs: dict = {}

        def keep_z(x, hook):
            zs["z"] = x.clone()

        hooks = [
            ("blocks.0.attn.hook_v", keep_v),
            ("blocks.0.attn.hook_pattern", edit),
            ("blocks.0.attn.hook_z", keep_z),
        ]
        with pattern_blocks(model, 2):
            model.run_with_hooks(tokens, fwd_hooks=hooks)
        v0 = model.blocks[0].attn._repeat_kv(values["v"].transpose(1, 2))[:, :, :1]  # [batch, head, 1, d_head]
        expect = v0.expand(-1, -1, tokens.shape[1], -1).transpose(1, 2)
        assert torch.equal(zs["z"], expect), edit.__name__
    with pattern_blocks(model, 2):  # and unedited, z is not that
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", keep_z)])
    assert not torch.equal(zs["z"], expect)


def test_query_rows_only_inside_blocks_and_settings_restored():
    model = _family("gpt2_like")
    tokens, _ = tiny_batch(model.cfg)
    seen = []

    def note(x, hook):
        seen.append((hook.name.rsplit(".", 1)[-1], hook.query_rows, x.shape[2]))

    hooks = [("blocks.1.attn.hook_attn_scores", note), ("blocks.1.attn.hook_pattern", note)]
    model.run_with_hooks(tokens, fwd_hooks=hooks)
    assert seen == [("hook_attn_scores", None, 9), ("hook_pattern", None, 9)]
    seen.clear()
    with pattern_blocks(model, 4):
        with pattern_blocks(model, 5):  # nested: the inner setting, then the outer one again
            model.run_with_hooks(tokens, fwd_hooks=hooks)
        assert [r for _, r, _ in seen] == [QueryRows(0, 5, 9)] * 2 + [QueryRows(5, 9, 9)] * 2
        assert all(r.rows.stop - r.rows.start == size for _, r, size in seen)
        assert all(a.query_block == 4 for a in (b.attn for b in model.blocks))
    assert all(a.query_block is None for a in (b.attn for b in model.blocks))
    assert model.blocks[1].attn.hook_pattern.query_rows is None


def test_caching_patterns_in_blocks_is_refused_and_the_rest_still_caches():
    """A caching hook keeps what it is handed: under blocks that is the last block only, so
    run_with_cache refuses the scores and the pattern, names the hook and says what to do."""
    model = _family("gpt2_like")
    tokens, _ = tiny_batch(model.cfg)
    _, full = model.run_with_cache(tokens)
    rest = lambda n: "hook_pattern" not in n and "scores" not in n  # noqa: E731
    _, unblocked_rest = model.run_with_cache(tokens, names_filter=rest)
    _, one = model.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")
    with pattern_blocks(model, 4):
        for names in (None, "blocks.1.attn.hook_pattern", lambda n: n.endswith("hook_attn_scores")):
            with pytest.raises(ValueError, match=r"blocks\.0\.attn\.hook_pattern|blocks\.1\.attn\.hook_pattern"):
                model.run_with_cache(tokens, names_filter=names)
        _, part = model.run_with_cache(tokens, names_filter=rest)
    assert list(part.keys()) == [k for k in full.keys() if rest(k)]
    assert all(torch.equal(part[k], unblocked_rest[k]) for k in part.keys())
    _, again = model.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")  # outside: allowed
    assert torch.equal(again["blocks.1.attn.hook_pattern"], one["blocks.1.attn.hook_pattern"])
    assert again["blocks.1.attn.hook_pattern"].shape[-2:] == (tokens.shape[1], tokens.shape[1])  # every row


@pytest.mark.parametrize("rows", [0, -3, 2.5, True, "8"])
def test_bad_block_size_is_an_error(rows):
    with pytest.raises(ValueError, match="rows must be a positive int"):
        with pattern_blocks(_family("gpt2_like"), rows):
            pass


def test_a_model_without_our_attention_is_an_error():
    with pytest.raises(ValueError, match="has no models.transformer.Attention"):
        with pattern_blocks(torch.nn.Linear(2, 2), 4):
            pass


def test_row_blocks_add_up_and_refuse_gaps():
    acc = RowBlocks()
    assert acc.add("a", QueryRows(0, 3, 7), {"s": torch.tensor([1.0])}) is None
    assert acc.add("a", QueryRows(3, 6, 7), {"s": torch.tensor([2.0])}) is None
    assert acc.pending == ["a"]
    assert acc.add("a", QueryRows(6, 7, 7), {"s": torch.tensor([4.0])})["s"].item() == 7.0
    assert acc.pending == []
    assert acc.add("b", None, {"s": torch.tensor([5.0])})["s"].item() == 5.0
    acc.add("c", QueryRows(0, 3, 7), {"s": torch.tensor([1.0])})
    with pytest.raises(RuntimeError, match="query rows 4:7 of 7 arrived; expected rows from 3"):
        acc.add("c", QueryRows(4, 7, 7), {"s": torch.tensor([1.0])})


def test_role_scores_of_blocks_add_up_to_the_whole():
    """The probe's scorers on row blocks of one pattern: every token role and the relation columns
    add up to the whole pattern's, within float32 reassociation (each score sums <= t + k terms of
    total weight <= 1: 2 gamma_{t+k}; the columns' weights reach 2)."""
    torch.manual_seed(0)
    b, h, t = 3, 2, 11
    mask = torch.ones(b, t, dtype=torch.bool)
    mask[1, 8:] = False
    tokens = torch.randint(0, 4, (b, t))
    sets = torch.rand(b, t, len(head_roles.SET_ROLES)) < 0.3
    sets[:, 0, 0] = True
    plan = scoring.token_plan(mask, True, sets, detect=scoring.duplicate_detection(tokens, mask))
    logits = torch.randn(b, h, t, t).masked_fill(~scoring.visible_keys(mask, True)[:, None], float("-inf"))
    p = torch.softmax(logits, -1).nan_to_num()
    roles = [*head_roles.OFFSET_ROLES, "local", *head_roles.SET_ROLES, "broad", "duplicate_token", "induction"]
    whole = scoring.token_role_scores(p, plan, roles)
    words = torch.randint(0, 3, (b, t, 4)).float()
    every = torch.ones(b, 2, 4, dtype=torch.bool)
    rel = scoring.RelationPlan(
        row_weights=torch.rand(b, 2, t) / t,
        columns=words,
        gold=torch.zeros(b, 2).long(),
        others=every,
        valid=every[..., 0],
    )
    cols = scoring.relation_columns(p, rel)
    tol = 2 * gamma(2 * t)
    for step in (1, 3, 5):
        acc = RowBlocks()
        for s in range(0, t, step):
            r = QueryRows(s, min(s + step, t), t)
            part = scoring.token_role_scores(p[:, :, r.rows], plan, roles, r.rows)
            part["cols"] = scoring.relation_columns(p[:, :, r.rows], rel, r.rows)
            total = acc.add("layer", r, part)
        for role in whole:
            assert (total[role] - whole[role]).abs().max() <= tol, (role, step)
        assert (total["cols"] - cols).abs().max() <= 2 * tol  # a token's column weight is at most 2


def test_probe_with_blocks_gives_the_same_table():
    """``probe_items(query_block=...)``: the same labels and, within float32 reassociation of sums
    over <= 16 rows and the tiny kernels' pattern bound (both < 1e-6 here), the same numbers."""
    import numpy as np

    model = planted_model("causal")
    kw = dict(n_repeat=20, seed=0, n_boot=30, null_n=20, weighting=("attention", "norm"))
    items = planted_items(40, seed=1)
    whole = heads.probe_items(model, items, **kw)
    blocked = heads.probe_items(model, items, query_block=3, **kw)
    num = [c for c in whole.columns if whole[c].dtype.kind == "f"]
    assert whole.drop(columns=num).astype(str).equals(blocked.drop(columns=num).astype(str))
    a, b = whole[num].to_numpy(float), blocked[num].to_numpy(float)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.nanmax(np.abs(a - b)) < 1e-6


@pytest.mark.parametrize("key", ["llama_like", "sliding"])
def test_no_whole_mask_is_built_where_no_path_needs_one(key, monkeypatch):
    """The masks are a recipe until asked (``models.masks.Masks``): an unpadded causal forward on the
    fused path builds none (SDPA gets the causal flag; a sliding layer still gets HF's mask, as HF
    passes it), and the eager path in blocks of 3 rows builds masks of at most 3 query rows, never the
    n x n one; the outputs are the whole-mask run's."""
    model = _family(key)
    tokens, _ = tiny_batch(model.cfg)
    n = tokens.shape[1]
    built: list[tuple[int, int]] = []
    original = Masks._build

    def counting(self, rows):
        out = original(self, rows)
        if out[0] is not None:
            built.append((out[0].shape[2], self.window or 0))
        return out

    monkeypatch.setattr(Masks, "_build", counting)
    with torch.no_grad():
        model(tokens)
        fused = list(built)
        built.clear()
        with pattern_blocks(model, 3):
            blocked = model(tokens, exact=True)
        in_blocks = list(built)
        built.clear()
        whole = model(tokens, exact=True)
    assert all(window for _, window in fused), fused  # only the sliding layers' mask, as HF's SDPA call has it
    assert in_blocks and max(rows for rows, _ in in_blocks) <= 3, in_blocks
    assert max(rows for rows, _ in built) == n  # the whole-pattern eager path builds the whole mask
    torch.testing.assert_close(blocked, whole, rtol=1e-4, atol=1e-5)  # blocks: other GEMM shapes (the bound above)
