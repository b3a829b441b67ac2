"""Which keys each query may see: the causal mask, the sliding window of a layer's type and the
padding, built once per forward pass for every block (``Masks``), and handed to the two attention
paths of ``models.transformer.Attention`` as each expects them (a boolean mask for the eager path;
for SDPA the mask or the causal flag, as Hugging Face's SDPA attention is called)."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["Masks"]


class Masks:
    """Which keys each query may see, computed once per forward pass for every block.

    ``allowed`` [batch or 1, 1, query_pos or 1, key_pos] bool (None: every key); ``empty_rows``
    [batch, 1, query_pos, 1] bool, the padded query rows that may see no key (None: there are none);
    ``padded``: a key mask takes part; ``n_queries``: the new tokens (query_pos); ``past``: keys of
    earlier tokens come first (generation with a ``KVCache``); ``window``: the sliding window these
    masks apply (None: full attention); ``sliding``: the sliding layers' masks, beside the full
    layers' (None when no layer slides)."""

    __slots__ = ("allowed", "empty_rows", "padded", "n_queries", "past", "window", "sliding", "_sdpa")

    def __init__(
        self,
        allowed: Tensor | None,
        empty_rows: Tensor | None,
        padded: bool,
        n_queries: int,
        past: int = 0,
        window: int | None = None,
    ) -> None:
        self.allowed, self.empty_rows, self.padded = allowed, empty_rows, padded
        self.n_queries, self.past, self.window = n_queries, past, window
        self.sliding: Masks | None = None
        self._sdpa: tuple[Tensor | None, bool] | None = None

    @classmethod
    def build(
        cls, n: int, past: int, key_mask: Tensor | None, causal: bool, window: int | None, device: torch.device
    ) -> Masks:
        """The masks of ``n`` new queries after ``past`` earlier tokens: causal (or not), within
        ``window`` tokens (by index, as Hugging Face's ``sliding_window_overlay``: a query at index i
        sees keys j with i - window < j <= i; bidirectional: |i - j| <= window), and the key mask
        [batch, key_pos] (None: all real)."""
        allowed = empty_rows = None
        if not causal and window is not None and past + n >= window:
            # a bidirectional window (ModernBERT's local layers): |query - key| <= window, as HF's
            # sliding_window_bidirectional_overlay; built from ``window`` keys on, where HF's SDPA mask is
            query = torch.arange(past, past + n, device=device)[:, None]
            allowed = ((query - torch.arange(past + n, device=device)[None]).abs() <= window)[None, None]
        if causal:
            allowed = torch.ones(n, past + n, dtype=torch.bool, device=device).tril(past)
            if window is not None:
                allowed = allowed.triu(past - window + 1)
            allowed = allowed[None, None]
        if key_mask is not None:
            keys = key_mask[:, None, None, :]
            allowed = keys if allowed is None else allowed & keys
            empty_rows = ~allowed.any(-1, keepdim=True)
            empty_rows = empty_rows if empty_rows.any() else None
        return cls(allowed, empty_rows, key_mask is not None, n, past, window)

    def sdpa(self) -> tuple[Tensor | None, bool]:
        """(attn_mask, is_causal) for ``scaled_dot_product_attention``, as Hugging Face passes them:
        the causal flag and no mask for an unpadded causal prompt, no mask where every key is allowed,
        else the boolean mask [batch, 1, query_pos, key_pos], contiguous. A sliding layer with at
        least ``window`` keys always gets the mask (HF's ``_ignore_causal_mask_sdpa``)."""
        if self._sdpa is None:
            allowed = self.allowed
            if allowed is None:
                self._sdpa = (None, False)
            elif self.window is not None and allowed.shape[-1] >= self.window:
                shape = (allowed.shape[0], 1, self.n_queries, allowed.shape[-1])
                self._sdpa = (allowed.expand(shape).contiguous(), False)
            elif not self.padded and self.past == 0:
                self._sdpa = (None, True)
            elif not self.padded and self.n_queries == 1:  # one new token sees every earlier key
                self._sdpa = (None, False)
            else:
                shape = (allowed.shape[0], 1, self.n_queries, allowed.shape[-1])
                self._sdpa = (allowed.expand(shape).contiguous(), False)
        return self._sdpa
