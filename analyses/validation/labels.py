"""The labels that ``validate`` tests: read from a CSV (``read_labels``) and checked
(``check_labels``), so that a table that is not what it should be is refused with the row, the column
and what is expected, instead of validating nothing (``label`` spelt yes/no), everything (no
``label`` column) or another head (``layer`` 2.7 read as 2).

The table: one row per (head, role) hypothesis, columns ``layer`` and ``head`` (integers, in the
model's range), ``role`` (a name: ``previous_token``, ``subject_verb``, ...), ``label`` (true or
false: only rows with ``label`` true are validated; also 1/0) and optionally ``score`` (a number:
with several rows of one head and role the best is kept). Other columns (``model``, ``direction``,
the rest of ``heads.csv``) are ignored, except ``model``: a table written for another model is
refused (``check_labels_model``), and ``reading`` (labels v4: "retrospective" or "predictive", where a
relation is read; ``analyses.heads.roles``): a heads.csv written before that column gets it from its
``direction`` (``roles.with_reading``: an old table reads as retrospective). ``role_names`` gives each
row the name it is validated under (``roles.label_name``: "subject_verb (predictive)" and
"subject_verb (retrospective)" are two roles, with their own metric and ablation site).

``pattern_labels``: labels from attention patterns alone, for the two best-known roles (a fallback
when no heads table exists).
"""

from __future__ import annotations

import hashlib
import math
import numbers
import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from analyses.validation.prompts import PromptSet, repeated_tokens
from interp.io import read_csv_rows, readable_input
from interp.names import act_name
from interp.view import view

__all__ = ["LABEL_COLUMNS", "read_labels", "check_labels", "check_labels_model", "role_names", "pattern_labels"]

LABEL_COLUMNS = ("layer", "head", "role", "label")
_TRUE, _FALSE = ("true", "1", "1.0"), ("false", "0", "0.0")


def read_labels(path) -> pd.DataFrame:
    """A labels CSV (``interp probe``'s ``heads.csv``, or one written by hand), read strictly and
    checked by ``check_labels``. Errors (ValueError, FileNotFoundError) are one line naming the file,
    the line and the column. The frame's index is the CSV line of each row; ``attrs`` hold ``path``
    and ``sha256`` (of the bytes read), so outputs can record which table they came from."""
    path = Path(path)
    readable_input(path, "labels file", "the heads.csv written by `interp probe`, e.g. DIR/heads.csv")
    data = path.read_bytes()
    header, rows = read_csv_rows(path, data)
    missing = [c for c in LABEL_COLUMNS if c not in header]
    if missing:
        raise ValueError(
            f"{path}: no column {missing[0]!r} (its columns: {', '.join(header)}); expected the heads.csv of "
            "`interp probe`, or a CSV with columns layer, head, role and label (true/false)"
        )
    if not rows:
        raise ValueError(f"{path}: has a header but no rows; expected one row per head and role")
    df = pd.DataFrame([fields for _, fields in rows], columns=header, index=[line for line, _ in rows], dtype=object)
    df.attrs.update(path=str(path), sha256=hashlib.sha256(data).hexdigest())
    return _with_reading(check_labels(df))


def _with_reading(labels: pd.DataFrame) -> pd.DataFrame:
    """``labels`` with a ``reading`` column where it has ``direction`` (``roles.with_reading``: kept
    where present, an old heads.csv's rows derived from their direction), else as it is (a table
    written by hand: no reading). Empty readings in a present column are derived too."""
    if "direction" not in labels.columns:
        return labels
    from analyses.heads.roles import reading_of, with_reading  # lazily: the heads room is heavy to import

    out = with_reading(labels)
    derived = [reading_of(r, str(d)) for r, d in zip(out["role"], out["direction"])]
    out["reading"] = [derived[i] if _empty(v) else str(v).strip() for i, v in enumerate(out["reading"])]
    out.attrs = dict(labels.attrs)
    return out


def role_names(labels: pd.DataFrame) -> list[str]:
    """Each row's role under the name it is validated and shown under (``roles.label_name``:
    "subject_verb (predictive)" for a subject-verb row read predictively; a role read in one way
    only, and every row of a table without ``reading`` or ``direction``, keeps its name)."""
    lab = _with_reading(labels)
    if "reading" not in lab.columns:
        return [str(r) for r in lab["role"]]
    from analyses.heads.roles import label_name

    return [label_name(str(r), "" if _empty(v) else str(v).strip()) for r, v in zip(lab["role"], lab["reading"])]


def check_labels_model(labels: pd.DataFrame, model_names) -> None:
    """Refuse labels written for another model: every non-empty value of the ``model`` column (as
    ``interp probe`` writes it: the model's name, e.g. ``minilm``, the same whatever folder the
    table is in) must be one of ``model_names`` (the model being validated). A table without the
    column (written by hand) is not checked. Raises ValueError naming the row and both models."""
    if "model" not in labels.columns:
        return
    names = [str(n) for n in model_names if n]
    where = _where(labels)
    for i, v in zip(labels.index, labels["model"]):
        if _empty(v) or str(v).strip() in names:
            continue
        raise ValueError(
            f"{where(i)}: column 'model' is {str(v).strip()!r}, but the model being validated is {names[0]!r}: "
            f"these labels were written for another model; use the heads.csv `interp probe` wrote for {names[0]!r}"
        )


def _where(df: pd.DataFrame):
    path = df.attrs.get("path")
    return (lambda i: f"{path}:{i}") if path else (lambda i: f"labels row {i}")


def _empty(v) -> bool:
    if v is None:
        return True
    if isinstance(v, str):
        return not v.strip()
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and math.isnan(float(v))


def _shown(v) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def _integer(v) -> int | None:
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        return int(f) if math.isfinite(f) and f == int(f) else None
    if isinstance(v, str):
        s = v.strip()
        if re.fullmatch(r"[+-]?\d+(\.0*)?", s):
            return int(float(s)) if "." in s else int(s)
    return None


def _boolean(v) -> bool | None:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, numbers.Real):
        return {0.0: False, 1.0: True}.get(float(v))
    if isinstance(v, str):
        s = v.strip().lower()
        return True if s in _TRUE else False if s in _FALSE else None
    return None


def check_labels(labels: pd.DataFrame, n_layers: int | None = None, n_heads: int | None = None) -> pd.DataFrame:
    """The labels table with its values checked and typed: ``layer``/``head`` int (within
    ``n_layers``/``n_heads`` when given, else >= 0), ``role`` str, ``label`` bool, ``score`` float
    (NaN when absent). Raises ValueError naming the row (FILE:LINE for a table from
    ``read_labels``), the column, the value and what is expected. The index and attrs are kept."""
    where = _where(labels)
    missing = [c for c in ("layer", "head", "role") if c not in labels.columns]
    if missing:
        raise ValueError(
            f"the labels table lacks columns {missing}; it needs layer, head, role and label (score optional)"
        )
    if "label" not in labels.columns:
        raise ValueError(
            f"the labels table has no column 'label' (columns: {', '.join(map(str, labels.columns))}); expected "
            "label true/false per row (a table without it would make every row a label)"
        )
    limits = {"layer": n_layers, "head": n_heads}
    out = {c: [] for c in ("layer", "head", "role", "label", "score")}
    has_score = "score" in labels.columns
    for i, row in zip(labels.index, labels.itertuples(index=False, name=None)):
        rec = dict(zip(labels.columns, row))
        for col in ("layer", "head"):
            v = rec[col]
            if _empty(v):
                raise ValueError(f"{where(i)}: column {col!r} is empty; expected an integer")
            k = _integer(v)
            if k is None:
                raise ValueError(f"{where(i)}: column {col!r} is {_shown(v)}; expected an integer")
            limit = limits[col]
            if limit is not None and not 0 <= k < limit:
                s = "" if limit == 1 else "s"
                has = f"{limit} layer{s}" if col == "layer" else f"{limit} head{s} per layer"
                raise ValueError(f"{where(i)}: column {col!r} is {k}; expected 0..{limit - 1} (the model has {has})")
            if k < 0:
                raise ValueError(f"{where(i)}: column {col!r} is {k}; expected an integer >= 0")
            out[col].append(k)
        role = rec["role"]
        if _empty(role) or not isinstance(role, str):
            what = "empty" if _empty(role) else f"{_shown(role)}"
            raise ValueError(f"{where(i)}: column 'role' is {what}; expected a role name (e.g. previous_token)")
        out["role"].append(role.strip())
        lab = rec["label"]
        if _empty(lab):
            raise ValueError(f"{where(i)}: column 'label' is empty; expected true or false")
        b = _boolean(lab)
        if b is None:
            raise ValueError(f"{where(i)}: column 'label' is {_shown(lab)}; expected true or false")
        out["label"].append(b)
        score = rec["score"] if has_score else None
        if _empty(score):
            out["score"].append(math.nan)
        else:
            try:
                out["score"].append(float(score))
            except (TypeError, ValueError):
                raise ValueError(f"{where(i)}: column 'score' is {_shown(score)}; expected a number") from None
    checked = labels.copy()
    checked["layer"] = pd.Series(out["layer"], index=labels.index, dtype="int64")
    checked["head"] = pd.Series(out["head"], index=labels.index, dtype="int64")
    checked["role"] = pd.Series(out["role"], index=labels.index, dtype=object)
    checked["label"] = pd.Series(out["label"], index=labels.index, dtype=bool)
    checked["score"] = pd.Series(out["score"], index=labels.index, dtype="float64")
    checked.attrs = dict(labels.attrs)
    return checked


@torch.no_grad()
def pattern_labels(
    model, prompts: PromptSet | None = None, top: int = 4, threshold: float = 0.3, seed: int = 0
) -> pd.DataFrame:
    """previous_token and induction labels read off the attention patterns on repeated random token
    sequences: previous-token score = mean weight from position p to p-1; induction score = mean
    weight from a token of the second copy to the token after its first occurrence. A head is
    labelled when its score is among the ``top`` of its role and above ``threshold``. Returns the
    heads-table schema (model, layer, head, role, direction, score, label)."""
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    if prompts is not None and "induction_loss" in prompts.tasks:
        rows = prompts.tasks["induction_loss"].rows
        tokens = prompts.tokens[torch.as_tensor(rows)]
        half = int(prompts.attention_mask[rows[0]].sum()) // 2
        tokens = tokens[:, : 2 * half]
    else:
        half = 6
        tokens = repeated_tokens(model, 8, half, np.random.default_rng(seed))
    names = [act_name(layer, "attn.hook_pattern") for layer in range(n_layers)]
    _, cache = model.run_with_cache(tokens, names_filter=names)
    q = torch.arange(1, 2 * half)
    qi = torch.arange(half, 2 * half)
    rows = []
    for layer, name in enumerate(names):
        pat = cache[name].float()  # [batch, head, query_pos, key_pos]; averaged in fp32 whatever the model's dtype
        prev = pat[:, :, q, q - 1].mean((0, 2))
        ind = pat[:, :, qi, qi - half + 1].mean((0, 2))
        for head in range(n_heads):
            rows.append(dict(layer=layer, head=head, role="previous_token", score=float(prev[head])))
            rows.append(dict(layer=layer, head=head, role="induction", score=float(ind[head])))
    df = pd.DataFrame(rows)
    df["model"] = view(model).name
    df["direction"] = "back"
    rank = df.groupby("role")["score"].rank(ascending=False, method="first")
    df["label"] = (rank <= top) & (df["score"] > threshold)
    return df[["model", "layer", "head", "role", "direction", "score", "label"]]
