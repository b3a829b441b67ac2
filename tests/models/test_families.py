"""Every causal architecture of ``models/tiny.py`` (the Llama-like families of ``models/families.py``,
GPT-2, and the parallel and LayerNorm decoders of ``models/decoders.py``), on tiny random configs:
what the parity matrix (tests/models/test_parity_matrix.py: each path against Hugging Face, bitwise,
fp32 and bf16, unpadded, left- and right-padded; generation) does not check: the Config fields that
set each family apart, sliding windows that attend exactly zero outside, the hook table's shapes on
the new hook points, checkpoints that round-trip, cached generation past the window, refusals.

Each model is randomly initialised, every tensor perturbed (zero biases or unit norm weights could
hide a conversion mistake), saved with ``save_pretrained`` and read back by ``models.load``. Inputs
are 13 tokens, longer than the window of 4, so the sliding masks cut keys.
"""

from __future__ import annotations

import json

import pytest
import torch
import transformers

import models
from models.loading import UnsupportedModelError
from models.tiny import ARCHITECTURES, WINDOW, N, save_tiny, tiny_inputs

V = 97
# every causal architecture of models/tiny.py (BERT's tiny config is checked in tests/models/test_loading.py)
FAMILY_KEYS = sorted(k for k, t in ARCHITECTURES.items() if not t.encoder)


def _save(tmp_path, key: str):
    return save_tiny(key, tmp_path / key)


@pytest.fixture(scope="module", params=FAMILY_KEYS)
def family(request, tmp_path_factory):
    key = request.param
    folder, hf = _save(tmp_path_factory.mktemp(key), key)
    return key, models.load(str(folder)), hf


def _inputs(padding: str):
    return tiny_inputs(padding)


def _hf(hf, tokens, mask, implementation: str):
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # ours follow the mask; HF takes them as given
    hf.set_attn_implementation(implementation)
    try:
        with torch.no_grad():
            return hf(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                output_attentions=implementation == "eager",
                output_hidden_states=True,
                use_cache=False,
            )
    finally:
        hf.set_attn_implementation("eager")


def _diffs(model, out, cache, ref, real) -> dict[str, float]:
    """Max abs difference on real positions of the logits, hidden states and (if cached) patterns."""
    n = model.cfg.n_layers
    diffs = {"logits": (out - ref.logits)[real].abs().max().item()}
    if cache is None:
        return diffs
    for l in range(n):
        diffs[f"hidden {l}"] = (cache[f"blocks.{l}.hook_resid_pre"] - ref.hidden_states[l])[real].abs().max().item()
    diffs["hidden last"] = (cache["ln_final.hook_normalized"] - ref.hidden_states[n])[real].abs().max().item()
    if ref.attentions is not None:
        both = real[:, None, :, None] & real[:, None, None, :]
        for l in range(n):
            d = (cache[f"blocks.{l}.attn.hook_pattern"] - ref.attentions[l]).abs()
            diffs[f"pattern {l}"] = d[both.expand_as(d)].max().item()
    return diffs


def _not_attention(name: str) -> bool:
    """Every hook but the scores and the pattern: a cache of these keeps the fused path."""
    return not name.endswith(("hook_pattern", "hook_attn_scores"))


def _assert_bitwise(diffs: dict[str, float], what: str) -> None:
    worst = max(diffs, key=diffs.get)
    assert diffs[worst] == 0.0, f"{what}: max abs diff {diffs[worst]:.3g} at {worst}"


def test_caching_keeps_the_eager_bits_and_the_two_paths_differ(family):
    """Each path against Hugging Face, bitwise, is the parity matrix's claim (``eager``, ``fused``,
    ``bf16_*`` cells for every architecture here: tests/models/test_parity_matrix.py). What it does
    not check: a cache of every hook leaves the eager output's bits alone, and the two paths do give
    different last bits (else the two claims would be one)."""
    key, model, hf = family
    tokens, mask = _inputs("right")
    real = mask.bool()
    with torch.no_grad():
        out, _ = model.run_with_cache(tokens, attention_mask=mask)  # patterns cached: every layer eager
        plain = model(tokens, attention_mask=mask, exact=True)
        fused = model(tokens, attention_mask=mask)
    assert torch.equal(out, plain), f"{key}: caching every hook changed the eager output"
    if model.cfg.attn_softcap is not None or model.cfg.attn_sinks:  # always eager: SDPA cannot cap or sink
        assert torch.equal(fused, plain)
    else:
        gap = (fused - plain)[real].abs().max().item()
        assert 0.0 < gap <= 1e-5 * plain[real].abs().max().item(), f"{key}: eager vs fused {gap}"


def test_gemma2_has_no_hf_sdpa_reference(tmp_path):
    """HF's Gemma 2 has no SDPA attention at all (SDPA cannot soft-cap its scores), so the fused path
    has no reference there (the matrix's "no HF reference" cell reads it off this very error)."""
    _, hf = _save(tmp_path, "gemma2")
    tokens, mask = _inputs("none")
    with pytest.raises(ValueError, match="scaled_dot_product_attention"):
        _hf(hf, tokens, mask, "sdpa")


def test_the_configs_carry_what_sets_each_family_apart(family):
    key, model, _ = family
    cfg = model.cfg
    expected = ARCHITECTURES[key].expect
    assert expected, f"{key}: models/tiny.py names nothing that sets it apart"
    for field, value in expected.items():
        assert getattr(cfg, field) == value, (key, field, getattr(cfg, field))
    assert cfg.n_ctx == 64  # the window no longer caps the context


def test_a_sliding_layer_attends_exactly_zero_outside_its_window(family):
    key, model, _ = family
    cfg = model.cfg
    tokens, mask = _inputs("right")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, attention_mask=mask, names_filter=lambda n: n.endswith("hook_pattern"))
    q = torch.arange(N)[:, None]
    k = torch.arange(N)[None, :]
    for l in range(cfg.n_layers):
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        window = cfg.window(l)
        outside = k > q if window is None else (k > q) | (k <= q - window)
        assert (pattern[..., outside] == 0).all(), f"{key} layer {l}: weight outside its keys"
        if window is not None:  # the window binds: keys inside it carry the weight, the row sums to 1
            row = pattern[0, :, N - 1]
            inside = row[:, N - window :].sum(-1)
            assert (inside - row.sum(-1)).abs().max() < 1e-6  # nothing outside the window
            if model.blocks[l].attn.sinks is None:  # a learned sink takes the rest of the row (gpt-oss)
                assert inside.sub(1).abs().max() < 1e-6
        elif cfg.has_sliding_layers:  # a full layer beside sliding ones reads further back
            assert (pattern[0, :, N - 1, : N - WINDOW] > 0).all()


def test_qk_norm_hooks_sit_between_the_projection_and_rope(tmp_path):
    folder, hf = _save(tmp_path, "gemma3_text")
    model = models.load(str(folder))
    tokens, _ = _inputs("none")
    names = ("hook_q", "hook_q_normed", "hook_rot_q", "hook_k", "hook_k_normed", "hook_rot_k")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.rsplit(".", 1)[-1] in names)
    attn = hf.model.layers[0].self_attn
    with torch.no_grad():
        x = hf.model.layers[0].input_layernorm(hf.model.embed_tokens(tokens))
        q = attn.q_proj(x).view(3, N, -1, 8)
    assert torch.equal(cache["blocks.0.attn.hook_q"], q)
    assert torch.equal(cache["blocks.0.attn.hook_q_normed"], attn.q_norm(q))
    assert not torch.equal(cache["blocks.0.attn.hook_rot_q"], cache["blocks.0.attn.hook_q_normed"])
    # a hook on the normed queries changes the output (the hook point is live)
    with torch.no_grad():
        base = model(tokens)
        edited = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_q_normed", lambda t, hook: t * 0)])
    assert not torch.equal(base, edited)


def test_gemma_hook_attn_out_is_after_the_post_attention_norm(tmp_path):
    folder, _ = _save(tmp_path, "gemma3_text")
    model = models.load(str(folder))
    tokens, _ = _inputs("none")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    for l in range(model.cfg.n_layers):
        p = f"blocks.{l}."
        assert torch.equal(cache[p + "hook_attn_out"], cache[p + "ln1_post.hook_normalized"])
        assert torch.equal(cache[p + "hook_mlp_out"], cache[p + "ln2_post.hook_normalized"])
        assert torch.equal(cache[p + "hook_resid_mid"], cache[p + "hook_resid_pre"] + cache[p + "hook_attn_out"])
        # the heads' outputs sum to the attention output before the post-norm, not to hook_attn_out
        heads = cache[p + "attn.hook_result"].sum(2)
        assert not torch.allclose(heads, cache[p + "hook_attn_out"], atol=1e-3)


@pytest.mark.parametrize("model_type", ["t5", "gemma3"])
def test_an_unsupported_architecture_names_itself_and_the_supported_ones(tmp_path, model_type):
    folder, _ = _save(tmp_path, "qwen3")
    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = model_type
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match=f"'{model_type}' is not supported") as info:
        models.load(str(folder))
    message = str(info.value)
    assert "\n" not in message and len(message) < 550  # the folder, and every one of the 28 supported types
    if model_type == "gemma3":  # the multimodal config: the text model is named
        assert "Gemma3ForCausalLM, is 'gemma3_text'" in message
    for supported in ("gemma2", "gemma3_text", "olmo2", "phi3", "qwen3", "mistral"):
        assert supported in message


def test_scaled_rope_of_gemma3_sliding_layers_is_refused_in_one_line(tmp_path):
    """Gemma 3's larger checkpoints scale the global layers' RoPE (supported: ``gemma3_text_linear``
    in models/tiny.py); a scaled type on the sliding layers has no Hugging Face checkpoint and is refused."""
    folder, _ = _save(tmp_path, "gemma3_text")
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"]["sliding_attention"] = {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e4}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedModelError, match=r"rope_scaling type 'linear' \(sliding_attention layers\)") as e:
        models.load(str(folder))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key", ["gemma3_text", "mistral", "phi3_longrope"])
def test_cached_generation_past_the_window_matches_rerunning_the_whole_sequence(tmp_path, key):
    """With a ``KVCache`` the sliding layers mask the keys that fell out of the window (the cache
    keeps them, Hugging Face's sliding cache drops them): greedy decoding 12 tokens past a prompt
    of 3 picks the same tokens as rerunning the whole sequence each step and as HF's ``generate``."""
    folder, hf = _save(tmp_path, key)
    model = models.load(str(folder))
    prompt = torch.randint(1, V, (2, 3), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        cached = model.generate(prompt, max_new_tokens=3 * WINDOW, do_sample=False, stop_at_eos=False)
        rerun = model.generate(
            prompt, max_new_tokens=3 * WINDOW, do_sample=False, stop_at_eos=False, use_past_kv_cache=False
        )
        hf.generation_config.eos_token_id = None  # HF stops at EOS and pads; ours is told not to stop
        reference = hf.generate(prompt, max_new_tokens=3 * WINDOW, do_sample=False)
    assert cached.shape == (2, 3 + 3 * WINDOW)
    assert torch.equal(cached, rerun)
    assert torch.equal(cached, reference)


def test_every_hook_has_the_shape_the_table_gives_it(family):
    """The new hook points (QK-norm, the post-norms) fire with the shapes ``_HOOK_SHAPES`` (and so
    docs/hooks.md) gives them, axes read off the config."""
    key, model, _ = family
    cfg = model.cfg
    tokens, mask = _inputs("right")
    sizes = dict(batch=3, pos=N, query_pos=N, key_pos=N, head=cfg.n_heads, kv_head=cfg.kv_heads)
    sizes |= dict(d_model=cfg.d_model, d_head=cfg.d_head, d_mlp=cfg.d_mlp, vocab=cfg.d_vocab)
    sizes |= dict(expert=cfg.n_experts, top_k=cfg.top_k)
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, attention_mask=mask)
    table = dict(model.hook_table())
    assert set(cache) == set(table) == set(model.hook_names())
    bad = []
    for name, value in cache.items():
        axes = table[name].strip("[]").split(", ")
        width = {"d_mlp": cfg.d_shared_expert} if ".mlp.shared." in name else {}  # Qwen2-MoE's shared expert
        expected = tuple(1 if a == "1" else (sizes | width)[a] for a in axes)
        if tuple(value.shape) != expected:
            bad.append(f"{name}: {tuple(value.shape)} vs {table[name]}")
    assert not bad, bad
    if cfg.qk_norm != "none":
        assert "blocks.0.attn.hook_q_normed" in cache and "blocks.0.attn.hook_k_normed" in cache
    if cfg.norm_placement in ("sandwich", "reordered"):
        assert "blocks.0.ln1_post.hook_normalized" in cache and "blocks.0.ln2_post.hook_scale" in cache
    assert ("blocks.0.ln1.hook_scale" in cache) == (cfg.norm_placement != "reordered")


def test_a_converted_family_round_trips_through_a_toolkit_checkpoint(tmp_path, family):
    key, model, _ = family
    loaded = models.load(str(models.save_checkpoint(model, tmp_path / key)))
    assert loaded.cfg == model.cfg
    tokens, mask = _inputs("left")
    with torch.no_grad():
        assert torch.equal(loaded(tokens, attention_mask=mask), model(tokens, attention_mask=mask))


def test_config_refuses_layer_types_that_do_not_fit_in_one_line():
    base = dict(d_model=16, n_layers=2, n_heads=2, d_head=8, d_mlp=32, d_vocab=11, n_ctx=16)
    cases = [
        (dict(layer_types=["full"]), "must name each of the 2 layers"),
        (dict(layer_types=["full", "local"]), "must name each of the 2 layers 'full' or 'sliding'"),
        (dict(layer_types=["full", "sliding"]), "sliding_window is None"),
        (dict(sliding_window=0), "must be positive"),
        (dict(attn_softcap=0.0), "attn_softcap=0.0 must be a positive finite number"),
        (dict(norm_offset=1.0), "needs norm='rmsnorm'"),
        (dict(qk_norm="post"), "qk_norm='post' is not one of"),
    ]
    for fields, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            models.Config(**base, **fields)
        assert "\n" not in str(info.value)
    cfg = models.Config(**base, sliding_window=4, layer_types=["sliding", "full"])
    assert cfg.layer_types == ("sliding", "full") and cfg.window(0) == 4 and cfg.window(1) is None
    assert models.Config(**base, sliding_window=4).layer_type(1) == "sliding"  # Mistral: every layer
    assert "layer_types" not in models.Config(**base).to_dict()  # checkpoints without them read as before
    # a bidirectional window (ModernBERT): |query - key| <= sliding_window
    assert models.Config(**base, sliding_window=4, attention="bidirectional").window(0) == 4


@pytest.mark.parametrize("past, n, window", [(0, 6, 3), (0, 3, 3), (4, 1, 3), (4, 2, 2), (0, 5, 1)])
def test_the_sliding_mask_counts_keys_by_index_as_hugging_face_does(past, n, window):
    from transformers.masking_utils import sdpa_mask, sliding_window_causal_mask_function

    from models.masks import Masks

    ours = Masks.build(n, past, None, True, window, torch.device("cpu")).allowed
    theirs = sdpa_mask(
        batch_size=1,
        q_length=n,
        kv_length=past + n,
        q_offset=past,
        mask_function=sliding_window_causal_mask_function(window),
        allow_is_causal_skip=False,
    )
    assert torch.equal(ours.expand_as(theirs), theirs)


# the op orders that bf16 shows (every architecture: the parity matrix's bf16 cells)
@pytest.mark.parametrize("key", ["gemma3_text", "gemma2", "olmo2", "cohere", "gptj", "granite"])
def test_bf16_is_bitwise_hf_bf16_on_both_paths(tmp_path, key):
    """In bf16 the families' operation orders show: Gemma's embedding factor rounded to bf16 and its
    (1 + w) taken in fp32, OLMo-2's and Gemma's norm weight applied before the cast back, OLMo-2's
    RoPE in fp32 (``Config.rope_fp32``: without it, 0.08 on the tiny OLMo-2's bf16 logits, measured)."""
    folder, _ = _save(tmp_path, key)
    model = models.load(str(folder), dtype="bf16")
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch.bfloat16, attn_implementation="eager"
    ).eval()
    tokens, mask = _inputs("right")
    real = mask.bool()
    ref = _hf(hf, tokens, mask, "eager")
    with torch.no_grad():
        out, cache = model.run_with_cache(tokens, attention_mask=mask)
    assert out.dtype == torch.bfloat16
    _assert_bitwise(_diffs(model, out, cache, ref, real), f"{key} bf16 eager")
    if not key.startswith("gemma2"):  # HF's Gemma 2 has no SDPA attention
        ref = _hf(hf, tokens, mask, "sdpa")
        with torch.no_grad():
            fused = model(tokens, attention_mask=mask)
        _assert_bitwise(_diffs(model, fused, None, ref, real), f"{key} bf16 fused")


@pytest.mark.parametrize("key", ["gemma3_text", "olmo2"])
def test_split_reader_inputs_run_the_same_function_on_the_new_placements(tmp_path, key):
    """Per-head q/k/v input copies (``use_split_inputs``) through Gemma's ln1 and QK-norm, and
    OLMo-2's un-normalised attention input: the same logits to float rounding (other kernels), and
    an edit of one head's query input changes the output."""
    from models.split_inputs import split_inputs

    folder, _ = _save(tmp_path, key)
    model = models.load(str(folder))
    tokens, mask = _inputs("right")
    real = mask.bool()
    with torch.no_grad():
        plain = model(tokens, attention_mask=mask)
        with split_inputs(model):
            split = model(tokens, attention_mask=mask)

        def zero_head(t, hook):
            t[:, :, 1] = 0
            return t

        edited = model.run_with_hooks(tokens, attention_mask=mask, fwd_hooks=[("blocks.0.hook_q_input", zero_head)])
    gap = (split - plain)[real].abs().max().item()
    assert gap <= 1e-5 * plain[real].abs().max().item(), gap
    assert not torch.allclose(edited[real], plain[real], atol=1e-4)


def test_attention_layer_of_a_sliding_layer_keeps_its_window_and_rope_base(tmp_path):
    """``attention_layer(l, x)`` on Gemma 3's layers: the pattern equals the forward pass's, sliding
    (window, local RoPE base) or full."""
    folder, _ = _save(tmp_path, "gemma3_text")
    model = models.load(str(folder))
    tokens, _ = _inputs("none")
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        for l in range(model.cfg.n_layers):
            seen = {}
            hook = (f"blocks.{l}.attn.hook_pattern", lambda t, hook: seen.setdefault("p", t.clone()))
            with model.hooks(fwd_hooks=[hook]):
                model.attention_layer(l, cache[f"blocks.{l}.ln1.hook_normalized"])
            assert torch.equal(seen["p"], cache[f"blocks.{l}.attn.hook_pattern"]), l
