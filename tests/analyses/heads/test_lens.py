"""Norm-based attention (Kobayashi et al. 2020): hand-computed norms, and the planted head that
attends to '.' but moves nothing from it (a delimiter by weight, a no-op sink by norm)."""

from __future__ import annotations

import pytest
import torch

from analyses import heads
from analyses.heads.scoring import norm_weighted, value_norms
from tests.factories import planted_items, planted_model, tiny_model


@pytest.mark.parametrize("key", ["gpt2_like", "llama_like"])  # llama_like: grouped-query attention
def test_norm_weighting_matches_a_hand_computation(key):
    model = tiny_model(key)
    cfg = model.cfg
    tokens = torch.randint(0, cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    pattern, v = cache["blocks.1.attn.hook_pattern"], cache["blocks.1.attn.hook_v"]
    W_O = model.blocks[1].attn.W_O.detach()
    got = norm_weighted(pattern, value_norms(v, W_O))
    group = cfg.n_heads // v.shape[2]
    want = torch.zeros_like(got)
    for b in range(2):
        for h in range(cfg.n_heads):
            for q in range(6):
                row = torch.stack(
                    [torch.linalg.vector_norm(pattern[b, h, q, k] * (v[b, k, h // group] @ W_O[h])) for k in range(6)]
                )
                want[b, h, q] = row / row.sum()
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    torch.testing.assert_close(got.sum(-1), torch.ones_like(got.sum(-1)), rtol=0, atol=1e-6)


def test_a_head_that_moves_nothing_from_its_delimiter_is_a_noop_sink():
    m = planted_model(values=True)
    df = heads.probe_items(
        m, planted_items(120, seed=1), n_repeat=0, seed=0, n_boot=50, null_model=False, weighting=("attention", "norm")
    )
    delim = df[(df["role"] == "delimiter") & (df["head"] == 1)].set_index("weighting")
    assert delim.loc["attention", "label"] and delim.loc["attention", "score"] > 0.9
    assert not delim.loc["norm", "label"] and delim.loc["norm", "score"] < delim.loc["norm", "baseline"]
    assert delim.loc["norm", "family"] == "delimiter@norm"
    # the map calls it what it is (the previous-token head, whose values are not zero, keeps its role);
    # a no-op sink is the map's sink layer, not a primary role: the head does nothing else, so it idles
    rmap = heads.role_map(df).set_index("head")
    assert rmap.loc[1, "primary"] == "no-op sink" and rmap.loc[1, "sink"] == "noop_sink"
    assert rmap.loc[0, "primary"] in ("previous_token", "local")
    # norm rows other than the boundary roles' are descriptive
    other = df[(df["weighting"] == "norm") & ~df["role"].isin(heads.NORM_LABEL_ROLES)]
    assert (other["family"] == "").all() and not other["label"].any()


def test_weighting_must_start_with_attention():
    with pytest.raises(ValueError, match="weighting"):
        heads.probe_items(planted_model(), planted_items(4, seed=0), weighting=("norm",), null_model=False, n_repeat=0)
