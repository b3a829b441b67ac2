"""Attention patterns in query blocks, so that reading them at long context costs block x key_pos
memory per layer instead of query_pos x key_pos.

>>> with pattern_blocks(model, 256):
...     model.run_with_hooks(tokens, fwd_hooks=[("blocks.3.attn.hook_pattern", reduce_rows)])

Inside the context the eager attention path (the one that runs when ``hook_attn_scores`` or
``hook_pattern`` is hooked, or with ``exact=True``) computes the scores and the softmax rows 256
query rows at a time and hands each block to the hooks: a hook on ``hook_pattern`` is called once
per block with ``[batch, head, rows, key_pos]``, and ``hook.query_rows`` (an
``interp.hooks.QueryRows``: ``start``, ``stop``, ``n``, ``.rows``, ``.last``) says which rows of
the full ``[batch, head, query_pos, key_pos]`` it holds (None outside blocks). A hook that returns
an edited block edits those rows. The masks (causal, padding, sliding windows), the ALiBi bias and
the soft-cap are taken per block, row for row what the full path uses.

What it gives: the scores, the pattern and the softmax's temporaries of one layer exist for one
block at a time; the rest of the forward is unchanged (z, the residual stream and the MLP are
O(query_pos)). Equality with the full eager path (``tests/models/test_blockwise.py``): softmax rows
are independent, so the pattern and the scores are the same bits wherever the matrix product of a
block of rows rounds as the product of all rows does (it does on the CPU kernels tested, for every
positional scheme); z = pattern @ v sums over the same keys, within a stated bound where a kernel
changes the summation order with the number of rows (docs/long_context_memory.md).

A hook that keeps what it is given (``run_with_cache``'s caching hook) sees only one block at a
time, so ``run_with_cache`` refuses the scores and the pattern inside the context (an error naming the
hook): cache patterns without blocks, and use blocks with hooks that read ``hook.query_rows`` (the
streaming reducers of ``interp.reducers``, the head probe)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

__all__ = ["pattern_blocks"]


@contextmanager
def pattern_blocks(model: nn.Module, rows: int | None) -> Iterator[nn.Module]:
    """Within the context, every attention layer of ``model`` (a ``models.Transformer``) computes its
    eager scores and pattern ``rows`` query rows at a time (None: all at once, the default), and
    restores the previous setting on exit."""
    from models.transformer import Attention

    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise ValueError(f"pattern_blocks: rows must be a positive int (query rows per block) or None, got {rows!r}")
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    if not layers:
        raise ValueError(
            f"pattern_blocks: {type(model).__name__} has no models.transformer.Attention layers "
            "(query blocks need the toolkit's own Transformer)"
        )
    before = [layer.__dict__.get("query_block") for layer in layers]
    for layer in layers:
        layer.query_block = rows
    try:
        yield model
    finally:
        for layer, old in zip(layers, before):
            if old is None:
                layer.__dict__.pop("query_block", None)  # back to the class default
            else:
                layer.query_block = old
