"""``run``: the head catalogue of one model, one verdict per head and task (``verdicts``).

The pattern side is the probe's heads table (``interp probe``'s heads.csv: labelled roles with
their reading, score, strongest heuristic and real-text support, and the map's primary role). The
causal side is measured here:

* a causal LM: for each task of ``analyses.tasks.TASKS``, ``2 n`` contrastive pairs are generated
  (``analyses.circuits.tasks.circuit_task``), the model's accuracy measured (logit difference > 0),
  and a task is solved when the accuracy is at least ``MIN_ACCURACY`` (0.7) with at least
  ``MIN_SOLVED`` solved pairs; unsolved tasks are listed and skipped. On the first ``n`` solved pairs
  every head is patched at the answer position (``patching.answer_patching``), the best
  ``all_position_heads`` heads of each role that acts before the answer on the task
  (``verdicts.acts_elsewhere``) also at every position, and EAP-IG scores every head on the first
  ``eap_pairs`` of them (``analyses.circuits.attribution.node_scores``, summed over positions; shown,
  not decided on);
* an encoder: ``interp validate``'s probe metrics (``analyses.validation.run``: every head
  mean-ablated on ``n`` prompts per family; the probes read the subject's number at the verb and the
  antecedent at the pronoun).

Each effect gets a 95% t interval over pairs (prompts are independent draws; ``scipy.stats.t``).
Where the folder the heads table came from holds ``powered/powered.csv`` (``scripts/powered.sh``),
``retrieval/retrieval.csv`` (``interp retrieval``) or ``sinks/sinks_heads.csv`` (``interp sinks``), of
this model, their per-head numbers are joined on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from analyses.catalogue.patching import all_position_patching, answer_patching, head_order
from analyses.catalogue.verdicts import NO_TASK, acts_elsewhere, causal_state, decide, tasks_of
from analyses.contract import HEAD_KEYS, make_info, model_identity
from analyses.heads.roles import SINK_ROLES

__all__ = ["CatalogueResult", "COLUMNS", "TASK_COLUMNS", "MIN_SOLVED", "run", "pattern_side", "t_interval"]

MIN_SOLVED = 20  # solved pairs a task needs before its heads are patched
COLUMNS = [
    "model",
    "layer",
    "head",
    "task",
    "metric",
    "roles",
    "other_roles",
    "primary",
    "pattern_score",
    "heuristic",
    "real_text",
    "site",
    "effect",
    "ci_low",
    "ci_high",
    "n_pairs",
    "min_effect",
    "normalised",
    "rank",
    "effect_answer",
    "eap_ig",
    "eap_ig_rank",
    "powered_effect",
    "powered_verdict",
    "powered_group_effect",
    "powered_group_verdict",
    "retrieval",
    "sink_share",
    "sink_by_length",
    "state",
    "sign",
    "verdict",
    "reason",
]
TASK_COLUMNS = [
    "task",
    "metric",
    "n_generated",
    "accuracy",
    "n_solved",
    "n_used",
    "solved",
    "clean",
    "corrupted",
    "min_effect",
    "sd",
    "detectable",
    "note",
]


@dataclass
class CatalogueResult:
    """table: ``COLUMNS``, one row per head and solved task (and a "no causal test" row per head
    whose roles no solved task exercises); tasks: ``TASK_COLUMNS``, one row per task (solved or
    not); info: the run (``analyses.contract``'s keys)."""

    table: pd.DataFrame
    tasks: pd.DataFrame
    info: dict = field(default_factory=dict)

    @property
    def heads(self) -> pd.DataFrame:
        return self.table


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, low, high) over axis 0 of ``values`` [item, ...]: the t interval of the mean (NaN
    with fewer than two items)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    n = values.shape[0]
    mean = values.mean(0) if n else np.full(values.shape[1:], np.nan)
    if n < 2:
        nan = np.full(values.shape[1:], np.nan)
        return mean, nan, nan
    half = stats.t.ppf(0.5 + level / 2, n - 1) * values.std(0, ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


# -- the pattern side -------------------------------------------------------------------------------


def pattern_side(labels: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the labelled roles: one row per head and label name with its best score, heuristic and
    real-text support; the map: one row per head with its primary role) from a probe heads table."""
    from analyses.heads.labels import labelled_roles, role_map

    need = {"layer", "head", "role", "label", "score", "baseline", "source", "subset", "specials", "direction"}
    missing = sorted(need - set(labels.columns))
    if missing:
        raise ValueError(
            f"the heads table lacks columns {missing}: the catalogue reads `interp probe`'s heads.csv "
            "(a table of labels alone has no scores or map)"
        )
    lab = labelled_roles(labels)
    for col in ("heuristic", "real_text"):
        if col not in lab:
            lab[col] = ""
    lab = lab.sort_values("score", ascending=False).drop_duplicates(["layer", "head", "name"])
    keep = ["layer", "head", "name", "role", "score", "heuristic", "real_text"]
    return lab[keep].reset_index(drop=True), role_map(labels)[["layer", "head", "primary"]]


# -- the causal side --------------------------------------------------------------------------------


def _shard_batches(world, pairs, batch_size: int, fn) -> list:
    """``fn(batch)`` of every batch of ``pairs`` (batches of ``batch_size`` in order), each worker
    computing its share (batch i: worker i % size) and the results gathered back in batch order, so
    that any number of workers gives the same values as one process."""
    from interp.distributed import SINGLE

    world = world or SINGLE
    starts = list(range(0, len(pairs), batch_size))
    mine = {i: fn(pairs[starts[i] : starts[i] + batch_size]) for i in world.shard(len(starts))}
    if world.size == 1:
        return [mine[i] for i in range(len(starts))]
    got = {}
    for part in world.gather(mine):
        got.update(part)
    return [got[i] for i in range(len(starts))]


def _eap_ig(model, pairs, steps: int, batch_size: int, world) -> np.ndarray:
    """[layer * head] -(EAP-IG score), the mean over ``pairs``: the first-order estimate of the same
    quantity as ``effect`` (clean - patched), summed in batch order."""
    from analyses.circuits.attribution import node_scores

    def one(batch):
        s = node_scores(model, batch, method="eap-ig", steps=steps, batch_size=len(batch))
        s = s[s["head"] != "mlp"]
        return -s["score"].to_numpy(dtype=float) * len(batch)

    parts = _shard_batches(world, pairs, batch_size, one)
    return np.sum(parts, axis=0) / len(pairs)


def _given_task(model, task: str, pairs, min_pairs: int):
    """A ``CircuitTask`` of pairs the caller gives (their own prompts, or a planted model's): the
    accuracy measured on them as on generated ones."""
    from analyses.circuits.tasks import CircuitTask, clean_logit_diff

    ok = clean_logit_diff(model, pairs) > 0
    keep = torch.as_tensor(np.flatnonzero(ok if ok.any() else ~ok))  # none solved: kept only to be counted
    return CircuitTask(
        task,
        pairs[keep],
        np.zeros(int(ok.sum()), dtype=bool),
        n_generated=len(pairs),
        accuracy=float(ok.mean()),
        min_pairs=min_pairs,
    )


def _lm_task(
    model,
    task: str,
    n: int,
    seed: int,
    heads_all: list,
    all_pos: list,
    eap_pairs: int,
    steps: int,
    batch_size: int,
    world,
    progress: bool,
    given=None,
) -> tuple[dict, dict | None]:
    """(the task's row, its per-head measurements or None when unsolved)."""
    from analyses.circuits.tasks import MIN_ACCURACY, circuit_task
    from analyses.validation.metrics import REL_MIN_EFFECT

    ct = (
        circuit_task(model, task, n=2 * n, seed=seed, min_pairs=min(MIN_SOLVED, n))
        if given is None
        else _given_task(model, task, given, min(MIN_SOLVED, n))
    )
    row = dict(
        task=task,
        metric="logit_diff",
        n_generated=ct.n_generated,
        accuracy=ct.accuracy,
        n_solved=int(round(ct.accuracy * ct.n_generated)),
        n_used=0,
        solved=ct.solved,
        note=ct.why_not(),
    )
    if not ct.solved:
        return row, None
    pairs = ct.pairs[: min(n, len(ct.pairs))]
    parts = _shard_batches(world, pairs, batch_size, lambda b: answer_patching(model, b, batch_size=len(b)))
    effects = np.concatenate([p[0] for p in parts])
    clean = np.concatenate([p[1] for p in parts])
    corrupted = np.concatenate([p[2] for p in parts])
    min_effect = REL_MIN_EFFECT["logit_diff"] * float(np.mean(np.abs(clean)))
    mean, lo, hi = t_interval(effects)
    out = dict(mean=mean, lo=lo, hi=hi, min_effect=min_effect, gap=float(clean.mean() - corrupted.mean()))
    if all_pos:
        parts = _shard_batches(world, pairs, batch_size, lambda b: all_position_patching(model, b, all_pos, len(b)))
        m2, l2, h2 = t_interval(np.concatenate(parts))
        out["all"] = {h: (m2[i], l2[i], h2[i]) for i, h in enumerate(all_pos)}
    else:
        out["all"] = {}
    out["eap_ig"] = _eap_ig(model, pairs[: min(eap_pairs, len(pairs))], steps, batch_size, world) if eap_pairs else None
    sd = float(np.median(effects.std(0, ddof=1)))
    from scipy import stats

    k = len(pairs)
    # the smallest true effect whose interval clears min_effect with 80% power, at the median head's sd
    detectable = min_effect + (stats.t.ppf(0.975, k - 1) + stats.norm.ppf(0.8)) * sd / math.sqrt(k)
    row.update(
        n_used=k,
        clean=float(clean.mean()),
        corrupted=float(corrupted.mean()),
        min_effect=min_effect,
        sd=sd,
        detectable=detectable,
        note=f"{MIN_ACCURACY:.0%} accuracy needed; solved",
    )
    return row, out


def _all_position_heads(roles: pd.DataFrame, task: str, k: int, role_tasks: dict) -> list[tuple[int, int]]:
    """The heads patched at every position on ``task``: the ``k`` best-scoring heads of each of its
    roles that act before the answer on it (``acts_elsewhere``; each head costs a run per pair from its
    layer; the others are "not measured" there)."""
    picked = set()
    for role in sorted(
        {r for r in roles["name"] if task in tasks_of(r, False, role_tasks) and acts_elsewhere(r, task)}
    ):
        g = roles[roles["name"] == role].sort_values("score", ascending=False).head(k)
        picked |= {(int(a), int(b)) for a, b in zip(g["layer"], g["head"])}
    return sorted(picked)


def _lm_causal(
    model,
    roles: pd.DataFrame,
    n,
    seed,
    eap_pairs,
    steps,
    batch_size,
    world,
    progress,
    all_position_heads,
    pairs,
    role_tasks,
):
    from analyses.tasks import TASKS

    heads_all = head_order(model)
    rows, measured = [], {}
    for task in tqdm(list(pairs) if pairs else TASKS, desc="catalogue tasks", disable=not progress):
        all_pos = _all_position_heads(roles, task, all_position_heads, role_tasks)
        given = pairs.get(task) if pairs else None
        row, out = _lm_task(
            model, task, n, seed, heads_all, all_pos, eap_pairs, steps, batch_size, world, progress, given
        )
        rows.append(row)
        if out is not None:
            measured[task] = out
    return pd.DataFrame(rows).reindex(columns=TASK_COLUMNS), measured, heads_all


def _encoder_causal(model, labels: pd.DataFrame, n: int, seed: int, world):
    """The encoder's causal side: ``interp validate``'s every-head ablation on its probe metrics."""
    from analyses.catalogue.verdicts import ENCODER_TASKS
    from analyses.validation import run as validate

    res = validate(model, labels, n=n, seed=seed, world=world)
    eff = res.effects
    rows, measured = [], {}
    heads_all = head_order(model)
    for metric, task in ENCODER_TASKS.items():
        e = eff[eff["metric"] == metric]
        clean = res.info["clean"].get(metric, math.nan)
        acc = res.info["clean_accuracy"].get(metric, math.nan)
        ok = bool(len(e)) and clean > 0
        rows.append(
            dict(
                task=task,
                metric=metric,
                n_generated=res.info["n_prompts"],
                accuracy=acc,
                n_solved=res.info["n_prompts"],
                n_used=res.info["n_prompts"],
                solved=ok,
                clean=clean,
                corrupted=math.nan,
                min_effect=float(e["min_effect"].iloc[0]) if len(e) else math.nan,
                sd=math.nan,
                detectable=math.nan,
                note="" if ok else "the probe fails on clean held-out prompts (mean log-odds <= 0)",
            )
        )
        if not ok:
            continue
        idx = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(e["layer"], e["head"]))}
        pick = [idx.get(h) for h in heads_all]
        get = lambda col: np.array([e[col].iloc[i] if i is not None else np.nan for i in pick], dtype=float)  # noqa: E731
        measured[task] = dict(
            mean=get("effect"),
            lo=get("ci_low"),
            hi=get("ci_high"),
            min_effect=float(e["min_effect"].iloc[0]),
            gap=float(clean),
            all={},
            eap_ig=None,
            site="all positions (mean ablation)",
        )
    return pd.DataFrame(rows).reindex(columns=TASK_COLUMNS), measured, heads_all, res


# -- the other analyses' per-head tables ------------------------------------------------------------


def _read_optional(folder: Path | None, rel: str) -> pd.DataFrame | None:
    if folder is None:
        return None
    path = Path(folder) / rel
    return pd.read_csv(path, low_memory=False) if path.is_file() else None


def _of_model(table: pd.DataFrame | None, name: str | None) -> pd.DataFrame | None:
    """``table`` where it is of model ``name`` (or says nothing about its model), else None: another
    model's numbers are never joined onto this one's heads."""
    if table is None or name is None or "model" not in table.columns:
        return table
    models = {str(m) for m in table["model"].dropna().unique()}
    return table if models <= {name} else None


def _extras(folder: Path | None, name: str | None = None) -> dict:
    """Per head, from the other analyses' output sets in the model's folder (each only where it is
    there and of this model): the powered run (``powered/powered.csv``, by head and role: effect and
    verdict; ``powered/groups.csv``: the group ablation of the head's role, its effect and verdict with the
    group's size), the retrieval score (``retrieval/retrieval.csv``, ``interp retrieval``) and the sink
    share by length (``sinks/sinks_heads.csv``, ``interp sinks``: the role ``attention_sink``'s score,
    its mean over lengths and the value at each length)."""
    out: dict = {"powered": {}, "groups": {}, "retrieval": {}, "sink": {}, "sink_by_length": {}, "ran": {}}
    pw = _of_model(_read_optional(folder, "powered/powered.csv"), name)
    out["ran"]["powered"] = pw is not None
    if pw is not None:
        for r in pw.itertuples():
            out["powered"][(int(r.layer), int(r.head), str(r.role))] = (float(r.effect), str(r.verdict))
        gr = _of_model(_read_optional(folder, "powered/groups.csv"), name)
        for r in gr.itertuples() if gr is not None else ():
            out["groups"][str(r.role)] = (float(r.effect), f"{r.verdict} (group of {int(r.size)})")
    rt = None
    if folder is not None and (Path(folder) / "retrieval" / "retrieval.csv").is_file():
        from analyses.longctx.retrieval_report import read_retrieval

        rt = _of_model(_read_optional(folder, "retrieval/retrieval.csv"), name)
        rt = None if rt is None else read_retrieval(Path(folder) / "retrieval" / "retrieval.csv")
    out["ran"]["retrieval"] = rt is not None
    if rt is not None:
        for a, b, s in zip(rt["layer"], rt["head"], rt["retrieval"]):
            out["retrieval"][(int(a), int(b))] = float(s)
    sk = _of_model(_read_optional(folder, "sinks/sinks_heads.csv"), name)
    if sk is not None and not {"role", "length", "layer", "head", "score"} <= set(sk.columns):
        raise ValueError(
            f"{Path(folder) / 'sinks' / 'sinks_heads.csv'} lacks the columns role, length, layer, head, score: "
            "not the table `interp sinks` writes"
        )
    out["ran"]["sinks"] = sk is not None
    if sk is not None:
        sk = sk[sk["role"] == "attention_sink"]
        for (a, b), g in sk.groupby(["layer", "head"]):
            g = g.sort_values("length")
            out["sink"][(int(a), int(b))] = float(g["score"].mean())
            out["sink_by_length"][(int(a), int(b))] = "; ".join(
                f"{int(n)}: {s:.3f}" for n, s in zip(g["length"], g["score"])
            )
    return out


# -- the join ---------------------------------------------------------------------------------------


def _rank(values: np.ndarray) -> np.ndarray:
    """1 for the largest value, NaN stays NaN."""
    s = pd.Series(values)
    return s.rank(ascending=False, method="min").to_numpy()


def _combine(answer: tuple, every: tuple, roles: list[str], task: str) -> tuple:
    """The (state, sign, site) that decides for a head measured at the answer position and, for its
    roles that act elsewhere, at every position: a head whose task roles all act elsewhere is
    decided at every position; one with both kinds shows an effect where either does, and no effect
    only where both do."""
    if all(acts_elsewhere(r, task) for r in roles):
        return every
    if answer[0] == "effect":
        return answer
    if every[0] == "effect":
        return every
    if answer[0] == "no effect" and every[0] == "no effect":
        return answer
    return ("under-powered", 0, answer[2]) if "under-powered" in (answer[0], every[0]) else answer


def _join(name, heads_all, roles, primary, tasks, measured, extras, encoder, role_tasks) -> pd.DataFrame:
    by_head: dict[tuple[int, int], pd.DataFrame] = {
        (int(a), int(b)): g for (a, b), g in roles.groupby(["layer", "head"])
    }
    prim = {(int(a), int(b)): str(p) for a, b, p in zip(primary["layer"], primary["head"], primary["primary"])}
    metric_of = dict(zip(tasks["task"], tasks["metric"]))
    rows = []
    for task, m in measured.items():
        rank = _rank(m["mean"])
        eap = m.get("eap_ig")
        eap_rank = _rank(eap) if eap is not None else None
        for i, h in enumerate(heads_all):
            g = by_head.get(h)
            names = [] if g is None else list(g["name"])
            mine = [r for r in names if task in tasks_of(r, encoder, role_tasks)]
            others = [r for r in names if r not in mine]
            best = None if g is None or not mine else g[g["name"].isin(mine)].iloc[0]
            state, sign = causal_state(m["mean"][i], m["lo"][i], m["hi"][i], m["min_effect"])
            site = m.get("site", "answer position")
            row = dict(
                model=name,
                layer=h[0],
                head=h[1],
                task=task,
                metric=metric_of[task],
                roles="; ".join(mine),
                other_roles="; ".join(others),
                primary=prim.get(h, "unclassified"),
                pattern_score=float(best["score"]) if best is not None else math.nan,
                heuristic=str(best["heuristic"]) if best is not None else "",
                real_text=str(best["real_text"]) if best is not None else "",
                site=site,
                effect=m["mean"][i],
                ci_low=m["lo"][i],
                ci_high=m["hi"][i],
                n_pairs=0,
                min_effect=m["min_effect"],
                normalised=m["mean"][i] / m["gap"] if m["gap"] else math.nan,
                rank=rank[i],
                effect_all=math.nan,
                ci_low_all=math.nan,
                ci_high_all=math.nan,
                eap_ig=eap[i] if eap is not None else math.nan,
                eap_ig_rank=eap_rank[i] if eap_rank is not None else math.nan,
            )
            row["effect_answer"] = m["mean"][i]
            if any(acts_elsewhere(r, task) for r in mine):
                e2, l2, h2 = m["all"].get(h, (math.nan, math.nan, math.nan))
                s2, sign2 = causal_state(e2, l2, h2, m["min_effect"])
                state, sign, site = _combine((state, sign, site), (s2, sign2, "all positions"), mine, task)
                if site == "all positions":
                    row.update(effect=e2, ci_low=l2, ci_high=h2)
                row["site"] = site
            pw = [extras["powered"][(h[0], h[1], r)] for r in mine if (h[0], h[1], r) in extras["powered"]]
            row["powered_effect"] = pw[0][0] if pw else math.nan
            row["powered_verdict"] = pw[0][1] if pw else ("not run" if not extras["ran"]["powered"] else "")
            grp = [extras["groups"][r] for r in mine if r in extras["groups"]]
            row["powered_group_effect"] = grp[0][0] if grp else math.nan
            row["powered_group_verdict"] = grp[0][1] if grp else ""
            row["retrieval"] = extras["retrieval"].get(h, math.nan)
            row["sink_share"] = extras["sink"].get(h, math.nan)
            row["sink_by_length"] = extras["sink_by_length"].get(h, "")
            verdict, reason = decide(bool(mine), state, row["primary"], sign)
            row.update(state=state, sign=sign, verdict=verdict, reason=reason)
            rows.append(row)
    # the roles no solved task exercises
    for h in heads_all:
        g = by_head.get(h)
        if g is None:
            continue
        untested = [r for r in g["name"] if not any(t in measured for t in tasks_of(r, encoder, role_tasks))]
        untested = [r for r in untested if r not in SINK_ROLES]
        if not untested:
            continue
        best = g[g["name"].isin(untested)].iloc[0]
        why = "; ".join(
            f"{r}: " + (f"task {', '.join(ts)} not solved" if ts else "no task tests it")
            for r, ts in ((r, tasks_of(r, encoder, role_tasks)) for r in untested)
        )
        rows.append(
            dict(
                model=name,
                layer=h[0],
                head=h[1],
                task=NO_TASK,
                metric="",
                roles="; ".join(untested),
                other_roles="; ".join(r for r in g["name"] if r not in untested),
                primary=prim.get(h, "unclassified"),
                pattern_score=float(best["score"]),
                heuristic=str(best["heuristic"]),
                real_text=str(best["real_text"]),
                site="",
                powered_verdict="not run" if not extras["ran"]["powered"] else "",
                retrieval=extras["retrieval"].get(h, math.nan),
                sink_share=extras["sink"].get(h, math.nan),
                sink_by_length=extras["sink_by_length"].get(h, ""),
                state="not measured",
                sign=0,
                verdict="no causal test",
                reason=why,
            )
        )
    table = pd.DataFrame(rows).reindex(columns=COLUMNS)
    order = {t: i for i, t in enumerate([*measured, NO_TASK])}
    table = table.sort_values(["task", "layer", "head"], key=lambda c: c.map(order) if c.name == "task" else c)
    return table.reset_index(drop=True)


def run(
    model: Any,
    labels: pd.DataFrame,
    n: int = 32,
    seed: int = 0,
    eap_pairs: int = 8,
    ig_steps: int = 5,
    batch_size: int = 16,
    folder: str | Path | None = None,
    encoder_n: int = 32,
    all_position_heads: int = 4,
    pairs: dict | None = None,
    role_tasks: dict | None = None,
    world: Any = None,
    progress: bool = False,
) -> CatalogueResult:
    """The catalogue of ``model`` from its probe heads table ``labels`` (``interp probe``'s heads.csv).

    n: solved pairs per task patched (a causal LM; ``2 n`` are generated to measure accuracy);
    eap_pairs: of them, the pairs EAP-IG (``ig_steps`` steps) scores (0: no EAP-IG);
    encoder_n: prompts per family of the encoder's probe metrics;
    all_position_heads: the best-scoring heads of each role that acts elsewhere (previous-token,
    duplicate-token) patched at every position on its tasks (the others: "no causal test" there);
    pairs: {task: interp.pairs.Pairs} to patch instead of the generated tasks (a causal LM; the
    task names are the caller's, tested with the roles ``role_tasks`` maps to that name);
    role_tasks: {label name: (task, ...)}, what each role is tested on (default ``ROLE_TASKS``, the
    generated tasks'; with pairs of your own, say which roles they test);
    folder: where to look for ``powered/``, ``retrieval/`` and ``sinks/`` (the model's output folder);
    world: the workers (``interp.distributed``): pairs are dealt out by batch and gathered back in
    order, so the table is the one process's, value for value."""
    from interp.view import view

    if n < 2:
        raise ValueError(f"n={n}: the catalogue needs at least 2 pairs per task for an interval (e.g. 40)")
    if eap_pairs < 0 or ig_steps < 1:
        raise ValueError(f"eap_pairs={eap_pairs}, ig_steps={ig_steps}: need eap_pairs >= 0 and ig_steps >= 1")
    name = model_identity(model)
    if "model" in labels.columns:
        other = sorted({str(x) for x in labels["model"].dropna().unique()} - {name})
        if other:
            raise ValueError(f"the heads table is of model {', '.join(other)}, not {name!r}: probe {name} first")
    roles, primary = pattern_side(labels)
    v = view(model)
    encoder = not (v.causal and v.lm_head)
    if encoder:
        tasks, measured, heads_all, _ = _encoder_causal(model, labels, encoder_n, seed, world)
    else:
        tasks, measured, heads_all = _lm_causal(
            model,
            roles,
            n,
            seed,
            eap_pairs,
            ig_steps,
            batch_size,
            world,
            progress,
            all_position_heads,
            pairs,
            role_tasks,
        )
    extras = _extras(Path(folder) if folder is not None else None, name)
    table = _join(name, heads_all, roles, primary, tasks, measured, extras, encoder, role_tasks)
    for task in measured:
        table.loc[table["task"] == task, "n_pairs"] = int(tasks.loc[tasks["task"] == task, "n_used"].iloc[0])
    info = make_info(
        "catalogue",
        name,
        seed,
        n=n,
        eap_pairs=eap_pairs,
        ig_steps=ig_steps,
        batch_size=batch_size,
        encoder_n=encoder_n,
        all_position_heads=all_position_heads,
    )
    info.update(
        encoder=encoder,
        workers=getattr(world, "size", 1) if world is not None else 1,
        ran={k: bool(x) for k, x in extras["ran"].items()},
        head_keys=list(HEAD_KEYS),
    )
    return CatalogueResult(table, tasks, info)
