"""The causal side of the catalogue on a causal LM: each head patched from the corrupted prompt into
the clean one, on each contrastive pair, at the position where a role acts.

* ``answer_patching``: every head patched **at the answer position only** (the token whose
  next-token prediction is the answer: where predictive readings, IOI's name movers and induction
  heads act). On a causal model nothing before that position sees it, so the run after the patch
  is one row: the clean prompt's keys and values up to the answer are cached once
  (``models.generate.KVCache``), and per layer the answer row is run from that layer
  (``Transformer.run_from_layer(past_kv_cache=...)``) with the layer's heads' patched copies
  stacked along the batch. About one sequence-length cheaper than patching at every position.
* ``all_position_patching``: the heads listed patched at every position (the roles that act
  before the answer: previous-token and duplicate-token heads write into earlier positions what
  later heads read), the whole sequence run from the head's layer with the layer's listed heads
  stacked, as ``interp.interventions.head_sweep`` does head by head.

Both return per-pair effects ``clean - patched`` of the logit difference (positive: the head
carries the behaviour, patching in the corrupted prompt's value lowers it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from interp.interventions import all_heads, cache_z, replace_stacked
from interp.names import act_name
from interp.pairs import Pairs, logit_diff
from interp.view import view

__all__ = ["answer_patching", "all_position_patching"]


def _two_logits(model: Any, hidden: Tensor, batch: Pairs) -> Tensor:
    """[n] logit(right) - logit(wrong) from final-norm rows ``hidden`` [n, d_model]: only the two
    rows of the unembedding each pair needs (``Transformer._unembed`` computes all 49,152 of
    SmolLM2's; the same numbers within float rounding), soft-capped where the model caps logits."""
    weight = model.W_E if model.unembed_weight is None else model.unembed_weight
    tokens = torch.stack([batch.right, batch.wrong], 1).to(hidden.device)  # [n, 2]
    logits = torch.einsum("nd,nkd->nk", hidden, weight[tokens])
    if model.b_U is not None:
        logits = logits + model.b_U[tokens]
    cap = model.cfg.final_softcap
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return logits[:, 0] - logits[:, 1]


def _left_aligned(batch: Pairs) -> tuple[Tensor, Tensor]:
    """The clean prompts up to and including each pair's answer position, left-padded so that every
    answer sits in the last column: (tokens [b, P + 1], mask [b, P + 1]), P the largest position.
    Positions follow the mask, so each prompt's tokens keep their positions (and RoPE angles)."""
    pos = batch.position
    width = int(pos.max()) + 1
    b = len(batch)
    tokens = torch.zeros(b, width, dtype=batch.clean.dtype)
    mask = torch.zeros(b, width, dtype=torch.bool)
    for i in range(b):
        p = int(pos[i])
        tokens[i, width - 1 - p :] = batch.clean[i, : p + 1]
        real = torch.ones(p + 1, dtype=torch.bool) if batch.attention_mask is None else batch.attention_mask[i, : p + 1]
        mask[i, width - 1 - p :] = real.bool()
    return tokens, mask


def _answer_batch(model: Any, batch: Pairs, z_corrupted: dict[int, Tensor]) -> tuple[Tensor, Tensor]:
    """(clean [b], patched [layer * head, b]) logit differences: the prompts' prefixes up to the
    answer cached once (left-aligned), the answer row run from each layer with that layer's heads'
    patched copies stacked."""
    from models.generate import KVCache

    cfg = model.cfg
    n_layers, n_heads, b = cfg.n_layers, cfg.n_heads, len(batch)
    tokens, mask = _left_aligned(batch)
    cache = KVCache(n_layers)
    if tokens.shape[1] > 1:
        prefix_mask = mask[:, :-1]
        if not prefix_mask.any(-1).all():
            raise ValueError("answer-position patching needs at least one token before each pair's answer position")
        model(
            tokens[:, :-1],
            attention_mask=None if prefix_mask.all() else prefix_mask,
            past_kv_cache=cache,
            return_type=None,
        )
    names = [act_name(layer, "hook_resid_pre") for layer in range(n_layers)]
    store: dict[str, Tensor] = {}

    def keep(x: Tensor, hook: Any) -> None:
        store[hook.name] = x

    with model.hooks(fwd_hooks=[(n, keep) for n in names]):
        hidden = model(tokens[:, -1:], past_kv_cache=cache.repeat(1), return_type="hidden")
    clean = _two_logits(model, hidden[:, 0], batch)
    stacked = batch.repeat(n_heads)
    one_each = torch.eye(n_heads, dtype=torch.bool).view(n_heads, 1, 1, n_heads, 1)
    rows = []
    for layer in range(n_layers):
        src = z_corrupted[layer]
        hook = (act_name(layer, "attn.hook_z"), functools.partial(replace_stacked, src=src, where=one_each))
        with model.hooks(fwd_hooks=[hook]):
            out = model.run_from_layer(
                layer,
                store[names[layer]].repeat(n_heads, 1, 1),
                past_kv_cache=cache.repeat(n_heads, layer),
                return_type="hidden",
            )
        rows.append(_two_logits(model, out[:, 0], stacked).view(n_heads, b))
    return clean, torch.cat(rows)


@torch.no_grad()
def answer_patching(
    model: Any, pairs: Pairs, batch_size: int = 16, progress: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(effects [pair, head] = clean - patched logit difference, heads in ``all_heads`` order;
    clean [pair]; corrupted [pair]) with each head patched alone at each pair's answer position
    (``Pairs.position``) from the corrupted run. Needs the toolkit's causal model."""
    from models.transformer import Transformer

    if not isinstance(model, Transformer) or not model.cfg.is_causal:
        raise ValueError("answer-position patching needs the toolkit's causal model (models.load of a causal LM)")
    n_layers = view(model).n_layers
    effects, cleans, corrupteds = [], [], []
    for batch in tqdm(list(pairs.batches(batch_size)), desc="answer patching", disable=not progress, leave=False):
        out, z = cache_z(model, batch.corrupted, range(n_layers), attention_mask=batch.corrupted_attention_mask)
        corrupted = logit_diff(out, batch)
        rows = torch.arange(len(batch))
        zc = {layer: z[layer][rows, batch.position][:, None] for layer in range(n_layers)}
        clean, patched = _answer_batch(model, batch, zc)
        effects.append((clean[None] - patched).T.double().cpu().numpy())
        cleans.append(clean.double().cpu().numpy())
        corrupteds.append(corrupted.double().cpu().numpy())
    return np.concatenate(effects), np.concatenate(cleans), np.concatenate(corrupteds)


@torch.no_grad()
def all_position_patching(
    model: Any, pairs: Pairs, heads: Sequence[tuple[int, int]], batch_size: int = 16, progress: bool = False
) -> np.ndarray:
    """effects [pair, len(heads)] = clean - patched logit difference with each listed head patched
    alone at every position from the corrupted run. One clean run caches each needed layer's input;
    per layer, the listed heads of that layer are patched in copies stacked along the batch and the
    whole sequence is run from that layer (``run_from_layer``: nothing below it changes); only the two
    unembedding rows of the answer are computed."""
    heads = [(int(a), int(b)) for a, b in heads]
    if not heads:
        return np.zeros((len(pairs), 0))
    n_heads = model.cfg.n_heads
    layers = sorted({a for a, _ in heads})
    names = {layer: act_name(layer, "hook_resid_pre") for layer in layers}
    parts = []
    for batch in tqdm(list(pairs.batches(batch_size)), desc="all-position patching", disable=not progress, leave=False):
        _, z = cache_z(model, batch.corrupted, layers, attention_mask=batch.corrupted_attention_mask)
        store: dict[str, Tensor] = {}

        def keep(x: Tensor, hook: Any, store: dict = store) -> None:
            store[hook.name] = x

        kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
        with model.hooks(fwd_hooks=[(n, keep) for n in names.values()]):
            hidden = model(batch.clean, return_type="hidden", **kw)
        rows = torch.arange(len(batch))
        clean = _two_logits(model, hidden[rows, batch.position], batch)
        out = np.zeros((len(batch), len(heads)))
        for layer in layers:
            mine = [i for i, (a, _) in enumerate(heads) if a == layer]
            k = len(mine)
            where = torch.zeros(k, 1, 1, n_heads, 1, dtype=torch.bool)
            for j, i in enumerate(mine):
                where[j, 0, 0, heads[i][1], 0] = True
            stacked = batch.repeat(k)
            hook = (act_name(layer, "attn.hook_z"), functools.partial(replace_stacked, src=z[layer], where=where))
            with model.hooks(fwd_hooks=[hook]):
                h = model.run_from_layer(
                    layer,
                    store[names[layer]].repeat(k, 1, 1),
                    attention_mask=stacked.attention_mask,
                    return_type="hidden",
                )
            srows = torch.arange(len(stacked))
            patched = _two_logits(model, h[srows, stacked.position], stacked).view(k, len(batch))
            out[:, mine] = (clean[None] - patched).T.double().cpu().numpy()
        parts.append(out)
    return np.concatenate(parts)


def head_order(model: Any) -> list[tuple[int, int]]:
    """The heads in the order of ``answer_patching``'s columns."""
    return [(int(a), int(b)) for a, b in all_heads(model)]
