"""Which keys each query may see: the causal mask, the sliding window of a layer's type and the
padding, built once per forward pass for every block (``Masks``), and handed to the two attention
paths of ``models.transformer.Attention`` as each expects them (a boolean mask for the eager path;
for SDPA the mask or the causal flag, as Hugging Face's SDPA attention is called)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["Masks"]


class Masks:
    """Which keys each query may see, for every block of one forward pass.

    Built lazily, from a recipe (``build``): nothing n x n exists until a path asks for it. The fused
    path of an unpadded causal prompt never does (SDPA gets the causal flag), and the eager path in
    query blocks asks for its rows only (``rows``), so a block costs rows x key_pos booleans.

    ``allowed`` [batch or 1, 1, query_pos or 1, key_pos] bool (None: every key); ``empty_rows``
    [batch, 1, query_pos, 1] bool, the padded query rows that may see no key (None: there are none);
    ``padded``: a key mask takes part; ``n_queries``: the new tokens (query_pos); ``past``: keys of
    earlier tokens come first (generation with a ``KVCache``); ``window``: the sliding window these
    masks apply (None: full attention); ``sliding``: the sliding layers' masks, beside the full
    layers' (None when no layer slides)."""

    __slots__ = ("key_mask", "causal", "device", "padded", "n_queries", "past", "window", "sliding", "_full", "_sdpa")

    def __init__(
        self, n_queries: int, past: int, key_mask: Tensor | None, causal: bool, window: int | None, device: torch.device
    ) -> None:
        self.n_queries, self.past, self.key_mask, self.causal = n_queries, past, key_mask, causal
        self.window, self.device, self.padded = window, device, key_mask is not None
        self.sliding: Masks | None = None
        self._full: tuple[Tensor | None, Tensor | None] | None = None  # (allowed, empty_rows), once asked
        self._sdpa: tuple[Tensor | None, bool] | None = None

    @classmethod
    def build(
        cls, n: int, past: int, key_mask: Tensor | None, causal: bool, window: int | None, device: torch.device
    ) -> Masks:
        """The masks of ``n`` new queries after ``past`` earlier tokens: causal (or not), within
        ``window`` tokens (by index, as Hugging Face's ``sliding_window_overlay``: a query at index i
        sees keys j with i - window < j <= i; bidirectional: |i - j| <= window), and the key mask
        [batch, key_pos] (None: all real). Nothing is computed until asked."""
        return cls(n, past, key_mask, causal, window, device)

    @property
    def _bidirectional_window(self) -> bool:
        # ModernBERT's local layers: |query - key| <= window, as HF's sliding_window_bidirectional_overlay;
        # built from ``window`` keys on, where HF's SDPA mask is
        return not self.causal and self.window is not None and self.past + self.n_queries >= self.window

    @property
    def every_key(self) -> bool:
        """Every query may see every key (``allowed`` is None), known without building anything."""
        return not self.causal and not self._bidirectional_window and self.key_mask is None

    def rows(self, rows: slice | None) -> tuple[Tensor | None, Tensor | None]:
        """(allowed, empty_rows) of the query rows ``rows`` only (None: all of them), each as the
        properties give it; built for those rows alone unless the whole mask exists already."""
        if self._full is not None or rows is None:
            allowed, empty = self._whole()
            if rows is None:
                return allowed, empty
            allowed = allowed if allowed is None or allowed.shape[2] == 1 else allowed[:, :, rows]
            return allowed, None if empty is None else empty[:, :, rows]
        return self._build(rows)

    def _whole(self) -> tuple[Tensor | None, Tensor | None]:
        if self._full is None:
            self._full = self._build(None)
        return self._full

    @property
    def allowed(self) -> Tensor | None:
        return self._whole()[0]

    @property
    def empty_rows(self) -> Tensor | None:
        return None if self.key_mask is None else self._whole()[1]

    def _build(self, rows: slice | None) -> tuple[Tensor | None, Tensor | None]:
        n, past, device = self.n_queries, self.past, self.device
        query = torch.arange(past, past + n, device=device)
        query = (query if rows is None else query[rows])[:, None]
        keys = torch.arange(past + n, device=device)[None]
        allowed = empty_rows = None
        if self._bidirectional_window:
            allowed = ((query - keys).abs() <= self.window)[None, None]
        if self.causal:
            allowed = keys <= query
            if self.window is not None:
                allowed = allowed & (keys > query - self.window)
            allowed = allowed[None, None]
        if self.key_mask is not None:
            key_mask = self.key_mask[:, None, None, :]
            allowed = key_mask if allowed is None else allowed & key_mask
            empty_rows = ~allowed.any(-1, keepdim=True)
            empty_rows = empty_rows if empty_rows.any() else None
        return allowed, empty_rows

    def sdpa(self) -> tuple[Tensor | None, bool]:
        """(attn_mask, is_causal) for ``scaled_dot_product_attention``, as Hugging Face passes them:
        the causal flag and no mask for an unpadded causal prompt (no mask is built), no mask where
        every key is allowed, else the boolean mask [batch, 1, query_pos, key_pos], contiguous. A
        sliding layer with at least ``window`` keys always gets the mask (HF's ``_ignore_causal_mask_sdpa``)."""
        if self._sdpa is None:
            n_keys = self.past + self.n_queries
            if self.every_key:
                self._sdpa = (None, False)
            elif self.window is not None and n_keys >= self.window:
                self._sdpa = (self._expanded(), False)
            elif not self.padded and self.past == 0:
                self._sdpa = (None, True)
            elif not self.padded and self.n_queries == 1:  # one new token sees every earlier key
                self._sdpa = (None, False)
            else:
                self._sdpa = (self._expanded(), False)
        return self._sdpa

    def _expanded(self) -> Tensor:
        allowed = self.allowed
        return allowed.expand(allowed.shape[0], 1, self.n_queries, allowed.shape[-1]).contiguous()
