"""Train and measure one small model on one synthetic task (``analyses.positional.tasks``).

One run = (task, positional scheme, attention direction, seed). The model is the toolkit's
transformer (pre-LayerNorm, GELU); the induction runs are attention-only (every MLP's output
weights are zero and frozen, so the MLPs write exactly 0). Sinusoidal models scale their token
embeddings by ``study.SINUSOIDAL_EMBED_SCALE`` (``Config.embed_scale``; why: see there); every
other scheme leaves them unscaled.

Training is AdamW with warm-up and cosine decay (``models.training.lr_factor``) on batches the
task draws from a generator seeded by the run's seed; with ``state_path`` the run saves its whole
state every ``checkpoint_every`` steps and a restarted run resumes from it bit-identically.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import models
from analyses.data.generated import random_repeated_tokens
from analyses.positional.formation import (  # EVAL_SEED: held-out draws
    EVAL_SEED,
    abruptness,
    copy_losses,
    own_head_scores,
)
from analyses.positional.study import SINUSOIDAL_EMBED_SCALE, head_scores
from analyses.positional.tasks import IGNORE, CopyBackTask, InductionTask, OrderTask
from interp.io import atomic_save
from interp.names import act_name
from models.training import TrainConfig, lr_factor

FORMED_SCORE = 0.3  # an induction head "formed" once its induction score passes this (chance ~0.02)
FORMED_LOSS_FRACTION = 0.5  # ... and the second copy's loss once it falls below this fraction of ln(vocab)


@dataclass(frozen=True)
class TaskSpec:
    """A task, the model that learns it and how long it trains."""

    task: OrderTask | CopyBackTask | InductionTask
    train: TrainConfig
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_mlp: int = 256  # 0: attention-only
    eval_batch: int = 512
    extrapolate: tuple[int, ...] = (2, 4, 8)  # copy_back: test lengths as multiples of the training length
    # learned positions: a table of table_factor x length rows, trained on sequences of length rows only, so
    # rows length.. never get a gradient (the seeds' claim: an untrained position vector fails). With
    # table_factor > 1, W_pos is excluded from weight decay: AdamW's decoupled decay would otherwise move the
    # untrained rows (by a factor 1 - lr * weight_decay per step) although their gradient is exactly zero.
    table_factor: int = 1

    def n_ctx(self, scheme: str) -> int:
        return self.task.length * (self.table_factor if scheme == "learned" else 1)

    def no_decay(self, scheme: str) -> tuple[str, ...]:
        """Parameters kept out of weight decay besides the vectors (see ``table_factor``)."""
        return ("W_pos",) if scheme == "learned" and self.table_factor > 1 else ()

    def model(self, scheme: str, attention: str, seed: int) -> models.Transformer:
        if self.table_factor < 1:
            raise ValueError(f"table_factor={self.table_factor}; expected a positive integer (table rows / length)")
        cfg = models.Config(
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_head=self.d_model // self.n_heads,
            d_mlp=max(self.d_mlp, 1),
            d_vocab=self.task.d_vocab,
            n_ctx=self.n_ctx(scheme),
            attention=attention,
            positional=scheme,
            norm="layernorm",
            norm_placement="pre",
            act="gelu",
            embed_scale=SINUSOIDAL_EMBED_SCALE if scheme == "sinusoidal" else 1.0,
            name=f"{self.task.name}-{attention}-{scheme}-s{seed}",
        )
        model = models.Transformer(cfg, seed=seed)
        if self.d_mlp == 0:
            with torch.no_grad():
                for block in model.blocks:
                    block.mlp.out_weight.zero_()
                    block.mlp.out_weight.requires_grad_(False)
                    block.mlp.in_weight.requires_grad_(False)
        return model


# --------------------------------------------------------------------------------------------------
# The training loop


@dataclass
class TaskRun:
    model: models.Transformer
    history: list[dict] = field(default_factory=list)  # {"step", "loss", **eval}
    seconds: float = 0.0


def _loss(model: models.Transformer, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(tokens, return_type="logits")
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE)


def _optimizer(
    model: models.Transformer, tc: TrainConfig, no_decay: tuple[str, ...] = ()
) -> tuple[list, torch.optim.Optimizer, object]:
    """(trainable parameters, AdamW with weight decay on matrices only (and not on the parameters named
    in ``no_decay``), warm-up + decay schedule)."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    unknown = set(no_decay) - {n for n, _ in named}
    if unknown:
        raise ValueError(f"no_decay names {sorted(unknown)}, which the model has no trainable parameter called")
    params = [p for _, p in named]
    decay = [p for n, p in named if p.ndim >= 2 and n not in no_decay]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": tc.weight_decay},
            {"params": [p for n, p in named if p.ndim < 2 or n in no_decay], "weight_decay": 0.0},
        ],
        lr=tc.lr,
        betas=tc.betas,
        foreach=False,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, tc))
    return params, optimizer, scheduler


def load_state(state_path: Path) -> dict:
    """A run's resume state: tensors and plain data only (``weights_only=True``), so a planted file
    cannot run code. The state ``train_task`` writes (weights, optimizer and scheduler state, the
    batch generator's state as a uint8 tensor, the history) is exactly that, so older states resume;
    anything else is refused with a one-line ValueError."""
    import pickle

    try:
        return torch.load(state_path, weights_only=True)
    except pickle.UnpicklingError as e:
        # torch's message opens with advice to load with weights_only=False: keep only the line
        # naming what the file holds
        found = [line.strip() for line in str(e).splitlines() if "GLOBAL" in line]
        raise ValueError(
            f"{state_path}: a resume state must hold only tensors and plain data; this one holds something else"
            f"{' (' + found[0] + ')' if found else ''} and was not loaded: remove it to train the run from the start"
        ) from None


def _resume(state: dict, model, optimizer, scheduler, gen: torch.Generator) -> tuple[int, list[dict], float]:
    """Put a saved state back into the run's objects; returns (step, history, seconds so far)."""
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    gen.set_state(state["gen"])
    return state["step"], state["history"], state["seconds"]


def train_task(
    spec: TaskSpec,
    scheme: str,
    attention: str,
    seed: int,
    evaluate: Callable[[models.Transformer, int], dict] | None = None,
    state_path: str | Path | None = None,
    progress: bool = False,
    stop_at: int | None = None,
) -> TaskRun:
    """Train a fresh model (weights and batches from ``seed``) for ``spec.train.steps`` steps.
    ``evaluate(model, step)`` runs every ``eval_every`` steps (and at step 0 and the end); its dict
    joins the history. ``state_path``: resume from it if present (``load_state``), save to it every
    ``checkpoint_every`` steps. ``stop_at``: stop after that many steps (to test resuming)."""
    import time

    from tqdm.auto import tqdm

    tc = spec.train
    model = spec.model(scheme, attention, seed)
    params, optimizer, scheduler = _optimizer(model, tc, spec.no_decay(scheme))
    gen = torch.Generator().manual_seed(seed)
    run = TaskRun(model)
    step = 0
    state_path = Path(state_path) if state_path is not None else None
    if state_path is not None and state_path.exists():
        step, run.history, run.seconds = _resume(load_state(state_path), model, optimizer, scheduler, gen)

    def save() -> None:
        state = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "gen": gen.get_state(),
            "step": step,
            "history": run.history,
            "seconds": run.seconds,
        }
        atomic_save(state_path, lambda t: torch.save(state, t))

    def log(loss: float | None) -> None:
        entry = {"step": step, "loss": loss}
        if evaluate is not None:
            entry.update(evaluate(model, step))
            model.train()
        run.history.append(entry)

    if step == 0 and evaluate is not None and tc.eval_every:
        log(None)
    until = tc.steps if stop_at is None else min(stop_at, tc.steps)
    bar = tqdm(total=until, initial=step, disable=not progress, leave=False, desc=model.cfg.name)
    start = time.perf_counter()
    model.train()
    while step < until:
        tokens, targets = spec.task.sample(tc.batch_size, gen)
        loss = _loss(model, tokens, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, tc.grad_clip, foreach=False)
        optimizer.step()
        scheduler.step()
        step += 1
        bar.update(1)
        if (tc.eval_every and step % tc.eval_every == 0) or step == tc.steps:
            log(loss.item())
        if state_path is not None and tc.checkpoint_every and step % tc.checkpoint_every == 0 and step < tc.steps:
            run.seconds += time.perf_counter() - start
            start = time.perf_counter()
            save()
    bar.close()
    run.seconds += time.perf_counter() - start
    if state_path is not None and step < tc.steps:
        save()
    return run


# --------------------------------------------------------------------------------------------------
# Measurements, one per task


def order_measure(task: OrderTask, model: models.Transformer, n_pairs: int = 500) -> dict:
    """Accuracy on a balanced held-out set (each sequence next to its A/B-swapped twin) and the
    share of twins answered differently (what the model knows about order at all)."""
    gen = torch.Generator().manual_seed(EVAL_SEED)
    tokens, targets = task.sample(2 * n_pairs, gen, balanced=True)
    model.eval()
    with torch.no_grad():  # float64, as OrderTask.accuracy: twins of an order-blind model tie exactly
        logits = model.double()(tokens, return_type="logits")[:, -1]
        model.float()
    says_yes = logits[:, task.YES] > logits[:, task.NO]
    acc = float((says_yes == (targets[:, -1] == task.YES)).double().mean())
    yes = says_yes.view(n_pairs, 2)
    return {"accuracy": acc, "twins_differ": float((yes[:, 0] != yes[:, 1]).double().mean())}


def copy_measure(spec: TaskSpec, model: models.Transformer, batch: int = 128) -> tuple[dict, np.ndarray]:
    """Accuracy inside the training length and at each test length (over the positions beyond the
    training length); learned positions cannot run past n_ctx (NaN). Returns (row, accuracy by
    position on the longest test length)."""
    task = spec.task
    L = task.length
    gen = torch.Generator().manual_seed(EVAL_SEED)
    longest = max(spec.extrapolate) * L
    tokens, targets = task.sample(batch, gen, length=longest)
    # one pass over the longest sequences: a causal model's output at t depends on tokens 0..t only,
    # so the first m L positions of an 8 L sequence are a sequence of length m L
    usable = min(model.cfg.n_ctx, longest) if model.cfg.positional == "learned" else longest  # no row past n_ctx
    curve = np.full(longest, np.nan)
    curve[:usable] = task.accuracy_by_position(model, tokens[:, :usable], targets[:, :usable]).numpy()
    row = {}
    row["acc_train_len"] = float(np.nanmean(curve[:L]))
    for m in spec.extrapolate:
        row[f"acc_{m}x"] = float(np.nanmean(curve[(m // 2) * L : m * L])) if not np.isnan(curve[m * L - 1]) else np.nan
    return row, curve


def untrained_rows_change(spec: TaskSpec, model: models.Transformer, seed: int) -> float:
    """max |W_pos - W_pos at initialisation| over the rows past the training length (learned positions
    with ``table_factor`` > 1): exactly 0 when those rows never got a gradient and were not decayed."""
    if model.cfg.positional != "learned" or model.cfg.n_ctx <= spec.task.length:
        return float("nan")
    init = spec.model("learned", model.cfg.attention, seed).W_pos.detach()
    return float((model.W_pos.detach()[spec.task.length :] - init[spec.task.length :]).abs().max())


def shift_check(spec: TaskSpec, model: models.Transformer, shifts: tuple[int, ...] = (1, 8, 32)) -> dict:
    """The distance claim, measured: every layer's attention scores with all positions shifted by s
    (``analyses.invariance.position.shift_errors``: each layer fed its own input, normalised change
    against its float32 tolerance, and a guard that must change). Returns the worst ratio of change
    to tolerance over shifts (<= 1: the scores depend on distance only) and the smallest guard ratio."""
    from analyses.invariance.position import shift_errors

    gen = torch.Generator().manual_seed(EVAL_SEED)
    tokens, _ = spec.task.sample(1, gen)
    room = model.cfg.n_ctx - tokens.shape[1] if model.cfg.positional == "learned" else max(shifts)
    usable = tuple(s for s in shifts if s <= room)
    if not usable:
        return {"shift_ratio": float("nan"), "shift_guard_ratio": float("nan"), "shifts": []}
    with torch.no_grad():
        t = shift_errors(model.eval(), tokens, usable)
    ratio = t.value / t.tolerance
    return {
        "shift_ratio": float(ratio.max()),
        "shift_guard_ratio": float((t.baseline / t.tolerance).min()),
        "shifts": list(usable),
    }


def induction_measure(spec: TaskSpec, model: models.Transformer, batch: int = 128) -> dict:
    """Loss on the second copy (held-out sequences); the best heads' scores on the task's own
    sequences (``formation.own_head_scores``: ``task_induction_score``, the formation criterion,
    ``task_prev_token_score``, ``task_dup_token_score``); and, secondary, the best heads' induction
    and previous-token scores on repeated random tokens (``study.head_scores``: distinct random
    tokens, then the same again, at a fixed offset)."""
    task = spec.task
    gen = torch.Generator().manual_seed(EVAL_SEED)
    tokens, targets, mask = task.sample_with_mask(batch, gen)
    half = task.length // 2
    probe = random_repeated_tokens(batch, half, task.d_vocab, seed=EVAL_SEED, distinct=True)
    names = [act_name(layer, "attn.hook_pattern") for layer in range(model.cfg.n_layers)]
    model.eval()
    copy_loss, other_loss = copy_losses(model, tokens, targets, mask)
    with torch.no_grad():
        _, cache = model.run_with_cache(probe, names_filter=lambda n: n in names, return_type=None)
    own = own_head_scores(model, task, batch, EVAL_SEED)
    heads = head_scores({layer: cache[names[layer]] for layer in range(model.cfg.n_layers)}, half)
    best = heads.loc[heads.induction.idxmax()]
    best_own = own.loc[own.induction.idxmax()]
    shifted = own[own.layer == model.cfg.n_layers - 1]
    return {
        "copy_loss": copy_loss,
        "other_loss": other_loss,
        "induction_score": float(best.induction),
        "induction_head": f"L{int(best['layer'])}H{int(best['head'])}",
        "prev_token_score": float(heads.previous_token.max()),
        "task_induction_score": float(best_own.induction),
        "task_induction_head": f"L{int(best_own['layer'])}H{int(best_own['head'])}",
        "task_prev_token_score": float(own.previous_token.max()),
        "task_dup_token_score": float(own.duplicate_token.max()),
        # the best last-layer head's attention to the c-th token after the earlier occurrence, any
        # c >= 1 (c = 1 is induction proper; learned positions reach the copy by c = segment)
        "task_shift_score": float(shifted.copy_shift_attention.max()),
        "task_shift": int(shifted.loc[shifted.copy_shift_attention.idxmax(), "copy_shift"]),
    }


def formation_step(history: list[dict], column: str, below: float | None = None, above: float | None = None) -> float:
    """The first logged step at which ``column`` is below ``below`` (or above ``above``) and stays
    so at every later evaluation; NaN if it never settles there."""
    rows = [h for h in history if h.get(column) is not None]
    ok = [(below is not None and h[column] < below) or (above is not None and h[column] > above) for h in rows]
    for i in range(len(rows)):
        if all(ok[i:]):
            return float(rows[i]["step"])
    return float("nan")


def induction_formation(history: list[dict], d_vocab: int) -> dict:
    """Formation steps (``formation_step``): the best induction score on the task's own sequences
    past ``FORMED_SCORE`` (the criterion), the same on the repeated-random-token probe (secondary)
    and for the best shifted-induction head (``task_shift_score``),
    the second-copy loss below ``FORMED_LOSS_FRACTION`` ln(vocab); and the abruptness of the score's
    rise (``score_*``, runs whose score formed) and of the loss's fall (``loss_*``, runs whose loss
    formed), ``formation.abruptness``."""
    out = {
        "step_score_formed": formation_step(history, "task_induction_score", above=FORMED_SCORE),
        "step_probe_formed": formation_step(history, "induction_score", above=FORMED_SCORE),
        "step_shift_formed": formation_step(history, "task_shift_score", above=FORMED_SCORE),
        "step_loss_formed": formation_step(history, "copy_loss", below=FORMED_LOSS_FRACTION * math.log(d_vocab)),
    }
    out.update(abruptness(history, not math.isnan(out["step_score_formed"]), "task_induction_score", "score"))
    out.update(abruptness(history, not math.isnan(out["step_loss_formed"]), "copy_loss", "loss", falling=True))
    return out
