import copy

import pytest
import torch

import models
from interp import interventions as iv
from tests.factories import tiny_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one thread is fastest on shared cores


def _tokens(batch=5, pos=9, vocab=50, seed=0):
    return torch.randint(0, vocab, (batch, pos), generator=torch.Generator().manual_seed(seed))


def _no_hooks(model):
    return all(not hp._forward_hooks and not hp._backward_hooks for hp in model.hook_dict.values())


def _model(**kw):
    return models.Transformer(tiny_config(**kw), seed=1).eval()


def test_zero_ablation_equals_zeroing_the_heads_output_weights():
    model = _model()
    tok = _tokens()
    heads = [(0, 1), (1, 3)]
    got = iv.run_ablated(model, tok, heads, kind="zero")
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in heads:
            ref.blocks[layer].attn.W_O[head].zero_()
    torch.testing.assert_close(got, ref(tok), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(got, model(tok), atol=1e-4)  # the ablation changed something
    assert _no_hooks(model)


def test_mean_ablation_equals_head_output_replaced_by_a_constant_bias():
    model = _model(attn_out_bias=True)
    tok = _tokens()
    layer, head = 1, 2
    _, cache = model.run_with_cache(tok, names_filter=f"blocks.{layer}.attn.hook_z")
    mean_z = cache[f"blocks.{layer}.attn.hook_z"][:, :, head].mean((0, 1))  # [d_head]
    ref = copy.deepcopy(model)
    with torch.no_grad():
        attn = ref.blocks[layer].attn
        attn.b_O.add_(mean_z @ attn.W_O[head])
        attn.W_O[head].zero_()
    got = iv.run_ablated(model, tok, [(layer, head)], kind="mean")
    torch.testing.assert_close(got, ref(tok), rtol=1e-5, atol=1e-5)


def test_mean_ignores_padding():
    model = _model()
    tok = _tokens(batch=4, pos=8)
    mask = torch.ones_like(tok)
    mask[0, 5:] = 0
    mask[2, 3:] = 0
    _, z = iv.cache_z(model, tok, [0], attention_mask=mask)
    src = iv.ablation_source(z, "mean", attention_mask=mask)
    real = z[0][mask.bool()]  # [n_real, head, d_head]
    torch.testing.assert_close(src[0][1, 2], real.mean(0))


def test_resample_takes_another_prompt_of_the_same_group_and_is_seeded():
    model = _model()
    tok = _tokens(batch=6)
    _, z = iv.cache_z(model, tok, [0])
    groups = ["a", "a", "a", "b", "b", "b"]
    s1 = iv.ablation_source(z, "resample", groups=groups, seed=3)[0]
    s2 = iv.ablation_source(z, "resample", groups=groups, seed=3)[0]
    torch.testing.assert_close(s1, s2)
    for i in range(6):
        matches = [j for j in range(6) if torch.equal(s1[i], z[0][j])]
        assert matches and i not in matches
        assert all(groups[j] == groups[i] for j in matches)
    with pytest.raises(ValueError, match="at least two prompts"):
        iv.ablation_source(z, "resample", groups=["a"] * 5 + ["b"])


def test_sweep_through_transformer_lens_matches_single_ablations():
    model = _model()
    tok = _tokens()
    out, z = iv.cache_z(model, tok, [0, 1])
    src = iv.ablation_source(z, "zero")
    heads = [(0, 0), (1, 3), (0, 2)]
    metric = {"first_logit": lambda logits: logits[:, -1, 0], "mean": lambda logits: logits.mean((1, 2))}
    res = iv.head_sweep(model, tok, src, metric, heads=heads)
    assert res["first_logit"].shape == (3, 5)
    for i, h in enumerate(heads):
        ref = copy.deepcopy(model)
        with torch.no_grad():
            ref.blocks[h[0]].attn.W_O[h[1]].zero_()
        r = ref(tok)
        torch.testing.assert_close(torch.as_tensor(res["first_logit"][i]), r[:, -1, 0], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.as_tensor(res["mean"][i]), r.mean((1, 2)), rtol=1e-5, atol=1e-5)
    assert _no_hooks(model)


def test_sweep_with_padding_uses_the_mask():
    model = _model()
    tok = _tokens(batch=3, pos=8)
    mask = torch.ones_like(tok)
    mask[1, 4:] = 0
    src = iv.ablation_source(iv.cache_z(model, tok, [1], attention_mask=mask)[1], "zero")
    res = iv.head_sweep(model, tok, src, {"m": lambda lg: lg[:, 3, 7]}, heads=[(1, 0)], attention_mask=mask)
    # row 1 run alone, unpadded, with the same head zeroed
    ref = copy.deepcopy(model)
    with torch.no_grad():
        ref.blocks[1].attn.W_O[0].zero_()
    alone = ref(tok[1:2, :4])
    torch.testing.assert_close(torch.as_tensor(res["m"][0, 1]), alone[0, 3, 7], rtol=1e-5, atol=1e-5)


def test_gqa_ablates_one_query_head_only():
    model = _model(n_heads=4, n_kv_heads=2)
    tok = _tokens()
    got = iv.run_ablated(model, tok, [(0, 1)], kind="zero")
    ref = copy.deepcopy(model)
    with torch.no_grad():
        ref.blocks[0].attn.W_O[1].zero_()
    torch.testing.assert_close(got, ref(tok), rtol=1e-5, atol=1e-5)
    other = iv.run_ablated(model, tok, [(0, 0)], kind="zero")  # its kv partner: a different effect
    assert not torch.allclose(got, other, atol=1e-5)


def test_patching_a_head_from_the_clean_run():
    model = _model()
    clean, corrupted = _tokens(seed=1), _tokens(seed=2)
    metric = {"m": lambda lg: lg[:, -1, :5].sum(-1)}
    same = iv.patch_heads(model, corrupted, corrupted, metric, heads=[(0, 1), (1, 2)])
    base = model(corrupted)[:, -1, :5].sum(-1)
    for row in same["m"]:  # patching a run with its own activations changes nothing
        torch.testing.assert_close(torch.as_tensor(row), base, rtol=1e-5, atol=1e-5)
    res = iv.patch_heads(model, clean, corrupted, metric, heads=[(1, 2)])
    _, cache = model.run_with_cache(clean, names_filter="blocks.1.attn.hook_z")
    clean_z = cache["blocks.1.attn.hook_z"]

    def put(z, hook):
        z = z.clone()
        z[:, :, 2] = clean_z[:, :, 2]
        return z

    ref = model.run_with_hooks(corrupted, fwd_hooks=[("blocks.1.attn.hook_z", put)])[:, -1, :5].sum(-1)
    torch.testing.assert_close(torch.as_tensor(res["m"][0]), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        iv.patch_heads(model, clean[:, :5], corrupted, metric)


def test_no_hooks_left_behind_after_an_exception():
    model = _model()
    tok = _tokens()
    src = iv.ablation_source(iv.cache_z(model, tok, [0])[1], "mean")

    def bad(logits):
        raise RuntimeError("metric failed")

    with pytest.raises(RuntimeError, match="metric failed"):
        iv.head_sweep(model, tok, src, {"bad": bad}, heads=[(0, 0)])
    assert _no_hooks(model)
    with pytest.raises(RuntimeError, match="inside"):
        with iv.ablated(model, [(0, 0)], src):
            assert not _no_hooks(model)  # attached inside the block
            raise RuntimeError("inside")
    assert _no_hooks(model)
    with pytest.raises(ValueError, match="replacement values"):  # a hook that raises mid-forward
        iv.run_ablated(model, tok[:2], [(0, 0)], source=src)
    assert _no_hooks(model)


def test_bad_arguments_are_explained():
    model = _model()
    with pytest.raises(ValueError, match="does not exist"):
        iv.normalize_heads(model, [(2, 0)])
    with pytest.raises(ValueError, match="unknown"):
        iv.ablation_source({0: torch.zeros(1, 2, 4, 8)}, "noise")


def test_transformer_lens_stock_patching_runs_on_our_model_directly():
    from transformer_lens.patching import get_act_patch_attn_head_out_all_pos

    model = _model()
    clean, corrupted = _tokens(seed=3), _tokens(seed=4)
    _, cache = model.run_with_cache(clean)
    metric = lambda logits: logits[:, -1, 3].mean()  # noqa: E731
    stock = get_act_patch_attn_head_out_all_pos(model, corrupted, cache, metric)  # [layer, head]
    ours = iv.patch_heads(model, clean, corrupted, {"m": lambda lg: lg[:, -1, 3]})["m"].mean(1)
    torch.testing.assert_close(stock.flatten(), torch.as_tensor(ours, dtype=stock.dtype), rtol=1e-5, atol=1e-5)
    assert stock.abs().max() > 1e-3  # patching changed something: the comparison can fail


def test_stock_patching_on_a_padded_batch_takes_the_mask_through_inputs_bound():
    """TransformerLens's patching calls ``run_with_hooks(tokens, fwd_hooks=...)`` with the tokens
    only; ``inputs_bound`` gives every call on those tokens the batch's mask. A left-padded row then
    patches exactly as it does alone, unpadded; without the mask it does not."""
    from transformer_lens.patching import get_act_patch_attn_head_out_all_pos

    model = _model()
    clean, corrupted = _tokens(batch=2, pos=8, seed=5), _tokens(batch=2, pos=8, seed=6)
    mask = torch.ones_like(corrupted)
    mask[1, :3] = 0  # row 1 is left-padded by 3
    _, cache = model.run_with_cache(clean, attention_mask=mask)
    metric = lambda logits: logits[1, -1, 3]  # noqa: E731  the padded row's last logit
    with model.inputs_bound(corrupted, attention_mask=mask):
        bound = get_act_patch_attn_head_out_all_pos(model, corrupted, cache, metric)
    assert model._bound_inputs is None  # the binding ends with the block
    with pytest.raises(TypeError, match="attention_mask"):  # a misspelt argument is not silently dropped
        with model.inputs_bound(corrupted, mask=mask):
            pass
    _, alone_cache = model.run_with_cache(clean[1:, 3:])
    alone = get_act_patch_attn_head_out_all_pos(model, corrupted[1:, 3:], alone_cache, lambda logits: logits[0, -1, 3])
    torch.testing.assert_close(bound, alone, rtol=1e-5, atol=1e-5)
    unmasked = get_act_patch_attn_head_out_all_pos(model, corrupted, cache, metric)
    assert (unmasked - alone).abs().max() > 1e-3
    # head_sweep binds the mask the same way
    res = iv.patch_heads(model, clean, corrupted, {"m": lambda lg: lg[:, -1, 3]}, attention_mask=mask)["m"]
    torch.testing.assert_close(torch.as_tensor(res[:, 1], dtype=bound.dtype), bound.flatten(), rtol=1e-5, atol=1e-5)


def test_head_sweep_binds_the_mask_on_a_bridge_too(minilm, minilm_bridge):
    """A TransformerLens bridge has no ``inputs_bound``: head_sweep passes the mask through a private
    stand-in. The padded row then sweeps exactly as it does alone, unpadded."""
    batch = minilm.to_words(["The cat sleeps on the warm mat.", "Rain fell."])
    tokens, mask = batch.input_ids, batch.attention_mask
    n = int(mask[1].sum())
    heads = [(0, 1), (3, 5)]
    metric = {"m": lambda out: out[:, 1, :5].sum(-1)}  # MLM logits of the second token
    _, z = iv.cache_z(minilm_bridge, tokens, [0, 3], attention_mask=mask)
    padded = iv.head_sweep(minilm_bridge, tokens, iv.ablation_source(z, "zero"), metric, heads, attention_mask=mask)
    _, z1 = iv.cache_z(minilm_bridge, tokens[1:, :n], [0, 3])
    alone = iv.head_sweep(minilm_bridge, tokens[1:, :n], iv.ablation_source(z1, "zero"), metric, heads)
    torch.testing.assert_close(
        torch.as_tensor(padded["m"][:, 1]), torch.as_tensor(alone["m"][:, 0]), rtol=1e-5, atol=1e-5
    )
    unmasked = iv.head_sweep(minilm_bridge, tokens, iv.ablation_source(z, "zero"), metric, heads)
    assert abs(unmasked["m"][:, 1] - alone["m"][:, 0]).max() > 1e-3


@pytest.mark.parametrize("kw", [{}, {"attention": "bidirectional", "positional": "rope", "n_kv_heads": 2}])
def test_sweep_from_the_cached_layer_input_is_bitwise_the_full_pass(kw):
    """Starting each ablated run from the ablated layer's cached input changes nothing below it,
    so it must give exactly the numbers of TransformerLens's full-pass sweep (padding included)."""
    model = _model(**kw)
    tok = _tokens(batch=4, pos=8)
    mask = torch.ones_like(tok)
    mask[1, 5:] = 0
    mask[2, :2] = 0
    src = iv.ablation_source(iv.cache_z(model, tok, [0, 1], attention_mask=mask)[1], "mean", attention_mask=mask)
    metric = {"a": lambda out: out[:, -1, 3], "b": lambda out: out.float().mean((1, 2))}
    heads = [(0, 1), (1, 0), (1, 3)]
    fast = iv.head_sweep(model, tok, src, metric, heads=heads, attention_mask=mask)
    full = iv.head_sweep(model, tok, src, metric, heads=heads, attention_mask=mask, from_layer=False)
    for name in metric:
        assert fast[name].shape == full[name].shape == (3, 4)
        assert (fast[name] == full[name]).all(), name
    assert _no_hooks(model)


def test_run_from_layer_continues_the_forward_pass_exactly():
    model = _model(positional="rope")
    tok = _tokens(batch=2, pos=7)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tok, return_cache_object=False)
        again = model.run_from_layer(1, cache["blocks.1.hook_resid_pre"], exact=True)  # as the full cache ran
    assert torch.equal(again, logits)
    with pytest.raises(ValueError, match="layers 0..1"):
        model.run_from_layer(2, cache["blocks.1.hook_resid_pre"])


def test_run_from_layer_with_a_kv_cache_runs_the_new_rows_as_the_full_pass_does():
    """The catalogue's answer-position patching: the prefix cached once, the last row run from layer 1
    with the cache repeated 3 times (``KVCache.repeat``) equals the full pass's last row, on a left-
    padded batch too; the cache it was repeated from is left as it was."""
    from models.generate import KVCache

    model = _model(positional="rope")
    tok = _tokens(batch=2, pos=7)
    for mask in (None, torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * 7])):
        kw = {} if mask is None else {"attention_mask": mask}
        with torch.no_grad():
            full = model(tok, return_type="hidden", **kw)
            cache = KVCache(model.cfg.n_layers)
            model(
                tok[:, :-1],
                past_kv_cache=cache,
                return_type=None,
                attention_mask=None if mask is None else mask[:, :-1],
            )
            store = {}
            with model.hooks(fwd_hooks=[("blocks.1.hook_resid_pre", lambda x, hook: store.update(x=x))]):
                model(tok[:, -1:], past_kv_cache=cache.repeat(1), return_type=None)
            keys = cache.layers[1].k.clone()
            again = model.run_from_layer(
                1, store["x"].repeat(3, 1, 1), past_kv_cache=cache.repeat(3, 1), return_type="hidden"
            )
        assert torch.allclose(again[:, 0], full[:, -1].repeat(3, 1), atol=1e-5)
        assert cache.length == 6 and torch.equal(cache.layers[1].k, keys)
        assert cache.repeat(3, 1).layers[0].k is None  # the layers below the start stay empty


def test_patching_table_is_layer_by_head_and_normalised_by_the_clean_corrupted_gap():
    import warnings

    import numpy as np

    model = _model()
    clean, corrupted = _tokens(seed=1), _tokens(seed=2)

    def metric(lg):
        return lg[:, -1, :5].sum(-1)

    flat = iv.patch_heads(model, clean, corrupted, {"m": metric})["m"]  # [n_heads, batch], every head
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    raw = iv.head_table(model, flat)
    assert raw.shape == (n_layers, n_heads) and raw.index.name == "layer" and raw.columns.name == "head"
    np.testing.assert_allclose(raw.to_numpy(), flat.astype(float).mean(1).reshape(n_layers, n_heads), rtol=1e-12)
    with torch.no_grad():
        clean_v, corrupted_v = (float(metric(model(t)).double().mean()) for t in (clean, corrupted))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a clear gap: no warning
        table = iv.patching_table(model, clean, corrupted, metric, min_gap=0.0)
    assert table.attrs["gap"] == pytest.approx(clean_v - corrupted_v)
    np.testing.assert_allclose(table.to_numpy(), (raw.to_numpy() - corrupted_v) / (clean_v - corrupted_v), rtol=1e-9)
    # a metric that returns one number (TransformerLens's `.mean()` habit) gives the same table
    scalar = iv.patching_table(model, clean, corrupted, lambda lg: metric(lg).double().mean(), min_gap=0.0)
    np.testing.assert_allclose(scalar.to_numpy(), table.to_numpy(), rtol=1e-9)
    part = iv.head_table(model, flat[:2], heads=[(0, 0), (0, 1)])  # unlisted heads are NaN
    assert np.isnan(part.to_numpy()).sum() == n_layers * n_heads - 2 and part.loc[0, 1] == pytest.approx(
        flat[1].astype(float).mean(), rel=1e-12
    )


def test_patching_table_refuses_rows_of_different_lengths():
    """Issue 41 item 5: a ragged batch (a list of rows, a list of 1-d tensors) and a pair whose clean
    and corrupted rows have different real lengths (different masks) are refused in one line: patching
    copies activations position by position, so position i would meet another token or padding."""
    import numpy as np

    model = _model()

    def metric(lg):
        return lg[:, -1, 0] - lg[:, -1, 1]

    with pytest.raises(ValueError, match=r"clean_tokens: rows of different lengths \[3, 2\]"):
        iv.patching_table(model, [[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 6, 7]], metric, min_gap=0.0)
    rows = [torch.tensor([1, 2, 3]), torch.tensor([4, 5])]
    with pytest.raises(ValueError, match=r"corrupted_tokens: rows of different lengths \[3, 2\]"):
        iv.patching_table(model, [[1, 2, 3], [4, 5, 6]], rows, metric, min_gap=0.0)
    clean, corrupted = torch.tensor([[1, 2, 3], [4, 5, 6]]), torch.tensor([[1, 2, 3], [4, 5, 7]])
    full, short = torch.ones(2, 3, dtype=torch.long), torch.tensor([[1, 1, 1], [1, 1, 0]])
    with pytest.raises(ValueError, match="row 1: the clean prompt has 3 real tokens and the corrupted one 2"):
        iv.patching_table(model, clean, corrupted, metric, attention_mask=full, corrupted_attention_mask=short)
    # rows of one length, as tensors or lists, and one mask for both: the same table
    a = iv.patching_table(model, clean, corrupted, metric, min_gap=0.0)
    b = iv.patching_table(model, list(clean), [r.tolist() for r in corrupted], metric, min_gap=0.0)
    c = iv.patching_table(
        model, clean, corrupted, metric, attention_mask=full, corrupted_attention_mask=full, min_gap=0.0
    )
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.to_numpy(), c.to_numpy(), rtol=1e-6)


def test_patching_table_warns_when_the_gap_is_too_small_to_normalise_by():
    model = _model()
    clean, corrupted = _tokens(seed=1), _tokens(seed=2)

    def metric(lg):  # a metric the two prompts barely differ on
        return lg[:, -1, :5].sum(-1) * 1e-3

    with pytest.warns(UserWarning, match="too small a gap to normalise by"):
        table = iv.patching_table(model, clean, corrupted, metric)
    assert abs(table.attrs["gap"]) < iv.MIN_GAP
    with pytest.raises(TypeError, match="metric must be a callable"):
        iv.patching_table(model, clean, corrupted, {"m": metric})


def test_plot_head_table_draws_a_layer_by_head_heatmap():
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = _model()
    table = iv.head_table(
        model, iv.patch_heads(model, _tokens(seed=1), _tokens(seed=2), {"m": lambda lg: lg[:, -1, 0]})["m"]
    )
    ax = iv.plot_head_table(table, title="patching")
    assert ax.get_xlabel() == "head" and ax.get_ylabel() == "layer" and ax.get_title() == "patching"
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_array()).reshape(table.shape), table.to_numpy())
    plt.close(ax.figure)
    with pytest.raises(TypeError, match="table must be"):
        iv.plot_head_table(table.to_numpy())
