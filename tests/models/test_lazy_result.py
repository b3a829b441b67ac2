"""``attn.hook_result`` in ``run_with_cache`` is computed on read from the cached ``hook_z``
(interp.hooks.LazyCacheDict): the same bits as the per-head result the forward pass computes when
a hook watches it, the same keys in the same order, and the ordinary path whenever something else
watches the hook point (an edit by a ``hook_result`` hook still takes effect; backward hooks fire)."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from interp.hooks import LazyCacheDict, _Pending
from tests.factories import TINY, randomized, tiny_config

RESULT = "blocks.1.attn.hook_result"


def _watch(tensor, hook):  # a read-only hook: makes the forward materialise the per-head result
    return None


def _eager_cache(model, tokens, **kwargs):
    """The cache as it was before: a hook on every hook_result makes the forward compute it."""
    names = [f"blocks.{layer}.attn.hook_result" for layer in range(model.cfg.n_layers)]
    with model.hooks(fwd_hooks=[(name, _watch) for name in names]):
        return model.run_with_cache(tokens, **kwargs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


@pytest.fixture(scope="module", params=["llama_like", "gpt2_like", "bert_like", "alibi_bidir_gqa"])
def model_and_tokens(request):
    model = randomized(tiny_config(**TINY[request.param]), seed=3)
    tokens = torch.randint(0, model.cfg.d_vocab, (3, 11), generator=torch.Generator().manual_seed(0))
    return model, tokens


def test_lazy_result_equals_the_forward_result_bitwise_with_the_same_keys(model_and_tokens):
    model, tokens = model_and_tokens
    _, lazy = model.run_with_cache(tokens)
    _, eager = _eager_cache(model, tokens)
    raw = lazy.cache_dict
    assert isinstance(raw, LazyCacheDict)
    _, plain = model.run_with_cache(tokens, return_cache_object=False)
    assert type(plain) is dict and torch.equal(plain[RESULT], eager[RESULT])
    assert isinstance(dict.__getitem__(raw, RESULT), _Pending)  # not computed by the run
    assert list(lazy.keys()) == list(eager.keys())  # same names, same (forward) order
    for layer in range(model.cfg.n_layers):
        name = f"blocks.{layer}.attn.hook_result"
        assert torch.equal(_bits(lazy[name]), _bits(eager[name])), name
    for name in eager.keys():  # everything else unchanged too
        assert torch.equal(lazy[name], eager[name]), name


def test_tl_cache_methods_see_the_real_values(model_and_tokens):
    model, tokens = model_and_tokens
    _, lazy = model.run_with_cache(tokens)
    _, eager = _eager_cache(model, tokens)
    a, labels_a = lazy.stack_head_results(layer=-1, return_labels=True)
    b, labels_b = eager.stack_head_results(layer=-1, return_labels=True)
    assert labels_a == labels_b and torch.equal(a, b)
    if model.cfg.norm_placement == "pre":
        assert torch.equal(lazy.decompose_resid(layer=-1), eager.decompose_resid(layer=-1))


def test_only_the_result_asked_for_computes_from_a_hidden_z(model_and_tokens):
    model, tokens = model_and_tokens
    wanted = [RESULT, "blocks.1.hook_resid_post"]  # no pattern hook: the fused attention path, both runs
    _, eager = _eager_cache(model, tokens, names_filter=wanted)
    _, lazy = model.run_with_cache(tokens, names_filter=wanted)
    assert list(lazy.keys()) == [RESULT, "blocks.1.hook_resid_post"]
    assert "blocks.1.attn.hook_z" not in lazy
    assert torch.equal(_bits(lazy[RESULT]), _bits(eager[RESULT]))


def test_batch_dim_removed_like_the_other_entries():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=4)
    tokens = torch.randint(0, model.cfg.d_vocab, (1, 9), generator=torch.Generator().manual_seed(1))
    _, lazy = model.run_with_cache(tokens, remove_batch_dim=True)
    _, eager = _eager_cache(model, tokens, remove_batch_dim=True)
    assert lazy[RESULT].shape == (9, model.cfg.n_heads, model.cfg.d_model)
    assert torch.equal(_bits(lazy[RESULT]), _bits(eager[RESULT]))


def test_a_weight_edit_after_the_run_does_not_change_the_cached_result():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=5)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 7), generator=torch.Generator().manual_seed(2))
    _, eager = _eager_cache(model, tokens)
    _, lazy = model.run_with_cache(tokens)
    with torch.no_grad():
        model.blocks[1].attn.o_weight.mul_(2.0)
    assert torch.equal(lazy[RESULT], eager[RESULT])


def test_every_way_of_reading_gives_tensors():
    model = randomized(tiny_config(**TINY["gpt2_like"]), seed=6)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 5), generator=torch.Generator().manual_seed(3))
    _, eager = _eager_cache(model, tokens)
    for read in (
        lambda c: dict(c)[RESULT],
        lambda c: dict(c.items())[RESULT],
        lambda c: [v for k, v in zip(c.keys(), c.values()) if k == RESULT][0],
        lambda c: c.copy()[RESULT],
        lambda c: c.get(RESULT),
        lambda c: c.pop(RESULT),
        lambda c: pickle.loads(pickle.dumps(c))[RESULT],
        lambda c: copy.deepcopy(c)[RESULT],
    ):
        _, cache = model.run_with_cache(tokens)
        value = read(cache.cache_dict)
        assert isinstance(value, torch.Tensor) and torch.equal(value, eager[RESULT])


def test_an_edit_by_a_result_hook_still_takes_effect_and_is_cached():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=7)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(4))
    clean = model(tokens)

    def zero_head(result, hook):
        result[:, :, 1] = 0.0
        return result

    with model.hooks(fwd_hooks=[(RESULT, zero_head)]):
        logits, cache = model.run_with_cache(tokens)
    assert not torch.equal(logits, clean)
    assert not isinstance(dict.__getitem__(cache.cache_dict, RESULT), _Pending)  # the ordinary path
    assert torch.count_nonzero(cache[RESULT][:, :, 1]) == 0


def test_backward_hooks_on_the_result_still_fire():
    model = randomized(tiny_config(**TINY["llama_like"]), seed=8)
    tokens = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=torch.Generator().manual_seed(5))
    _, cache = model.run_with_cache(tokens, return_type="loss", incl_bwd=True)
    assert RESULT + "_grad" in cache
    grad = cache[RESULT + "_grad"]
    assert grad.shape == (2, 6, model.cfg.n_heads, model.cfg.d_model) and torch.count_nonzero(grad) > 0
