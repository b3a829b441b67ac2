"""The circuits' pairs and metric: ``Pairs`` and the fp32 ``logit_diff`` of ``interp.pairs``
(one pair type and one logit difference for the circuits, the prompt generator's ``PairSet`` and
exact patching). ``PairBatch``, ``as_batch`` and ``to_pairs`` are deprecated: ``Pairs`` is what
every function takes."""

from __future__ import annotations

import warnings
from typing import Any

from interp.pairs import Metric, Pairs, answer_diff, logit_diff

__all__ = ["Metric", "Pairs", "logit_diff", "answer_diff"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=3)


def PairBatch(clean, corrupted, attention_mask, pos, right, wrong, corrupted_mask=None) -> Pairs:  # noqa: N802
    """Deprecated: ``Pairs(clean, corrupted, right, wrong, position, attention_mask, corrupted_mask)``."""
    _deprecated(
        "PairBatch(clean, corrupted, attention_mask, pos, right, wrong)",
        "Pairs(clean, corrupted, right, wrong, position, attention_mask)",
    )
    return Pairs(clean, corrupted, right, wrong, pos, attention_mask, corrupted_mask)


def as_batch(pairs: Any) -> Pairs:
    """Deprecated: every function takes ``Pairs`` (``PairSet`` is one)."""
    _deprecated("as_batch", "Pairs itself (no conversion)")
    if not isinstance(pairs, Pairs):
        raise TypeError(f"expected Pairs (or a PairSet), got {type(pairs).__name__}")
    return pairs


def to_pairs(batch: Pairs) -> Pairs:
    """Deprecated: the identity (one pair type)."""
    _deprecated("to_pairs", "Pairs itself (no conversion)")
    return batch


DEPRECATED = {"PairBatch": PairBatch, "as_batch": as_batch, "to_pairs": to_pairs}
