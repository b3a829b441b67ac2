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
NormPlacement = Literal["pre", "post"]
Activation = Literal["gelu", "gelu_new", "relu", "silu"]
MLPKind = Literal["standard", "gated"]

_CHOICES = {
    "attention": ("causal", "bidirectional"),
    "positional": ("learned", "sinusoidal", "rope", "alibi", "none"),
    "norm": ("layernorm", "rmsnorm"),
    "norm_placement": ("pre", "post"),
    "act": ("gelu", "gelu_new", "relu", "silu"),
    "mlp": ("standard", "gated"),
}

_POSITIVE_INTS = ("d_model", "n_layers", "n_heads", "d_head", "d_mlp", "d_vocab", "n_ctx")


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
    norm_placement: NormPlacement = "pre"
    act: Activation = "gelu"
    mlp: MLPKind = "standard"
    eps: float = 1e-5
    n_token_types: int = 0  # BERT segment embeddings; 0 disables them
    embed_norm: bool = False  # a norm right after the embeddings (BERT)
    final_norm: bool = True  # a norm after the last block (pre-norm models)
    attn_bias: bool = False  # biases on W_Q, W_K, W_V
    attn_out_bias: bool = False  # bias on W_O
    mlp_bias: bool = False
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
    # Hugging Face's sliding-window attention (Mistral, Qwen2), which this model does not implement:
    # the loader caps n_ctx at the window, within which the two agree exactly, and no input may run
    # past it (not even with allow_beyond_ctx). None: no window. Left out of to_dict when None.
    sliding_window: int | None = None
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    name: str = "custom"

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
        if self.rotary_dim is not None and not 0 < self.rotary_dim <= self.d_head:
            raise ValueError(f"rotary_dim={self.rotary_dim} must lie in 1..d_head={self.d_head}")

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
    def model_name(self) -> str:
        return self.name

    @property
    def attn_only(self) -> bool:
        return False

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

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        if data["sliding_window"] is None:  # checkpoints of models without a window read as before
            del data["sliding_window"]
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
