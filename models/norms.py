"""RMSNorm as a function: the one definition, called by the block norms and the QK-norms
(``models/transformer.py``) and by the split reader inputs (``models/split_inputs.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

if TYPE_CHECKING:
    from models.config import Config

__all__ = ["at_least_fp32", "layer_norm", "norm", "rms_norm"]


def rms_norm(cfg: Config, x: Tensor, w: Tensor) -> Tensor:
    """RMSNorm of ``x`` over its last axis with weight ``w``, in fp32 whatever the model's dtype, in
    the operation order of the family's Hugging Face RMSNorm: Llama's ``w * normed.to(dtype)``, or
    with ``cfg.norm_scale_fp32`` ``(normed * (offset + w)).to(dtype)`` (Gemma's (1 + w), OLMo-2's w).
    The one definition: the block norms, the QK-norms and the split reader inputs all call it."""
    h = x.float()  # a no-op in fp32
    normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + cfg.eps)
    if not cfg.norm_scale_fp32:
        return w * normed.to(x.dtype)
    scale = w.float() if cfg.norm_offset == 0.0 else cfg.norm_offset + w.float()
    return (normed * scale).to(x.dtype)


def at_least_fp32(x: Tensor) -> Tensor:
    """``x`` in fp32, or as it is in fp64: the families' upcasts (a Hugging Face ``.float()``), which
    must not round an fp64 run (the exact reference some analyses run) down to fp32."""
    return x if x.dtype == torch.float64 else x.float()


def layer_norm(cfg: Config, x: Tensor, w: Tensor | None, b: Tensor | None) -> Tensor:
    """LayerNorm of ``x`` over its last axis as the family's Hugging Face norm computes it: the
    fused ``F.layer_norm`` (weight and bias optional: OLMo's has neither), in fp32 and cast back where
    ``cfg.norm_fp32``, or Cohere's explicit op order (``cfg.norm_explicit``: mean, variance, rsqrt,
    weight, in fp32)."""
    if cfg.norm_explicit:
        h = at_least_fp32(x)
        mean = h.mean(-1, keepdim=True)
        variance = (h - mean).pow(2).mean(-1, keepdim=True)
        h = (h - mean) * torch.rsqrt(variance + cfg.eps)
        h = h if w is None else w.to(h.dtype) * h
        return (h if b is None else h + b.to(h.dtype)).to(x.dtype)
    h = at_least_fp32(x) if cfg.norm_fp32 else x
    return F.layer_norm(h, (x.shape[-1],), w, b, cfg.eps).to(x.dtype)


def norm(cfg: Config, x: Tensor, w: Tensor | None, b: Tensor | None = None) -> Tensor:
    """The model's norm (``cfg.norm``) of ``x`` with weight ``w`` (and bias ``b``)."""
    return layer_norm(cfg, x, w, b) if cfg.norm == "layernorm" else rms_norm(cfg, x, w)
