"""RMSNorm as a function: the one definition, called by the block norms and the QK-norms
(``models/transformer.py``) and by the split reader inputs (``models/split_inputs.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from models.config import Config

__all__ = ["rms_norm"]


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
