"""Causal validation of head labels: does a head labelled by its attention pattern do that job?

For every labelled head, ablate it (``interp.interventions``, default mean-ablation of ``hook_z``)
and measure how much a behaviour tied to its role degrades, against the degradation caused by
ablating random heads. The rooms: ``prompts`` (the seeded prompt sets) -> ``metrics`` (the
behaviour scores, and the table from role to metric) -> ``verdicts`` (the null, Benjamini-Hochberg
per role, the decision rule) -> ``runner`` (this module: ``run``, a procedure over them) ->
``report`` (``write``).

The other direction: every evaluated head without a label tied to a metric whose effect is measurable,
positive, and has ``p <= alpha`` against the same null is listed in ``unlabelled``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from analyses.contract import HEAD_KEYS, head_table, make_info
from analyses.validation.labels import check_labels, check_labels_model, role_names
from analyses.validation.metrics import REL_MIN_EFFECT, metric_functions, role_metric
from analyses.validation.prompts import PromptSet, build_prompts, is_lm
from analyses.validation.verdicts import check_settings, empirical_p, null_effects, verdict_table
from interp import interventions as iv
from interp.distributed import World, current
from interp.stats import bootstrap_ci
from interp.view import view

__all__ = ["ValidationResult", "run", "validate"]

UNLABELLED_COLUMNS = [
    "model",
    "layer",
    "head",
    "metric",
    "effect",
    "ci_low",
    "ci_high",
    "null_mean",
    "p_value",
    "other_labels",
]


def _effect_row(model: str, head: tuple[int, int], metric: str, effect: float, lo: float, hi: float, **more) -> dict:
    return dict(model=model, layer=head[0], head=head[1], metric=metric, effect=effect, ci_low=lo, ci_high=hi, **more)


@dataclass
class ValidationResult:
    table: pd.DataFrame  # one row per labelled (head, role), COLUMNS
    unlabelled: pd.DataFrame  # heads with large effects and no label tied to the metric
    effects: pd.DataFrame  # every evaluated head x metric: effect, ci, in_null
    info: dict = field(default_factory=dict)  # the run's settings and sizes; analyses.contract's keys
    labels_source: str = "given"  # where the labels came from, in words (validation.md, .json)
    labels_path: str | None = None  # the labels file read, if any (validation.json)
    labels_sha256: str | None = None  # its SHA-256 (validation.json: ``interp summary`` checks it)

    @property
    def heads(self) -> pd.DataFrame:
        """The per-head table of ablation effects (``model, layer, head`` first): ``effects``, one
        row per evaluated head and metric."""
        return ablation_heads(self.effects, self.info.get("model", ""))


def ablation_heads(effects: pd.DataFrame, model) -> pd.DataFrame:
    """``effects`` as a per-head table (``analyses.contract.head_table``); an empty table keeps the
    head keys as its columns."""
    if effects.empty and "layer" not in effects:
        return pd.DataFrame(columns=list(HEAD_KEYS))
    return head_table(effects, model)


def _labels_frame(labels: pd.DataFrame, n_layers: int | None = None, n_heads: int | None = None) -> pd.DataFrame:
    """The rows with ``label`` true, values checked (``check_labels``: the row, the column and what
    is expected), one row per (head, role), the role named by its reading (``role_names``: the two
    readings of subject-verb are two roles)."""
    lab = check_labels(labels, n_layers, n_heads)
    lab["role"] = pd.Series(role_names(lab), index=lab.index, dtype=object)
    lab = lab[lab["label"]]
    # several directions of one (head, role) are one hypothesis here: keep the best score
    lab = lab.sort_values("score", ascending=False, na_position="last").drop_duplicates(["layer", "head", "role"])
    return lab.reset_index(drop=True)


def _sharded_sweep(
    model, prompts: PromptSet, source: dict, funcs: dict, heads: list, kw: dict, world: World | None
) -> tuple[dict[str, np.ndarray], list[list[int]]]:
    """``iv.head_sweep`` over ``heads``, each worker ablating its share (head i: worker i % N) on every
    prompt (one padded batch, as in one process, so the numbers are the same bits); the rows are
    gathered back into the order of ``heads`` on every worker. Returns (scores, each worker's
    indices into ``heads``)."""
    world = world if world is not None else current()
    mine = list(world.shard(len(heads)))
    got = iv.head_sweep(
        model,
        prompts.tokens,
        source,
        funcs,
        heads=[heads[i] for i in mine],
        attention_mask=prompts.attention_mask,
        **kw,
    )
    if world.size == 1:
        return got, [mine]
    shares = world.gather((mine, got))
    dtypes = {m: np.result_type(*[values[m] for _, values in shares]) for m in funcs}  # as one process's
    out = {m: np.full((len(heads), prompts.tokens.shape[0]), np.nan, dtype=dtypes[m]) for m in funcs}
    seen = sorted(i for idx, _ in shares for i in idx)
    if seen != list(range(len(heads))):
        raise RuntimeError(f"the workers' shares of the {len(heads)} heads overlap or leave heads out")
    for idx, values in shares:
        for m in funcs:
            out[m][idx] = values[m]
    return out, [idx for idx, _ in shares]


def _labelled(model, labels: pd.DataFrame, max_heads_per_role: int | None, name: str) -> pd.DataFrame:
    """The labels to validate: one row per (head, role), its metric (``role_metric``), sorted by role
    and best score first, at most ``max_heads_per_role`` per role; bad heads, and labels written for
    another model than ``model`` (``name``), refused."""
    v = view(model)
    check_labels_model(labels, [v.name, name])
    lab = _labels_frame(labels, v.n_layers, v.n_heads)
    causal = is_lm(model)
    lab["metric"] = [role_metric(r, causal) for r in lab["role"]]
    lab = lab.sort_values(["role", "score"], ascending=[True, False], na_position="last")
    if max_heads_per_role is not None:
        lab = lab.groupby("role", sort=False).head(max_heads_per_role)
    lab = lab.reset_index(drop=True)
    iv.normalize_heads(model, list(zip(lab["layer"], lab["head"])))  # clear error for bad rows
    return lab


@dataclass
class _Pools:
    null: list  # the heads of the null, from all layers
    layer: dict  # {layer: the heads of that layer's null}
    heads: list  # every head evaluated: the labelled ones, then the nulls', each once


def _head_pools(model, lab: pd.DataFrame, n_null: int | None, n_layer_null: int | None, seed: int) -> _Pools:
    """The null of ``n_null`` random heads (None: every head), ``n_layer_null`` per labelled layer,
    drawn from one generator seeded with ``seed`` in this order."""
    rng = np.random.default_rng(seed)

    def pick(pool, k):
        return (
            list(pool)
            if k is None or k >= len(pool)
            else [pool[i] for i in sorted(rng.choice(len(pool), k, replace=False))]
        )

    null_pool = pick(iv.all_heads(model), n_null)
    layer_pool = {}
    for layer in sorted(set(lab["layer"])):
        layer_pool[layer] = pick([(layer, h) for h in range(model.cfg.n_heads)], n_layer_null)
    tested = [(int(a), int(b)) for a, b in zip(lab["layer"], lab["head"])]
    heads = list(dict.fromkeys(tested + null_pool + [h for hs in layer_pool.values() for h in hs]))
    return _Pools(null_pool, layer_pool, heads)


@dataclass
class _Effects:
    eff: dict  # {(head, metric): (mean effect, ci_low, ci_high, n_items)}
    min_effect: dict  # {metric: the smallest |effect| that counts}
    frame: pd.DataFrame  # every evaluated head x metric (ValidationResult.effects)


def _effects(name: str, prompts: PromptSet, clean: dict, scores: dict, pools: _Pools, n_boot: int, seed: int):
    """Per head x metric: the mean effect (clean - ablated score) and its bootstrap interval over the
    prompts that count."""
    eff, rows, min_eff = {}, [], {}
    for m, c in clean.items():
        ok = np.isfinite(c)
        scale = float(np.mean(np.abs(c[ok]))) if ok.any() else float("nan")
        min_eff[m] = REL_MIN_EFFECT[prompts.tasks[m].kind] * scale
        per = c[None, ok] - scores[m][:, ok]  # [head, item]
        for i, h in enumerate(pools.heads):
            e = float(per[i].mean()) if per.shape[1] else float("nan")
            lo, hi = bootstrap_ci(per[i], n_boot=n_boot, seed=seed) if per.shape[1] else (math.nan, math.nan)
            eff[(h, m)] = (e, lo, hi, int(ok.sum()))
            clean_mean = float(np.mean(c[ok])) if ok.any() else math.nan
            rows.append(
                _effect_row(name, h, m, e, lo, hi, clean=clean_mean, min_effect=min_eff[m], in_null=h in pools.null)
            )
    return _Effects(eff, min_eff, pd.DataFrame(rows))


def _unlabelled(name: str, lab: pd.DataFrame, fx: _Effects, null_pool: list, alpha: float) -> pd.DataFrame:
    """The other direction: heads with large effects on a metric and no label tied to it."""
    labelled_for = {
        (int(a), int(b), m) for a, b, m in zip(lab["layer"], lab["head"], lab["metric"]) if isinstance(m, str)
    }
    labels_of = {}
    for a, b, r in zip(lab["layer"], lab["head"], lab["role"]):
        labels_of.setdefault((int(a), int(b)), []).append(str(r))
    extra = []
    for (h, m), (e, lo, hi, _n_items) in fx.eff.items():
        if (h[0], h[1], m) in labelled_for:
            continue
        null = null_effects(fx.eff, h, m, null_pool)
        p = empirical_p(e, null)
        if lo > 0 and e >= fx.min_effect[m] and p <= alpha:
            more = dict(null_mean=float(null.mean()), p_value=p, other_labels=",".join(labels_of.get(h, [])))
            extra.append(_effect_row(name, h, m, e, lo, hi, **more))
    unlabelled = pd.DataFrame(extra, columns=UNLABELLED_COLUMNS)
    return unlabelled.sort_values("effect", ascending=False).reset_index(drop=True)


def _unreadable(prompts: PromptSet, clean: dict) -> set:
    """The probe metrics that fail on clean held-out prompts (mean log-odds <= 0)."""
    return {m for m in clean if prompts.tasks[m].kind == "probe" and not np.nanmean(clean[m]) > 0}


def _info(name: str, prompts: PromptSet, clean: dict, pools: _Pools, head_shards: list, lab, **settings) -> dict:
    """What the run was: its settings (``settings``), sizes and the clean scores of every metric."""
    probes = [m for m in clean if prompts.tasks[m].kind == "probe"]
    return dict(
        model=name,
        ablation=settings["ablation"],
        seed=settings["seed"],
        workers=len(head_shards),
        head_shards=head_shards,  # indices into the evaluated heads, per worker
        n_prompts=int(prompts.tokens.shape[0]),
        n_heads_evaluated=len(pools.heads),
        n_null=len(pools.null),
        n_layer_null=settings["n_layer_null"],
        alpha=settings["alpha"],
        max_heads_per_role=settings["max_heads_per_role"],
        metrics={m: prompts.tasks[m].description for m in clean},
        clean_accuracy={m: float(np.mean(clean[m][np.isfinite(clean[m])] > 0)) for m in probes},
        clean={m: float(np.nanmean(v)) for m, v in clean.items()},
        n_labels=len(lab),
        input=prompts.input,  # the texts' input convention (analyses.heads.model_input)
    )


def _clean_and_sweep(model, prompts: PromptSet, heads: list, ablation: str, seed: int, world: World | None):
    """The clean run (caching ``hook_z`` of the evaluated heads' layers), the metric functions
    (probes trained on it), the clean scores and every head's ablated scores. Returns (funcs, clean,
    scores, head_shards)."""
    kw = prompts.forward_kwargs()
    clean_out, z = iv.cache_z(model, prompts.tokens, sorted({l for l, _ in heads}), **kw)
    funcs = metric_functions(prompts, clean_out)
    clean = {m: f(clean_out).numpy() for m, f in funcs.items()}
    source = iv.ablation_source(z, ablation, attention_mask=prompts.attention_mask, groups=prompts.family, seed=seed)
    extra = {k: v for k, v in kw.items() if k != "attention_mask"}
    scores, head_shards = _sharded_sweep(model, prompts, source, funcs, heads, extra, world)
    return funcs, clean, scores, head_shards


@torch.no_grad()
def run(
    model,
    labels: pd.DataFrame | None = None,
    prompts: PromptSet | None = None,
    n: int = 8,
    seed: int = 0,
    ablation: str = "mean",
    n_null: int | None = None,
    n_layer_null: int | None = None,
    max_heads_per_role: int | None = None,
    alpha: float = 0.05,
    n_boot: int = 1000,
    probe_n: int = 100,
    model_name: str | None = None,
    q_family: int | None = 8,
    world: World | None = None,
) -> ValidationResult:
    """Validate every labelled head causally.

    labels: a heads table (``analyses.heads.probe_heads`` schema; rows with ``label`` true are used;
        at least layer, head, role and label, checked by ``check_labels``; ``read_labels`` reads one
        from a CSV). None: computed with ``probe_heads(model, n=probe_n, seed=seed)``.
    prompts: ``build_prompts(model, n, seed)`` by default.
    n_null: random heads (from all layers) forming the null; None: every head.
    n_layer_null: random other heads per labelled layer for the per-layer null; None: all of them.
    max_heads_per_role: validate only the best-scoring labelled heads of each role (None: all).
    q_family: the ``q_value`` family of a role: its best ``q_family`` labels by probe score (None:
        all its labels).
    world: the workers (``interp.distributed``; default: this process's group, else one process).
        Every worker calls ``run`` with the same arguments and builds the same prompts and clean
        run; the ablation sweep, one forward pass per head, is sharded by head (head i of the list:
        worker i % N) and the per-prompt scores are gathered, so every worker returns the table one
        process would, bitwise.
    """
    if ablation not in iv.ABLATIONS:
        raise ValueError(f"ablation {ablation!r} is unknown; use one of {iv.ABLATIONS}")
    check_settings(alpha, n=n, n_null=n_null, n_layer_null=n_layer_null, max_heads_per_role=max_heads_per_role)
    name = model_name or view(model).name
    if labels is None:
        from analyses.heads import probe_heads  # lazily: heavy, and only needed without a table

        labels = probe_heads(model, n=probe_n, seed=seed)
    lab = _labelled(model, labels, max_heads_per_role, name)
    prompts = prompts or build_prompts(model, n=n, seed=seed)
    pools = _head_pools(model, lab, n_null, n_layer_null, seed)
    funcs, clean, scores, head_shards = _clean_and_sweep(model, prompts, pools.heads, ablation, seed, world)
    # a role whose metric these prompts do not measure has no behaviour to test
    lab["metric"] = pd.Series([m if m in funcs else None for m in lab["metric"]], index=lab.index, dtype=object)
    fx = _effects(name, prompts, clean, scores, pools, n_boot, seed)
    unreadable, base = _unreadable(prompts, clean), dict(model=name, ablation=ablation)
    nulls = (pools.null, pools.layer)
    table = verdict_table(lab, fx.eff, clean, fx.min_effect, nulls, unreadable, base, alpha=alpha, q_family=q_family)
    unlabelled = _unlabelled(name, lab, fx, pools.null, alpha)
    settings = dict(
        ablation=ablation, seed=seed, n_layer_null=n_layer_null, alpha=alpha, max_heads_per_role=max_heads_per_role
    )
    info = _info(name, prompts, clean, pools, head_shards, lab, **settings)
    params = {k: v for k, v in settings.items() if k != "seed"}
    params.update(n=n, n_null=n_null, n_boot=n_boot, probe_n=probe_n, q_family=q_family, input=prompts.input)
    info.update(make_info("validation", name, seed, **params))  # model and seed: the same values
    return ValidationResult(table, unlabelled, fx.frame, info)


def validate(*args, **kwargs) -> ValidationResult:
    """Deprecated: ``run``."""
    warnings.warn(
        "analyses.validation.validate is deprecated; use analyses.validation.run", DeprecationWarning, stacklevel=2
    )
    return run(*args, **kwargs)
