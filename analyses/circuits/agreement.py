"""Does what a head attends to agree in rank with what it does? (issue 35, section 1.)

For each task (``subject_verb``, ``ioi``, ``pronoun_gender``: the shared contrastive pairs of
``analyses.circuits.tasks``, only the pairs the model solves), on the same clean prompts:

- what a head *does*: its exact activation-patching effect on each pair
  (``analyses.circuits.exact.exact_patching``'s ``per_pair``: m(patched) - m(clean), the logit
  difference right - wrong with that head alone patched from the corrupted run); a head that carries
  the behaviour has a negative effect, so the rank statistics use the *drop* ``-effect`` (and its
  magnitude ``|effect|``, for heads that act against the answer);
- what a head *attends to*: the attention mass on the task's target word (``TARGETS``: the subject,
  the indirect object, the antecedent), in two readings (``analyses.heads.roles``): **predictive**,
  the row of the final token (whose next-token prediction is the answer: the row patching acts
  on), and **retrospective**, the row of the answer itself, appended to the clean prompt (Clark et
  al.'s convention; not for IOI, whose relation is predictive only); and how often the row's argmax
  is the target.

Per task and reading: Spearman's rho across heads between the mean score and the mean drop, a
percentile bootstrap interval over prompts (pairs resampled, both means recomputed on the same
resample, ``n_boot`` seeded replicates), and the overlap of the top ``top`` heads by score and by
drop. ``run`` -> ``AgreementResult``; ``OUTPUTS`` / ``write`` as every analysis
(``analyses.contract``); ``interp agreement`` is the command.

Where the target is: the pairs do not record word positions, so they are derived from what the
pairs' API gives (the token ids), whatever the input convention (a BOS or a sink token first):
the subject is the one position where the clean and corrupted prompts differ (the corruption flips
its number); the indirect object is the clean prompt's occurrence of the answer token (the IO's
name, which the prompt names once); the antecedent is the one of the two swapped people whose
gender is the answer's (the gendered nouns of ``analyses.data.lexicon.PAIR_GENDER_PAIRS``).
"""

from __future__ import annotations

import functools
import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from analyses.circuits.exact import ExactEffects, exact_patching
from analyses.circuits.nodes import head_name
from analyses.circuits.tasks import MIN_ACCURACY, circuit_task
from analyses.contract import head_table, make_info
from interp.display import md_table
from interp.interventions import all_heads
from interp.io import atomic_write, write_set
from interp.names import act_name
from interp.pairs import Pairs
from interp.view import view

__all__ = [
    "AGREEMENT_TASKS",
    "READINGS",
    "TASK_READINGS",
    "TARGETS",
    "OUTPUTS",
    "AgreementResult",
    "TaskAgreement",
    "target_positions",
    "rival_positions",
    "with_answer",
    "attention_to",
    "pattern_scores",
    "bootstrap_weights",
    "rank_agreement_ci",
    "top_overlap",
    "run",
    "write",
]

AGREEMENT_TASKS = ("subject_verb", "ioi", "pronoun_gender")
READINGS = ("predictive", "retrospective")
TASK_READINGS = {"subject_verb": READINGS, "pronoun_gender": READINGS, "ioi": ("predictive",)}
TARGETS = {"subject_verb": "subject", "ioi": "indirect object", "pronoun_gender": "antecedent"}
MIN_PAIRS = 20  # solved pairs a task needs here: a rank correlation over heads, its interval over prompts
OUTPUTS = ("tasks.csv", "heads.csv", "summary.csv", "agreement.md", "agreement.json")


# ---- where the target word is ------------------------------------------------------------------


def _differing(pairs: Pairs) -> list[np.ndarray]:
    """Per pair the positions (real tokens only) where its clean and corrupted prompts differ."""
    diff = pairs.clean != pairs.corrupted
    if pairs.attention_mask is not None:
        diff &= pairs.attention_mask.bool()
    return [np.flatnonzero(row.numpy()) for row in diff]


def _one_token(hf: Any, word: str) -> int | None:
    ids = hf.encode(" " + word, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def _antecedents(pairs: Pairs, tokenizer: Any) -> np.ndarray:
    from analyses.data.lexicon import PAIR_GENDER_PAIRS

    hf = getattr(tokenizer, "hf", tokenizer)
    male = {_one_token(hf, m) for m, _ in PAIR_GENDER_PAIRS} - {None}
    female = {_one_token(hf, f) for _, f in PAIR_GENDER_PAIRS} - {None}
    him = _one_token(hf, "himself")
    out = []
    for i, where in enumerate(_differing(pairs)):
        gender = male if int(pairs.right[i]) == him else female
        hits = [int(p) for p in where if int(pairs.clean[i, p]) in gender]
        if len(where) != 2 or len(hits) != 1:
            raise ValueError(
                f"pronoun_gender pair {i}: expected two swapped people, one of the answer's gender, where clean and "
                f"corrupted differ; found positions {where.tolist()} ({len(hits)} of the answer's gender)"
            )
        out.append(hits[0])
    return np.asarray(out, dtype=int)


def target_positions(task: str, pairs: Pairs, tokenizer: Any = None) -> np.ndarray:
    """[n] the position of the task's target word (``TARGETS``) in each clean prompt, from the pairs'
    ids alone (see the module docstring). ``tokenizer`` (the model's) is needed for
    ``pronoun_gender`` only. A pair that does not fit its task's form is a ValueError naming it."""
    if task not in TARGETS:
        raise ValueError(f"agreement tasks are {', '.join(AGREEMENT_TASKS)}; got {task!r}")
    if task == "pronoun_gender":
        if tokenizer is None:
            raise ValueError("pronoun_gender's antecedent is found by its gender: pass the model's tokenizer")
        return _antecedents(pairs, tokenizer)
    out = []
    for i, where in enumerate(_differing(pairs)):
        if task == "ioi":
            before = pairs.clean[i, : int(pairs.position[i])]
            where = np.flatnonzero((before == pairs.right[i]).numpy())
        if len(where) != 1:
            what = "the answer's name" if task == "ioi" else "the clean/corrupted difference (the subject)"
            raise ValueError(f"{task} pair {i}: expected one position of {what}, found {where.tolist()}")
        out.append(int(where[0]))
    return np.asarray(out, dtype=int)


def rival_positions(task: str, pairs: Pairs, targets: np.ndarray) -> np.ndarray | None:
    """[n] the key that competes with the target where the prompt fixes one, or None: ``ioi``, the
    subject's second mention S2 (the last occurrence of the wrong answer's name before the answer
    position; Wang et al.'s name movers attend to the indirect object over S2); ``pronoun_gender``,
    the other person (the other position where clean and corrupted differ); ``subject_verb``, None
    (the prompt fixes no rival)."""
    if task == "ioi":
        out = []
        for i in range(len(pairs)):
            before = pairs.clean[i, : int(pairs.position[i]) + 1]
            where = np.flatnonzero((before == pairs.wrong[i]).numpy())
            if len(where) < 1:
                raise ValueError(f"ioi pair {i}: the subject's name (the wrong answer) is not in the prompt")
            out.append(int(where[-1]))
        return np.asarray(out)
    if task == "pronoun_gender":
        diff = pairs.clean != pairs.corrupted
        out = []
        for i in range(len(pairs)):
            where = [int(p) for p in np.flatnonzero(diff[i].numpy()) if int(p) != int(targets[i])]
            if len(where) != 1:
                raise ValueError(f"pronoun_gender pair {i}: expected one other person, found positions {where}")
            out.append(where[0])
        return np.asarray(out)
    return None


# ---- what a head attends to ----------------------------------------------------------------------


def with_answer(pairs: Pairs) -> tuple[Tensor, Tensor, Tensor]:
    """(ids [n, pos + 1], mask, rows): each clean prompt with its answer token (``right``) put right
    after the answer position, and that row: the retrospective reading reads the answer's own row
    (a causal model: nothing after it changes that row)."""
    n = len(pairs)
    ids = torch.cat([pairs.clean, torch.zeros(n, 1, dtype=torch.long)], 1)
    base = pairs.attention_mask if pairs.attention_mask is not None else torch.ones_like(pairs.clean)
    mask = torch.cat([base.long(), torch.zeros(n, 1, dtype=torch.long)], 1)
    rows = pairs.position + 1
    ids[torch.arange(n), rows] = pairs.right
    mask[torch.arange(n), rows] = 1
    return ids, mask, rows


@torch.no_grad()
def attention_to(model: Any, ids: Tensor, mask: Tensor | None, rows: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """(mass, hit), both [n, layer * head] in ``all_heads`` order: each head's attention from query
    row ``rows[i]`` to key ``targets[i]`` (``hook_pattern``), and whether that row's argmax is the
    target. One forward pass; the hooks keep one row per prompt."""
    v = view(model)
    n = len(ids)
    mass = torch.zeros(n, v.n_layers, v.n_heads, dtype=torch.float64)
    hit = torch.zeros(n, v.n_layers, v.n_heads, dtype=torch.bool)
    b = torch.arange(n)

    def read(pattern: Tensor, hook: Any, layer: int) -> None:
        row = pattern[b, :, rows.to(pattern.device)].double().cpu()  # [n, head, key]
        mass[:, layer] = row[b, :, targets]
        hit[:, layer] = row.argmax(-1) == targets[:, None]

    hooks = [(act_name(lay, "attn.hook_pattern"), functools.partial(read, layer=lay)) for lay in range(v.n_layers)]
    mask = None if mask is None else mask.to(v.device)
    v.run_with_hooks(ids.to(v.device), attention_mask=mask, fwd_hooks=hooks, return_type=None)
    return mass.view(n, -1), hit.view(n, -1)


def pattern_scores(
    model: Any, pairs: Pairs, targets: np.ndarray, readings: Sequence[str] = READINGS, batch_size: int = 16
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{reading: (mass [n, head], hit [n, head])}: ``attention_to`` the target in each reading
    (predictive: the answer position's row of the clean prompt; retrospective: the appended
    answer's row, ``with_answer``), batch by batch."""
    bad = [r for r in readings if r not in READINGS]
    if bad:
        raise ValueError(f"unknown reading(s) {bad}; the readings are {', '.join(READINGS)}")
    out: dict[str, tuple[list, list]] = {r: ([], []) for r in readings}
    targets_t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    for start in range(0, len(pairs), int(batch_size)):
        batch = pairs[start : start + int(batch_size)]
        tgt = targets_t[start : start + len(batch)]
        for r in readings:
            if r == "predictive":
                mass, hit = attention_to(model, batch.clean, batch.attention_mask, batch.position, tgt)
            else:
                mass, hit = attention_to(model, *with_answer(batch), tgt)
            out[r][0].append(mass.numpy())
            out[r][1].append(hit.numpy())
    return {r: (np.concatenate(m), np.concatenate(h)) for r, (m, h) in out.items()}


# ---- the statistics ------------------------------------------------------------------------------


def bootstrap_weights(n: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n] how many times each of ``n`` units is drawn in each resample (``n`` draws with
    replacement, seeded): a resample's mean of per-unit rows X [n, ...] is ``w @ X / n``."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    w = np.zeros((n_boot, n))
    np.add.at(w, (np.arange(n_boot)[:, None], idx), 1.0)
    return w


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    with warnings.catch_warnings():  # a constant column: rho is undefined (NaN), said as such
        warnings.simplefilter("ignore")
        return float(spearmanr(a, b)[0])


def rank_agreement_ci(
    score: np.ndarray, effect: np.ndarray, weights: np.ndarray, level: float = 0.95, magnitude: bool = False
) -> tuple[float, float, float]:
    """(rho, low, high): Spearman's rho across heads between the mean over units of ``score`` and
    of ``effect`` (both [unit, head]; ``magnitude``: the absolute value of the mean effect), and its
    percentile interval over the resamples ``weights`` (``bootstrap_weights``: both means
    recomputed on the same resample)."""
    n = score.shape[0]
    size = np.abs if magnitude else np.asarray
    rho = _spearman(score.mean(0), size(effect.mean(0)))
    s, e = weights @ score / n, size(weights @ effect / n)
    boot = np.array([_spearman(s[i], e[i]) for i in range(len(weights))])
    a = (1 - level) / 2
    ok = boot[~np.isnan(boot)]
    if not len(ok):
        return rho, float("nan"), float("nan")
    return rho, float(np.quantile(ok, a)), float(np.quantile(ok, 1 - a))


def _top(values: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` largest values, ties to the earlier head."""
    return [int(i) for i in np.argsort(-np.asarray(values, dtype=float), kind="stable")[:k]]


def top_overlap(score: np.ndarray, importance: np.ndarray, k: int = 5) -> tuple[int, list[int], list[int]]:
    """(how many heads the top ``k`` by score and the top ``k`` by importance share, the first, the
    second): per-head means, indices in ``all_heads`` order."""
    a, b = _top(score, k), _top(importance, k)
    return len(set(a) & set(b)), a, b


def _intervals(x: np.ndarray, weights: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    means = weights @ x / x.shape[0]
    a = (1 - level) / 2
    return np.quantile(means, a, axis=0), np.quantile(means, 1 - a, axis=0)


# ---- one task, the whole run ---------------------------------------------------------------------


@dataclass
class TaskAgreement:
    """One task's per-pair arrays (not written): the solved pairs, the target positions, the exact
    effects (``ExactEffects``: ``per_pair`` [pair, head]) and per reading the attention mass on the
    target and the argmax hits [pair, head]; ``weights``: the bootstrap resamples."""

    task: str
    pairs: Pairs
    targets: np.ndarray
    effects: ExactEffects
    scores: dict[str, np.ndarray]
    hits: dict[str, np.ndarray]
    weights: np.ndarray


@dataclass
class AgreementResult:
    """tasks: each task's accuracy on its generated pairs (solved or not, and why); per_head: one row
    per head and solved task (layer, head, task, effect with its interval, the normalised effect, per
    reading the mean score, its interval and the argmax accuracy); summary: one row per solved task
    and reading (n pairs, rho and its interval for the drop and for |effect|, the top heads by score
    and by drop and their overlap); raw: ``TaskAgreement`` per solved task; info: the contract's."""

    model_name: str
    tasks: pd.DataFrame
    per_head: pd.DataFrame
    summary: pd.DataFrame
    info: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)

    @property
    def heads(self) -> pd.DataFrame:
        """``per_head`` keyed model, layer, head (``analyses.contract``)."""
        return head_table(self.per_head, self.model_name)


# summary.csv: one row per solved task and reading (the header alone when no task is solved)
SUMMARY_COLUMNS = ["task", "reading", "target", "n_pairs", "n_heads", "rho", "rho_low", "rho_high", "rho_abs",
                   "rho_abs_low", "rho_abs_high", "top_overlap", "top_chance", "top_score", "top_effect"]  # fmt: skip


def _task_tables(model: Any, t: TaskAgreement, top: int) -> tuple[pd.DataFrame, list[dict]]:
    heads = all_heads(model)
    effect = t.effects.per_pair
    lo, hi = _intervals(effect, t.weights)
    df = pd.DataFrame(heads, columns=["layer", "head"]).assign(task=t.task)
    df["effect"], df["effect_low"], df["effect_high"] = effect.mean(0), lo, hi
    df["normalised"] = t.effects.table["normalised"].to_numpy()
    rows = []
    names = [head_name(layer, h) for layer, h in heads]
    for r, score in t.scores.items():
        lo, hi = _intervals(score, t.weights)
        df[r], df[f"{r}_low"], df[f"{r}_high"] = score.mean(0), lo, hi
        df[f"{r}_argmax"] = t.hits[r].mean(0)
        rho, rlo, rhi = rank_agreement_ci(score, -effect, t.weights)
        rho_abs, alo, ahi = rank_agreement_ci(score, effect, t.weights, magnitude=True)
        shared, by_score, by_effect = top_overlap(score.mean(0), -effect.mean(0), top)
        rows.append(dict(
            task=t.task, reading=r, target=TARGETS[t.task], n_pairs=len(t.pairs), n_heads=len(heads),
            rho=rho, rho_low=rlo, rho_high=rhi, rho_abs=rho_abs, rho_abs_low=alo, rho_abs_high=ahi,
            top_overlap=shared, top_chance=top * top / len(heads),
            top_score=" ".join(names[i] for i in by_score), top_effect=" ".join(names[i] for i in by_effect),
        ))  # fmt: skip
    return df, rows


def _one_task(model: Any, task: str, n: int, seed: int, n_boot: int, batch_size: int, progress: bool,
              generator: Any, task_kw: dict) -> tuple[dict, TaskAgreement | None]:  # fmt: skip
    ct = circuit_task(model, task, n=n, seed=seed, generator=generator, **task_kw)
    row = {k: v for k, v in ct.row().items() if k not in ("n_discovery", "n_held_out")}
    if not ct.solved:
        return dict(row, note=f"not solved: {ct.why_not()}"), None
    pairs = ct.pairs  # every solved pair: nothing is selected on them, so none is held out
    targets = target_positions(task, pairs, view(model).tokenizer)
    effects = exact_patching(model, pairs, batch_size=batch_size, progress=progress)
    got = pattern_scores(model, pairs, targets, TASK_READINGS[task], batch_size=batch_size)
    weights = bootstrap_weights(len(pairs), n_boot, seed)
    scores, hits = {r: m for r, (m, _) in got.items()}, {r: h for r, (_, h) in got.items()}
    return row, TaskAgreement(task, pairs, targets, effects, scores, hits, weights)


def _check(tasks: Sequence[str], n: int, n_boot: int, top: int) -> list[str]:
    tasks = list(tasks)
    bad = [t for t in tasks if t not in AGREEMENT_TASKS]
    if bad or not tasks:
        raise ValueError(f"agreement tasks {bad or tasks!r}: use one or more of {', '.join(AGREEMENT_TASKS)}")
    for name, value, least in (("n", n, 2), ("n_boot", n_boot, 10), ("top", top, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return tasks


def run(
    model: Any,
    tasks: Sequence[str] = AGREEMENT_TASKS,
    n: int = 200,
    seed: int = 0,
    n_boot: int = 2000,
    top: int = 5,
    min_accuracy: float = MIN_ACCURACY,
    min_pairs: int = MIN_PAIRS,
    batch_size: int = 16,
    progress: bool = False,
    dtype: Any = None,
    generator: Any = None,
) -> AgreementResult:
    """The rank agreement of pattern scores and exact patching effects (see the module docstring) on
    ``n`` generated pairs of each task in ``tasks`` (the solved ones kept: a task whose accuracy is
    under ``min_accuracy`` or with fewer than ``min_pairs`` solved pairs is listed as not solved and
    skipped). ``model``: a loaded causal LM, or a name ``models.load`` loads (with ``dtype``).
    ``generator``: stands in for the pair generator (``circuit_task``'s; tests)."""
    from tqdm.auto import tqdm

    tasks = _check(tasks, n, n_boot, top)
    if isinstance(model, str):
        import models

        model = models.load(model, dtype=dtype).eval()
    v = view(model)
    if not (v.causal and v.lm_head):
        raise ValueError(f"{v.name} is not a causal LM: the agreement needs next-token logits and causal rows")
    params = dict(tasks=tasks, n=n, n_boot=n_boot, top=top, min_accuracy=min_accuracy, min_pairs=min_pairs,
                  batch_size=batch_size)  # fmt: skip
    info = make_info("agreement", v.name, seed, **params)
    task_kw = dict(min_accuracy=min_accuracy, min_pairs=min_pairs)
    rows, per_head, summary, raw = [], [], [], {}
    for task in tqdm(tasks, desc="agreement", disable=not progress):
        t0 = time.perf_counter()
        row, t = _one_task(model, task, n, seed, n_boot, batch_size, progress, generator, task_kw)
        rows.append(row)
        if t is not None:
            raw[task] = t
            df, s = _task_tables(model, t, top)
            per_head.append(df)
            summary += s
            info["first_token"] = info.get("first_token") or _first_token(model, t.pairs)
        info[f"t_{task}"] = time.perf_counter() - t0
    per = pd.concat(per_head, ignore_index=True) if per_head else pd.DataFrame(columns=["layer", "head", "task"])
    return AgreementResult(v.name, pd.DataFrame(rows), per, pd.DataFrame(summary, columns=SUMMARY_COLUMNS), info, raw)


def _first_token(model: Any, pairs: Pairs) -> str:
    """The input convention as the pairs carry it: their first token, decoded."""
    tok = view(model).tokenizer
    hf = getattr(tok, "hf", tok)
    return repr(hf.decode([int(pairs.clean[0, 0])])) if hf is not None else str(int(pairs.clean[0, 0]))


# ---- the report ----------------------------------------------------------------------------------


def agreement_markdown(result: AgreementResult) -> str:
    """agreement.md: the tasks, the summary (one row per task and reading) and the top heads."""
    info = result.info
    p = info["params"]
    lines = [
        f"## Pattern vs exact patching: {result.model_name}",
        "",
        "Per head, the attention mass on the task's target word (predictive: the final token's row, where the "
        "answer is predicted; retrospective: the appended answer's own row) against its exact patching effect "
        "(the head alone patched from the corrupted run; drop = clean - patched logit difference). rho: Spearman "
        f"across heads, 95% bootstrap interval over pairs ({p['n_boot']} resamples, seed {info['seed']}); "
        f"top {p['top']}: heads shared by the top {p['top']} by score and by drop (chance: top_chance).",
        "",
        f"Input convention: the pairs' first token is {info.get('first_token', '?')}.",
        "",
        "### Tasks",
        "",
        md_table(result.tasks),
    ]
    skipped = result.tasks[~result.tasks["solved"].astype(bool)] if len(result.tasks) else result.tasks
    if len(skipped):
        lines.append("Not solved (skipped): " + "; ".join(f"`{r.task}` ({r.note})" for r in skipped.itertuples()))
        lines.append("")
    if not len(result.summary):
        lines.append("**No solved task**: no agreement measured.")
        return "\n".join(lines) + "\n"
    cols = ["task", "reading", "n_pairs", "n_heads", "rho", "rho_low", "rho_high", "rho_abs", "rho_abs_low",
            "rho_abs_high", "top_overlap", "top_chance"]  # fmt: skip
    lines += ["### Rank agreement", "", md_table(result.summary, cols), "### Top heads", ""]
    lines.append(md_table(result.summary, ["task", "reading", "top_score", "top_effect"]))
    times = ", ".join(f"{k[2:]} {v:.0f} s" for k, v in info.items() if k.startswith("t_"))
    lines += [f"Times: {times}.", ""]
    return "\n".join(lines)


def _files(result: AgreementResult) -> dict[str, str]:
    record = dict(result.info, solved=[t for t in result.raw])
    return {
        "tasks.csv": result.tasks.to_csv(index=False),
        "heads.csv": result.heads.to_csv(index=False),
        "summary.csv": result.summary.to_csv(index=False),
        "agreement.md": agreement_markdown(result),
        "agreement.json": json.dumps(record, indent=2, default=str) + "\n",
    }


def _write_files(result: AgreementResult, folder: str | Path) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in _files(result).items():
        atomic_write(out / name, data)


def write(result: AgreementResult, folder: str | Path, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set (``interp.io.write_set``; inside a
    command's open set, into its staging folder). Returns ``folder``."""
    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command="interp agreement", force=force)
