"""Planted compositions, for checking that QK attribution finds what was built.

Both start from ``analyses.validation.planted.planted_model``: the stream is [token one-hot | position
one-hot | previous-token slot], and head ``PREV`` = (0, 0) attends from p to p - 1 and copies the
token there into the previous-token slot. Layer 1 gets two hand-set heads:

* ``INDUCTION`` = (1, 0), **K-composition**: its query reads the token slot, its key the
  previous-token slot. It attends from a token x to the keys whose *previous* token is x (an induction
  head), and what makes a key match is written there by ``PREV``: the key side of its score is PREV's.
* ``DUPLICATE_PREV`` = (1, 1), **Q-composition**: its query reads the previous-token slot, its key the
  token slot. It attends from position i to the earlier copies of the token at i - 1: what its query
  asks for is written by ``PREV``, at the query's position.

``composition_prompt`` gives a repeated sequence with the positions where each head should attend.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["PREV", "INDUCTION", "DUPLICATE_PREV", "composition_model", "composition_prompt"]

PREV, INDUCTION, DUPLICATE_PREV = (0, 0), (1, 0), (1, 1)


def composition_model(strength: float = 3.0, vocab: int = 12, n_ctx: int = 12, seed: int = 0) -> Any:
    """The planted model with ``INDUCTION`` (K-composition) and ``DUPLICATE_PREV`` (Q-composition)
    set in layer 1 (weights x ``strength``); every other layer-1 head keeps small random weights."""
    from analyses.validation.planted import planted_model

    model, _ = planted_model(n_layers=2, n_heads=4, vocab=vocab, n_ctx=n_ctx, seed=seed)
    cfg = model.cfg
    tok, prev = 0, vocab + n_ctx
    reads_token = torch.zeros(cfg.d_model, cfg.d_head)
    reads_prev = torch.zeros(cfg.d_model, cfg.d_head)
    for t in range(vocab):
        reads_token[tok + t, t] = strength
        reads_prev[prev + t, t] = strength
    with torch.no_grad():
        attn = model.blocks[1].attn
        attn.W_Q[INDUCTION[1]], attn.W_K[INDUCTION[1]] = reads_token, reads_prev
        attn.W_Q[DUPLICATE_PREV[1]], attn.W_K[DUPLICATE_PREV[1]] = reads_prev, reads_token
    return model


def composition_prompt(vocab: int = 12, length: int = 6, seed: int = 0) -> dict:
    """A sequence of ``length`` distinct tokens then its first ``length - 1`` again (2 * length - 1
    tokens) and where the planted heads should look from its last position q (the second copy of
    token s[length - 2]): ``induction`` the key after the first copy (length - 1), ``duplicate_prev``
    the first copy of the token before q (length - 3), and ``other`` a key neither should prefer (0)."""
    if not 3 <= length <= vocab or 2 * length - 1 > 12:
        raise ValueError(f"length={length}: need 3 <= length <= vocab and 2 * length - 1 <= 12 positions")
    g = torch.Generator().manual_seed(seed)
    first = torch.randperm(vocab, generator=g)[:length]
    tokens = torch.cat([first, first[: length - 1]])[None]
    q = tokens.shape[1] - 1
    return {"tokens": tokens, "query": q, "induction": length - 1, "duplicate_prev": length - 3, "other": 0}
