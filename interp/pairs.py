"""Contrastive prompt pairs, the input of every patching analysis, and the one logit difference.

A ``Pairs`` holds ``n`` clean prompts and their corrupted twins, token-aligned (the same length, so
activations compare position by position), their attention masks, the answer token the clean
prompt should give (``right``), the one it is contrasted with (``wrong``), the position where the
answer is read (``position``: the logits there predict it) and, optionally, which pairs are held
out (kept out of circuit selection). The circuits' tasks (``analyses.circuits.tasks``) and the
prompt generator (``analyses.validation.prompts.contrastive_pairs``, whose ``PairSet`` is a
``Pairs`` plus its text) build them; any [n, pos] token ids will do.

A metric is ``metric(logits, pairs) -> [n]``: one number per pair, larger meaning more of the clean
behaviour; ``logit_diff`` (right minus wrong at the answer position, in fp32) is the one every
analysis uses.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["Metric", "Pairs", "logit_diff", "answer_diff"]

Metric = Callable[[Tensor, "Pairs"], Tensor]
_IDS = ("clean", "corrupted")
_PER_PAIR = ("right", "wrong", "position")


def _ids(name: str, value: object, ndim: int) -> Tensor:
    t = torch.as_tensor(value)
    if t.ndim != ndim:
        want = "[n, pos]" if ndim == 2 else "[n]"
        raise ValueError(f"Pairs.{name} must be {want} token ids, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"Pairs.{name} must hold integer ids, got dtype {t.dtype}")
    return t.long()


def _mask(name: str, value: object, shape: tuple[int, int]) -> Tensor | None:
    if value is None:
        return None
    mask = torch.as_tensor(value)
    if tuple(mask.shape) != shape:
        raise ValueError(f"Pairs.{name} has shape {tuple(mask.shape)}, the prompts {shape}")
    return mask


@dataclass(frozen=True, eq=False)
class Pairs:
    """``n`` clean/corrupted prompt pairs.

    clean, corrupted: [n, pos] token ids, the same shape. right, wrong: [n] the clean prompt's
    answer token and its contrast. position: [n] where the answer is read. attention_mask: [n, pos]
    of the clean prompts, 1 real and 0 padding (None: no padding); corrupted_mask: of the corrupted
    ones (None: the same). held_out: [n] bool, True for pairs kept out of circuit selection (None:
    no split). Masks are kept as given (the models treat an all-ones mask as none)."""

    clean: Tensor
    corrupted: Tensor
    right: Tensor
    wrong: Tensor
    position: Tensor
    attention_mask: Tensor | None = None
    corrupted_mask: Tensor | None = None
    held_out: Tensor | None = None

    def __post_init__(self) -> None:
        clean, corrupted = _ids("clean", self.clean, 2), _ids("corrupted", self.corrupted, 2)
        if clean.shape != corrupted.shape:
            raise ValueError(
                f"Pairs.clean {tuple(clean.shape)} and Pairs.corrupted {tuple(corrupted.shape)} must have the same "
                "shape: patching compares activations position by position (build same-length pairs)"
            )
        n, pos = clean.shape
        if n == 0:
            raise ValueError("Pairs holds no pair: clean has shape (0, pos)")
        fields = {"clean": clean, "corrupted": corrupted}
        for name in _PER_PAIR:
            t = _ids(name, getattr(self, name), 1)
            if len(t) != n:
                raise ValueError(f"Pairs.{name} has {len(t)} entries for {n} pairs; one per pair")
            fields[name] = t
        where = fields["position"]
        if int(where.min()) < 0 or int(where.max()) >= pos:
            raise ValueError(f"Pairs.position must lie in 0..{pos - 1} (the prompt length), got {where}")
        for name in ("attention_mask", "corrupted_mask"):
            fields[name] = _mask(name, getattr(self, name), (n, pos))
        if fields["attention_mask"] is not None and not fields["attention_mask"].bool()[torch.arange(n), where].all():
            raise ValueError("Pairs.position points at padding (attention_mask 0) for some pair")
        if self.held_out is not None:
            flag = torch.as_tensor(np.asarray(self.held_out)).bool()
            if tuple(flag.shape) != (n,):
                raise ValueError(f"Pairs.held_out has shape {tuple(flag.shape)}; one flag per pair, ({n},)")
            fields["held_out"] = flag
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return int(self.clean.shape[0])

    def __getitem__(self, index: Any) -> Pairs:
        """The pairs selected by a slice, an index array or a bool mask over the pairs, in that order
        (text fields of a subclass too)."""
        if isinstance(index, slice):
            return self._take(index, range(len(self))[index])
        idx = torch.as_tensor(np.asarray(index))
        if idx.dtype == torch.bool:
            if tuple(idx.shape) != (len(self),):
                raise ValueError(
                    f"a mask over {len(self)} pairs must have shape ({len(self)},), got {tuple(idx.shape)}"
                )
            idx = idx.nonzero()[:, 0]
        if idx.ndim != 1 or idx.is_floating_point():
            raise TypeError(f"Pairs are indexed by a slice, an index array or a bool mask, got {index!r}")
        idx = idx.long()
        return self._take(idx, idx.tolist())

    def subset(self, keep: Any) -> Pairs:
        """``self[keep]``: the pairs selected by a bool mask or an index array, in that order."""
        return self[keep]

    def _take(self, index: Any, rows: Any) -> Pairs:
        changes = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                changes[f.name] = value[index]
            elif isinstance(value, list):
                changes[f.name] = [value[i] for i in rows]
        return dataclasses.replace(self, **changes)

    def batches(self, batch_size: int) -> Iterator[Pairs]:
        """Consecutive slices of at most ``batch_size`` pairs."""
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive number of pairs, got {batch_size}")
        for start in range(0, len(self), int(batch_size)):
            yield self[start : start + int(batch_size)]

    def _map(self, fn: Callable[[Tensor], Tensor]) -> Pairs:
        changes = {f.name: fn(v) for f in dataclasses.fields(self) if isinstance(v := getattr(self, f.name), Tensor)}
        return dataclasses.replace(self, **changes)

    def to(self, device: torch.device | str) -> Pairs:
        return self._map(lambda t: t.to(device))

    def repeat(self, g: int) -> Pairs:
        """The pairs stacked ``g`` times along the batch axis (copy i: rows i*n .. (i+1)*n - 1)."""
        return self._map(lambda t: t.repeat(g, *([1] * (t.ndim - 1))))

    @property
    def corrupted_attention_mask(self) -> Tensor | None:
        """The mask the corrupted prompts run with: ``corrupted_mask``, else ``attention_mask``."""
        return self.corrupted_mask if self.corrupted_mask is not None else self.attention_mask

    @property
    def pos(self) -> Tensor:
        warnings.warn("Pairs.pos is deprecated; use Pairs.position", DeprecationWarning, stacklevel=2)
        return self.position

    @property
    def answer_pos(self) -> Tensor:
        warnings.warn("Pairs.answer_pos is deprecated; use Pairs.position", DeprecationWarning, stacklevel=2)
        return self.position


def answer_diff(at: Tensor, pairs: Pairs) -> Tensor:
    """[n] logit(right) - logit(wrong) from the answer position's logits ``at`` [n, vocab], in fp32
    (half-precision logits are widened first; float64 ones stay float64)."""
    rows = torch.arange(at.shape[0], device=at.device)
    at = at.to(torch.promote_types(at.dtype, torch.float32))
    return at[rows, pairs.right.to(at.device)] - at[rows, pairs.wrong.to(at.device)]


def logit_diff(logits: Tensor, pairs: Pairs) -> Tensor:
    """[n] logit of the right answer minus the wrong one at each pair's answer position, in fp32 or
    wider (``answer_diff``; ``logits`` [n, pos, vocab], from the clean, the corrupted or a patched run)."""
    if logits.ndim != 3 or logits.shape[0] != len(pairs):
        raise ValueError(f"logits must be [{len(pairs)}, pos, vocab] for these pairs, got {tuple(logits.shape)}")
    rows = torch.arange(logits.shape[0], device=logits.device)
    return answer_diff(logits[rows, pairs.position.to(logits.device)], pairs)
