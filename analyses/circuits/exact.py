"""Exact per-head patching, the ground truth for the attribution scores: every head patched alone
from the corrupted run into the clean run (``interp.interventions.head_sweep``), the exact
counterpart of what EAP linearises ((corrupted - clean) . gradient at the clean run).
``exact_patching`` gives the effect of each head on each pair and the table of means;
``rank_agreement`` is Spearman's rho between attribution scores and the exact effects over heads.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from analyses.circuits.nodes import node_name, scores_to_series
from analyses.circuits.runner import answer_metric, narrow
from interp.interventions import all_heads, cache_z, head_sweep, replace_stacked
from interp.names import act_name
from interp.pairs import Metric, Pairs, logit_diff
from interp.view import view

__all__ = ["ExactEffects", "exact_patching", "exact_head_effects", "rank_agreement"]


def _sweep_stacked(model: Any, batch: Pairs, z: Mapping[int, Tensor], metric: Metric) -> tuple[Tensor, Tensor]:
    """(the clean run's metric [batch], the metric with each head alone patched to ``z`` (its
    corrupted ``hook_z``) [layer * head, batch], heads in ``all_heads`` order). One clean run caches
    every block's input; then per layer one ``run_from_layer`` on that input stacked n_heads times,
    copy h with head h patched: what ``head_sweep`` does head by head."""
    v = view(model)
    n_heads, b = v.n_heads, len(batch)
    names = [act_name(layer, "hook_resid_pre") for layer in range(v.n_layers)]
    store: dict[str, Tensor] = {}

    def keep(x: Tensor, hook: Any) -> None:
        store[hook.name] = x

    short = narrow(model, metric)
    kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
    with model.hooks(fwd_hooks=[(n, keep) for n in names]):
        out = model(batch.clean, return_type="hidden" if short else "default", **kw)
    clean = answer_metric(model, out, batch) if short else metric(out, batch)
    stacked = batch.repeat(n_heads)
    one_each = torch.eye(n_heads, dtype=torch.bool).view(n_heads, 1, 1, n_heads, 1)
    rows = []
    for layer in range(v.n_layers):
        hook = (act_name(layer, "attn.hook_z"), functools.partial(replace_stacked, src=z[layer], where=one_each))
        with model.hooks(fwd_hooks=[hook]):
            out = model.run_from_layer(
                layer,
                store[names[layer]].repeat(n_heads, 1, 1),
                attention_mask=stacked.attention_mask,
                return_type="hidden" if short else "default",
            )
        rows.append((answer_metric(model, out, stacked) if short else metric(out, stacked)).view(n_heads, b))
    return clean, torch.cat(rows)


@dataclass
class ExactEffects:
    """``exact_patching``'s result. table: one row per head (layer, head, effect: the mean over pairs
    of m(patched) - m(clean), normalised: effect / (m(clean) - m(corrupted))), attrs clean and
    corrupted (the means); per_pair: [pair, head] m(patched) - m(clean) of each pair (heads in the
    table's order); clean, corrupted: [pair] the unpatched metrics."""

    table: pd.DataFrame
    per_pair: np.ndarray
    clean: np.ndarray
    corrupted: np.ndarray


@torch.no_grad()
def exact_patching(
    model: Any,
    pairs: Pairs,
    metric: Metric = logit_diff,
    batch_size: int = 32,
    progress: bool = False,
    fast: bool = True,
) -> ExactEffects:
    """Each head patched alone from the corrupted run into the clean run, on each pair. Every run
    starts from the head's layer (``run_from_layer`` on the clean run's cached input to it).
    ``fast`` (the toolkit's model): one run per layer with its heads' patched copies stacked along
    the batch axis (``_sweep_stacked``); False: one run per head (``head_sweep``), the same numbers
    within float rounding (tested). The means are accumulated batch by batch as they always were
    (so the table's numbers do not move); the per-pair arrays sit beside them."""
    from tqdm.auto import tqdm

    from models.transformer import Transformer

    heads = all_heads(model)
    total = np.zeros(len(heads))
    clean_sum = corrupted_sum = 0.0
    fast = fast and isinstance(model, Transformer)
    patched_parts, clean_parts, corrupted_parts = [], [], []
    for batch in tqdm(list(pairs.batches(batch_size)), desc="exact patching", disable=not progress, leave=False):
        out, z = cache_z(
            model, batch.corrupted, range(view(model).n_layers), attention_mask=batch.corrupted_attention_mask
        )
        corrupted = metric(out, batch)
        corrupted_sum += float(corrupted.sum())
        if fast:
            clean, patched = _sweep_stacked(model, batch, z, metric)
            clean_sum += float(clean.sum())
            total += patched.sum(1).double().cpu().numpy()
            patched = patched.double().cpu().numpy()
        else:
            kw = {} if batch.attention_mask is None else {"attention_mask": batch.attention_mask}
            clean = metric(model(batch.clean, **kw), batch)
            clean_sum += float(clean.sum())
            res = head_sweep(
                model, batch.clean, z, {"m": lambda out, b=batch: metric(out, b)}, attention_mask=batch.attention_mask
            )
            total += res["m"].sum(1)
            patched = np.asarray(res["m"], dtype=float)
        clean = clean.double().cpu().numpy()
        patched_parts.append(patched.T - clean[:, None])
        clean_parts.append(clean)
        corrupted_parts.append(corrupted.double().cpu().numpy())
    n = len(pairs)
    clean, corrupted = clean_sum / n, corrupted_sum / n
    effect = total / n - clean
    df = pd.DataFrame(heads, columns=["layer", "head"])
    df["effect"] = effect
    df["normalised"] = effect / (clean - corrupted)
    df.attrs.update(clean=clean, corrupted=corrupted)
    return ExactEffects(df, np.concatenate(patched_parts), np.concatenate(clean_parts), np.concatenate(corrupted_parts))


def exact_head_effects(model: Any, pairs: Pairs, *args: Any, **kw: Any) -> pd.DataFrame:
    """``exact_patching(...).table`` (the same arguments): per head the mean effect over pairs and
    its normalised value."""
    return exact_patching(model, pairs, *args, **kw).table


def rank_agreement(attribution: pd.DataFrame | pd.Series, exact: pd.DataFrame) -> tuple[float, float, int]:
    """Spearman's rho (scipy) between attribution scores and exact patching effects over the heads
    both list: (rho, p-value, number of heads)."""
    from scipy.stats import spearmanr

    a = scores_to_series(attribution)
    e = pd.Series(exact["effect"].to_numpy(float), index=[node_name(r.layer, r.head) for r in exact.itertuples()])
    common = [n for n in e.index if n in a.index]
    if len(common) < 3:
        raise ValueError(f"rank agreement needs >= 3 heads scored by both; {len(common)} are")
    rho, p = spearmanr(a[common].to_numpy(), e[common].to_numpy())
    return float(rho), float(p), len(common)
