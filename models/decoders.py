"""The LayerNorm decoders whose checkpoints do not use Llama's tensor names: GPT-NeoX (Pythia),
GPT-J, Phi (phi-1, phi-1.5, phi-2), OPT and Falcon. All but OPT have parallel blocks (attention and MLP read the same
input), partial RoPE, a standard (not gated) MLP with biases and GPT-2's ``gelu_new`` (Phi) or
exact GELU (Pythia). One converter each, registered in ``models.convert.CONVERTERS``; like every
converter they only rename and split tensors.

GPT-NeoX's fused ``query_key_value`` projection holds, per head, its q, k and v rows one after the
other ([head, 3, d_head] on the output axis); it is split at load into our q, k and v weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import Tensor

from models.config import Config
from models.families import _ACTS, UnsupportedModelError, _expect, _get, _rope, _strip_prefix

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = ["DECODERS"]


def _act(hf_cfg: PretrainedConfig, family: str, value: str) -> str:
    if value not in _ACTS:
        raise UnsupportedModelError(f"{family} activation {value!r} is not supported; only {sorted(_ACTS)}")
    return _ACTS[value]


def _config(hf_cfg: PretrainedConfig, name: str, **fields: Any) -> Config:
    """A parallel-block LayerNorm decoder's Config; ``fields`` override and add."""
    base: dict[str, Any] = dict(
        attention="causal", positional="rope", norm="layernorm", norm_placement="pre", mlp="standard",
        parallel_block=True, lm_head=True, attn_out_bias=True, mlp_bias=True, name=name,
        bos_token_id=getattr(hf_cfg, "bos_token_id", None), eos_token_id=getattr(hf_cfg, "eos_token_id", None),
        pad_token_id=getattr(hf_cfg, "pad_token_id", None),
    )  # fmt: skip
    return Config(**(base | fields))


def _layers(cfg: Config, sd: dict[str, Tensor], src: str, names: dict[str, str], prefix: str) -> dict[str, Tensor]:
    """Per-layer tensors renamed: ``names`` maps our name (``attn.q_weight``, ``ln1.w``, ...) to the
    checkpoint's, relative to ``{prefix}{layer}.``."""
    out = {}
    for l in range(cfg.n_layers):
        for ours, theirs in names.items():
            out[f"blocks.{l}.{ours}"] = _get(sd, f"{prefix}{l}.{theirs}", src)
    return out


def _outer(
    cfg: Config, sd: dict[str, Tensor], src: str, prefixes: tuple[str, ...], embed: str, final_norm: str | None
) -> tuple[dict[str, Tensor], Callable[[str], Tensor], dict[str, Tensor]]:
    """(``sd`` with ``prefixes`` stripped and the LM head kept, a getter of its tensors, the state of the
    token embedding ``embed``, the final LayerNorm named ``final_norm`` (None: none), the logits' bias
    where ``cfg.lm_head_bias`` and the unembedding unless tied)."""
    head = {k: sd[k] for k in ("lm_head.weight", "lm_head.bias") if k in sd}
    sd = _strip_prefix(sd, prefixes) | head
    g = lambda k: _get(sd, k, src)  # noqa: E731
    out = {"W_E": g(embed)}
    if final_norm is not None:
        out |= {"ln_final.w": g(f"{final_norm}.weight"), "ln_final.b": g(f"{final_norm}.bias")}
    if cfg.lm_head_bias:
        out["b_U"] = g("lm_head.bias")
    if not cfg.tie_embeddings:
        out["unembed_weight"] = g("lm_head.weight")
    return sd, g, out


def _gpt_neox(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    h, m = hf_cfg.num_attention_heads, hf_cfg.hidden_size
    d = m // h
    theta, _, rot, scaling = _rope(hf_cfg, d)
    parallel = bool(hf_cfg.use_parallel_residual)
    bias = bool(getattr(hf_cfg, "attention_bias", True))
    cfg = _config(
        hf_cfg, name, d_model=m, n_layers=hf_cfg.num_hidden_layers, n_heads=h, d_head=d,
        d_mlp=hf_cfg.intermediate_size, d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.max_position_embeddings,
        act=_act(hf_cfg, "GPT-NeoX", hf_cfg.hidden_act), eps=hf_cfg.layer_norm_eps, parallel_block=parallel,
        attn_bias=bias, attn_out_bias=bias, rope_theta=theta, rotary_dim=rot, rope_scaling=scaling,
        tie_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", False)),
    )  # fmt: skip
    src = f"GPT-NeoX checkpoint {name!r}"
    sd, g, out = _outer(cfg, sd, src, ("gpt_neox.",), "embed_in.weight", "final_layer_norm")
    names = {
        "ln1.w": "input_layernorm.weight", "ln1.b": "input_layernorm.bias",
        "ln2.w": "post_attention_layernorm.weight", "ln2.b": "post_attention_layernorm.bias",
        "attn.o_weight": "attention.dense.weight",
        "mlp.in_weight": "mlp.dense_h_to_4h.weight", "mlp.in_bias": "mlp.dense_h_to_4h.bias",
        "mlp.out_weight": "mlp.dense_4h_to_h.weight", "mlp.out_bias": "mlp.dense_4h_to_h.bias",
    } | ({"attn.o_bias": "attention.dense.bias"} if bias else {})  # fmt: skip
    out |= _layers(cfg, sd, src, names, "layers.")
    for l in range(cfg.n_layers):  # [(head, {q, k, v}, d_head), d_model] -> our three projections
        key = f"layers.{l}.attention.query_key_value"
        w = _expect(g(f"{key}.weight"), (3 * m, m), f"{key}.weight", src).view(h, 3, d, m)
        for i, part in enumerate("qkv"):
            out[f"blocks.{l}.attn.{part}_weight"] = w[:, i].reshape(m, m)
        if bias:
            b = g(f"{key}.bias").view(h, 3, d)
            for i, part in enumerate("qkv"):
                out[f"blocks.{l}.attn.{part}_bias"] = b[:, i].reshape(m)
    return cfg, out


def _gptj(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    h, m = hf_cfg.n_head, hf_cfg.n_embd
    d = m // h
    rot = hf_cfg.rotary_dim
    if not rot:  # HF then builds its sin/cos table over hidden_size, not the head
        raise UnsupportedModelError(
            "GPT-J rotary_dim=None (RoPE over the whole width) is not supported; set rotary_dim"
        )
    cfg = _config(
        hf_cfg, name, d_model=m, n_layers=hf_cfg.n_layer, n_heads=h, d_head=d, d_mlp=hf_cfg.n_inner or 4 * m,
        d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.n_positions, act=_act(hf_cfg, "GPT-J", hf_cfg.activation_function),
        eps=hf_cfg.layer_norm_epsilon, shared_norm=True, attn_out_bias=False, rope_interleaved=True,
        rotary_dim=rot if rot and rot != d else None, scores_fp32=True, lm_head_bias=True,
        tie_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", False)),
    )  # fmt: skip
    src = f"GPT-J checkpoint {name!r}"
    sd, g, out = _outer(cfg, sd, src, ("transformer.",), "wte.weight", "ln_f")
    names = {
        "ln1.w": "ln_1.weight", "ln1.b": "ln_1.bias",
        "attn.q_weight": "attn.q_proj.weight", "attn.k_weight": "attn.k_proj.weight",
        "attn.v_weight": "attn.v_proj.weight", "attn.o_weight": "attn.out_proj.weight",
        "mlp.in_weight": "mlp.fc_in.weight", "mlp.in_bias": "mlp.fc_in.bias",
        "mlp.out_weight": "mlp.fc_out.weight", "mlp.out_bias": "mlp.fc_out.bias",
    }  # fmt: skip
    return cfg, out | _layers(cfg, sd, src, names, "h.")


def _phi(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    if getattr(hf_cfg, "qk_layernorm", False):
        raise UnsupportedModelError("Phi qk_layernorm=True (a LayerNorm on q and k) is not supported")
    h, m = hf_cfg.num_attention_heads, hf_cfg.hidden_size
    kv = getattr(hf_cfg, "num_key_value_heads", None) or h
    d = m // h
    theta, _, rot, scaling = _rope(hf_cfg, d)
    cfg = _config(
        hf_cfg, name, d_model=m, n_layers=hf_cfg.num_hidden_layers, n_heads=h, n_kv_heads=kv if kv != h else None,
        d_head=d, d_mlp=hf_cfg.intermediate_size, d_vocab=hf_cfg.vocab_size,
        n_ctx=hf_cfg.max_position_embeddings, act=_act(hf_cfg, "Phi", hf_cfg.hidden_act), eps=hf_cfg.layer_norm_eps,
        shared_norm=True, attn_bias=True, rope_theta=theta, rotary_dim=rot, rope_scaling=scaling, lm_head_bias=True,
        tie_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", False)),
    )  # fmt: skip
    src = f"Phi checkpoint {name!r}"
    sd, g, out = _outer(cfg, sd, src, ("model.",), "embed_tokens.weight", "final_layernorm")
    names = {"ln1.w": "input_layernorm.weight", "ln1.b": "input_layernorm.bias"}
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "dense")):
        names[f"attn.{ours}_weight"] = f"self_attn.{theirs}.weight"
        names[f"attn.{ours}_bias"] = f"self_attn.{theirs}.bias"
    for ours, theirs in (("in", "fc1"), ("out", "fc2")):
        names[f"mlp.{ours}_weight"] = f"mlp.{theirs}.weight"
        names[f"mlp.{ours}_bias"] = f"mlp.{theirs}.bias"
    return cfg, out | _layers(cfg, sd, src, names, "layers.")


def _opt(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """OPT (125m, 1.3b and up): pre-norm, learned positions stored from row 2 on (Hugging Face's
    offset; rows 0 and 1 serve padding only), ReLU, the queries scaled before q k^T."""
    m = hf_cfg.hidden_size
    if not hf_cfg.do_layer_norm_before or hf_cfg.word_embed_proj_dim != m:
        raise UnsupportedModelError(
            "OPT with do_layer_norm_before=False or word_embed_proj_dim != hidden_size (OPT-350m: post-norm, "
            "projected embeddings) is not supported; the pre-norm OPT models are"
        )
    if getattr(hf_cfg, "_remove_final_layer_norm", False):
        raise UnsupportedModelError("OPT _remove_final_layer_norm=True is not supported")
    h, bias = hf_cfg.num_attention_heads, bool(hf_cfg.enable_bias)
    affine = bool(hf_cfg.layer_norm_elementwise_affine)
    cfg = Config(
        d_model=m, n_layers=hf_cfg.num_hidden_layers, n_heads=h, d_head=m // h, d_mlp=hf_cfg.ffn_dim,
        d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.max_position_embeddings, attention="causal", positional="learned",
        norm="layernorm", norm_placement="pre", norm_weight=affine, act=_act(hf_cfg, "OPT", hf_cfg.activation_function),
        mlp="standard", eps=1e-5, attn_bias=bias, attn_out_bias=bias, mlp_bias=bias, lm_head=True,
        tie_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", True)), scale_queries=True, name=name,
        bos_token_id=getattr(hf_cfg, "bos_token_id", None), eos_token_id=getattr(hf_cfg, "eos_token_id", None),
        pad_token_id=getattr(hf_cfg, "pad_token_id", None),
    )  # fmt: skip
    src = f"OPT checkpoint {name!r}"
    sd, g, out = _outer(
        cfg, sd, src, ("model.decoder.", "decoder."), "embed_tokens.weight", "final_layer_norm" if affine else None
    )
    positions = _expect(g("embed_positions.weight"), (cfg.n_ctx + 2, m), "embed_positions.weight", src)
    out["W_pos"] = positions[2:]
    names = {}
    for ours, theirs in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        names[f"attn.{ours}_weight"] = f"self_attn.{theirs}.weight"
        if bias:
            names[f"attn.{ours}_bias"] = f"self_attn.{theirs}.bias"
    for ours, theirs in (("in", "fc1"), ("out", "fc2")):
        names[f"mlp.{ours}_weight"] = f"{theirs}.weight"
        if bias:
            names[f"mlp.{ours}_bias"] = f"{theirs}.bias"
    if affine:
        for ours, theirs in (("ln1", "self_attn_layer_norm"), ("ln2", "final_layer_norm")):
            names[f"{ours}.w"], names[f"{ours}.b"] = f"{theirs}.weight", f"{theirs}.bias"
    return cfg, out | _layers(cfg, sd, src, names, "layers.")


def _falcon(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """Falcon 7B (multi-query, parallel block with one norm), 40B/180B (``new_decoder_architecture``:
    grouped kv heads, parallel with two norms) and the sequential variant; RoPE, no biases."""
    if hf_cfg.alibi or hf_cfg.bias:
        raise UnsupportedModelError(
            "Falcon with alibi=True or bias=True (falcon-rw) is not supported; Falcon 7B/40B/180B (RoPE, no biases) are"
        )
    h, m = hf_cfg.num_attention_heads, hf_cfg.hidden_size
    d = m // h
    new = bool(hf_cfg.new_decoder_architecture)
    kv = hf_cfg.num_kv_heads if new else (1 if hf_cfg.multi_query else h)
    parallel = new or bool(hf_cfg.parallel_attn)
    two_norms = new and (hf_cfg.num_ln_in_parallel_attn or 2) == 2
    theta, _, rot, scaling = _rope(hf_cfg, d)
    cfg = _config(
        hf_cfg, name, d_model=m, n_layers=hf_cfg.num_hidden_layers, n_heads=h, n_kv_heads=kv if kv != h else None,
        d_head=d, d_mlp=hf_cfg.ffn_hidden_size, d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.max_position_embeddings,
        act=_act(hf_cfg, "Falcon", hf_cfg.activation), eps=hf_cfg.layer_norm_epsilon, parallel_block=parallel,
        shared_norm=parallel and not two_norms, attn_out_bias=False, mlp_bias=False, rope_theta=theta,
        rotary_dim=rot, rope_scaling=scaling, tie_embeddings=bool(getattr(hf_cfg, "tie_word_embeddings", True)),
    )  # fmt: skip
    src = f"Falcon checkpoint {name!r}"
    sd, g, out = _outer(cfg, sd, src, ("transformer.",), "word_embeddings.weight", "ln_f")
    norms = (("ln1", "ln_attn"), ("ln2", "ln_mlp")) if two_norms else (("ln1", "input_layernorm"),)
    if not parallel:
        norms = (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm"))
    names = {"attn.o_weight": "self_attention.dense.weight", "mlp.in_weight": "mlp.dense_h_to_4h.weight",
             "mlp.out_weight": "mlp.dense_4h_to_h.weight"}  # fmt: skip
    for ours, theirs in norms:
        names[f"{ours}.w"], names[f"{ours}.b"] = f"{theirs}.weight", f"{theirs}.bias"
    out |= _layers(cfg, sd, src, names, "h.")
    for l in range(cfg.n_layers):  # the fused projection's layout differs by variant
        key = f"h.{l}.self_attention.query_key_value.weight"
        w = _expect(g(key), ((h + 2 * kv) * d, m), key, src)
        if new:  # per kv head: its group's query heads, then its k, then its v
            w = w.view(kv, h // kv + 2, d, m)
            q, k, v = w[:, :-2].reshape(h * d, m), w[:, -2].reshape(kv * d, m), w[:, -1].reshape(kv * d, m)
        elif kv == 1:  # multi-query: every query head, then the one k, then the one v
            q, k, v = w[: h * d], w[h * d : (h + 1) * d], w[(h + 1) * d :]
        else:  # per head: q, k, v
            w = w.view(h, 3, d, m)
            q, k, v = (w[:, i].reshape(h * d, m) for i in range(3))
        out |= {f"blocks.{l}.attn.q_weight": q, f"blocks.{l}.attn.k_weight": k, f"blocks.{l}.attn.v_weight": v}
    return cfg, out


DECODERS = {"gpt_neox": _gpt_neox, "gptj": _gptj, "phi": _phi, "opt": _opt, "falcon": _falcon}
