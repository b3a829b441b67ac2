"""The positional study as a list of independent runs, resumable one by one.

A run is one trained model: (kind, scheme, attention, seed), with kind one of ``order``,
``copy_back``, ``induction`` (synthetic tasks, ``analyses.positional.synthetic``), ``text`` or
``text_large`` (the BoolQ passages at two model sizes, ``analyses.positional.study``; the seed
drives initial weights and batch order), or ``anchor`` (SmolLM2 beside the seed-0 text models on
the same passages, ``analyses.positional.anchor``: measured, nothing trained). Seed 0 of ``text``
saves its model to ``--checkpoints`` (committed); the other text runs save theirs under
``work/checkpoints/``. A text run whose result
is missing but whose checkpoint was trained under the same budget is only measured again. Each
finished run leaves one JSON file of results in ``work/results/`` (written atomically); a run whose
file exists for the same budget signature is skipped, an interrupted one resumes from its state in
``work/state/``. ``jobs`` runs that many at once in separate processes, one torch thread each (the
longest first).

>>> results = run_all(study_budget("quick"), work="out/positional", checkpoints=None, jobs=1)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import analyses.positional.synthetic as S
from analyses.positional.study import BUDGETS, SCHEMES, Budget
from analyses.positional.tasks import CopyBackTask, InductionTask, OrderTask
from interp.io import atomic_write
from models.training import TrainConfig

KINDS = ("text", "text_large", "anchor", "order", "copy_back", "induction")
TEXT_KINDS = ("text", "text_large")  # natural text (``study.Budget``): two model sizes


@dataclass(frozen=True)
class AnchorSpec:
    """SmolLM2-135M's held-out loss from the passage start, next to the study models' (``anchor.smollm2_anchor``:
    deterministic, no training): on the first ``n_passages`` held-out passages of ``max_chars`` characters
    or more, with the seed-0 natural-text checkpoints found in ``--checkpoints`` measured on the same passages."""

    n_passages: int = 256
    max_chars: int = 512
    n_boot: int = 1000


@dataclass(frozen=True)
class StudyBudget:
    """Everything the study trains: the natural-text budgets (two model sizes) and one ``TaskSpec``
    per task, with the seeds of each kind (``seeds`` unless ``kind_seeds`` names the kind) and the
    schemes the larger text model is trained for."""

    name: str
    text: Budget
    order: S.TaskSpec
    copy_back: S.TaskSpec
    induction: S.TaskSpec
    seeds: tuple[int, ...] = (0, 1, 2)
    text_large: Budget | None = None  # the second natural-text size (None: not part of this budget)
    large_schemes: tuple[str, ...] = ("rope", "none")
    kind_seeds: tuple[tuple[str, tuple[int, ...]], ...] = ()  # e.g. (("induction", (0, 1, 2, 3, 4)),)
    anchor: AnchorSpec | None = None  # SmolLM2's curve (None: not part of this budget)

    def seeds_for(self, kind: str) -> tuple[int, ...]:
        self.spec(kind)
        return (0,) if kind == "anchor" else dict(self.kind_seeds).get(kind, self.seeds)

    def kinds(self) -> tuple[str, ...]:
        """The kinds this budget runs (``text_large`` and ``anchor`` only when it has them)."""
        return tuple(k for k in KINDS if k not in ("text_large", "anchor") or getattr(self, k) is not None)

    def spec(self, kind: str) -> S.TaskSpec | Budget | AnchorSpec:
        if kind not in KINDS:
            raise ValueError(f"unknown run kind {kind!r}; choose from {KINDS}")
        if kind in ("text_large", "anchor") and getattr(self, kind) is None:
            raise ValueError(f"budget {self.name!r} has no {kind} run ({kind}=None)")
        return getattr(self, kind)

    def text_budget(self, kind: str, seed: int) -> Budget:
        """The natural-text budget of one text run: the kind's budget trained from ``seed`` (seed 0:
        the budget itself, so round two's committed seed-0 checkpoints keep their signature)."""
        spec = self.spec(kind)
        if not isinstance(spec, Budget):
            raise ValueError(f"kind {kind!r} is a synthetic task, not natural text; text kinds: text, text_large")
        return spec.with_seed(seed)

    def signature(self, kind: str, seed: int = 0) -> str:
        """A hash of what decides one run of ``kind``: a stored result is reused only when it matches.
        Natural-text kinds hash the budget trained from ``seed``; the synthetic ones do not depend on it."""
        spec = self.spec(kind)
        if isinstance(spec, Budget):
            return self.text_budget(kind, seed).signature()
        if isinstance(spec, AnchorSpec):  # the study models it measures come from the text budget
            d = {**dataclasses.asdict(spec), "text": self.text.signature()}
            return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]
        d = dataclasses.asdict(spec)
        d["train"] = spec.train.to_dict()
        d["task_kind"] = type(spec.task).__name__
        return hashlib.sha1(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _tc(steps: int, batch: int, lr: float, eval_every: int, warmup: int) -> TrainConfig:
    return TrainConfig(
        steps=steps, batch_size=batch, lr=lr, warmup_steps=warmup, eval_every=eval_every, checkpoint_every=250
    )


STUDY_BUDGETS = {
    # from scratch about 105 CPU-minutes, an hour on 2 idle cores with --jobs 2 (process CPU time per run at
    # 1 thread, round three): text ~175-250 s (15 runs), text_large ~300 s (6), induction ~24 s (25, with
    # evaluations every 25 steps and the route and long-range tests), copy_back ~11 s (15), order ~6 s (30),
    # the anchor ~100 s (1)
    "full": StudyBudget(
        name="full",
        text=BUDGETS["full"],
        order=S.TaskSpec(OrderTask(length=16), _tc(400, 64, 3e-3, 100, 40)),
        copy_back=S.TaskSpec(
            CopyBackTask(length=32, k=2), _tc(800, 32, 3e-3, 200, 40), extrapolate=(2, 4, 8), table_factor=8
        ),
        induction=S.TaskSpec(InductionTask(length=32, segment=8, d_vocab=64), _tc(1500, 64, 3e-3, 25, 50), d_mlp=0),
        seeds=(0, 1, 2),
        # 4 layers, rope and none, 3 seeds: ~1.7 x the 2-layer model's time per step (147 vs 88 ms measured
        # at 1 thread on the shared machine), ~6 x 380-440 s if a 2-layer model takes its 226-264 s
        text_large=BUDGETS["full_large"],
        kind_seeds=(("induction", (0, 1, 2, 3, 4)),),
        anchor=AnchorSpec(),
    ),
    # seconds: tests and notebook 05
    "quick": StudyBudget(
        name="quick",
        text=BUDGETS["quick"],
        order=S.TaskSpec(OrderTask(length=8, n_fill=4), _tc(60, 32, 3e-3, 30, 6), d_model=32, d_mlp=64),
        copy_back=S.TaskSpec(
            CopyBackTask(length=8, k=1, n_symbols=8), _tc(60, 32, 3e-3, 30, 6), d_model=32, d_mlp=64, table_factor=8
        ),
        induction=S.TaskSpec(
            InductionTask(length=16, segment=4, d_vocab=16), _tc(60, 32, 3e-3, 20, 6), d_model=32, d_mlp=0
        ),
        seeds=(0, 1),
        text_large=BUDGETS["quick_large"],  # ~2 s per run: the same machinery, 4 layers
        kind_seeds=(("text", (0,)), ("text_large", (0,))),
    ),
}


def study_budget(budget: str | StudyBudget) -> StudyBudget:
    if isinstance(budget, StudyBudget):
        return budget
    if budget not in STUDY_BUDGETS:
        raise ValueError(f"unknown budget {budget!r}; choose from {sorted(STUDY_BUDGETS)} or pass a StudyBudget")
    return STUDY_BUDGETS[budget]


@dataclass(frozen=True)
class Run:
    kind: str
    scheme: str
    attention: str = "causal"
    seed: int = 0

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.attention}-{self.scheme}-s{self.seed}"


def plan(budget: StudyBudget, kinds: Sequence[str] = KINDS, schemes: Sequence[str] = SCHEMES) -> list[Run]:
    """Every run of the study, the longest kinds first (so parallel workers end together)."""
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown run kind {k!r}; choose from {KINDS}")
    for s in schemes:
        if s not in SCHEMES:
            raise ValueError(f"unknown positional scheme {s!r}; choose from {SCHEMES}")
    runs = []
    for kind in ("text_large", "text", "induction", "anchor", "copy_back", "order"):
        if kind not in kinds or kind not in budget.kinds():
            continue
        if kind == "anchor":  # one run, SmolLM2 (the schemes it shows are the seed-0 checkpoints found)
            runs.append(Run("anchor", "smollm2"))
            continue
        for seed in budget.seeds_for(kind):
            for scheme in schemes:
                if kind == "text_large" and scheme not in budget.large_schemes:
                    continue
                for attention in ("causal", "bidirectional") if kind == "order" else ("causal",):
                    runs.append(Run(kind, scheme, attention, seed))
    return runs


# --------------------------------------------------------------------------------------------------
# One run


def _result_path(work: Path, run: Run) -> Path:
    return work / "results" / f"{run.id}.json"


def load_result(work: str | Path, run: Run, budget: StudyBudget) -> dict | None:
    """The stored result of ``run`` if it was made under this budget, else None."""
    path = _result_path(Path(work), run)
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    if run.kind in TEXT_KINDS and "per_window" not in result:
        return None  # round two's text results lack the per-window losses: measured again (not retrained)
    return result if result.get("signature") == budget.signature(run.kind, run.seed) else None


def _clean(x):
    """JSON-ready: numpy scalars and arrays to Python, NaN to None."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray):
        return _clean(x.tolist())
    if isinstance(x, (np.floating, float)):
        return None if math.isnan(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


def execute(run: Run, budget: StudyBudget, work: str | Path, checkpoints: str | Path | None = None) -> dict:
    """Train and measure one run (or return its stored result) on one torch thread; the caller's
    thread count is restored afterwards, whatever happens."""
    work = Path(work)
    done = load_result(work, run, budget)
    if done is not None and not _checkpoint_missing(run, budget, checkpoints):
        return done
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _execute(run, budget, work, checkpoints)
    finally:
        torch.set_num_threads(before)


def _execute(run: Run, budget: StudyBudget, work: Path, checkpoints: str | Path | None) -> dict:
    start, cpu = time.perf_counter(), time.process_time()
    state = work / "state" / run.id
    state.parent.mkdir(parents=True, exist_ok=True)
    if run.kind in TEXT_KINDS:
        from analyses.positional.study import text_run

        b = budget.text_budget(run.kind, run.seed)
        metrics = text_run(run.scheme, b, state, text_checkpoint(run, work, checkpoints))
    elif run.kind == "anchor":
        metrics = _anchor(budget, checkpoints)
    else:
        metrics = _synthetic(run, budget.spec(run.kind), state.with_suffix(".pt"))
    result = _clean(
        {
            "id": run.id,
            **dataclasses.asdict(run),
            "budget": budget.name,
            "signature": budget.signature(run.kind, run.seed),
            "wall_seconds": time.perf_counter() - start,
            # CPU time of this process (one torch thread): what the run costs, whatever else shares the machine
            "cpu_seconds": time.process_time() - cpu,
            "torch": torch.__version__,
            **metrics,
        }
    )
    atomic_write(_result_path(work, run), json.dumps(result, indent=1))
    return result


def text_checkpoint(run: Run, work: str | Path, checkpoints: str | Path | None) -> Path:
    """Where a natural-text run's model is saved: seed 0 of kind ``text`` in ``checkpoints/<scheme>``
    (the committed models the notebook and the model cards use) when ``checkpoints`` is given; every
    other text run (other seeds, the larger size) in ``work/checkpoints/<run id>`` (never committed)."""
    if run.kind not in TEXT_KINDS:
        raise ValueError(f"run {run.id} is not a natural-text run (kinds {TEXT_KINDS})")
    if run.kind == "text" and run.seed == 0 and checkpoints is not None:
        return Path(checkpoints) / run.scheme
    return Path(work) / "checkpoints" / run.id


def _checkpoint_missing(run: Run, budget: StudyBudget, checkpoints: str | Path | None) -> bool:
    """Seed 0 of the natural-text run counts as done only if its committed checkpoint (what the
    notebook and the model cards use) is there too, trained under this budget; the other text runs'
    checkpoints live in the work folder, and their results alone count."""
    if run.kind != "text" or run.seed != 0 or checkpoints is None:
        return False
    from analyses.positional.study import load_scheme

    return load_scheme(Path(checkpoints) / run.scheme, budget.text_budget(run.kind, run.seed)) is None


def _anchor(budget: StudyBudget, checkpoints: str | Path | None) -> dict:
    """SmolLM2's curve, and the seed-0 natural-text models of ``checkpoints`` (those trained under this
    budget) on the same passages; the study tokenizer is theirs (or a fresh BPE of the budget's data)."""
    from analyses.positional.anchor import smollm2_anchor
    from analyses.positional.study import SCHEMES as TEXT_SCHEMES
    from analyses.positional.study import load_scheme, prepare_data

    spec = budget.spec("anchor")
    found = {}
    for scheme in TEXT_SCHEMES:
        got = None if checkpoints is None else load_scheme(Path(checkpoints) / scheme, budget.text)
        if got is not None:
            found[scheme] = got[0].eval()
    tokenizer = next(iter(found.values())).tokenizer if found else prepare_data(budget.text).tokenizer
    return smollm2_anchor(
        tokenizer,
        n_passages=spec.n_passages,
        max_chars=spec.max_chars,
        n_ctx=budget.text.n_ctx,
        n_boot=spec.n_boot,
        study_models=found,
    )


def _synthetic(run: Run, spec: S.TaskSpec, state_path: Path) -> dict:
    if run.kind == "order":

        def ev(model, step):
            return S.order_measure(spec.task, model, n_pairs=250)
    elif run.kind == "induction":

        def ev(model, step):
            return S.induction_measure(spec, model, batch=64)
    else:
        ev = None
    trained = S.train_task(spec, run.scheme, run.attention, run.seed, evaluate=ev, state_path=state_path)
    model = trained.model.eval()
    out = {"train_seconds": trained.seconds, "history": trained.history}
    if run.kind == "order":
        out.update(S.order_measure(spec.task, model))
    elif run.kind == "copy_back":
        row, curve = S.copy_measure(spec, model)
        out.update(row, curve=curve, untrained_rows_change=S.untrained_rows_change(spec, model, run.seed))
        out.update(table_rows=model.cfg.n_ctx, train_length=spec.task.length, n_symbols=spec.task.n_symbols)
        out.update(S.shift_check(spec, model))
    else:
        from analyses.positional.formation import long_range, route

        out.update(S.induction_measure(spec, model), **S.induction_formation(trained.history, spec.task.d_vocab))
        out.update(route(model, spec.task), **long_range(model, spec.task, spec.extrapolate))
    state_path.unlink(missing_ok=True)  # the result holds what the report needs; the state was for resuming
    return out


# --------------------------------------------------------------------------------------------------
# All runs


def run_all(
    budget: str | StudyBudget,
    work: str | Path,
    checkpoints: str | Path | None = None,
    kinds: Sequence[str] = KINDS,
    schemes: Sequence[str] = SCHEMES,
    jobs: int = 1,
    progress: bool = True,
) -> list[dict]:
    """Execute every planned run not yet done (``jobs`` processes at once) and return all results."""
    from tqdm.auto import tqdm

    b = study_budget(budget)
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r}; expected a positive integer (processes running at once)")
    runs = plan(b, kinds, schemes)
    results = {}
    todo = []
    for r in runs:
        done = load_result(work, r, b)
        if done is None or _checkpoint_missing(r, b, checkpoints):
            todo.append(r)
        else:
            results[r.id] = done
    bar = tqdm(total=len(runs), initial=len(results), desc="runs", disable=not progress)
    if jobs == 1:
        for r in todo:
            results[r.id] = execute(r, b, work, checkpoints)
            bar.update(1)
    else:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no forked torch thread pools
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(execute, r, b, work, checkpoints): r for r in todo}
            for f in as_completed(futures):
                results[futures[f].id] = f.result()
                bar.update(1)
    bar.close()
    return [results[r.id] for r in runs]
