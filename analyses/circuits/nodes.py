"""Nodes and node circuits: the names, their parsing, rankings and random circuits (MIB's names).

A *node* is a component that writes to the residual stream: ``"a{layer}.h{head}"`` (one attention
head: its ``hook_z`` slice, per *query* head under grouped-query attention), ``"m{layer}"`` (one
MLP: ``hook_mlp_out``), and ``INPUT`` = ``"input"`` (the embeddings: ``blocks.0.hook_resid_pre``).
A circuit is a collection of node names; ``circuit_parts`` checks one against a model.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from interp.view import view

__all__ = [
    "INPUT",
    "head_name",
    "mlp_name",
    "node_name",
    "parse_node",
    "all_nodes",
    "circuit_parts",
    "scores_to_series",
    "top_nodes",
    "random_circuits",
    "label_ranking",
]

INPUT = "input"
_HEAD = re.compile(r"^a(\d+)\.h(\d+)$")
_MLP = re.compile(r"^m(\d+)$")


def head_name(layer: int, head: int) -> str:
    """The node name of head ``head`` of layer ``layer``: ``a{layer}.h{head}``."""
    return f"a{layer}.h{head}"


def mlp_name(layer: int) -> str:
    """The node name of layer ``layer``'s MLP: ``m{layer}``."""
    return f"m{layer}"


def node_name(layer: int, head: int | str) -> str:
    """``"a{layer}.h{head}"`` for a head, ``"m{layer}"`` for ``head == "mlp"``."""
    return mlp_name(int(layer)) if str(head) == "mlp" else head_name(int(layer), int(head))


def parse_node(name: str) -> tuple[str, int, int | None]:
    """(kind, layer, head): ("head", L, H), ("mlp", L, None) or ("input", -1, None)."""
    if name == INPUT:
        return "input", -1, None
    m = _HEAD.match(name)
    if m:
        return "head", int(m.group(1)), int(m.group(2))
    m = _MLP.match(name)
    if m:
        return "mlp", int(m.group(1)), None
    raise ValueError(f"{name!r} is not a node name; use 'a<layer>.h<head>' (e.g. 'a0.h1'), 'm<layer>' or 'input'")


def all_nodes(model: Any) -> list[str]:
    """Every head and MLP of ``model`` in layer order (the input is not listed: it is in every
    non-empty circuit)."""
    v = view(model)
    out = []
    for layer in range(v.n_layers):
        out += [head_name(layer, h) for h in range(v.n_heads)]
        out.append(mlp_name(layer))
    return out


def circuit_parts(model: Any, circuit: Collection[str]) -> tuple[dict[int, set[int]], set[int]]:
    """A circuit's heads by layer and its MLPs' layers, its names checked against the model."""
    if isinstance(circuit, str):
        raise TypeError(f"a circuit is a collection of node names, got the string {circuit!r}")
    v = view(model)
    inside: dict[int, set[int]] = {layer: set() for layer in range(v.n_layers)}
    mlps: set[int] = set()
    for name in circuit:
        kind, layer, head = parse_node(name)
        if (kind != "input" and not 0 <= layer < v.n_layers) or (kind == "head" and not 0 <= head < v.n_heads):
            raise ValueError(f"node {name!r} does not exist: the model has {v.n_layers} layers of {v.n_heads} heads")
        if kind == "head":
            inside[layer].add(head)
        elif kind == "mlp":
            mlps.add(layer)
    return inside, mlps


def scores_to_series(scores: pd.DataFrame | pd.Series | Mapping[str, float]) -> pd.Series:
    """Node scores as a Series indexed by node name: from a DataFrame with ``layer``, ``head`` (an
    int, or "mlp") and ``score`` columns (what ``node_scores`` returns), or ``node`` and ``score``."""
    if isinstance(scores, pd.Series):
        return scores.astype(float)
    if isinstance(scores, Mapping):
        return pd.Series(dict(scores), dtype=float)
    if "score" not in scores.columns:
        raise ValueError(f"node scores need a 'score' column; the table has {list(scores.columns)}")
    if "node" in scores.columns:
        names = scores["node"].astype(str)
    elif {"layer", "head"} <= set(scores.columns):
        names = [node_name(layer, head) for layer, head in zip(scores["layer"], scores["head"])]
    else:
        raise ValueError("node scores need a 'node' column or 'layer' and 'head' columns")
    return pd.Series(scores["score"].to_numpy(dtype=float), index=list(names))


def top_nodes(scores: pd.Series, k: int, absolute: bool = True) -> list:
    """The ``k`` entries (nodes, or edges) of highest |score| (``absolute``, MIB's default) or
    score; ties by index order."""
    if k < 0:
        raise ValueError(f"a circuit has k >= 0 nodes, got k={k}")
    key = scores.abs() if absolute else scores
    order = np.argsort(-key.to_numpy(), kind="stable")
    return [scores.index[i] for i in order[:k]]


def random_circuits(nodes: Sequence, k: int, n: int, seed: int = 0) -> list[list]:
    """``n`` circuits of ``k`` entries (nodes, or edges) drawn uniformly without replacement from
    ``nodes`` (seeded)."""
    rng = np.random.default_rng(seed)
    return [[nodes[i] for i in rng.choice(len(nodes), size=k, replace=False)] for _ in range(n)]


def label_ranking(nodes: Sequence[str], labels: pd.DataFrame) -> pd.Series:
    """A score per node from a role's labels (rows: layer, head, label, score): labelled heads first
    (by their score), then the other heads by score, MLPs last."""
    score = {}
    for r in labels.itertuples():
        name = node_name(int(r.layer), int(r.head))
        s = float(getattr(r, "score", 0.0)) if pd.notna(getattr(r, "score", np.nan)) else 0.0
        score[name] = max(score.get(name, -np.inf), s + (1e6 if bool(r.label) else 0.0))
    low = min(score.values(), default=0.0) - 1.0
    out = {n: score.get(n, low if parse_node(n)[0] == "head" else low - 1.0) for n in nodes}
    return pd.Series(out, dtype=float)
