"""The one configuration object of the toolkit's transformer.

Every architectural choice is a field here, fixed at construction; nothing in ``forward`` branches
on flags that make hooks appear or disappear. Axis vocabulary used across the package:
``batch pos head kv_head d_model d_head d_mlp query_pos key_pos layer vocab``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

Attention = Literal["causal", "bidirectional"]
Positional = Literal["learned", "sinusoidal", "rope", "alibi", "none"]
Norm = Literal["layernorm", "rmsnorm"]
NormPlacement = Literal["pre", "post", "sandwich", "reordered"]
QKNorm = Literal["none", "head", "full"]
LayerType = Literal["full", "sliding"]
_UNKNOWN = object()  # a tokenizer property the bound tokenizer does not have
Activation = Literal["gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu"]
MLPKind = Literal["standard", "gated"]

_CHOICES = {
    "attention": ("causal", "bidirectional"),
    "positional": ("learned", "sinusoidal", "rope", "alibi", "none"),
    "norm": ("layernorm", "rmsnorm"),
    "norm_placement": ("pre", "post", "sandwich", "reordered"),
    "qk_norm": ("none", "head", "full"),
    "act": ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu"),
    "mlp": ("standard", "gated"),
}

# Hugging Face's scaled RoPE types the toolkit runs (Config.rope_scaling; models.positions.scaled_rope);
# "dynamic" and "longrope" pick their frequencies from the sequence's length, the others are fixed
SCALED_ROPE_TYPES = ("linear", "dynamic", "yarn", "longrope", "llama3")
RUNTIME_ROPE_TYPES = ("dynamic", "longrope")

_POSITIVE_INTS = ("d_model", "n_layers", "n_heads", "d_head", "d_mlp", "d_vocab", "n_ctx")


# fields that to_dict leaves out at their default value (they came after checkpoints were first written)
_OMITTED_AT_DEFAULT = {
    "sliding_window": None,
    "layer_types": None,
    "rope_local_theta": None,
    "attn_softcap": None,
    "final_softcap": None,
    "norm_offset": 0.0,
    "norm_scale_fp32": False,
    "qk_norm": "none",
    "gate_up_fused": False,
    "rope_fp32": False,
    "parallel_block": False,
    "shared_norm": False,
    "residual_first": False,
    "norm_weight": True,
    "norm_bias": True,
    "norm_fp32": False,
    "norm_explicit": False,
    "embed_multiplier": 1.0,
    "residual_multiplier": 1.0,
    "logit_scale": 1.0,
    "logit_divisor": 1.0,
    "clip_qkv": None,
    "rope_layers": None,
    "rope_scaling": None,
    "scores_fp32": False,
    "scale_queries": False,
    "rope_upcast": False,
    "n_experts": 0,
    "top_k": 0,
    "d_expert": None,
    "norm_topk": True,
    "router_fp32": False,
    "d_shared_expert": 0,
    "moe_layers": None,
    "first_attn_norm": True,
    "attn_sinks": False,
    "router": "softmax_topk",
    "expert_kind": "swiglu",
    "swiglu_limit": None,
    "swiglu_alpha": 1.702,
}


@dataclass(frozen=True)
class Config:
    """Shape and architecture of a transformer.

    The three families the toolkit ships map onto it as follows:

    ============  ============  ==========  =========  ======  =========  =====
    family        attention     positional  norm       place   mlp        extra
    ============  ============  ==========  =========  ======  =========  =====
    BERT/MiniLM   bidirectional learned     layernorm  post    standard   token types, embedding norm
    Llama/SmolLM  causal        rope        rmsnorm    pre     gated      grouped-query attention
    GPT-2         causal        learned     layernorm  pre     standard   gelu_new, tied unembedding
    ============  ============  ==========  =========  ======  =========  =====

    The families loaded through ``models/families.py`` add: per-layer attention types
    (``layer_types``, ``sliding_window``), QK-norm (``qk_norm``), Gemma's (1 + w) RMSNorm
    (``norm_offset``) and four norms per block (``norm_placement="sandwich"``), OLMo-2's norms on
    the sublayer outputs only (``"reordered"``), soft-capping (``attn_softcap``, ``final_softcap``)
    and a second RoPE base for sliding layers (``rope_local_theta``); docs/models.md lists them.
    """

    d_model: int
    n_layers: int
    n_heads: int
    d_head: int
    d_mlp: int
    d_vocab: int
    n_ctx: int
    n_kv_heads: int | None = None  # None: same as n_heads (no grouped-query attention)
    attention: Attention = "causal"
    positional: Positional = "learned"
    norm: Norm = "layernorm"
    # pre: x + f(norm(x)) (Llama, GPT-2); post: norm(x + f(x)) (BERT); sandwich: x + norm_post(f(norm(x)))
    # (Gemma 2/3: ln1, ln1_post, ln2, ln2_post); reordered: x + norm_post(f(x)) (OLMo-2: ln1_post, ln2_post)
    norm_placement: NormPlacement = "pre"
    act: Activation = "gelu"
    mlp: MLPKind = "standard"
    eps: float = 1e-5
    # RMSNorm variants. norm_offset: the scale is norm_offset + w (Gemma: 1.0; w is stored as Hugging
    # Face stores it, centred on 0). norm_scale_fp32: the scale multiplies in fp32 before the cast back
    # to the model's dtype (Gemma, OLMo-2); False: after it (Llama). Both only matter below fp32 or for
    # Gemma's offset; in fp32 the two orders give the same bits.
    norm_offset: float = 0.0
    norm_scale_fp32: bool = False
    # RMSNorm on queries and keys before RoPE: "head" over each head's d_head (Qwen3, Gemma 3; one
    # weight [d_head] shared by the heads), "full" over the whole projection (OLMo-2; weights [head
    # d_head] and [kv_head d_head]); "none" (default).
    qk_norm: QKNorm = "none"
    n_token_types: int = 0  # BERT segment embeddings; 0 disables them
    embed_norm: bool = False  # a norm right after the embeddings (BERT)
    final_norm: bool = True  # a norm after the last block (pre-norm models)
    attn_bias: bool = False  # biases on W_Q, W_K, W_V
    attn_out_bias: bool = False  # bias on W_O
    mlp_bias: bool = False
    # Phi-3: Hugging Face applies the activation to the gate half of one fused gate_up projection; the
    # model keeps the weights split but hands the activation that strided layout (its bits depend on it)
    gate_up_fused: bool = False
    lm_head: bool = True
    tie_embeddings: bool = False
    lm_head_bias: bool = False
    rope_theta: float = 10000.0
    rotary_dim: int | None = None  # None: rotate all of d_head
    rope_interleaved: bool = False  # False: (i, i + d/2) pairs (HF Llama, NeoX); True: (2i, 2i+1) (GPT-J)
    attn_scale: float | None = None  # None: 1 / sqrt(d_head)
    # token embeddings are multiplied by this before positions are added (Vaswani et al. 2017 use
    # sqrt(d_model), so a sinusoid of norm sqrt(d_model/2) does not drown them); the unembedding is not scaled
    embed_scale: float = 1.0
    # Sliding-window attention: a query of a "sliding" layer sees the keys less than sliding_window
    # tokens back (itself and the sliding_window - 1 before it), as Hugging Face's sliding layers do;
    # a "full" layer sees every earlier key. Bidirectional (ModernBERT): the keys within
    # sliding_window tokens on either side, |query - key| <= sliding_window (HF's config.sliding_window,
    # local_attention // 2). layer_types: one per layer; None: every layer "sliding"
    # when sliding_window is set (Mistral), else every layer "full". Left out of to_dict when None.
    sliding_window: int | None = None
    layer_types: tuple[LayerType, ...] | None = None
    rope_local_theta: float | None = None  # RoPE base of the sliding layers (Gemma 3); None: rope_theta
    # RoPE rotates in fp32 and casts back (OLMo-2 keeps cos/sin fp32); False: cos/sin in the model's
    # dtype (Llama). The same bits in fp32.
    rope_fp32: bool = False
    # q and k upcast to fp32 for the rotation, cos/sin in the model's dtype (Cohere); the same bits in fp32
    rope_upcast: bool = False
    # tanh soft-capping, cap * tanh(x / cap) (Gemma 2): of the attention scores before the mask, and of
    # the logits. None: none. A soft-capped layer always runs eager attention (SDPA cannot cap).
    attn_softcap: float | None = None
    final_softcap: float | None = None
    # Parallel blocks (GPT-NeoX, GPT-J, Phi, Cohere): attention and MLP both read the block's input,
    # resid_post = resid_pre + attn_out + mlp_out, and there is no resid_mid (no hook_resid_mid).
    # shared_norm: the MLP reads ln1's output (GPT-J, Phi, Cohere; no ln2); else its own ln2 (NeoX).
    # residual_first: summed as (resid_pre + attn_out) + mlp_out (Cohere), else (attn_out + mlp_out)
    # + resid_pre (GPT-J, NeoX, Phi): the two orders round differently.
    parallel_block: bool = False
    shared_norm: bool = False
    residual_first: bool = False
    # LayerNorm variants: norm_weight False: no weight and no bias (OLMo's non-parametric norm);
    # norm_bias False: a weight only (Cohere, StableLM 2); norm_fp32: computed in fp32 and cast back
    # (OLMo, Cohere); norm_explicit: Cohere's op order (mean, variance, rsqrt, weight) instead of the
    # fused F.layer_norm kernel (they differ in the last bits)
    norm_weight: bool = True
    norm_bias: bool = True
    norm_fp32: bool = False
    norm_explicit: bool = False
    # Granite's multipliers: the token embeddings times embed_multiplier (a Python float, unlike
    # embed_scale's rounding), each sublayer's output times residual_multiplier before it is added
    # (hook_attn_out / hook_mlp_out are after it: what the residual receives), the logits divided by
    # logit_divisor; Cohere multiplies its logits by logit_scale
    embed_multiplier: float = 1.0
    residual_multiplier: float = 1.0
    logit_scale: float = 1.0
    logit_divisor: float = 1.0
    clip_qkv: float | None = None  # OLMo: q, k and v clamped to [-clip_qkv, clip_qkv] after the projection
    # which layers rotate q and k (SmolLM3's no-RoPE layers, Cohere 2's full layers); None: all of them
    rope_layers: tuple[bool, ...] | None = None
    # Hugging Face's scaled RoPE (rope_type "linear", "dynamic", "yarn", "longrope", "llama3") as
    # (key, value) pairs of its rope parameters; None: unscaled. Applies to the full layers' RoPE
    # (Gemma 3's sliding layers keep rope_local_theta unscaled). models.positions.scaled_rope.
    rope_scaling: tuple[tuple[str, Any], ...] | None = None
    # the eager scores computed from q and k upcast to fp32 (GPT-J); the same bits in fp32
    scores_fp32: bool = False
    # the queries multiplied by the scale before q k^T (OPT), instead of the scores after it: the
    # same scores to rounding, other bits
    scale_queries: bool = False
    # Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): n_experts > 0 makes the MLP of each layer
    # moe_layers names (None: every layer) a router over n_experts gated experts of width d_expert
    # (None: d_mlp), top_k of them per token; norm_topk: their weights renormalised to sum to 1;
    # router_fp32: the weights stay fp32 when they multiply the experts' outputs (Mixtral), else they
    # are cast to the model's dtype (Qwen); d_shared_expert > 0: a shared gated expert of that width,
    # scaled by sigmoid(a learned gate), added to every token's output (Qwen2-MoE)
    n_experts: int = 0
    top_k: int = 0
    d_expert: int | None = None
    norm_topk: bool = True
    router_fp32: bool = False
    d_shared_expert: int = 0
    moe_layers: tuple[bool, ...] | None = None
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    name: str = "custom"
    # False: block 0's attention reads resid_pre without ln1 (ModernBERT: the embedding norm stands in
    # for it; blocks.0.ln1 is then None)
    first_attn_norm: bool = True
    # gpt-oss: a learned logit per head (``attn.sinks`` [head]) that takes part in every row's softmax
    # as one more key with no value; the pattern is the share of the real keys (rows sum to 1 minus
    # the sink's share). Such layers always run the eager path: Hugging Face has no SDPA path for them.
    attn_sinks: bool = False
    # the router: "softmax_topk" (Mixtral, Qwen: softmax over every expert, then the top k) or
    # "topk_softmax" (gpt-oss, Granite-MoE: the top k logits, then a softmax over those k)
    router: str = "softmax_topk"
    # the experts: "swiglu" (act(gate) * up, no biases) or "gpt_oss" (biases on the router and both
    # expert projections; gate and up interleaved in one [expert, d_model, 2 d_expert] weight; the gate
    # clamped above at swiglu_limit, up clamped to +-swiglu_limit; (up + 1) * gate * sigmoid(alpha gate))
    expert_kind: str = "swiglu"
    swiglu_limit: float | None = None
    swiglu_alpha: float = 1.702

    def __post_init__(self) -> None:
        for field, allowed in _CHOICES.items():
            value = getattr(self, field)
            if value not in allowed:
                raise ValueError(f"Config.{field}={value!r} is not one of {allowed}")
        for field in _POSITIVE_INTS:
            if getattr(self, field) <= 0:
                raise ValueError(f"Config.{field} must be positive, got {getattr(self, field)}")
        if self.n_heads % self.kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.kv_heads} "
                "(each key/value head serves a whole group of query heads)"
            )
        if self.positional == "rope" and self.rot_dim % 2:
            raise ValueError(f"rotary_dim={self.rot_dim} must be even")
        if (
            not isinstance(self.embed_scale, (int, float))
            or isinstance(self.embed_scale, bool)
            or not (0 < self.embed_scale < float("inf"))
        ):
            raise ValueError(
                f"Config.embed_scale={self.embed_scale!r} must be a positive finite number (1.0: unscaled)"
            )
        if self.sliding_window is not None and not 0 < self.sliding_window:
            raise ValueError(f"Config.sliding_window={self.sliding_window} must be positive (or None: no window)")
        self._check_layer_types()
        self._check_new_fields()
        for field in ("attn_softcap", "final_softcap", "rope_local_theta"):
            value = getattr(self, field)
            if value is not None and not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise ValueError(f"Config.{field}={value!r} must be a positive finite number (or None)")
        if self.norm_offset != 0.0 and self.norm != "rmsnorm":
            raise ValueError(
                f"Config.norm_offset={self.norm_offset} is Gemma's (offset + w) RMSNorm; it needs norm='rmsnorm'"
            )
        if self.rotary_dim is not None and not 0 < self.rotary_dim <= self.d_head:
            raise ValueError(f"rotary_dim={self.rotary_dim} must lie in 1..d_head={self.d_head}")

    def _check_new_fields(self) -> None:
        if self.rope_layers is not None:
            layers = tuple(bool(x) for x in self.rope_layers)
            object.__setattr__(self, "rope_layers", layers)
            if len(layers) != self.n_layers:
                raise ValueError(f"Config.rope_layers names {len(layers)} layers; the model has {self.n_layers}")
        if self.rope_scaling is not None:
            items = self.rope_scaling.items() if isinstance(self.rope_scaling, dict) else self.rope_scaling
            frozen = tuple(sorted((str(k), tuple(v) if isinstance(v, list) else v) for k, v in items))
            object.__setattr__(self, "rope_scaling", frozen)
            kind = dict(frozen).get("rope_type")
            if kind not in SCALED_ROPE_TYPES:
                raise ValueError(f"Config.rope_scaling rope_type={kind!r} is not one of {SCALED_ROPE_TYPES}")
            if self.positional != "rope":
                raise ValueError("Config.rope_scaling needs positional='rope'")
        if (self.shared_norm or self.residual_first) and not self.parallel_block:
            raise ValueError("Config.shared_norm and residual_first describe parallel blocks; set parallel_block=True")
        if self.parallel_block and self.norm_placement != "pre":
            raise ValueError(f"parallel blocks are pre-norm; norm_placement={self.norm_placement!r}")
        if not (self.norm_weight and self.norm_bias and not self.norm_fp32 and not self.norm_explicit):
            if self.norm != "layernorm":
                raise ValueError("Config.norm_weight/norm_bias/norm_fp32/norm_explicit are LayerNorm options")
        if self.residual_multiplier != 1.0 and (self.parallel_block or self.norm_placement != "pre"):
            raise ValueError("Config.residual_multiplier (Granite) is implemented for sequential pre-norm blocks")
        for field in ("embed_multiplier", "residual_multiplier", "logit_scale", "logit_divisor"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and value != 0 and abs(value) < float("inf")):
                raise ValueError(f"Config.{field}={value!r} must be a finite non-zero number (1.0: none)")
        if self.n_experts:
            if not 0 < self.top_k <= self.n_experts:
                raise ValueError(f"Config.top_k={self.top_k} must lie in 1..n_experts={self.n_experts}")
            if self.mlp != "gated":
                raise ValueError("mixture-of-experts layers are gated (SwiGLU) experts; set mlp='gated'")
        if self.router not in ("softmax_topk", "topk_softmax"):
            raise ValueError(f"Config.router={self.router!r} is not one of ('softmax_topk', 'topk_softmax')")
        if self.expert_kind not in ("swiglu", "gpt_oss"):
            raise ValueError(f"Config.expert_kind={self.expert_kind!r} is not one of ('swiglu', 'gpt_oss')")
        if self.expert_kind == "gpt_oss" and not (self.swiglu_limit and self.swiglu_limit > 0):
            raise ValueError(f"Config.expert_kind='gpt_oss' needs a positive swiglu_limit, got {self.swiglu_limit!r}")
        if self.moe_layers is not None:
            layers = tuple(bool(x) for x in self.moe_layers)
            object.__setattr__(self, "moe_layers", layers)
            if len(layers) != self.n_layers or not self.n_experts:
                raise ValueError(f"Config.moe_layers must name each of the {self.n_layers} layers, with n_experts > 0")
        if self.clip_qkv is not None and not self.clip_qkv > 0:
            raise ValueError(f"Config.clip_qkv={self.clip_qkv!r} must be positive (or None)")

    def is_moe(self, layer: int) -> bool:
        """Whether ``layer``'s MLP is a mixture of experts."""
        return self.n_experts > 0 and (self.moe_layers is None or self.moe_layers[layer])

    def uses_rope(self, layer: int) -> bool:
        """Whether ``layer`` rotates its queries and keys."""
        return self.positional == "rope" and (self.rope_layers is None or self.rope_layers[layer])

    def _check_layer_types(self) -> None:
        if self.layer_types is not None:
            types = tuple(self.layer_types)
            object.__setattr__(self, "layer_types", types)  # a list (JSON) becomes a tuple: hashable, frozen
            if len(types) != self.n_layers or not set(types) <= {"full", "sliding"}:
                raise ValueError(
                    f"Config.layer_types={list(types)} must name each of the {self.n_layers} layers 'full' or 'sliding'"
                )
            if "sliding" in types and self.sliding_window is None:
                raise ValueError("Config.layer_types has 'sliding' layers but sliding_window is None; set the window")

    @property
    def has_sliding_layers(self) -> bool:
        return any(self.layer_type(l) == "sliding" for l in range(self.n_layers))

    def layer_type(self, layer: int) -> LayerType:
        """ "sliding" (sees the last ``sliding_window`` tokens) or "full" (every earlier token)."""
        if self.layer_types is not None:
            return self.layer_types[layer]
        return "full" if self.sliding_window is None else "sliding"

    def window(self, layer: int) -> int | None:
        """The attention window of ``layer`` in tokens (None: a full layer)."""
        return self.sliding_window if self.layer_type(layer) == "sliding" else None

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.kv_heads

    @property
    def rot_dim(self) -> int:
        return self.d_head if self.rotary_dim is None else self.rotary_dim

    @property
    def scale(self) -> float:
        return self.d_head**-0.5 if self.attn_scale is None else self.attn_scale

    @property
    def is_causal(self) -> bool:
        return self.attention == "causal"

    # -- the names TransformerLens code reads (``model.cfg.X``) --------------------------------------
    # Read-only views of the fields above, plus the device and dtype of the model that owns this
    # config (bound by ``models.Transformer``). None of them is a field: ``to_dict``/``from_dict``,
    # equality and the frozen dataclass are unchanged.

    @property
    def n_key_value_heads(self) -> int | None:
        """Key/value heads under grouped-query attention; None without it (TransformerLens's
        convention: ``transformer_lens.patching`` then uses ``n_heads`` for ``k`` and ``v``)."""
        return None if self.kv_heads == self.n_heads else self.kv_heads

    @property
    def normalization_type(self) -> str:
        """``"LN"`` (LayerNorm) or ``"RMS"`` (RMSNorm), as TransformerLens names them. Weights are
        never folded into the next layer here (TransformerLens's "LNPre"/"RMSPre" do not occur)."""
        return "LN" if self.norm == "layernorm" else "RMS"

    @property
    def final_rms(self) -> bool:
        return self.final_norm and self.norm == "rmsnorm"

    @property
    def output_logits_soft_cap(self) -> float:
        """TransformerLens's name for the final soft-cap (-1.0: none, as TransformerLens writes it)."""
        return -1.0 if self.final_softcap is None else float(self.final_softcap)

    @property
    def model_name(self) -> str:
        return self.name

    @property
    def attn_only(self) -> bool:
        return False

    @property
    def parallel_attn_mlp(self) -> bool:
        """TransformerLens's name for a parallel block (``parallel_block``)."""
        return self.parallel_block

    @property
    def gated_mlp(self) -> bool:
        return self.mlp == "gated"

    @property
    def act_fn(self) -> str:
        return self.act

    @property
    def positional_embedding_type(self) -> str:
        """TransformerLens's names: ``"standard"`` (learned absolute), ``"rotary"``, ``"alibi"``;
        ``"sinusoidal"`` and ``"none"`` have no TransformerLens counterpart."""
        return {"learned": "standard", "rope": "rotary"}.get(self.positional, self.positional)

    @property
    def attention_dir(self) -> str:
        return "causal" if self.is_causal else "bidirectional"

    @property
    def d_vocab_out(self) -> int:
        return self.d_vocab

    @property
    def n_devices(self) -> int:
        return 1

    # The tokenizer's settings, as TransformerLens names them (the model binds its tokenizer here
    # whenever it is set: ``cfg._bind_tokenizer``); read when asked, so a later
    # ``model.tokenizer.prepend_bos = True`` or ``padding_side = "left"`` shows.

    @property
    def default_prepend_bos(self) -> bool:
        """Whether ``model.to_tokens(text)`` puts a start token first when ``prepend_bos`` is not
        given: the tokenizer made with ``prepend_bos=True``, or one that adds its start token itself
        (BERT's [CLS], Llama 2's ``<s>``, Gemma's ``<bos>``); False for SmolLM2 and GPT-2, whose
        tokenizers add none (docs/hooks.md, "Tokens"), and for a model without a tokenizer. What
        ``transformer_lens.evals.induction_loss`` and ``utilities.test_prompt`` default to."""
        tok = self.__dict__.get("_tokenizer")
        return bool(getattr(tok, "prepend_bos", None)) or bool(self.tokenizer_prepends_bos)

    @property
    def tokenizer_prepends_bos(self) -> bool | None:
        """Whether the Hugging Face tokenizer itself puts a start token first (``Tokenizer.own_start_id``);
        None without a tokenizer that can say (token ids only)."""
        start = getattr(self.__dict__.get("_tokenizer"), "own_start_id", _UNKNOWN)
        return None if start is _UNKNOWN else start is not None

    @property
    def default_padding_side(self) -> str:
        """The side ``model.to_tokens`` pads a batch of texts on (``model.tokenizer.padding_side``);
        "right" without a tokenizer."""
        side = getattr(self.__dict__.get("_tokenizer"), "padding_side", None)
        return side if side in ("left", "right") else "right"

    @property
    def tokenizer_name(self) -> str | None:
        """The Hugging Face tokenizer's ``name_or_path`` (a folder or hub id); None without one."""
        hf = getattr(self.__dict__.get("_tokenizer"), "hf", None)
        return getattr(hf, "name_or_path", None) or None

    # Hook points TransformerLens switches on with flags are always there here (computed when hooked):
    # ``attn.hook_result``, the per-head ``hook_q_input``/``hook_k_input``/``hook_v_input``,
    # ``hook_attn_in`` and ``hook_mlp_in`` (models/split_inputs.py).

    @property
    def use_attn_result(self) -> bool:
        return True

    @property
    def use_split_qkv_input(self) -> bool:
        return True

    @property
    def use_attn_in(self) -> bool:
        return True

    @property
    def use_hook_mlp_in(self) -> bool:
        return True

    @property
    def rmsnorm_uses_offset(self) -> bool:
        """RMSNorm scaled by (1 + w) (Gemma: ``norm_offset=1``), which TransformerLens's
        ``SVDInterpreter`` reads."""
        return self.norm == "rmsnorm" and self.norm_offset != 0.0

    @property
    def rotary_base(self) -> float | None:
        """RoPE's base (Gemma 3's full-attention layers; its sliding layers: ``rope_local_theta``);
        None without RoPE."""
        return self.rope_theta if self.positional == "rope" else None

    @property
    def per_layer_num_key_value_heads(self) -> None:
        """None: every layer has ``n_key_value_heads`` (TransformerLens's convention)."""
        return None

    @property
    def device(self) -> torch.device:
        """The device of the model that owns this config (``torch.device("cpu")`` for a config
        no model owns)."""
        import torch

        return self.__dict__.get("_device") or torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model that owns this config (``torch.float32`` for a config no model
        owns)."""
        import torch

        return self.__dict__.get("_dtype") or torch.float32

    def _bind(self, device: torch.device, dtype: torch.dtype) -> None:
        """Record the owning model's device and dtype (``models.Transformer`` calls this after
        construction and after every ``.to()``); not a field, so nothing else changes."""
        object.__setattr__(self, "_device", device)
        object.__setattr__(self, "_dtype", dtype)

    def _bind_tokenizer(self, tokenizer: object) -> None:
        """Record the owning model's tokenizer (its ``tokenizer`` setter calls this), which the
        tokenizer properties above read; not a field, so nothing else changes."""
        object.__setattr__(self, "_tokenizer", tokenizer)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        # fields at their defaults are left out, so checkpoints of models without them read as before
        for field, default in _OMITTED_AT_DEFAULT.items():
            if data[field] == default:
                del data[field]
        if data.get("layer_types") is not None:
            data["layer_types"] = list(data["layer_types"])
        if data.get("moe_layers") is not None:
            data["moe_layers"] = list(data["moe_layers"])
        if data.get("rope_layers") is not None:
            data["rope_layers"] = list(data["rope_layers"])
        if data.get("rope_scaling") is not None:
            data["rope_scaling"] = {k: list(v) if isinstance(v, tuple) else v for k, v in data["rope_scaling"]}
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Config:
        if not isinstance(data, dict):
            raise ValueError(f"a config is an object of fields, got {type(data).__name__}")
        fields = dataclasses.fields(cls)
        known = {f.name for f in fields}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config fields {unknown}; known fields: {sorted(known)}")
        required = [
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        absent = [k for k in required if k not in data]
        if absent:
            raise ValueError(f"config lacks the required fields {absent} (required: {required})")
        for k in _POSITIVE_INTS:
            if not isinstance(data[k], int) or isinstance(data[k], bool):
                raise ValueError(f"config field {k} must be a positive integer, got {data[k]!r}")
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)
