"""Node attribution patching: EAP and EAP-IG scores of every attention head and every MLP.

A node's score estimates what patching it from the corrupted run into the clean run does to the
metric, to first order (Nanda 2023; Syed et al. 2023):

    EAP      score(node) = (a_corrupted - a_clean) . d metric / d a        at the clean run
    EAP-IG   score(node) = (a_corrupted - a_clean) . mean_k d metric / d a  at the inputs
             e_k = e_corrupted + (k / m) (e_clean - e_corrupted), k = 1..m

EAP-IG follows Hanna et al. (2024): it interpolates the *input embeddings* (``hook_embed``, the
token embeddings; positions are the same in both prompts of a pair), not each node's activation,
and averages the node gradients over the m steps (a right Riemann sum, so ``steps=1`` is EAP
exactly). A head's activation is its ``attn.hook_z`` [batch, pos, head, d_head] (its result
``z @ W_O`` gives the same score: the map is linear), an MLP's its ``hook_mlp_out``. Scores are
summed over positions and averaged over pairs; negative means patching the node in moves the
metric down (towards the corrupted behaviour), so rank by ``abs(score)`` or by ``-score``.

Pairs are streamed in batches of ``batch_size``: the memory is one batch's activations and
gradients, whatever the number of pairs; the sums are accumulated in float64.

On a TransformerLens ``TransformerBridge`` (``node_scores(bridge, ...)``) the same EAP is computed
by TransformerLens 4.3's own ``attribution_patch`` (node granularity), one pair at a time, with its
clean and corrupted arguments swapped (its convention is the denoising one: gradients at the
corrupted run), so that its numbers are this module's; it has no EAP-IG (``ig_steps > 1`` raises
there) and no attention mask.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from analyses.circuits.nodes import head_name, mlp_name
from interp.pairs import Metric, Pairs, logit_diff
from models.transformer import Transformer

__all__ = [
    "METHODS",
    "check_method",
    "check_pairs",
    "forward",
    "cache_values",
    "gradients_along_path",
    "head_name",
    "mlp_name",
    "node_scores",
    "per_pair_node_scores",
    "run_metric",
]

METHODS = ("eap", "eap-ig")


def check_method(method: str, steps: int) -> list[float]:
    """The interpolation points of ``method``: [1.0] for EAP, [1/m, 2/m, .., 1] for EAP-IG."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}; use one of {', '.join(map(repr, METHODS))}")
    if method == "eap":
        return [1.0]
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r}: EAP-IG needs a positive whole number of interpolation steps (e.g. 5)")
    return [k / steps for k in range(1, steps + 1)]


def check_pairs(model: Any, pairs: Pairs) -> None:
    if not isinstance(pairs, Pairs):
        raise TypeError(f"pairs must be interp.pairs.Pairs (analyses.circuits.Pairs), got {type(pairs).__name__}")
    vocab = int(model.cfg.d_vocab)
    hi = max(int(pairs.clean.max()), int(pairs.corrupted.max()))
    if hi >= vocab:
        raise ValueError(f"Pairs hold token id {hi}, but the model's vocabulary has ids 0..{vocab - 1}")


def run_metric(model: Transformer, batch: Pairs, metric: Metric, logits: Tensor) -> Tensor:
    """``metric(logits, batch)``, checked to be one finite-shaped number per pair: [n]."""
    value = metric(logits, batch)
    if not isinstance(value, Tensor) or tuple(value.shape) != (len(batch),):
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"metric must return one number per pair, shape ({len(batch)},); got {shape}")
    return value


def forward(model: Transformer, tokens: Tensor, batch: Pairs) -> Tensor:
    """The model's default output (logits; the final hidden state of an encoder) on ``tokens``."""
    device = model.W_E.device
    mask = None if batch.attention_mask is None else batch.attention_mask.to(device)
    return model(tokens.to(device), attention_mask=mask, return_type="default")


def cache_values(model: Transformer, tokens: Tensor, batch: Pairs, names: Sequence[str]) -> dict[str, Tensor]:
    """The values of hook points ``names`` in a no-grad run on ``tokens`` (detached)."""
    store: dict[str, Tensor] = {}

    def keep(x: Tensor, hook: Any) -> None:
        store[hook.name] = x.detach()

    with torch.no_grad(), model.hooks(fwd_hooks=[(n, keep) for n in names]):
        forward(model, tokens, batch)
    return store


def gradients_along_path(
    model: Transformer,
    batch: Pairs,
    metric: Metric,
    names: Sequence[str],
    alphas: Sequence[float],
    corrupted_embed: Tensor,
    extra_hooks: Iterable[tuple[str, Callable]] = (),
) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """(values at the clean run, gradients of ``metric.sum()`` averaged over the interpolation
    points ``alphas``) at hook points ``names``: one forward and one backward per point, the token
    embeddings set to ``e_corrupted + alpha (e_clean - e_corrupted)``."""
    grads: dict[str, Tensor] = {}
    clean: dict[str, Tensor] = {}
    for alpha in alphas:
        live: dict[str, Tensor] = {}

        def keep(x: Tensor, hook: Any) -> None:
            live[hook.name] = x

        def interpolate(x: Tensor, hook: Any, alpha: float = alpha) -> Tensor:
            e = x if alpha == 1.0 else corrupted_embed + alpha * (x - corrupted_embed)
            return e.detach().requires_grad_(True)  # the graph exists even if the weights are frozen

        hooks = [("hook_embed", interpolate), *extra_hooks, *[(n, keep) for n in names]]
        with torch.enable_grad(), model.hooks(fwd_hooks=hooks):
            value = run_metric(model, batch, metric, forward(model, batch.clean, batch))
            missing = [n for n in names if n not in live]
            if missing:
                raise RuntimeError(f"hook points did not fire: {missing}")
            found = torch.autograd.grad(value.sum(), [live[n] for n in names], allow_unused=True)
        for n, g in zip(names, found):
            g = torch.zeros_like(live[n]) if g is None else g.detach()
            grads[n] = g / len(alphas) if n not in grads else grads[n] + g / len(alphas)
        if alpha == 1.0:
            clean = {n: live[n].detach() for n in names}
    return clean, grads


def _node_names(n_layers: int) -> list[str]:
    return [f"blocks.{layer}.attn.hook_z" for layer in range(n_layers)] + [
        f"blocks.{layer}.hook_mlp_out" for layer in range(n_layers)
    ]


def _node_batch(
    model: Transformer, batch: Pairs, metric: Metric, alphas: list[float], per_pair: bool = False
) -> tuple[Tensor, Tensor]:
    """Summed scores of one batch: heads [layer, head] and MLPs [layer], float64; ``per_pair``: each
    pair's own, heads [pair, layer, head] and MLPs [pair, layer]."""
    n_layers = model.cfg.n_layers
    names = _node_names(n_layers)
    corrupted = cache_values(model, batch.corrupted, batch, [*names, "hook_embed"])
    clean, grads = gradients_along_path(model, batch, metric, names, alphas, corrupted["hook_embed"])
    if per_pair:
        heads = torch.stack([((corrupted[n] - clean[n]) * grads[n]).double().sum(dim=(1, 3)) for n in names[:n_layers]])
        mlps = torch.stack([((corrupted[n] - clean[n]) * grads[n]).double().sum(dim=(1, 2)) for n in names[n_layers:]])
        return heads.transpose(0, 1).cpu(), mlps.transpose(0, 1).cpu()
    heads = torch.stack([((corrupted[n] - clean[n]) * grads[n]).double().sum(dim=(0, 1, 3)) for n in names[:n_layers]])
    mlps = torch.stack([((corrupted[n] - clean[n]) * grads[n]).double().sum() for n in names[n_layers:]])
    return heads.cpu(), mlps.cpu()


def per_pair_node_scores(
    model: Transformer,
    pairs: Pairs,
    metric: Metric = logit_diff,
    method: str = "eap",
    steps: int = 5,
    batch_size: int = 16,
    progress: bool = False,
) -> tuple[list[str], np.ndarray]:
    """(node names in ``node_scores``' order, [pair, node] each pair's EAP or EAP-IG score): the
    values ``node_scores`` averages (their mean over pairs is its ``score`` up to float64 rounding).
    What a bootstrap over pairs resamples. ``models.Transformer`` only."""
    alphas = check_method(method, steps)
    check_pairs(model, pairs)
    if not isinstance(model, Transformer):
        raise TypeError(f"per_pair_node_scores needs a models.Transformer, got {type(model).__name__}")
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    parts = []
    for batch in tqdm(list(pairs.batches(batch_size)), desc=f"{method} per pair", disable=not progress, leave=False):
        h, m = _node_batch(model, batch, metric, alphas, per_pair=True)  # [b, layer, head], [b, layer]
        parts.append(torch.cat([h, m[:, :, None]], dim=2).reshape(len(batch), -1))  # each layer's heads, its MLP
    names = []
    for layer in range(n_layers):
        names += [head_name(layer, h) for h in range(n_heads)] + [mlp_name(layer)]
    return names, torch.cat(parts).numpy()


def _bridge_node_batch(bridge: Any, batch: Pairs, metric: Metric, n_layers: int, n_heads: int) -> tuple[Tensor, Tensor]:
    """The same sums through TransformerLens's ``attribution_patch`` on a ``TransformerBridge``."""
    from transformer_lens.tools.analysis.attribution_patching import EdgeAttributionConfig, attribution_patch

    if batch.attention_mask is not None:
        raise ValueError(
            "TransformerLens's attribution_patch takes no attention mask: give the bridge unpadded pairs "
            "(all of one length), or run node_scores on models.Transformer"
        )
    heads = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    mlps = torch.zeros(n_layers, dtype=torch.float64)
    device = next(bridge.parameters()).device
    for i in range(len(batch)):
        one = batch[i : i + 1]

        def metric_fn(logits: Tensor, one: Pairs = one) -> Tensor:
            return metric(logits, one).sum()

        # swapped: TransformerLens scores (a_its_clean - a_its_corrupt) . grad at its corrupt run
        result = attribution_patch(
            bridge, one.corrupted.to(device), one.clean.to(device), metric_fn, EdgeAttributionConfig(granularity="node")
        )
        for node, score in result.node_scores.items():
            if node.kind == "attn_head_out":
                heads[node.layer, node.head] += score
            elif node.kind == "mlp_out":
                mlps[node.layer] += score
    return heads, mlps


def node_scores(
    model: Any,
    pairs: Pairs,
    metric: Metric = logit_diff,
    method: str = "eap",
    steps: int = 5,
    batch_size: int = 16,
    progress: bool = False,
) -> pd.DataFrame:
    """EAP or EAP-IG score of every head and MLP, averaged over ``pairs``.

    model: a ``models.Transformer`` (either method), or a TransformerLens ``TransformerBridge``
        (EAP only, through TransformerLens's own ``attribution_patch``).
    metric: ``metric(logits, pairs) -> [n]`` (default ``logit_diff``).
    method: "eap" (one backward per batch) or "eap-ig" (``steps`` interpolation points).
    Returns a DataFrame, one row per node in layer order (each layer's heads, then its MLP):
    ``node`` ("a3.h2", "m3"), ``layer``, ``head`` (the head's index, or "mlp"), ``score``.
    """
    alphas = check_method(method, steps)
    check_pairs(model, pairs)
    cfg = model.cfg
    n_layers, n_heads = int(cfg.n_layers), int(cfg.n_heads)
    ours = isinstance(model, Transformer)
    if not ours:
        if not (hasattr(model, "hook_dict") and hasattr(model, "original_model")):
            raise TypeError(
                f"node_scores needs a models.Transformer or a TransformerBridge, got {type(model).__name__}"
            )
        if method != "eap":
            raise NotImplementedError(
                "EAP-IG on a TransformerBridge: TransformerLens 4.3's attribution_patch raises for ig_steps > 1; "
                "run it on models.Transformer over the same weights (models.load)"
            )
    heads = torch.zeros(n_layers, n_heads, dtype=torch.float64)
    mlps = torch.zeros(n_layers, dtype=torch.float64)
    for batch in tqdm(list(pairs.batches(batch_size)), desc=f"{method} nodes", disable=not progress):
        if ours:
            h, m = _node_batch(model, batch, metric, alphas)
        else:
            h, m = _bridge_node_batch(model, batch, metric, n_layers, n_heads)
        heads += h
        mlps += m
    heads, mlps = heads / len(pairs), mlps / len(pairs)
    rows = []
    for layer in range(n_layers):
        rows += [(head_name(layer, h), layer, h, float(heads[layer, h])) for h in range(n_heads)]
        rows.append((mlp_name(layer), layer, "mlp", float(mlps[layer])))
    return pd.DataFrame(rows, columns=["node", "layer", "head", "score"])
