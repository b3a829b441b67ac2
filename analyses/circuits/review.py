"""What a reviewer asks of the circuit numbers (issue 37, section 2), on one task's solved pairs:

1. **Rank agreement with an interval.** Exact per-head patching on every held-out solved pair (at
   least ``min_pairs``, 100 by default) and each method's attribution (EAP, EAP-IG) on the *same*
   pairs, per pair; Spearman's rho across heads between the mean attribution and the mean exact effect,
   with a percentile bootstrap interval over pairs (both means recomputed on each resample, as
   ``agreement.rank_agreement_ci`` does), its half-width, and EAP-IG's rho minus EAP's on the same
   resamples (the paired comparison the single 16-pair numbers could not make). Signed (the effect
   and the score as they are) and by magnitude (|mean effect| against |mean score|).
2. **"EAP-IG's advantage is only the first MLP".** m0 patched alone from the corrupted run (its
   exact effect per pair, with an interval), each method's rank of m0, and the node faithfulness
   curves on the held-out pairs of EAP, EAP-IG and EAP with m0 moved to the top of its ranking
   (rankings from the discovery pairs, as ``interp circuit`` makes them), each with MIB's CPR / CMD,
   the small-circuit and log-axis means and their bootstrap intervals (``summarise_curve``).

``run`` -> ``ReviewResult``; ``OUTPUTS`` / ``write``; the command is
``python -m analyses.circuits.review --model smollm2 --task subject_verb --n 480 --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyses.circuits.agreement import _spearman, bootstrap_weights
from analyses.circuits.attribution import METHODS, per_pair_node_scores
from analyses.circuits.exact import exact_patching
from analyses.circuits.faithfulness import MIB_PROPORTIONS, faithfulness_curve, summarise_curve
from analyses.circuits.nodes import INPUT, all_nodes, head_name, mlp_name
from analyses.circuits.runner import run_circuits
from analyses.contract import make_info
from interp.display import md_table
from interp.io import atomic_write, write_set

__all__ = ["ReviewResult", "OUTPUTS", "run", "write", "with_first", "main"]

OUTPUTS = ("review_agreement.csv", "review_m0.csv", "review_curves.csv", "review_summary.csv", "review.md",
           "review.json")  # fmt: skip
MIN_PAIRS = 100


@dataclass
class ReviewResult:
    """``agreement``: per method and reading (signed, magnitude) rho with its interval, and the
    EAP-IG - EAP difference rows; ``m0``: m0's exact effect and each method's rank of it;
    ``curves`` / ``summary``: the node faithfulness curves and their summary with intervals."""

    model_name: str
    task: str
    agreement: pd.DataFrame
    m0: pd.DataFrame
    curves: pd.DataFrame
    summary: pd.DataFrame
    info: dict = field(default_factory=dict)


def with_first(scores: pd.Series, node: str) -> pd.Series:
    """``scores`` (node -> score) with ``node`` moved to the top of the |score| ranking (its score
    set just above the largest magnitude, sign kept), the rest unchanged."""
    out = scores.astype(float).copy()
    if node not in out.index:
        raise ValueError(f"{node!r} is not among the scored nodes")
    top = float(out.abs().max())
    out[node] = (1.0 if out[node] >= 0 else -1.0) * (top * 1.01 + 1e-12)
    return out


def _interval(values: np.ndarray, weights: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    n = len(values)
    boot = weights @ values / n
    a = (1 - level) / 2
    return float(values.mean()), float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a))


def run(
    model: Any,
    task: str = "subject_verb",
    n: int = 480,
    seed: int = 0,
    methods: tuple[str, ...] = METHODS,
    steps: int = 5,
    n_boot: int = 1000,
    n_random: int = 3,
    batch_size: int = 16,
    min_pairs: int = MIN_PAIRS,
    progress: bool = False,
    task_result: Any = None,
) -> ReviewResult:
    """See the module docstring. ``n`` pairs are generated (the held-out quarter of the solved ones is
    what the agreement and the curves read: ``n`` = 480 gives about 110 on SmolLM2's subject-verb);
    fewer than ``min_pairs`` held-out solved pairs is a ValueError naming the ``n`` to ask for.
    ``task_result``: an ``analyses.circuits.tasks.CircuitTask`` instead of generating one (tests)."""
    from analyses.circuits.tasks import circuit_task

    started = time.perf_counter()
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"methods {list(methods)}: use some of {', '.join(METHODS)}")
    ct = task_result if task_result is not None else circuit_task(model, task, n=n, seed=seed, min_pairs=1)
    held, discovery = ct.evaluation, ct.discovery
    if len(held) < min_pairs:
        raise ValueError(
            f"{task}: {len(held)} held-out solved pairs, fewer than min_pairs={min_pairs}; generate more (n about "
            f"{int(np.ceil(n * min_pairs / max(len(held), 1)))})"
        )
    times: dict[str, float] = {}
    t = time.perf_counter()
    exact = exact_patching(model, held, batch_size=batch_size, progress=progress)
    times["exact"] = time.perf_counter() - t
    heads = [head_name(int(r.layer), int(r.head)) for r in exact.table.itertuples()]
    w = bootstrap_weights(len(held), n_boot, seed)
    per_method, ranking = {}, {}
    for m in methods:
        t = time.perf_counter()
        names, values = per_pair_node_scores(model, held, method=m, steps=steps, batch_size=batch_size,
                                             progress=progress)  # fmt: skip
        per_method[m] = pd.DataFrame(values, columns=names)
        _, disc = per_pair_node_scores(model, discovery, method=m, steps=steps, batch_size=batch_size)
        ranking[m] = pd.Series(disc.mean(0), index=names)
        times[m] = time.perf_counter() - t
    rows = []
    boot_rho: dict[tuple[str, bool], np.ndarray] = {}
    n_held = len(held)
    e_boot = w @ exact.per_pair / n_held  # [boot, head] the resamples' mean effects
    for m, df in per_method.items():
        score = df[heads].to_numpy()
        s_boot = w @ score / n_held
        for magnitude in (False, True):
            size = np.abs if magnitude else np.asarray  # magnitude: |mean score| against |mean effect|
            rho = _spearman(size(score.mean(0)), size(exact.per_pair.mean(0)))
            boot = np.array([_spearman(size(s_boot[i]), size(e_boot[i])) for i in range(len(w))])
            boot_rho[(m, magnitude)] = boot
            lo, hi = np.nanquantile(boot, [0.025, 0.975])
            rows.append(dict(method=m, reading="magnitude" if magnitude else "signed", rho=rho, ci_low=lo, ci_high=hi,
                             half_width=(hi - lo) / 2, n_pairs=n_held, n_heads=len(heads)))  # fmt: skip
    if set(methods) >= {"eap", "eap-ig"}:
        for magnitude in (False, True):
            d = boot_rho[("eap-ig", magnitude)] - boot_rho[("eap", magnitude)]
            reading = "magnitude" if magnitude else "signed"
            point = {r["method"]: r["rho"] for r in rows if r["reading"] == reading}
            lo, hi = np.nanquantile(d, [0.025, 0.975])
            rows.append(dict(method="eap-ig - eap", reading=reading,
                             rho=point["eap-ig"] - point["eap"], ci_low=lo, ci_high=hi, half_width=(hi - lo) / 2,
                             n_pairs=len(held), n_heads=len(heads)))  # fmt: skip
    agreement = pd.DataFrame(rows)

    # m0: patched alone, and ranked first
    t = time.perf_counter()
    nodes = all_nodes(model)
    m0 = mlp_name(0)
    runs = run_circuits(model, held, {"without_m0": [INPUT, *[x for x in nodes if x != m0]]}, batch_size=batch_size)
    effect = runs.per_pair["without_m0"].astype(float) - runs.per_pair["clean"].astype(float)
    gap = runs.per_pair["clean"].astype(float) - runs.per_pair["corrupted"].astype(float)
    mean, lo, hi = _interval(effect, w)
    m0_rows = [dict(quantity="exact effect of m0 alone (m(patched) - m(clean))", value=mean, ci_low=lo, ci_high=hi,
                    share_of_gap=mean / float(gap.mean()))]  # fmt: skip
    for m in methods:
        order = ranking[m].abs().sort_values(ascending=False).index.tolist()
        m0_rows.append(dict(quantity=f"{m}: m0's rank by |score| (discovery pairs)", value=order.index(m0) + 1,
                            ci_low=np.nan, ci_high=np.nan, share_of_gap=np.nan))  # fmt: skip
        share = per_method[m][m0].to_numpy()
        mean, lo, hi = _interval(share, w)
        m0_rows.append(dict(quantity=f"{m}: m0's score (held-out pairs)", value=mean, ci_low=lo, ci_high=hi,
                            share_of_gap=mean / float(gap.mean())))  # fmt: skip
    times["m0"] = time.perf_counter() - t
    t = time.perf_counter()
    rankings = dict(ranking)
    if "eap" in ranking:
        rankings["eap, m0 first"] = with_first(ranking["eap"], m0)
    curves, per_pair = faithfulness_curve(
        model, held, rankings, proportions=MIB_PROPORTIONS, n_random=n_random, seed=seed, batch_size=batch_size,
        progress=progress, per_pair=True,
    )  # fmt: skip
    summary = summarise_curve(curves, per_pair=per_pair, n_boot=n_boot, seed=seed)
    times["curves"] = time.perf_counter() - t
    params = dict(task=task, n=n, methods=list(methods), steps=steps, n_boot=n_boot, n_random=n_random,
                  batch_size=batch_size, min_pairs=min_pairs)  # fmt: skip
    info = make_info("circuits.review", model, seed, **params)
    info.update(n_held_out=len(held), n_discovery=len(discovery), accuracy=float(ct.accuracy),
                seconds={k: round(v, 1) for k, v in times.items()},
                total_seconds=round(time.perf_counter() - started, 1))  # fmt: skip
    name = getattr(getattr(model, "cfg", None), "name", str(model))
    return ReviewResult(name, task, agreement, pd.DataFrame(m0_rows), curves, summary, info)


def review_markdown(r: ReviewResult) -> str:
    i = r.info
    cols = ["method", "cpr", "cpr_ci95_lo", "cpr_ci95_hi", "mean_f_p_le_0.1", "mean_f_p_le_0.1_ci95_lo",
            "mean_f_p_le_0.1_ci95_hi", "mean_f_log_p", "mean_f_log_p_ci95_lo", "mean_f_log_p_ci95_hi",
            "cmd"]  # fmt: skip
    return "\n".join([
        f"## Circuit review: {r.model_name}, {r.task}",
        "",
        f"{i['n_held_out']} held-out solved pairs (of {i['params']['n']} generated; accuracy {i['accuracy']:.3f}); "
        f"intervals: 95% bootstrap over pairs ({i['params']['n_boot']} resamples). Times (s): {i['seconds']}.",
        "",
        "### Rank agreement of attribution with exact patching (the same pairs)",
        "",
        md_table(r.agreement),
        "### m0",
        "",
        md_table(r.m0),
        "### Node faithfulness on the held-out pairs",
        "",
        md_table(r.summary, [c for c in cols if c in r.summary.columns]),
    ]) + "\n"  # fmt: skip


def _write_files(r: ReviewResult, folder: str | Path) -> None:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "review_agreement.csv": r.agreement.to_csv(index=False),
        "review_m0.csv": r.m0.to_csv(index=False),
        "review_curves.csv": r.curves.to_csv(index=False),
        "review_summary.csv": r.summary.to_csv(index=False),
        "review.md": review_markdown(r),
        "review.json": json.dumps(r.info, indent=2, default=str) + "\n",
    }
    for name, data in files.items():
        atomic_write(out / name, data)


def write(result: ReviewResult, folder: str | Path, force: bool = False) -> Path:
    """Write ``OUTPUTS`` into ``folder`` as one output set."""
    cmd = "python -m analyses.circuits.review"
    return write_set(folder, OUTPUTS, lambda tmp: _write_files(result, tmp), command=cmd, force=force)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analyses.circuits.review", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--task", default="subject_verb")
    parser.add_argument("--n", type=int, default=480)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--n-random", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--min-pairs", type=int, default=MIN_PAIRS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    from analyses.tasks import check_task
    from interp.io import OutputError, output_dir

    try:
        check_task(args.task)
        import models

        # the folder first (a file, another run's, files no toolkit run wrote: one line, before the work)
        with output_dir(args.out, OUTPUTS, command="python -m analyses.circuits.review", what="--out",
                        force=args.force) as tmp:  # fmt: skip
            model = models.load(args.model).eval()
            result = run(model, args.task, n=args.n, seed=args.seed, n_boot=args.n_boot, n_random=args.n_random,
                         batch_size=args.batch_size, min_pairs=args.min_pairs, progress=True)  # fmt: skip
            write(result, tmp)
    except (ValueError, OSError, OutputError) as e:
        sys.stderr.write(f"python -m analyses.circuits.review: {e}\n")
        return 2
    sys.stdout.write(review_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
