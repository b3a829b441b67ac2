"""The decoder families the toolkit converts from Hugging Face, one converter for all of them.

Llama, Mistral, Qwen2, Qwen3, Phi-3, OLMo-2, Gemma 2 and Gemma 3 (text) are one architecture with
switches: ``_decoder`` reads the Hugging Face config into a ``Config`` and renames the tensors.
What differs per family is a row of ``FAMILIES``; docs/models.md tabulates them with what was
checked. Conversions only rename and split tensors (Phi-3's fused qkv and gate_up projections are
split at load); they never fold, centre or rescale weights (Gemma's norm weights stay centred on 0,
the model adds the 1), so a converted model computes exactly what the source model computes.

The errors every converter raises live here too (``models.loading`` re-exports them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from torch import Tensor

from models.config import Config
from models.positions import SCALED_ROPE_TYPES

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = ["CheckpointError", "UnsupportedModelError", "FAMILIES", "decoder_layer_types"]


class CheckpointError(ValueError):
    """A checkpoint whose tensors do not fit the model: names the tensor and both shapes."""


class UnsupportedModelError(ValueError, NotImplementedError):
    """An architecture, or an option of one, that the toolkit does not implement: one line naming
    it and what is supported (a ValueError, so the command line prints one line; a
    NotImplementedError, as these were before)."""


def _get(sd: dict[str, Tensor], key: str, source: str) -> Tensor:
    if key not in sd:
        near = [k for k in sd if k.rsplit(".", 2)[-2:] == key.rsplit(".", 2)[-2:]][:3]
        raise CheckpointError(f"{source} has no tensor {key!r}" + (f" (found {near})" if near else ""))
    return sd[key]


def _expect(t: Tensor, shape: tuple, key: str, source: str) -> Tensor:
    if tuple(t.shape) != tuple(shape):
        raise CheckpointError(f"{source} tensor {key!r} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    return t


def _strip_prefix(sd: dict[str, Tensor], prefixes: tuple[str, ...]) -> dict[str, Tensor]:
    for p in prefixes:
        if any(k.startswith(p) for k in sd):
            return {k[len(p) :] if k.startswith(p) else k: v for k, v in sd.items()}
    return dict(sd)


def _first(x: int | Sequence[int] | None) -> int | None:
    return x[0] if isinstance(x, (list, tuple)) else x


class Family(NamedTuple):
    """What sets a decoder family apart. ``placement``: where its norms sit (Config.norm_placement);
    ``qk_norm``: Config.qk_norm; ``gemma``: (1 + w) norms, embeddings times sqrt(d_model),
    ``query_pre_attn_scalar`` and soft-capping; ``fused``: Phi-3's fused qkv and gate_up weights."""

    name: str
    placement: str = "pre"
    qk_norm: str = "none"
    gemma: bool = False
    fused: bool = False
    norm: str = "rmsnorm"
    # Config fields of the family beyond the common ones, from its HF config (None: none)
    extra: Callable[[PretrainedConfig], dict[str, Any]] | None = None


def _olmo(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    # OLMo's LayerNorm has no weight or bias, runs in fp32 with eps fixed at 1e-5 (HF's OlmoLayerNorm);
    # its RoPE rotates in fp32
    return dict(norm_weight=False, norm_fp32=True, eps=1e-5, rope_fp32=True, clip_qkv=hf_cfg.clip_qkv)


def _granite(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    return dict(
        embed_multiplier=float(hf_cfg.embedding_multiplier),
        residual_multiplier=float(hf_cfg.residual_multiplier),
        attn_scale=float(hf_cfg.attention_multiplier),
        logit_divisor=float(hf_cfg.logits_scaling),
    )


def _smollm3(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    extra: dict[str, Any] = dict(rope_layers=tuple(bool(x) for x in hf_cfg.no_rope_layers))  # 1: the layer rotates
    if not hf_cfg.use_sliding_window:  # its layer_types name sliding layers that only slide with this flag
        extra |= dict(layer_types=None, sliding_window=None)
    return extra


def _cohere(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    if getattr(hf_cfg, "use_qk_norm", False):
        raise UnsupportedModelError("Cohere use_qk_norm=True (a LayerNorm per head on q and k) is not supported")
    extra = dict(
        parallel_block=True, shared_norm=True, residual_first=True, norm_bias=False, norm_fp32=True,
        norm_explicit=True, rope_interleaved=True, rope_upcast=True, logit_scale=float(hf_cfg.logit_scale),
        eps=hf_cfg.layer_norm_eps,
    )  # fmt: skip
    if hf_cfg.model_type == "cohere2":  # its full layers have no RoPE
        extra["rope_layers"] = tuple(t == "sliding_attention" for t in hf_cfg.layer_types)
    return extra


def _stablelm(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    if getattr(hf_cfg, "qk_layernorm", False):
        raise UnsupportedModelError("StableLM qk_layernorm=True (a LayerNorm per head on q and k) is not supported")
    parallel = bool(hf_cfg.use_parallel_residual)  # x + attn(ln1(x)) + mlp(ln1(x))
    return dict(parallel_block=parallel, shared_norm=parallel, residual_first=parallel, eps=hf_cfg.layer_norm_eps)


def _moe(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    """Mixtral, Qwen2-MoE, Qwen3-MoE, Granite-MoE, gpt-oss: the router and experts (models/mlp.py ``MoE``)."""
    kind = hf_cfg.model_type
    experts = getattr(hf_cfg, "num_local_experts", None) or hf_cfg.num_experts
    if getattr(hf_cfg, "router_jitter_noise", 0.0):  # training only in HF; refused so a run never differs
        raise UnsupportedModelError(f"{kind} router_jitter_noise != 0 is not supported")
    step, dense = getattr(hf_cfg, "decoder_sparse_step", 1) or 1, set(getattr(hf_cfg, "mlp_only_layers", []) or [])
    layers = tuple(l not in dense and (l + 1) % step == 0 for l in range(hf_cfg.num_hidden_layers))
    extra = dict(
        n_experts=int(experts), top_k=int(hf_cfg.num_experts_per_tok),
        d_expert=getattr(hf_cfg, "moe_intermediate_size", None),
        norm_topk=kind == "mixtral" or bool(getattr(hf_cfg, "norm_topk_prob", True)),
        router_fp32=kind == "mixtral", d_shared_expert=int(getattr(hf_cfg, "shared_expert_intermediate_size", 0) or 0),
        moe_layers=None if all(layers) else layers,
    )  # fmt: skip
    if kind in ("granitemoe", "gpt_oss"):  # softmax over the top k logits only
        extra |= dict(router="topk_softmax", norm_topk=False)
    return extra


def _granite_moe(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    return _granite(hf_cfg) | _moe(hf_cfg)


def _gpt_oss(hf_cfg: PretrainedConfig) -> dict[str, Any]:
    """gpt-oss: learned attention sinks, clamped-SwiGLU experts with biases, RMSNorm weights kept fp32."""
    return _moe(hf_cfg) | dict(
        attn_sinks=True, expert_kind="gpt_oss", swiglu_limit=float(hf_cfg.swiglu_limit),
        swiglu_alpha=float(hf_cfg.swiglu_alpha),
    )  # fmt: skip


FAMILIES: dict[str, Family] = {
    "llama": Family("Llama"),
    "mistral": Family("Mistral"),
    "qwen2": Family("Qwen2"),
    "qwen3": Family("Qwen3", qk_norm="head"),
    "phi3": Family("Phi-3", fused=True),
    "olmo2": Family("OLMo-2", placement="reordered", qk_norm="full"),
    "gemma2": Family("Gemma 2", placement="sandwich", gemma=True),
    "gemma3_text": Family("Gemma 3", placement="sandwich", qk_norm="head", gemma=True),
    "gemma": Family("Gemma", gemma=True),
    "granite": Family("Granite", extra=_granite),
    "olmo": Family("OLMo", norm="layernorm", extra=_olmo),
    "olmo3": Family("OLMo 3", placement="reordered", qk_norm="full"),
    "smollm3": Family("SmolLM3", extra=_smollm3),
    "cohere": Family("Cohere", norm="layernorm", extra=_cohere),
    "cohere2": Family("Cohere 2", norm="layernorm", extra=_cohere),
    "stablelm": Family("StableLM", norm="layernorm", extra=_stablelm),
    "mixtral": Family("Mixtral", extra=_moe),
    "qwen2_moe": Family("Qwen2-MoE", extra=_moe),
    "qwen3_moe": Family("Qwen3-MoE", qk_norm="head", extra=_moe),
    "granitemoe": Family("Granite-MoE", extra=_granite_moe),
    # its RMSNorm multiplies the fp32 weight before the cast back, like OLMo-2's
    "gpt_oss": Family("gpt-oss", placement="pre", extra=_gpt_oss),
}

# Hugging Face's activation names -> ours, each the same function op for op (bitwise): "gelu_new" is
# HF's Python formula (GPT-2's), "gelu_pytorch_tanh" PyTorch's tanh GELU (Gemma's)
_ACTS = {a: a for a in ("silu", "gelu_pytorch_tanh", "gelu_new", "gelu", "relu")}
_LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}


def decoder_layer_types(hf_cfg: PretrainedConfig, n_layers: int) -> tuple[tuple[str, ...] | None, int | None]:
    """(layer_types, sliding_window) of a Hugging Face decoder config, as Hugging Face masks them:
    Mistral and Phi-3 slide in every layer when ``sliding_window`` is set; the others in the layers
    their ``layer_types`` call "sliding_attention" (Qwen2/Qwen3 derive those from
    ``use_sliding_window`` and ``max_window_layers``; Gemma from its pattern). (None, None) when no
    layer slides."""
    window = getattr(hf_cfg, "sliding_window", None)
    types = getattr(hf_cfg, "layer_types", None)
    if hf_cfg.model_type in ("mistral", "phi3", "stablelm", "mixtral") or types is None:
        return ((("sliding",) * n_layers), int(window)) if window else (None, None)
    unknown = sorted(set(types) - set(_LAYER_TYPES))
    if unknown:
        raise UnsupportedModelError(
            f"{hf_cfg.model_type} layer_types {unknown} are not supported; only {sorted(_LAYER_TYPES)}"
        )
    mapped = tuple(_LAYER_TYPES[t] for t in types)
    if "sliding" not in mapped:
        return None, None
    if not window:
        raise UnsupportedModelError(f"{hf_cfg.model_type}: sliding_attention layers but no sliding_window")
    return mapped, int(window)


def _rope(hf_cfg: PretrainedConfig, d_head: int) -> tuple[float, float | None, int | None, dict | None]:
    """(theta, theta of the sliding layers or None, rotary_dim or None, the scaled RoPE's parameters
    or None). Gemma 3 and OLMo 3 keep one parameter set per layer type; a scaled type ("llama3",
    "linear", "dynamic", "yarn", "longrope") is supported on the full layers (the sliding layers then
    keep their own unscaled frequencies)."""
    params = getattr(hf_cfg, "rope_parameters", None) or getattr(hf_cfg, "rope_scaling", None) or {}
    per_type = params if "full_attention" in params else {"full_attention": params}
    scaling = None
    for kind, p in per_type.items():
        rope_type = (p or {}).get("rope_type", (p or {}).get("type", "default"))
        if rope_type == "default":
            continue
        where = f" ({kind} layers)" if len(per_type) > 1 else ""
        if rope_type not in SCALED_ROPE_TYPES or kind != "full_attention":
            raise UnsupportedModelError(
                f"{hf_cfg.model_type} rope_scaling type {rope_type!r}{where} is not supported; "
                f"unscaled RoPE ('default') and, on full layers, {list(SCALED_ROPE_TYPES)}"
            )
        scaling = {k: v for k, v in p.items() if k not in ("rope_theta", "partial_rotary_factor", "type")}
        # the HF config's max_position_embeddings, which the scaled types read (n_ctx may differ: dynamic)
        scaling |= dict(rope_type=rope_type, max_position_embeddings=hf_cfg.max_position_embeddings)
    full = per_type["full_attention"] or {}
    theta = float(full.get("rope_theta", getattr(hf_cfg, "rope_theta", 10000.0)))
    local = per_type.get("sliding_attention")
    local_theta = float(local["rope_theta"]) if local and "rope_theta" in local else None
    if local_theta == theta and scaling is None:
        local_theta = None  # one base for every layer
    factor = full.get("partial_rotary_factor", getattr(hf_cfg, "partial_rotary_factor", 1.0)) or 1.0
    rot = int(d_head * factor)  # Hugging Face's int(head_dim * partial_rotary_factor)
    return theta, local_theta, (rot if rot != d_head else None), scaling


def _dynamic(scaling: dict | None) -> bool:
    return bool(scaling) and scaling.get("rope_type") == "dynamic"


def _decoder(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """Config and state dict of any decoder family of ``FAMILIES``."""
    kind = hf_cfg.model_type
    fam = FAMILIES[kind]
    act_name = getattr(hf_cfg, "hidden_activation", None) or getattr(hf_cfg, "hidden_act", "silu")
    act = _ACTS.get(act_name)
    if act is None:
        raise UnsupportedModelError(f"{fam.name} hidden activation {act_name!r} is not supported; only {sorted(_ACTS)}")
    if getattr(hf_cfg, "use_bidirectional_attention", False):
        raise UnsupportedModelError(f"{fam.name} use_bidirectional_attention=True (an encoder) is not supported")
    h = hf_cfg.num_attention_heads
    kv = getattr(hf_cfg, "num_key_value_heads", None) or h
    d_head = getattr(hf_cfg, "head_dim", None) or hf_cfg.hidden_size // h
    theta, local_theta, rot, scaling = _rope(hf_cfg, d_head)
    layer_types, window = decoder_layer_types(hf_cfg, hf_cfg.num_hidden_layers)
    sd = _strip_prefix(sd, ("model.",)) | ({"lm_head.weight": sd["lm_head.weight"]} if "lm_head.weight" in sd else {})
    tied = bool(getattr(hf_cfg, "tie_word_embeddings", False)) or "lm_head.weight" not in sd
    extra: dict[str, Any] = {}
    if fam.gemma:
        scalar = getattr(hf_cfg, "query_pre_attn_scalar", None)  # Gemma 1 has none: 1/sqrt(head_dim)
        extra = dict(
            norm_offset=1.0,
            embed_scale=hf_cfg.hidden_size**0.5,  # HF's expression; the model rounds it to its dtype as HF does
            attn_scale=None if scalar is None else scalar**-0.5,
            attn_softcap=getattr(hf_cfg, "attn_logit_softcapping", None),
            final_softcap=getattr(hf_cfg, "final_logit_softcapping", None),
        )
    extra = dict(layer_types=layer_types, sliding_window=window, eps=getattr(hf_cfg, "rms_norm_eps", None), **extra) | (
        fam.extra(hf_cfg) if fam.extra else {}
    )
    cfg = Config(
        d_model=hf_cfg.hidden_size,
        n_layers=hf_cfg.num_hidden_layers,
        n_heads=h,
        n_kv_heads=kv if kv != h else None,
        d_head=d_head,
        d_mlp=hf_cfg.intermediate_size,
        d_vocab=hf_cfg.vocab_size,
        # dynamic NTK RoPE exists to run past max_position_embeddings: its context is factor times that
        n_ctx=int(hf_cfg.max_position_embeddings * (scaling["factor"] if _dynamic(scaling) else 1)),
        attention="causal",
        positional="rope",
        norm=fam.norm,
        norm_placement=fam.placement,
        # their RMSNorm multiplies the weight before the cast back
        norm_scale_fp32=fam.gemma or fam.placement == "reordered" or kind == "gpt_oss",
        rope_fp32=fam.placement == "reordered" or extra.pop("rope_fp32", False),  # OLMo: cos/sin stay fp32
        qk_norm=fam.qk_norm,
        act=act,
        mlp="gated",
        attn_bias="layers.0.self_attn.q_proj.bias" in sd,
        attn_out_bias="layers.0.self_attn.o_proj.bias" in sd,
        mlp_bias="layers.0.mlp.up_proj.bias" in sd,
        gate_up_fused=fam.fused,
        lm_head=True,
        tie_embeddings=tied,
        rope_theta=theta,
        rope_local_theta=local_theta,
        rotary_dim=rot,
        rope_scaling=scaling,
        pad_token_id=getattr(hf_cfg, "pad_token_id", None),
        bos_token_id=getattr(hf_cfg, "bos_token_id", None),
        eos_token_id=_first(getattr(hf_cfg, "eos_token_id", None)),
        name=name,
        **extra,
    )
    return cfg, _decoder_weights(cfg, fam, sd, f"{fam.name} checkpoint {name!r}")


def _decoder_weights(cfg: Config, fam: Family, sd: dict[str, Tensor], src: str) -> dict[str, Tensor]:
    """The toolkit's state dict from a decoder family's (``model.`` prefix already stripped)."""
    g = lambda k: _get(sd, k, src)  # noqa: E731
    out = {"W_E": g("embed_tokens.weight")} | ({"ln_final.w": g("norm.weight")} if cfg.norm_weight else {})
    if not cfg.tie_embeddings:
        out["unembed_weight"] = g("lm_head.weight")
    norms = {
        "pre": (("ln1", "input_layernorm"), ("ln2", "post_attention_layernorm")),
        "sandwich": (
            ("ln1", "input_layernorm"),
            ("ln1_post", "post_attention_layernorm"),
            ("ln2", "pre_feedforward_layernorm"),
            ("ln2_post", "post_feedforward_layernorm"),
        ),
        "reordered": (("ln1_post", "post_attention_layernorm"), ("ln2_post", "post_feedforward_layernorm")),
    }[fam.placement]
    if cfg.shared_norm:  # one norm serves attention and MLP (parallel blocks)
        norms = norms[:1]
    with_bias = cfg.norm == "layernorm" and cfg.norm_bias and cfg.norm_weight
    if with_bias:
        out["ln_final.b"] = g("norm.bias")
    if not cfg.norm_weight:  # OLMo: non-parametric norms
        norms = ()
    for l in range(cfg.n_layers):
        p, q = f"layers.{l}.", f"blocks.{l}."
        if fam.fused:
            out.update(_split_fused(cfg, sd, p, q, src))
        else:
            for ours in "qkv":
                out[f"{q}attn.{ours}_weight"] = g(f"{p}self_attn.{ours}_proj.weight")
                if cfg.attn_bias:
                    out[f"{q}attn.{ours}_bias"] = g(f"{p}self_attn.{ours}_proj.bias")
        out[f"{q}attn.o_weight"] = g(f"{p}self_attn.o_proj.weight")
        if cfg.attn_sinks:
            out[f"{q}attn.sinks"] = g(f"{p}self_attn.sinks")
        if cfg.attn_out_bias:
            out[f"{q}attn.o_bias"] = g(f"{p}self_attn.o_proj.bias")
        if cfg.is_moe(l):  # a router and experts (models/mlp.py MoE)
            out.update(_moe_weights(sd, p, q, src))
        else:
            if not fam.fused:  # Phi-3's gate and up halves come from _split_fused
                for ours, theirs in (("gate", "gate_proj"), ("in", "up_proj")):
                    out[f"{q}mlp.{ours}_weight"] = g(f"{p}mlp.{theirs}.weight")
                    if cfg.mlp_bias:
                        out[f"{q}mlp.{ours}_bias"] = g(f"{p}mlp.{theirs}.bias")
            out[f"{q}mlp.out_weight"] = g(f"{p}mlp.down_proj.weight")
            if cfg.mlp_bias:
                out[f"{q}mlp.out_bias"] = g(f"{p}mlp.down_proj.bias")
        if cfg.qk_norm != "none":
            out[f"{q}attn.q_norm_w"] = g(f"{p}self_attn.q_norm.weight")
            out[f"{q}attn.k_norm_w"] = g(f"{p}self_attn.k_norm.weight")
        for ours, theirs in norms:
            out[f"{q}{ours}.w"] = g(f"{p}{theirs}.weight")
            if with_bias:
                out[f"{q}{ours}.b"] = g(f"{p}{theirs}.bias")
    return out


def _moe_weights(sd: dict[str, Tensor], p: str, q: str, src: str) -> dict[str, Tensor]:
    """A mixture-of-experts layer's router, experts and shared expert, as Hugging Face stores them
    (Granite-MoE under ``block_sparse_moe``, its router under ``router``; gpt-oss's router under
    ``router`` with a bias, its experts with biases)."""
    m = f"{p}block_sparse_moe." if f"{p}block_sparse_moe.router.weight" in sd else f"{p}mlp."
    router = f"{m}router." if f"{m}router.weight" in sd else f"{m}gate."
    out = {
        f"{q}mlp.router_weight": _get(sd, f"{router}weight", src),
        f"{q}mlp.gate_up_weight": _get(sd, f"{m}experts.gate_up_proj", src),
        f"{q}mlp.down_weight": _get(sd, f"{m}experts.down_proj", src),
    }
    if f"{router}bias" in sd:  # gpt-oss
        out[f"{q}mlp.router_bias"] = sd[f"{router}bias"]
        out[f"{q}mlp.gate_up_bias"] = _get(sd, f"{m}experts.gate_up_proj_bias", src)
        out[f"{q}mlp.down_bias"] = _get(sd, f"{m}experts.down_proj_bias", src)
    if f"{p}mlp.shared_expert_gate.weight" in sd:  # Qwen2-MoE
        out[f"{q}mlp.shared_gate_weight"] = sd[f"{p}mlp.shared_expert_gate.weight"]
        for ours, theirs in (("gate", "gate_proj"), ("in", "up_proj"), ("out", "down_proj")):
            out[f"{q}mlp.shared.{ours}_weight"] = _get(sd, f"{p}mlp.shared_expert.{theirs}.weight", src)
    return out


def _split_fused(cfg: Config, sd: dict[str, Tensor], p: str, q: str, src: str) -> dict[str, Tensor]:
    """Phi-3's ``qkv_proj`` [(head + 2 kv_head) d_head, d_model] and ``gate_up_proj`` [2 d_mlp,
    d_model] (gate first, as Hugging Face's ``chunk(2)`` reads it), split into our projections."""
    nq, nkv = cfg.n_heads * cfg.d_head, cfg.kv_heads * cfg.d_head
    key = f"{p}self_attn.qkv_proj.weight"
    qkv = _expect(_get(sd, key, src), (nq + 2 * nkv, cfg.d_model), key, src)
    key = f"{p}mlp.gate_up_proj.weight"
    gate_up = _expect(_get(sd, key, src), (2 * cfg.d_mlp, cfg.d_model), key, src)
    return {
        f"{q}attn.q_weight": qkv[:nq],
        f"{q}attn.k_weight": qkv[nq : nq + nkv],
        f"{q}attn.v_weight": qkv[nq + nkv :],
        f"{q}mlp.gate_weight": gate_up[: cfg.d_mlp],
        f"{q}mlp.in_weight": gate_up[cfg.d_mlp :],
    }
