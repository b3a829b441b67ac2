"""Contrastive prompt pairs, the input of every circuit analysis, and the logit-difference metric.

A ``Pairs`` holds ``n`` clean prompts and their corrupted twins, token-aligned (the same length,
the same padding: one ``attention_mask`` serves both), the answer token the clean prompt should
give (``right``), the one the corrupted prompt gives (``wrong``) and the position where the
answer is read. The task builders (``analyses/circuits/tasks.py``) produce them; any [n, pos]
token ids will do.

A metric is ``metric(logits, pairs) -> [n]``: one number per pair, larger meaning more of the
clean behaviour; ``logit_diff`` (right minus wrong at the answer position) is the default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Metric", "Pairs", "logit_diff"]

Metric = Callable[[Tensor, "Pairs"], Tensor]


def _ids(name: str, value: object, ndim: int) -> Tensor:
    t = torch.as_tensor(value)
    if t.ndim != ndim:
        want = "[n, pos]" if ndim == 2 else "[n]"
        raise ValueError(f"Pairs.{name} must be {want} token ids, got shape {tuple(t.shape)}")
    if t.is_floating_point() or t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"Pairs.{name} must hold integer ids, got dtype {t.dtype}")
    return t.long()


@dataclass(frozen=True)
class Pairs:
    """``n`` clean/corrupted prompt pairs.

    clean, corrupted: [n, pos] token ids, the same shape (activations are compared position by
        position). attention_mask: [n, pos], 1 for real tokens, shared by both (None: no padding).
    right, wrong: [n] the answer token of the clean and of the corrupted prompt.
    position: [n] where the answer is read (the logits of that position predict it).
    """

    clean: Tensor
    corrupted: Tensor
    right: Tensor
    wrong: Tensor
    position: Tensor
    attention_mask: Tensor | None = None

    def __post_init__(self) -> None:
        clean, corrupted = _ids("clean", self.clean, 2), _ids("corrupted", self.corrupted, 2)
        if clean.shape != corrupted.shape:
            raise ValueError(
                f"Pairs.clean {tuple(clean.shape)} and Pairs.corrupted {tuple(corrupted.shape)} must have the same "
                "shape: attribution compares activations position by position (build same-length pairs)"
            )
        n, pos = clean.shape
        if n == 0:
            raise ValueError("Pairs holds no pair: clean has shape (0, pos)")
        fields = {"clean": clean, "corrupted": corrupted}
        for name in ("right", "wrong", "position"):
            t = _ids(name, getattr(self, name), 1)
            if len(t) != n:
                raise ValueError(f"Pairs.{name} has {len(t)} entries for {n} pairs; one per pair")
            fields[name] = t
        if int(fields["position"].min()) < 0 or int(fields["position"].max()) >= pos:
            raise ValueError(f"Pairs.position must lie in 0..{pos - 1} (the prompt length), got {fields['position']}")
        mask = self.attention_mask
        if mask is not None:
            mask = torch.as_tensor(mask)
            if tuple(mask.shape) != (n, pos):
                raise ValueError(f"Pairs.attention_mask has shape {tuple(mask.shape)}, the prompts {(n, pos)}")
            mask = mask.bool()
            if not mask[torch.arange(n), fields["position"]].all():
                raise ValueError("Pairs.position points at padding (attention_mask 0) for some pair")
            fields["attention_mask"] = None if mask.all() else mask
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return self.clean.shape[0]

    def __getitem__(self, index: slice) -> Pairs:
        if not isinstance(index, slice):
            raise TypeError(f"Pairs are indexed by a slice (pairs[i:j]), got {type(index).__name__}")
        mask = None if self.attention_mask is None else self.attention_mask[index]
        return Pairs(self.clean[index], self.corrupted[index], self.right[index], self.wrong[index],
                     self.position[index], mask)  # fmt: skip

    def batches(self, batch_size: int) -> Iterator[Pairs]:
        """Consecutive slices of at most ``batch_size`` pairs."""
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive number of pairs, got {batch_size}")
        for start in range(0, len(self), int(batch_size)):
            yield self[start : start + int(batch_size)]

    def to(self, device: torch.device | str) -> Pairs:
        mask = None if self.attention_mask is None else self.attention_mask.to(device)
        return Pairs(*(getattr(self, f).to(device) for f in ("clean", "corrupted", "right", "wrong", "position")), mask)


def logit_diff(logits: Tensor, pairs: Pairs) -> Tensor:
    """[n] logit of the right answer minus the wrong one, at each pair's answer position
    (``logits`` [n, pos, vocab], from the clean, the corrupted or a patched run)."""
    rows = torch.arange(len(pairs), device=logits.device)
    at = logits[rows, pairs.position.to(logits.device)]
    return at[rows, pairs.right.to(logits.device)] - at[rows, pairs.wrong.to(logits.device)]
