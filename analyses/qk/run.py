"""Why a head attends where it does on a task's prompts: ``run`` splits each chosen head's score of
the answer position's row on the task's target word (and the score difference against a rival key)
into the terms of the stream's components (``analyses.qk.attribution``), over the pairs the model
solves, and summarises each component's share with a bootstrap interval over prompts.

The prompts and the positions are the causal side's (``analyses.circuits.tasks.circuit_task``: the
solved clean prompts; ``analyses.circuits.agreement.target_positions``: the subject, the indirect
object, the antecedent), and the query row is the answer position, the row whose prediction the
catalogue and the circuits patch. So "why does a26.h0 attend from the pre-verb token to the subject"
is asked on exactly the prompts where patching a26.h0 moves the verb's number.

The rival key (``OTHER``), per task: ``ioi``: the subject's second mention (S2; Wang et al.'s name
movers attend to the indirect object over S2); ``pronoun_gender``: the other person; ``subject_verb``:
``rival``, the key the head's own row attends to most apart from the subject (per prompt and head).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from analyses.circuits.agreement import TARGETS, rival_positions, target_positions
from analyses.contract import head_table, make_info
from analyses.qk.attribution import QKAttribution, frozen_scale_checks, qk_attributions, refusal
from interp.names import act_name
from interp.stats import bootstrap_ci

__all__ = ["QK_TASKS", "OTHER", "QKResult", "parse_heads", "task_positions", "run"]

QK_TASKS = tuple(TARGETS)  # subject_verb, ioi, pronoun_gender
OTHER = {"subject_verb": "rival", "ioi": "S2", "pronoun_gender": "other person"}
QUANTITIES = ("score", "difference")


@dataclass
class QKResult:
    """``heads``: one row per head (the contract's per-head table); ``components``: per head, quantity
    (score, difference), side (query, key) and component, the mean term over prompts with its 95%
    bootstrap interval; ``cells``: per head and quantity the largest (query component, key component)
    terms; ``check``: the frozen-scale check of each head's top key- and query-side components of the score;
    ``prompts``: per head and prompt the score, the difference and the terms' rounding error."""

    model_name: str
    task: str
    heads: pd.DataFrame
    components: pd.DataFrame
    cells: pd.DataFrame
    check: pd.DataFrame
    prompts: pd.DataFrame
    info: dict = field(default_factory=dict)


def parse_heads(spec: str | list, model: Any) -> list[tuple[int, int]]:
    """Heads from ``"L26H0,a27.h8,26.7"`` (or a list of such strings or (layer, head) pairs), checked
    against ``model``."""
    import re

    items = spec.split(",") if isinstance(spec, str) else list(spec)
    cfg = model.cfg
    out = []
    for item in items:
        if isinstance(item, (tuple, list)) and len(item) == 2:
            layer, head = int(item[0]), int(item[1])
        else:
            text = str(item).strip()
            m = re.fullmatch(r"(?:L(\d+)H(\d+)|a(\d+)\.h(\d+)|(\d+)\.(\d+))", text)
            if not m:
                raise ValueError(f"head {text!r}: write L<layer>H<head> (e.g. L26H0), a<layer>.h<head> or <l>.<h>")
            layer, head = (int(g) for g in m.groups() if g is not None)
        if not (0 <= layer < cfg.n_layers and 0 <= head < cfg.n_heads):
            raise ValueError(
                f"head ({layer}, {head}) does not exist: {cfg.name!r} has layers 0..{cfg.n_layers - 1} and heads "
                f"0..{cfg.n_heads - 1}"
            )
        out.append((layer, head))
    if not out:
        raise ValueError("no head given; e.g. --heads L26H0,L27H8")
    return sorted(set(out))


def task_positions(model: Any, task: str, pairs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(query rows, target keys, fixed rival keys or None) of ``task``'s ``pairs``."""
    targets = target_positions(task, pairs, getattr(model, "tokenizer", None))
    return pairs.position.numpy().astype(int), targets, rival_positions(task, pairs, targets)


@torch.no_grad()
def _rivals(model: Any, ids: torch.Tensor, rows: np.ndarray, targets: np.ndarray, heads: list) -> dict:
    """{(layer, head): [n] the key each head's answer row attends to most apart from the target}."""
    out: dict = {}
    b = torch.arange(len(ids))
    r = torch.as_tensor(rows)

    def read(pattern: torch.Tensor, hook: Any) -> None:
        layer = int(hook.name.split(".")[1])
        for lay, h in heads:
            if lay == layer:
                row = pattern[b, h, r].double().clone()  # [n, key]
                row[b, torch.as_tensor(targets)] = -1.0
                out[(lay, h)] = row.argmax(-1).cpu().numpy()

    layers = sorted({lay for lay, _ in heads})
    model.run_with_hooks(ids, fwd_hooks=[(act_name(lay, "attn.hook_pattern"), read) for lay in layers],
                         return_type=None)  # fmt: skip
    return out


def _summaries(parts: list[QKAttribution], quantity: str) -> tuple[np.ndarray, np.ndarray]:
    """(per prompt query marginals [n, c], key marginals [n, c]) of the score or the difference."""
    pick = [(a if quantity == "score" else a.difference) for a in parts]
    q = np.concatenate([p.query_marginal.numpy() for p in pick])
    k = np.concatenate([p.key_marginal.numpy() for p in pick])
    return q, k


def run(
    model: Any,
    task: str,
    heads: str | list,
    n: int = 96,
    seed: int = 0,
    batch_size: int = 16,
    top: int = 8,
    check: bool = True,
    progress: bool = False,
    pairs: Any = None,
) -> QKResult:
    """QK attribution of each of ``heads`` on ``task``'s solved prompts (``n`` generated, ``seed``):
    see the module docstring. ``top``: components and cells kept per head, side and quantity in the
    report (``components`` keeps every component). ``check``: run the frozen-scale check on each
    head's top key- and query-side component of the score (per batch; the summary keeps the most
    common). ``pairs``: the prompts themselves (an ``interp.pairs.Pairs`` of ``task``'s form) instead
    of generating them."""
    why = refusal(model)
    if why:
        raise ValueError(f"QK attribution: {why}")
    if task not in QK_TASKS:
        raise ValueError(f"task {task!r}: QK attribution reads {', '.join(QK_TASKS)} (a target word in the prompt)")
    head_list = parse_heads(heads, model)
    started = time.perf_counter()
    if pairs is None:
        from analyses.circuits.tasks import circuit_task

        ct = circuit_task(model, task, n=n, seed=seed, min_pairs=1)
        pairs, accuracy = ct.pairs, ct.accuracy
    else:
        accuracy = float("nan")
    rows, targets, fixed = task_positions(model, task, pairs)
    ids = pairs.clean.to(model.W_E.device)  # right padding (if any) lies after every row: a causal model ignores it
    per: dict = {h: [] for h in head_list}
    other_of: dict = {h: [] for h in head_list}
    checks: list[pd.DataFrame] = []
    starts = range(0, len(pairs), int(batch_size))
    for start in tqdm(starts, desc=f"qk {task}", disable=not progress, leave=False):
        sl = slice(start, min(start + int(batch_size), len(pairs)))
        if fixed is None:
            others = _rivals(model, ids[sl], rows[sl], targets[sl], head_list)
        else:
            others = {hd: fixed[sl] for hd in head_list}
        got = qk_attributions(model, ids[sl], head_list, rows[sl], targets[sl], other_pos=others)
        for hd in head_list:
            per[hd].append(got[hd])
            other_of[hd].append(np.asarray(others[hd]))
        if check:
            asks = []
            for hd in head_list:
                score = got[hd]  # the score's own top component per side: the check measures the score's change
                for side, m in (("key", score.key_marginal), ("query", score.query_marginal)):
                    asks.append((hd, got[hd].components[int(m.mean(0).abs().argmax())], side))
            frame = frozen_scale_checks(model, ids[sl], got, asks)
            frame["prompt"] += start
            checks.append(frame)
        for hd in head_list:
            got[hd].capture = None  # the captured components are not needed any more

    comp_rows, cell_rows, check_rows, prompt_rows, head_rows = [], [], [], [], []
    names = None
    for (lay, h), parts in per.items():
        names = parts[0].components
        score = np.concatenate([p.score.numpy() for p in parts])
        diff = np.concatenate([p.difference.score.numpy() for p in parts])
        err = np.concatenate([p.error().numpy() for p in parts])
        derr = np.concatenate([p.difference.error().numpy() for p in parts])
        others = np.concatenate(other_of[(lay, h)])
        for i in range(len(score)):
            prompt_rows.append((lay, h, i, int(rows[i]), int(targets[i]), int(others[i]), score[i], diff[i], err[i],
                                derr[i]))  # fmt: skip
        tops = {}
        for quantity in QUANTITIES:
            qm, km = _summaries(parts, quantity)
            for side, m in (("query", qm), ("key", km)):
                means = m.mean(0)
                order = np.argsort(-np.abs(means))
                tops[(quantity, side)] = [names[k] for k in order[:3]]
                for rank, k in enumerate(order):
                    lo, hi = bootstrap_ci(m[:, k], seed=seed) if rank < top else (np.nan, np.nan)
                    comp_rows.append((lay, h, quantity, side, names[k], rank + 1, means[k], lo, hi,
                                      float(np.mean(m[:, k] > 0))))  # fmt: skip
            terms = np.concatenate([(p.terms if quantity == "score" else p.difference.terms).numpy() for p in parts])
            mean_terms = terms.mean(0)
            flat = np.argsort(-np.abs(mean_terms), axis=None)[:top]
            for rank, f in enumerate(flat):
                a, c = np.unravel_index(f, mean_terms.shape)
                lo, hi = bootstrap_ci(terms[:, a, c], seed=seed)
                cell_rows.append((lay, h, quantity, rank + 1, names[a], names[c], mean_terms[a, c], lo, hi))
        ratios = {}
        if check:  # per batch the check read each batch's own top components; the summary names the most common
            fr = pd.concat(checks, ignore_index=True)
            fr = fr[(fr["layer"] == lay) & (fr["head"] == h)]
            for side in ("key", "query"):
                one = fr[fr["side"] == side]
                comp = one["component"].mode().iloc[0]
                one = one[one["component"] == comp]
                ratios[side] = float(np.median(one["ratio"]))
                varies = len(one) > 2 and one["predicted"].std() > 0 and one["measured"].std() > 0
                corr = float(np.corrcoef(one["predicted"], one["measured"])[0, 1]) if varies else np.nan
                check_rows.append((lay, h, side, comp, len(one), float(one["predicted"].mean()),
                                   float(one["measured"].mean()), ratios[side], corr))  # fmt: skip
        head_rows.append({
            "layer": lay, "head": h, "task": task, "n_prompts": len(score), "score": float(score.mean()),
            "difference": float(diff.mean()), "target_wins": float(np.mean(diff > 0)),
            "top_query": ", ".join(tops[("difference", "query")]), "top_key": ", ".join(tops[("difference", "key")]),
            "top_query_score": ", ".join(tops[("score", "query")]), "top_key_score": ", ".join(tops[("score", "key")]),
            "max_error": float(max(err.max(), derr.max())), "check_ratio_key": ratios.get("key", np.nan),
            "check_ratio_query": ratios.get("query", np.nan),
        })  # fmt: skip
    components = pd.DataFrame(
        comp_rows, columns=["layer", "head", "quantity", "side", "component", "rank", "mean", "ci_low", "ci_high",
                            "share_positive"],
    )  # fmt: skip
    cells = pd.DataFrame(
        cell_rows,
        columns=["layer", "head", "quantity", "rank", "query_component", "key_component", "mean", "ci_low", "ci_high"],
    )
    check_df = pd.DataFrame(
        check_rows, columns=["layer", "head", "side", "component", "n", "predicted", "measured", "median_ratio",
                             "correlation"],
    )  # fmt: skip
    prompts = pd.DataFrame(
        prompt_rows, columns=["layer", "head", "prompt", "query_pos", "key_pos", "other_pos", "score", "difference",
                              "error", "difference_error"],
    )  # fmt: skip
    params = {"task": task, "heads": [f"L{a}H{b}" for a, b in head_list], "n": n, "batch_size": batch_size,
              "top": top, "check": check, "other": OTHER[task]}  # fmt: skip
    info = make_info("qk", model, seed, **params)
    info.update({"n_prompts": len(pairs), "accuracy": accuracy, "seconds": round(time.perf_counter() - started, 1),
                 "norm_placement": model.cfg.norm_placement, "qk_norm": model.cfg.qk_norm,
                 "target": TARGETS[task], "n_components": len(names or [])})  # fmt: skip
    return QKResult(
        model_name=model.cfg.name, task=task, heads=head_table(pd.DataFrame(head_rows), model),
        components=head_table(components, model), cells=head_table(cells, model), check=head_table(check_df, model),
        prompts=head_table(prompts, model), info=info,
    )  # fmt: skip
