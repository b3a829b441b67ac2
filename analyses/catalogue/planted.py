"""The catalogue's inputs on a planted model whose heads are known: the model, the heads table a probe
would write for it and the contrastive pairs of its one task. With them ``analyses.catalogue.run`` can
be watched (notebook 04) and tested (tests/analyses/catalogue) where the right verdicts are known in
advance, in a few CPU-seconds.

The model is ``analyses.validation.planted.planted_copies`` with 2 layers of 8 heads: ``COPY``
(0, 0) attends from position p to p - 1 and writes the token there into the slot the unembedding
reads; ``DECOY`` (0, 1) has exactly that attention pattern and a near-zero W_O (random, x 0.02), so
it writes nothing; ``HIDDEN`` (1, 5) is a second copy head like ``COPY``. The heads table labels
``COPY`` and ``DECOY`` ``previous_token`` (their patterns would earn it) and leaves ``HIDDEN``
unnamed (a head a probe missed), so the catalogue should find ``mechanism``, ``pattern, no effect``
and ``effect, no named pattern``; every other head is ``quiet``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import torch

__all__ = ["COPY", "DECOY", "HIDDEN", "TASK", "ROLE_TASKS", "PlantedInputs", "copy_model", "copy_pairs", "heads_table",
           "planted_catalogue_inputs"]  # fmt: skip

COPY, DECOY, HIDDEN = (0, 0), (0, 1), (1, 5)
TASK = "induction"  # the planted task's name: on period-2 sequences a copy of the previous token is induction too
# what the planted pairs test (``run(..., role_tasks=ROLE_TASKS)``): the generated tasks' map tests no
# previous-token head (their corruptions leave what it writes where it is read unchanged); these pairs do,
# since the corrupted token is the previous token the copy heads read
ROLE_TASKS = {"previous_token": (TASK,), "induction": (TASK,)}


class PlantedInputs(NamedTuple):
    """What ``analyses.catalogue.run`` takes: ``run(model, labels, pairs=pairs, ...)``."""

    model: Any
    labels: pd.DataFrame
    pairs: dict


def copy_model() -> Any:
    """Two copy heads, ``COPY`` and ``HIDDEN``, attend from p to p - 1 and write the token there into
    the slot the unembedding reads; ``DECOY`` has ``COPY``'s pattern and a near-zero W_O."""
    from analyses.validation.planted import planted_copies

    return planted_copies({COPY: 1.0, HIDDEN: 1.0}, n_layers=2, n_heads=8)


def copy_pairs(n: int = 24, seed: int = 0, length: int = 8, vocab: int = 12, pad_some: bool = False):
    """``n`` period-2 sequences a b a b ... (``interp.pairs.Pairs``): the answer, read at the last
    position, is the previous token b; the corrupted prompt puts c there. ``pad_some``: every third
    pair two tokens shorter, right-padded (answer positions differ within a batch)."""
    from interp.pairs import Pairs

    if n < 1 or length < 4 or vocab < 3:
        raise ValueError(f"n={n}, length={length}, vocab={vocab}: need n >= 1, length >= 4 and vocab >= 3")
    g = np.random.default_rng(seed)
    clean, corr, right, wrong, pos, mask = [], [], [], [], [], []
    for i in range(n):
        a, b, c = (int(t) for t in g.choice(vocab, 3, replace=False))
        k = length - 2 if pad_some and i % 3 == 0 else length
        x = ([a, b] * length)[:k]
        y = list(x)
        y[k - 2] = c
        clean.append(x + [0] * (length - k))
        corr.append(y + [0] * (length - k))
        right.append(x[k - 2])
        wrong.append(c)
        pos.append(k - 1)
        mask.append([1] * k + [0] * (length - k))
    t = torch.tensor
    m = t(mask) if pad_some else None
    return Pairs(t(clean), t(corr), t(right), t(wrong), t(pos), attention_mask=m)


def heads_table(model: Any, labelled: dict) -> pd.DataFrame:
    """A probe heads table (``interp probe``'s heads.csv columns that the catalogue reads): one pooled
    row per head (role ``local``, score 0.12, unlabelled) and a labelled row, score 0.9, per
    ``labelled[(layer, head)] = role``."""
    from analyses.catalogue.patching import head_order
    from analyses.contract import model_identity

    heads = head_order(model)
    unknown = sorted(set(labelled) - set(heads))
    if unknown:
        raise ValueError(f"labelled heads {unknown} are not in the model ({len(heads)} heads, (layer, head) pairs)")
    name = model_identity(model)
    rows = []
    for layer, head in heads:
        base = dict(model=name, layer=layer, head=head, direction="all", baseline=0.1, source="all")
        base.update(subset="all", specials="-", weighting="attention", margin=0.05, heuristic="-", real_text="-")
        rows.append(dict(base, role="local", score=0.12, label=False))
        if (layer, head) in labelled:
            rows.append(dict(base, role=labelled[(layer, head)], score=0.9, label=True))
    return pd.DataFrame(rows)


def planted_catalogue_inputs(n: int = 24, seed: int = 0) -> PlantedInputs:
    """(model, heads table, {``TASK``: ``n`` pairs}): the copy model, ``COPY`` and ``DECOY`` labelled
    ``previous_token``, ``HIDDEN`` left unnamed (see the module docstring)."""
    model = copy_model()
    labels = heads_table(model, {COPY: "previous_token", DECOY: "previous_token"})
    return PlantedInputs(model, labels, {TASK: copy_pairs(n, seed=seed)})
