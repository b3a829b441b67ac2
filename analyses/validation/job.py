"""What ``interp validate`` runs, from a model's name to a result: load the model, pick the sizes,
get the labels (read, read off attention patterns, or recomputed by the probe), then ``run`` or
``run_powered``. The command line only parses its flags and calls these (on every worker for
``run_named``, whose ablation sweep is sharded; on rank 0 for ``run_powered_named``).

Sizes: every model is swept completely (every head ablated once, every other head in the null,
every labelled head validated) unless ``n_null``, ``n_layer_null`` or ``max_heads_per_role`` sample
fewer; prompts per family: ``default_n`` (a causal LM 8, an encoder 32, since half train its
probes). The powered run: 120 prompts per metric and a null of 30 heads unless told otherwise.
"""

from __future__ import annotations

import pandas as pd

from analyses.validation.powered import PoweredResult, run_powered
from analyses.validation.runner import ValidationResult, run
from analyses.validation.verdicts import check_settings

__all__ = ["default_n", "labels_for", "run_named", "run_powered_named"]

PATTERNS = "patterns"  # the labels argument that reads previous-token and induction heads off patterns


def default_n(model) -> int:
    """Prompts per family when none is given: 8 for a causal LM with an LM head, 32 for an encoder
    (its probes train on half of them)."""
    from interp.view import view

    v = view(model)
    return 8 if v.causal and v.lm_head else 32


def labels_for(model, labels, labels_path: str | None = None, probe_n: int = 60, seed: int = 0) -> tuple:
    """(the labels table, where it came from, in words): ``labels`` itself (a table read from
    ``labels_path``), ``"patterns"`` (``pattern_labels``), or None (recomputed by ``probe_heads``
    with ``probe_n`` items per relation)."""
    from analyses.validation.labels import pattern_labels

    if isinstance(labels, str):
        if labels != PATTERNS:
            raise ValueError(f"labels {labels!r}: give a table, {PATTERNS!r} or None (recompute)")
        return pattern_labels(model, seed=seed), "previous-token and induction heads from patterns (`pattern_labels`)"
    if labels is not None:
        return labels, f"read from `{labels_path}`" if labels_path else "given"
    from analyses.heads import probe_heads  # lazily: heavy, and only needed without a table

    return probe_heads(model, n=probe_n, seed=seed), f"recomputed (`probe_heads`, n={probe_n})"


def _load(name: str, dtype, device=None):
    import models

    return models.load(name, device=device or "cpu", dtype=dtype).eval()


def _provenance(result, labels, labels_path: str | None, source: str) -> None:
    """Record on ``result`` where its labels came from (the file and its SHA-256 when read)."""
    result.labels_source = source
    if isinstance(labels, pd.DataFrame):
        result.labels_sha256 = labels.attrs.get("sha256")
        if hasattr(result, "labels_path"):
            result.labels_path = labels_path


def run_named(
    model: str,
    labels: pd.DataFrame | str | None = None,
    labels_path: str | None = None,
    dtype=None,
    n: int | None = None,
    probe_n: int = 60,
    world=None,
    device=None,
    **kw,
) -> ValidationResult | None:
    """``run`` on the model named ``model`` (``models.load``, ``dtype``, ``device``), with ``labels`` as
    ``labels_for`` takes them and ``n`` prompts per family (None: ``default_n``); ``kw``: the rest of
    ``run``'s settings (seed, ablation, n_null, n_layer_null, max_heads_per_role, alpha). ``world``:
    the workers; each calls this with the same arguments and only rank 0 gets the result (the others
    None). ``info['n_heads_total']``: every head of the model."""
    from interp.distributed import current

    check_settings(kw.get("alpha", 0.05), n=n, probe_n=probe_n, n_null=kw.get("n_null"))  # before the model loads
    loaded = _load(model, dtype, device)
    table, source = labels_for(loaded, labels, labels_path, probe_n=probe_n, seed=kw.get("seed", 0))
    n = default_n(loaded) if n is None else n
    result = run(loaded, table, n=n, probe_n=probe_n, world=world, **kw)
    if not (world if world is not None else current()).is_main:
        return None
    result.info["n_heads_total"] = loaded.cfg.n_layers * loaded.cfg.n_heads
    _provenance(result, labels, labels_path, source)
    return result


def run_powered_named(
    model: str,
    labels: pd.DataFrame | str | None = None,
    labels_path: str | None = None,
    dtype=None,
    n: int | None = None,
    n_null: int | None = None,
    probe_n: int = 60,
    device=None,
    **kw,
) -> PoweredResult:
    """``run_powered`` on the model named ``model`` (a causal LM with an LM head), with ``labels`` as
    ``labels_for`` takes them, ``n`` prompts per metric (None: 120) and a null of ``n_null`` heads and
    as many random groups (None: 30); ``kw``: seed, ablation, max_heads_per_role, alpha."""
    from analyses.validation.prompts import is_lm

    check_settings(kw.get("alpha", 0.05), n=n, n_null=n_null, probe_n=probe_n)  # before the model loads
    loaded = _load(model, dtype, device)
    if not is_lm(loaded):
        raise ValueError(f"--powered needs a causal LM with an LM head (e.g. smollm2); {model} is not one")
    table, source = labels_for(loaded, labels, labels_path, probe_n=probe_n, seed=kw.get("seed", 0))
    n, n_null = 120 if n is None else n, 30 if n_null is None else n_null
    result = run_powered(loaded, table, n=n, n_null=n_null, n_group_null=n_null, **kw)
    _provenance(result, labels, labels_path, source)
    return result
