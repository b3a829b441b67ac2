"""One answer to "what is this model?": ``ModelView``, for the toolkit's ``models.Transformer`` and
for TransformerLens's ``TransformerBridge`` (or any HookedRootModule-like model with a ``cfg``).

>>> v = view(model)
>>> v.name, v.n_layers, v.n_heads, v.causal, v.device
>>> v.run_with_hooks(input_ids, attention_mask=mask, fwd_hooks=[(name, fn)])

Analyses ask the view, never the model's config directly, so that they run unchanged on both.
Imports nothing from ``models`` or ``analyses``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # ``import interp`` imports no torch
    import torch

__all__ = ["ModelView", "view"]


@dataclass(frozen=True)
class ModelView:
    """What an analysis may ask of a model.

    ``causal``: a token sees only earlier tokens. ``lm_head``: the output is next-token logits
    (a causal LM) rather than hidden states. ``is_bridge``: a TransformerLens bridge (its hooks
    follow TransformerLens's meanings where they differ from ours, see docs/hooks.md)."""

    model: Any
    name: str
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_model: int
    causal: bool
    lm_head: bool
    n_ctx: int
    d_vocab: int
    is_bridge: bool

    @property
    def device(self) -> torch.device:
        """The device of the model's first parameter (CPU for a model without parameters)."""
        import torch

        p = next(iter(self.model.parameters()), None)
        return p.device if p is not None else torch.device("cpu")

    @property
    def tokenizer(self) -> Any:
        return getattr(self.model, "tokenizer", None)

    @property
    def special_ids(self) -> tuple[int, ...]:
        """Ids of the tokenizer's special tokens ([CLS], [SEP], BOS, padding), sorted."""
        tok = self.tokenizer
        hf = getattr(tok, "hf", tok)
        return tuple(sorted({int(i) for i in (getattr(hf, "all_special_ids", None) or [])}))

    def run_with_hooks(
        self,
        input_ids: Any,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        fwd_hooks: Sequence[tuple[str, Callable]] = (),
        return_type: str | None = "default",
    ) -> Any:
        """One forward pass with temporary hooks. ``return_type`` (our model only): ``None`` skips
        the unembedding, ``"default"`` returns what the model returns by default."""
        kwargs: dict[str, Any] = {}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        if token_type_ids is not None and not (self.is_bridge and self.causal):
            kwargs["token_type_ids"] = token_type_ids
        if not self.is_bridge and return_type != "default":
            kwargs["return_type"] = return_type
        return self.model.run_with_hooks(input_ids, fwd_hooks=list(fwd_hooks), **kwargs)


def _short_name(name: str) -> str:
    """A bridge booted from a folder is named by its path: keep the last part."""
    return name.rstrip("/").rsplit("/", 1)[-1] if "/" in name else name


def view(model: Any) -> ModelView:
    """The ``ModelView`` of ``model`` (a ``ModelView`` is returned as is)."""
    if isinstance(model, ModelView):
        return model
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "n_layers") or not hasattr(cfg, "n_heads"):
        raise TypeError(
            f"{type(model).__name__} has no cfg.n_layers / cfg.n_heads; pass a models.Transformer "
            "or a transformer_lens TransformerBridge"
        )
    is_bridge = not hasattr(cfg, "attention")  # the toolkit's Config names it `attention`
    n_heads = int(cfg.n_heads)
    if is_bridge:
        direction = getattr(cfg, "attention_dir", None)
        causal = direction != "bidirectional" if direction is not None else bool(getattr(cfg, "is_causal", True))
        n_kv = getattr(cfg, "n_key_value_heads", None) or n_heads
        name = getattr(cfg, "model_name", None) or type(model).__name__
        tok = getattr(model, "tokenizer", None)
        d_vocab = int(getattr(cfg, "d_vocab", None) or getattr(tok, "vocab_size", 0))
        n_ctx = int(getattr(cfg, "n_ctx", None) or 512)
        lm_head = causal
    else:
        causal = bool(cfg.is_causal)
        n_kv = int(getattr(cfg, "n_kv_heads", None) or n_heads)
        name = getattr(cfg, "name", None) or type(model).__name__
        d_vocab, n_ctx = int(cfg.d_vocab), int(cfg.n_ctx)
        lm_head = bool(getattr(cfg, "lm_head", False))
    return ModelView(
        model=model,
        name=_short_name(str(name)),
        n_layers=int(cfg.n_layers),
        n_heads=n_heads,
        n_kv_heads=int(n_kv),
        d_head=int(cfg.d_head),
        d_model=int(cfg.d_model),
        causal=causal,
        lm_head=lm_head,
        n_ctx=n_ctx,
        d_vocab=d_vocab,
        is_bridge=is_bridge,
    )
