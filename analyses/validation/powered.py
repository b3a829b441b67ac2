"""Powered causal validation (issue 21 section 4): at least ``n`` prompts per behaviour metric on
which the model shows the behaviour, single labelled heads against a layer-matched null, and group
ablations (all labelled heads of a role at once) against random groups from the same layers.

``interp validate`` ablates every head on a few prompts (the every-head null); this run ablates
only the labelled non-sink heads and about ``n_null`` heads per role, on many prompts per metric:

* **Prompts where the model does the task** (``powered_prompts``): the logit-difference metrics are
  the clean prompts of ``contrastive_pairs`` (subject-verb, pronoun gender, IOI, induction), in the
  model's one input convention (``analyses.heads.model_input``: ``info["input"]``); the model's
  own accuracy (logit difference > 0) is measured on a pool of ``2 n`` and only the prompts it
  solves are kept (at most ``n``). The loss metrics read real text (XSum sentences): top-1
  accuracy at the positions that count is reported, and every text is kept.
* **Role-specific metrics** (``POWERED_METRICS``): ``local``, ``previous_token``, ``self_token``
  and ``next_token`` read ``continuation_loss``, the next-token loss where the next token continues
  the current word (a word split into several tokens: what the previous tokens decide);
  ``induction`` and ``duplicate_token`` the induction logit difference; the sinks
  (``SINK_ROLES``) are background, not a behaviour: they are left out (counted in ``info``).
* **Layer-matched null** (``layer_matched``): for each role, ``n_null`` heads drawn from the
  layers of its labelled heads in the same proportions (a layer that runs out lends from its
  neighbours), none labelled with that role. The verdict's p-value is against this null:
  ``p = (1 + #{null >= effect}) / (1 + n_null)``, so p can reach 1/31 with 30 heads.
* **Where the heads are ablated** (``ablation_site``, the ``ablated_at`` column): the predictive
  readings of labels v4 (``AT_ANSWER``: "subject_verb (predictive)", "anaphora (predictive)",
  "ioi (predictive)") act at the pairs' answer position (the token whose next-token prediction is
  the query word), so their heads, nulls and groups are ablated there only, by the mean of their z
  at the answer position over the reference set (the metric's prompts: ``answer_source``); every
  other role, the retrospective readings included (they act at the verb's own row, after the
  prediction), by the mean over all positions.
* **Group ablation**: the role's labelled heads ablated together, against ``n_group_null`` random
  groups of the same size with one head from each member's layer (not labelled with the role).
  A behaviour spread over several heads shows here when no single head stands out.

The verdict rule is ``analyses.validation.verdicts.decide`` (bootstrap interval over prompts above
0, at least ``min_effect``, p <= alpha).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from analyses.contract import head_table, make_info
from analyses.heads.roles import SINK_ROLES  # the probe's sink layer: background, not a behaviour
from analyses.validation.labels import check_labels_model
from analyses.validation.metrics import REL_MIN_EFFECT, metric_functions
from analyses.validation.prompts import (
    PAIR_TASKS,
    PromptSet,
    Task,
    _input_of,
    contrastive_pairs,
    is_lm,
    pair_logit_diff,
)
from analyses.validation.runner import _labels_frame
from analyses.validation.verdicts import check_settings, decide, empirical_p
from interp import interventions as iv
from interp.names import act_name
from interp.stats import bootstrap_ci
from interp.view import view

__all__ = [
    "POWERED_METRICS",
    "AT_ANSWER",
    "SITES",
    "ablation_site",
    "answer_source",
    "SINK_ROLES",
    "PoweredResult",
    "powered_prompts",
    "layer_matched",
    "matched_groups",
    "group_scores",
    "run_powered",
    "validate_powered",
]

# role -> metric of the powered run (causal LMs); a role outside it reads "loss"
POWERED_METRICS = {
    "subject_verb": "sv_logit_diff",
    "anaphora": "anaphora_logit_diff",
    "induction": "induction_logit_diff",
    "duplicate_token": "induction_logit_diff",
    "delimiter": "delimiter_loss",
    "punctuation": "delimiter_loss",
    "sep_eos": "delimiter_loss",
    "local": "continuation_loss",
    "previous_token": "continuation_loss",
    "self_token": "continuation_loss",
    "next_token": "continuation_loss",
    # labels v4: the two readings of a relation are two roles (``labels.role_names``)
    "subject_verb (retrospective)": "sv_logit_diff",
    "subject_verb (predictive)": "sv_logit_diff",
    "anaphora (retrospective)": "anaphora_logit_diff",
    "anaphora (predictive)": "anaphora_logit_diff",
    "ioi": "ioi_logit_diff",
    "ioi (predictive)": "ioi_logit_diff",
}
# metric -> its task among PAIR_TASKS (tests/analyses/validation/test_powered.py checks they are)
_PAIR_METRICS = {"sv_logit_diff": "subject_verb", "anaphora_logit_diff": "pronoun_gender"}
_PAIR_METRICS.update(induction_logit_diff="induction", ioi_logit_diff="ioi")
# where a role's heads are ablated: the predictive readings act at the row whose next-token prediction
# is the query word, which is the pairs' answer position (the token before the verb, the token before
# the reflexive pronoun, IOI's final token); there the head's z is replaced by its mean at the answer
# position over the reference set (the run's prompts of that metric), every other position kept clean.
# Every other role, the retrospective readings included (their heads act at the verb's own row, after
# the prediction is made), is ablated at every position by its mean over all positions.
AT_ANSWER = ("subject_verb (predictive)", "anaphora (predictive)", "ioi (predictive)", "ioi")
SITES = {"answer": "the answer position (mean there over the reference prompts)", "all": "all positions"}
_LOSS_METRICS = {
    "delimiter_loss": "minus next-token loss after punctuation (XSum sentences)",
    "continuation_loss": "minus next-token loss where the next token continues the current word (XSum sentences)",
    "loss": "minus mean next-token loss (XSum sentences)",
}
TABLE_COLUMNS = [
    "model",
    "layer",
    "head",
    "role",
    "metric",
    "ablated_at",
    "effect",
    "ci_low",
    "ci_high",
    "min_effect",
    "null_mean",
    "null_std",
    "n_null",
    "z",
    "p_value",
    "null_layers",
    "n_items",
    "label_score",
    "verdict",
    "reason",
]
GROUP_COLUMNS = [
    "model",
    "role",
    "metric",
    "ablated_at",
    "size",
    "heads",
    "effect",
    "ci_low",
    "ci_high",
    "min_effect",
    "null_mean",
    "null_std",
    "n_null",
    "z",
    "p_value",
    "best_single",
    "n_items",
    "verdict",
    "reason",
]
# the accuracy table's columns (``powered_prompts``; a subject-verb metric adds the attractor split):
# what an empty one (prompts given) still writes as its header
ACCURACY_COLUMNS = ["metric", "task", "kind", "n_generated", "accuracy", "n_kept", "kept", "clean_mean"]


@dataclass
class PoweredResult:
    table: pd.DataFrame  # one row per labelled non-sink (head, role), TABLE_COLUMNS
    groups: pd.DataFrame  # one row per role: the group ablation, GROUP_COLUMNS
    accuracy: pd.DataFrame  # per metric: the model's own accuracy and the prompts kept, ACCURACY_COLUMNS
    info: dict = field(default_factory=dict)  # the run's settings; analyses.contract's keys
    labels_source: str = "given"  # where the labels came from, in words (powered.md, .json)
    labels_sha256: str | None = None  # the SHA-256 of the labels file read, if any (powered.json)

    @property
    def heads(self) -> pd.DataFrame:
        """The per-head table (``model, layer, head`` first): ``table``, one row per labelled
        non-sink head and role."""
        return head_table(self.table, self.info.get("model", ""))


def _pair_prompts(model, metric: str, n: int, seed: int) -> tuple[PromptSet, dict]:
    """The clean prompts of ``contrastive_pairs`` that the model solves (a pool of 2n, at most n
    kept), as a one-task PromptSet, and the accuracy row."""
    task = _PAIR_METRICS[metric]
    if task not in PAIR_TASKS:
        raise ValueError(f"powered metric {metric!r} reads pair task {task!r}, not one of {sorted(PAIR_TASKS)}")
    pairs = contrastive_pairs(task, model.tokenizer, 2 * n, seed=seed, held_out=0.0)
    diff = pair_logit_diff(model, pairs)
    ok = (diff > 0).numpy()
    row = dict(metric=metric, task=task, kind="logit_diff", n_generated=len(pairs), accuracy=float(ok.mean()))
    if task == "subject_verb":
        att = pairs.attractor.numpy()
        row.update(accuracy_attractor=float(ok[att].mean()), accuracy_no_attractor=float(ok[~att].mean()))
    kept = pairs.subset(np.flatnonzero(ok)[:n])
    width = int(kept.attention_mask.sum(1).max()) if len(kept) else 1
    rows = np.arange(len(kept))
    what = f"logit(right) - logit(wrong) on solved {task} pairs (clean prompts)"
    t = Task(metric, "logit_diff", what, rows, pos=kept.position.numpy(), right=kept.right.numpy())
    t.wrong = kept.wrong.numpy()
    fam = [task] * len(kept)  # one resampling group (a form can have a single prompt)
    ps = PromptSet(
        kept.clean[:, :width], kept.attention_mask[:, :width], kept.clean_texts, fam, {metric: t}, input=pairs.input
    )
    row.update(n_kept=len(kept), kept="solved", clean_mean=float(diff[ok].mean()) if ok.any() else math.nan)
    return ps, row


def _positions(tok, ids: torch.Tensor, mask: torch.Tensor, metric: str) -> torch.Tensor:
    """[batch, pos] bool: the predictions (made at a position, of the next token) that ``metric``
    counts."""
    real = mask.bool()
    nxt = torch.zeros_like(real)
    nxt[:, :-1] = real[:, 1:]
    out = real & nxt
    if metric == "loss":
        return out
    keep = torch.zeros_like(out)
    for b in range(ids.shape[0]):
        strs = [tok.decode([int(t)]) for t in ids[b, : int(real[b].sum())]]
        for p in range(len(strs) - 1):
            if metric == "delimiter_loss":
                keep[b, p] = bool(strs[p].strip()) and not any(c.isalnum() for c in strs[p])
            else:  # continuation: the next token goes on with the word this one is part of
                nx = strs[p + 1]
                keep[b, p] = bool(nx) and nx[0].isalnum() and bool(strs[p]) and strs[p][-1].isalnum()
    return out & keep


def _text_prompts(model, metric: str, n: int, seed: int, texts: list) -> tuple[PromptSet, dict]:
    """``n`` of ``texts`` (seeded) with at least one counted position, as a one-task PromptSet; the
    model's top-1 accuracy at the counted positions."""
    rng = np.random.default_rng(seed)
    _, tok, convention = _input_of(model.tokenizer)  # the model's one input convention
    order = rng.permutation(len(texts))
    chosen = []
    for start in range(0, len(order), 4 * n):
        batch = [texts[i] for i in order[start : start + 4 * n]]
        enc = tok(batch)
        m = _positions(tok, enc.input_ids, enc.attention_mask, metric)
        for b in np.flatnonzero(m.any(1).numpy())[: n - len(chosen)]:
            chosen.append(batch[b])
        if len(chosen) >= n:
            break
    enc = tok(chosen)
    ids, am = enc.input_ids, enc.attention_mask
    m = _positions(tok, ids, am, metric)
    with torch.no_grad():
        logits = model(ids, attention_mask=am)
    hit = (logits[:, :-1].argmax(-1) == ids[:, 1:]) & m[:, :-1]
    acc = float(hit.sum() / m[:, :-1].sum().clamp(min=1))
    task = Task(metric, "loss", _LOSS_METRICS[metric], np.arange(len(chosen)), loss_mask=m)
    ps = PromptSet(ids, am.long(), chosen, ["xsum"] * len(chosen), {metric: task}, input=convention)
    row = dict(metric=metric, task="xsum", kind="loss", n_generated=len(chosen), accuracy=acc, n_kept=len(chosen))
    row.update(kept="all (top-1 accuracy at the counted positions)", clean_mean=math.nan)
    return ps, row


def powered_prompts(model, metrics, n: int = 120, seed: int = 0, texts: list | None = None):
    """{metric: PromptSet with that one task}, and the accuracy table (one row per metric: the
    model's own accuracy, how many prompts were generated and kept). ``texts``: the real sentences
    of the loss metrics (default: 4000 XSum sentences of at most 24 words)."""
    if not is_lm(model):
        raise ValueError("the powered validation needs a causal LM with an LM head (e.g. smollm2)")
    if n < 4:
        raise ValueError(f"n={n} prompts per metric is too few for a powered run (use 100 or more)")
    out, rows = {}, []
    for metric in tqdm(sorted(set(metrics)), desc="powered prompts", leave=False):
        if metric in _PAIR_METRICS:
            ps, row = _pair_prompts(model, metric, n, seed)
        elif metric in _LOSS_METRICS:
            if texts is None:
                from analyses.data.corpora import xsum_sentences  # lazily: reads the corpus

                texts = xsum_sentences(limit=4000, max_words=24)
            ps, row = _text_prompts(model, metric, n, seed, texts)
        else:
            raise ValueError(
                f"no powered prompts for metric {metric!r}; known: {sorted(_PAIR_METRICS) + sorted(_LOSS_METRICS)}"
            )
        out[metric] = ps
        rows.append(row)
    return out, pd.DataFrame(rows)


def _draw_near(layer: int, n_layers: int, n_heads: int, taken: set, rng) -> tuple[int, int] | None:
    """A random head of ``layer`` not in ``taken``; a layer that has none left lends from its
    nearest neighbours (below first). None if no head is left at all."""
    for d in range(n_layers):
        for l in dict.fromkeys((layer - d, layer + d)):
            if 0 <= l < n_layers:
                free = [(l, h) for h in range(n_heads) if (l, h) not in taken]
                if free:
                    return free[int(rng.integers(len(free)))]
    return None


def layer_matched(heads: list, n_null: int, n_layers: int, n_heads: int, exclude: set, rng) -> list:
    """``n_null`` distinct heads whose layers follow the layers of ``heads`` (cycling through them),
    none in ``exclude`` (the role's labelled heads): the layer-matched null."""
    taken, out = set(exclude) | set(heads), []
    layers = [l for l, _ in heads]
    for i in range(n_null):
        h = _draw_near(layers[i % len(layers)], n_layers, n_heads, taken, rng)
        if h is None:
            break
        taken.add(h)
        out.append(h)
    return sorted(out)


def matched_groups(group: list, n_groups: int, n_layers: int, n_heads: int, exclude: set, rng) -> list:
    """``n_groups`` random groups of ``len(group)`` heads, one from each member's layer (or its
    nearest neighbour), none in ``exclude``."""
    out = []
    for _ in range(n_groups):
        taken, g = set(exclude) | set(group), []
        for layer, _h in group:
            h = _draw_near(layer, n_layers, n_heads, taken, rng)
            if h is None:
                break
            taken.add(h)
            g.append(h)
        if len(g) == len(group):
            out.append(sorted(g))
    return out


@torch.no_grad()
def group_scores(model, prompts: PromptSet, source: dict, func, groups: list) -> np.ndarray:
    """[n_groups, batch] scores of ``func`` with each group of heads ablated at once (``source``:
    ``iv.ablation_source`` of these prompts). Runs from the group's lowest layer (its input cached
    from one clean run) on models with ``run_from_layer``."""
    mask = prompts.attention_mask
    out = []
    starts = sorted({min(l for l, _ in g) for g in groups})
    cache = {}
    if hasattr(model, "run_from_layer"):
        names = [act_name(l, "hook_resid_pre") for l in starts]
        _, cache = model.run_with_cache(
            prompts.tokens, attention_mask=mask, names_filter=names, return_type=None, return_cache_object=False
        )
    for g in groups:
        with iv.ablated(model, g, source):
            first = min(l for l, _ in g)
            if cache:
                res = model.run_from_layer(first, cache[act_name(first, "hook_resid_pre")], attention_mask=mask)
            else:
                res = model(prompts.tokens, attention_mask=mask)
        out.append(torch.as_tensor(func(res)).float().numpy())
    return np.stack(out) if out else np.zeros((0, prompts.tokens.shape[0]))


def _stats(per: np.ndarray, null: np.ndarray, n_boot: int, seed: int) -> dict:
    """Effect (mean over prompts of clean - ablated), its bootstrap interval, and the null."""
    e = float(per.mean())
    lo, hi = bootstrap_ci(per, n_boot=n_boot, seed=seed)
    sd = float(null.std(ddof=1)) if null.size > 1 else math.nan
    return dict(
        effect=e,
        ci_low=lo,
        ci_high=hi,
        null_mean=float(null.mean()) if null.size else math.nan,
        null_std=sd,
        n_null=int(null.size),
        z=(e - float(null.mean())) / sd if null.size > 1 and sd > 0 else math.nan,
        p_value=empirical_p(e, null),
        n_items=int(per.size),
    )


@dataclass
class _Plan:
    """What one metric's run ablates: the roles that read it, their labelled heads and nulls."""

    metric: str
    site: str = "all"  # where the heads are ablated: a key of SITES
    roles: dict = field(default_factory=dict)  # role -> list of labelled heads
    nulls: dict = field(default_factory=dict)  # role -> the layer-matched null heads
    groups: dict = field(default_factory=dict)  # role -> random matched groups

    def heads(self) -> list:
        every = [h for hs in self.roles.values() for h in hs] + [h for hs in self.nulls.values() for h in hs]
        return list(dict.fromkeys(every))


def _plans(lab: pd.DataFrame, shape: tuple, n_null: int, n_group_null: int, seed: int, metrics: dict) -> dict:
    """One ``_Plan`` per metric and ablation site (``ablation_site``); the nulls and groups drawn from
    one generator seeded with ``seed``, role by role in sorted order."""
    rng = np.random.default_rng(seed)
    plans = {}
    for role, sub in lab.groupby("role", sort=True):
        metric = metrics.get(str(role).lower(), "loss")
        heads = sorted({(int(a), int(b)) for a, b in zip(sub["layer"], sub["head"])})
        site = ablation_site(role)
        plan = plans.setdefault((metric, site), _Plan(metric, site))
        plan.roles[role] = heads
        plan.nulls[role] = layer_matched(heads, n_null, *shape, set(heads), rng)
        plan.groups[role] = matched_groups(heads, n_group_null, *shape, set(heads), rng) if len(heads) > 1 else []
    return plans


def ablation_site(role: str) -> str:
    """Where a role's heads are ablated (a key of ``SITES``): "answer" for the roles of ``AT_ANSWER``
    (the answer position of their logit-difference prompts, where the role acts), else "all"."""
    return "answer" if str(role).lower() in AT_ANSWER else "all"


def answer_source(z: dict, pos, kind: str = "mean", groups=None, seed: int = 0) -> dict:
    """Replacement ``hook_z`` values that ablate a head only at each prompt's answer position
    ``pos`` [batch]: there its z becomes the ``kind`` ablation of the z at the answer positions of
    the batch (``iv.ablation_source`` over them: "mean" is the mean at the answer position over the
    prompts, the reference set), everywhere else it stays the clean z (replacing a value by itself
    changes nothing)."""
    pos = torch.as_tensor(np.asarray(pos), dtype=torch.long)
    rows = torch.arange(len(pos))
    at = {layer: value[rows, pos][:, None] for layer, value in z.items()}  # [batch, 1, head, d_head]
    src = iv.ablation_source(at, kind, groups=groups, seed=seed)
    out = {}
    for layer, value in z.items():
        new = value.clone()
        new[rows, pos] = src[layer][:, 0].to(value.dtype)
        out[layer] = new
    return out


def _run_metric(model, plan: _Plan, ps: PromptSet, ablation: str, seed: int) -> tuple:
    """The clean scores [batch], every planned head's ablated scores {head: [batch]} and every
    role's group scores {role: [1 + n_groups, batch]} (the role's own group first), each head
    ablated where ``plan.site`` says."""
    heads = plan.heads()
    layers = sorted({l for l, _ in heads})
    clean_out, z = iv.cache_z(model, ps.tokens, layers, attention_mask=ps.attention_mask)
    func = metric_functions(ps)[plan.metric]
    clean = func(clean_out).float().numpy()
    if plan.site == "answer":
        if ps.tasks[plan.metric].pos is None:
            raise ValueError(
                f"roles {sorted(plan.roles)} are ablated at the answer position, but metric {plan.metric!r} has none "
                "(a loss); give them a logit-difference metric (POWERED_METRICS)"
            )
        source = answer_source(z, ps.tasks[plan.metric].pos, ablation, groups=ps.family, seed=seed)
    else:
        source = iv.ablation_source(z, ablation, attention_mask=ps.attention_mask, groups=ps.family, seed=seed)
    swept = iv.head_sweep(model, ps.tokens, source, {plan.metric: func}, heads=heads, attention_mask=ps.attention_mask)
    single = dict(zip(heads, swept[plan.metric]))
    groups = {}
    for role, hs in plan.roles.items():
        if plan.groups.get(role):
            groups[role] = group_scores(model, ps, source, func, [hs] + plan.groups[role])
    return clean, single, groups


def _verdict_cols(row: dict, alpha: float) -> dict:
    v, why = decide(
        row["effect"], row["ci_low"], row["ci_high"], row["min_effect"], row["p_value"], alpha, n_null=row["n_null"]
    )
    return dict(verdict=v, reason=why)


def _rows(name: str, plan: _Plan, lab: pd.DataFrame, got: tuple, min_effect: float, cfg: dict) -> tuple:
    """The single-head and the group rows of one metric."""
    clean, single, groups = got
    ok = np.isfinite(clean)
    score = {(int(a), int(b), r): s for a, b, r, s in zip(lab["layer"], lab["head"], lab["role"], lab["score"])}
    heads_out, groups_out = [], []
    for role, hs in plan.roles.items():
        null = np.array([float((clean[ok] - single[h][ok]).mean()) for h in plan.nulls[role]])
        best = -math.inf
        for h in hs:
            row = dict(model=name, layer=h[0], head=h[1], role=role, metric=plan.metric, min_effect=min_effect)
            row.update(ablated_at=SITES[plan.site])
            row.update(_stats(clean[ok] - single[h][ok], null, cfg["n_boot"], cfg["seed"]))
            row.update(null_layers=" ".join(str(l) for l in sorted({l for l, _ in plan.nulls[role]})))
            row.update(label_score=float(score.get((h[0], h[1], role), math.nan)), **_verdict_cols(row, cfg["alpha"]))
            best = max(best, row["effect"])
            heads_out.append(row)
        if role in groups:
            per = clean[None, ok] - groups[role][:, ok]
            gnull = per[1:].mean(1)
            row = dict(model=name, role=role, metric=plan.metric, size=len(hs), min_effect=min_effect)
            row.update(ablated_at=SITES[plan.site])
            row.update(heads=" ".join(f"L{l}H{h}" for l, h in hs), best_single=best)
            row.update(_stats(per[0], gnull, cfg["n_boot"], cfg["seed"]))
            groups_out.append({**row, **_verdict_cols(row, cfg["alpha"])})
    return heads_out, groups_out


def _labelled(model, labels: pd.DataFrame, name: str, max_heads_per_role: int | None) -> tuple[pd.DataFrame, dict]:
    """The labelled non-sink (head, role) rows (best score first, at most ``max_heads_per_role``
    per role); and the counts of the sink labels left out."""
    v = view(model)
    check_labels_model(labels, [v.name, name])
    lab = _labels_frame(labels, v.n_layers, v.n_heads)
    sink = lab["role"].astype(str).str.lower().isin(SINK_ROLES)
    skipped = lab[sink]["role"].value_counts().to_dict()
    lab = lab[~sink].sort_values(["role", "score"], ascending=[True, False], na_position="last")
    if max_heads_per_role is not None:
        lab = lab.groupby("role", sort=False).head(max_heads_per_role)
    return lab.reset_index(drop=True), skipped


@torch.no_grad()
def run_powered(
    model,
    labels: pd.DataFrame,
    n: int = 120,
    seed: int = 0,
    ablation: str = "mean",
    n_null: int = 30,
    n_group_null: int = 30,
    max_heads_per_role: int | None = None,
    alpha: float = 0.05,
    n_boot: int = 1000,
    prompts: dict | None = None,
    metrics: dict | None = None,
    model_name: str | None = None,
) -> PoweredResult:
    """The powered validation of ``labels`` (a heads table, as ``run`` reads it) on a causal
    LM; see the module docstring. ``prompts``: {metric: PromptSet} to use instead of
    ``powered_prompts`` (the accuracy table is then empty); ``metrics``: {role: metric} instead of
    ``POWERED_METRICS`` (a role outside it reads ``loss``)."""
    if ablation not in iv.ABLATIONS:
        raise ValueError(f"ablation {ablation!r} is unknown; use one of {iv.ABLATIONS}")
    check_settings(alpha, n=n, n_null=n_null, n_group_null=n_group_null, max_heads_per_role=max_heads_per_role)
    name = model_name or view(model).name
    lab, skipped = _labelled(model, labels, name, max_heads_per_role)
    v = view(model)
    plans = _plans(lab, (v.n_layers, v.n_heads), n_null, n_group_null, seed, metrics or POWERED_METRICS)
    given = prompts is not None
    wanted = sorted({p.metric for p in plans.values()})
    if prompts is None:
        prompts, accuracy = powered_prompts(model, wanted, n=n, seed=seed)
    else:
        missing = sorted(set(wanted) - set(prompts))
        if missing:
            raise ValueError(f"no prompts given for metrics {missing} (the labelled roles need them)")
        accuracy = pd.DataFrame(columns=ACCURACY_COLUMNS)
    cfg = dict(n_boot=n_boot, seed=seed, alpha=alpha)
    heads_rows, group_rows, cost = [], [], 0
    for (metric, _site), plan in tqdm(plans.items(), desc="powered validation", leave=False):
        ps = prompts[metric]
        got = _run_metric(model, plan, ps, ablation, seed)
        ok = np.isfinite(got[0])
        scale = float(np.mean(np.abs(got[0][ok]))) if ok.any() else math.nan
        h, g = _rows(name, plan, lab, got, REL_MIN_EFFECT[ps.tasks[metric].kind] * scale, cfg)
        heads_rows += h
        group_rows += g
        n_groups = sum(1 + len(x) for r, x in plan.groups.items() if x)
        cost += (len(plan.heads()) + n_groups) * int(ps.tokens.shape[0])
    info = dict(model=name, ablation=ablation, seed=seed, n=n, n_null=n_null, n_group_null=n_group_null, alpha=alpha)
    inputs = sorted({getattr(ps, "input", "as given") for ps in prompts.values()})
    info.update(sinks_left_out=skipped, ablated_prompt_runs=cost, input=", ".join(inputs))
    info.update(ablated_at={role: SITES[p.site] for p in plans.values() for role in p.roles})
    params = dict(n=n, ablation=ablation, n_null=n_null, n_group_null=n_group_null, alpha=alpha, n_boot=n_boot)
    params.update(max_heads_per_role=max_heads_per_role, prompts_given=given, metrics=metrics, input=info["input"])
    info.update(make_info("validation.powered", name, seed, **params))  # model and seed: the same values
    table = pd.DataFrame(heads_rows, columns=TABLE_COLUMNS)
    return PoweredResult(table, pd.DataFrame(group_rows, columns=GROUP_COLUMNS), accuracy, info)


def validate_powered(*args, **kwargs) -> PoweredResult:
    """Deprecated: ``run_powered``."""
    warnings.warn(
        "analyses.validation.validate_powered is deprecated; use analyses.validation.run_powered",
        DeprecationWarning,
        stacklevel=2,
    )
    return run_powered(*args, **kwargs)
