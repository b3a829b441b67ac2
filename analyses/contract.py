"""The one shape of every analysis package (heads, invariance, validation, circuits, longctx.sinks,
longctx.retrieval, positional), like scikit-learn's estimator contract:

- ``run(model, ...) -> <Name>Result``: a dataclass holding the run's tables and ``info``, a dict with
  at least ``analysis`` (the package's name), ``model`` (the model's identity: ``model_identity``),
  ``seed`` and ``params`` (the run's parameters, JSON-able);
- ``OUTPUTS``: the names (or glob patterns) of the files the package owns in an output folder; the
  command line imports it, never a copy;
- ``write(result, folder, force=False) -> Path``: writes exactly those files through
  ``interp.io.write_set`` (one output set, committed whole);
- an analysis that scores heads gives its per-head table as ``result.heads``: a DataFrame whose first
  columns are ``HEAD_KEYS`` (``model``, ``layer``, ``head``), one row per head (and per whatever else
  the analysis is keyed by, e.g. a task or a length), so that analyses join head by head.

``check_result`` checks a result against this contract (the contract test walks every package with
it); ``make_info`` builds ``info`` the same way everywhere.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HEAD_KEYS", "INFO_KEYS", "model_identity", "make_info", "check_result", "head_table"]

HEAD_KEYS = ("model", "layer", "head")
INFO_KEYS = ("analysis", "model", "seed", "params")


def model_identity(model: Any) -> str:
    """A model's name as every table writes it (``interp.view``: ``minilm``, ``smollm2``, a folder's
    name); a string passes through."""
    if isinstance(model, str):
        return model
    from interp.view import view

    return view(model).name


def make_info(analysis: str, model: Any, seed: int | None, **params: Any) -> dict[str, Any]:
    """``info`` of a result: the analysis, the model's identity, the seed and the parameters."""
    return {"analysis": analysis, "model": model_identity(model), "seed": seed, "params": dict(params)}


def head_table(df, model: Any):
    """``df`` (with ``layer`` and ``head`` columns) with ``model`` put first and the head keys
    leading: the per-head table every analysis gives."""
    out = df.copy()
    if "model" not in out.columns:
        out.insert(0, "model", model_identity(model))
    rest = [c for c in out.columns if c not in HEAD_KEYS]
    return out[[*HEAD_KEYS, *rest]]


def check_result(result: Any, scores_heads: bool) -> list[str]:
    """What in ``result`` breaks the contract (empty when nothing does)."""
    problems = []
    info = getattr(result, "info", None)
    if not isinstance(info, dict):
        return [f"{type(result).__name__} has no info dict"]
    problems += [f"info lacks {k!r}" for k in INFO_KEYS if k not in info]
    if "params" in info and not isinstance(info["params"], dict):
        problems.append("info['params'] is not a dict")
    if scores_heads:
        heads = getattr(result, "heads", None)
        if heads is None:
            problems.append(f"{type(result).__name__} scores heads but has no .heads table")
        elif tuple(heads.columns[:3]) != HEAD_KEYS:
            problems.append(f".heads starts with {list(heads.columns[:3])}, not {list(HEAD_KEYS)}")
        elif len(heads) == 0:
            problems.append(".heads is empty")
    return problems
