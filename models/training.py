"""Training for the toolkit's transformer: maximum likelihood on a token stream.

The objective is the mean next-token cross-entropy (``model(tokens, return_type="loss")``), the
optimiser AdamW with a linear warm-up and a cosine (or linear) decay to ``min_lr_ratio * lr``.
Everything random (initial weights, which windows make each batch) comes from ``seed``, so two
runs with the same seed and data are identical on CPU, and so is a run that was saved, loaded and
resumed part-way.

>>> tc = TrainConfig(steps=500, batch_size=32, lr=3e-3, seed=0)
>>> trainer = Trainer(models.Transformer(cfg, tokenizer=tok, seed=0), train_ids, heldout_ids, tc)
>>> history = trainer.train(out_dir="checkpoints/run")     # checkpoints at the end (and every N steps)
>>> trainer = Trainer.resume("checkpoints/run", train_ids, heldout_ids)   # picks up where it stopped
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.io import atomic_save, staged_dir
from models.loading import CONFIG_FILE, WEIGHTS_FILE, load_checkpoint, read_checkpoint_meta, save_checkpoint
from models.transformer import Transformer

STATE_FILE = "trainer_state.pt"
# the files of one checkpoint (a tokenizer's save_pretrained may add others: they belong to it too)
CHECKPOINT_FILES = (
    CONFIG_FILE,
    WEIGHTS_FILE,
    STATE_FILE,
    "tokenizer*.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "chat_template.*",
)


@dataclass(frozen=True)
class TrainConfig:
    """Training hyperparameters. ``steps`` optimiser steps of ``batch_size`` windows of
    ``seq_len`` tokens (None: the model's n_ctx)."""

    steps: int = 1000
    batch_size: int = 32
    seq_len: int | None = None
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # the schedule decays to lr * min_lr_ratio
    warmup_steps: int = 50
    schedule: str = "cosine"  # "cosine" | "linear" | "constant" (after warm-up)
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.95)
    grad_clip: float | None = 1.0
    seed: int = 0
    eval_every: int = 0  # 0: evaluate only at the end
    eval_windows: int = 64  # held-out windows per evaluation (fixed, the first ones of the stream)
    checkpoint_every: int = 0  # 0: only when train() ends (if out_dir is given)
    threads: int | None = None  # torch.set_num_threads during train(); None leaves it alone

    def __post_init__(self) -> None:
        self._check_kinds()
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"steps={self.steps}, batch_size={self.batch_size}: both must be >= 1")
        if self.schedule not in ("cosine", "linear", "constant"):
            raise ValueError(f"schedule={self.schedule!r}; use 'cosine', 'linear' or 'constant'")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"min_lr_ratio={self.min_lr_ratio}; it must lie in [0, 1]")
        if self.warmup_steps < 0 or self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps={self.warmup_steps}; it must lie in 0..steps ({self.steps})")
        object.__setattr__(self, "betas", tuple(self.betas))

    def _check_kinds(self) -> None:
        """Each setting of the right kind and range (a config file can hold anything: "3e-3" as a
        string, NaN, a negative rate), so a bad one is refused here, before any data is read or step
        taken, with one line naming the setting, its value and what is expected."""

        def bad(name: str, expected: str) -> ValueError:
            return ValueError(f"training.{name}={getattr(self, name)!r}; expected {expected}")

        def real(v: object) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        for name in ("steps", "batch_size", "warmup_steps", "seed", "eval_every", "eval_windows", "checkpoint_every"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise bad(name, "an integer")
        for name in ("seq_len", "threads"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise bad(name, "a positive integer or null")
        for name, least in (("eval_every", 0), ("checkpoint_every", 0), ("eval_windows", 1)):
            if getattr(self, name) < least:
                raise bad(name, f"an integer >= {least}")
        if not real(self.lr) or self.lr <= 0:
            raise bad("lr", "a positive finite number")
        if not real(self.min_lr_ratio) or not 0 <= self.min_lr_ratio <= 1:
            raise bad("min_lr_ratio", "a number in [0, 1]")
        if not real(self.weight_decay) or self.weight_decay < 0:
            raise bad("weight_decay", "a finite number >= 0")
        if self.grad_clip is not None and (not real(self.grad_clip) or self.grad_clip < 0):
            raise bad("grad_clip", "a finite number >= 0, or null (0 and null: no clipping)")
        betas = self.betas
        if not isinstance(betas, (list, tuple)) or len(betas) != 2 or not all(real(b) and 0 <= b < 1 for b in betas):
            raise bad("betas", "two numbers in [0, 1)")
        if not isinstance(self.schedule, str):
            raise bad("schedule", "'cosine', 'linear' or 'constant'")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["betas"] = list(self.betas)
        return d

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown training settings {unknown}; known: {sorted(known)}")
        return cls(**data)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


def lr_factor(step: int, tc: TrainConfig) -> float:
    """Multiplier of ``tc.lr`` at optimiser step ``step`` (0-based): linear warm-up from 1/warmup to
    1, then decay to ``min_lr_ratio`` at the last step."""
    if step < tc.warmup_steps:
        return (step + 1) / tc.warmup_steps
    if tc.schedule == "constant":
        return 1.0
    span = max(1, tc.steps - tc.warmup_steps - 1)
    progress = min(1.0, (step - tc.warmup_steps) / span)
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if tc.schedule == "cosine" else 1 - progress
    return tc.min_lr_ratio + (1 - tc.min_lr_ratio) * shape


def heldout_windows(ids: Tensor, seq_len: int, n_windows: int | None = None) -> Tensor:
    """Non-overlapping windows [n, seq_len] from the start of a 1-D token stream (a fixed set, so
    every evaluation scores the same tokens)."""
    ids = torch.as_tensor(ids)
    if ids.ndim != 1:
        raise ValueError(f"a token stream is 1-D, got shape {tuple(ids.shape)}")
    n = ids.numel() // seq_len
    if n == 0:
        raise ValueError(f"the held-out stream has {ids.numel()} tokens, fewer than one window of {seq_len}")
    if n_windows is not None:
        n = min(n, n_windows)
    return ids[: n * seq_len].view(n, seq_len)


@torch.no_grad()
def evaluate(model: Transformer, windows: Tensor, batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats) over all predicted tokens of ``windows`` [n, seq]."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, windows.shape[0], batch_size):
        chunk = windows[start : start + batch_size]
        total += float(model(chunk, return_type="loss")) * chunk.shape[0]
        count += chunk.shape[0]
    model.train(was_training)
    return total / count


class Trainer:
    """Owns the model, AdamW, the schedule and the batch RNG; ``train()`` runs to ``tc.steps``."""

    def __init__(self, model: Transformer, train_ids: Tensor, heldout_ids: Tensor, tc: TrainConfig) -> None:
        if not model.cfg.is_causal or not model.cfg.lm_head:
            raise ValueError(f"Trainer trains causal language models; {model.cfg.name!r} is not one")
        self.model = model
        self.tc = tc
        self.seq_len = tc.seq_len or model.cfg.n_ctx
        if self.seq_len > model.cfg.n_ctx:
            raise ValueError(f"seq_len={self.seq_len} exceeds the model's n_ctx={model.cfg.n_ctx}")
        self.train_ids = torch.as_tensor(train_ids, dtype=torch.long)
        if self.train_ids.ndim != 1 or self.train_ids.numel() <= self.seq_len:
            raise ValueError(
                f"train_ids must be a 1-D stream longer than seq_len={self.seq_len}, "
                f"got shape {tuple(self.train_ids.shape)}"
            )
        hi = int(self.train_ids.max())
        if hi >= model.cfg.d_vocab:
            raise ValueError(f"train_ids hold id {hi}, outside the model's vocabulary of {model.cfg.d_vocab}")
        self.heldout = heldout_windows(heldout_ids, self.seq_len, tc.eval_windows)
        # weight decay on matrices only (not norms, biases); the split is by shape, so it is fixed
        decay = [p for p in model.parameters() if p.ndim >= 2]
        no_decay = [p for p in model.parameters() if p.ndim < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=tc.lr,
            betas=tc.betas,
            foreach=False,  # the plain loop: same arithmetic on every machine and thread count
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: lr_factor(s, tc))
        self.batch_gen = torch.Generator().manual_seed(tc.seed)
        self.step = 0
        self.history: list[dict] = []  # {"step", "train_loss", "heldout_loss"?, "lr"}

    # -- one step ----------------------------------------------------------------------------------

    def next_batch(self) -> Tensor:
        """``batch_size`` windows at uniformly random offsets of the training stream [batch, seq]."""
        hi = self.train_ids.numel() - self.seq_len
        starts = torch.randint(0, hi + 1, (self.tc.batch_size,), generator=self.batch_gen)
        return torch.stack([self.train_ids[s : s + self.seq_len] for s in starts.tolist()])

    def train_step(self) -> float:
        self.model.train()
        batch = self.next_batch()
        loss = self.model(batch, return_type="loss")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip, foreach=False)
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        return loss.item()

    def evaluate(self) -> float:
        return evaluate(self.model, self.heldout, self.tc.batch_size)

    # -- the loop ----------------------------------------------------------------------------------

    def train(
        self,
        steps: int | None = None,
        out_dir: str | Path | None = None,
        progress: bool = True,
        desc: str = "train",
        force: bool = True,
    ) -> list[dict]:
        """Run until ``steps`` (default ``tc.steps``) optimiser steps in total have been taken.
        Evaluates every ``eval_every`` steps and after the last step (``tc.steps``; not when
        stopping early, so a stopped-and-resumed run logs exactly what a straight run logs); saves to ``out_dir`` every
        ``checkpoint_every`` steps and at the end (``force``: as in ``save``, checked before the
        first step). Returns the history."""
        from interp.io import check_recorded

        if out_dir is not None:
            check_recorded(out_dir, CHECKPOINT_FILES, "Trainer.save", force)
        from tqdm.auto import tqdm

        until = self.tc.steps if steps is None else min(steps, self.tc.steps)
        threads = torch.get_num_threads()
        if self.tc.threads:
            torch.set_num_threads(self.tc.threads)
        try:
            bar = tqdm(total=until, initial=self.step, desc=desc, disable=not progress, leave=False)
            running = None
            while self.step < until:
                loss = self.train_step()
                running = loss if running is None else 0.95 * running + 0.05 * loss
                entry = {"step": self.step, "train_loss": loss, "lr": self.scheduler.get_last_lr()[0]}
                if (self.tc.eval_every and self.step % self.tc.eval_every == 0) or self.step == self.tc.steps:
                    entry["heldout_loss"] = self.evaluate()
                self.history.append(entry)
                bar.update(1)
                bar.set_postfix(
                    loss=f"{running:.3f}",
                    **({"heldout": f"{entry['heldout_loss']:.3f}"} if "heldout_loss" in entry else {}),
                )
                if out_dir is not None and self.tc.checkpoint_every and self.step % self.tc.checkpoint_every == 0:
                    self.save(out_dir, force=force)
            bar.close()
        finally:
            torch.set_num_threads(threads)
        if out_dir is not None:
            self.save(out_dir, force=force)
        return self.history

    # -- checkpoints -------------------------------------------------------------------------------

    def save(
        self, folder: str | Path, optimizer_state: bool = True, extra: dict | None = None, force: bool = True
    ) -> Path:
        """Weights, config and tokenizer via ``models.save_checkpoint`` (``extra`` records the
        training config, step and history); with ``optimizer_state`` also ``trainer_state.pt``
        (AdamW moments, schedule, batch RNG: tensors and plain data only) so ``Trainer.resume``
        continues bit-identically. Replaces the checkpoint's files in ``folder``
        (``CHECKPOINT_FILES``); ``force=False`` refuses a folder holding files of those names that no
        toolkit run recorded writing (a user's ``vocab.txt``), as ``interp train`` does. (The default
        adopts them: the committed study checkpoints predate the manifest.)"""
        folder = Path(folder)
        info = {"training": self.tc.to_dict(), "step": self.step, "history": self.history, **(extra or {})}
        # one checkpoint is one set (weights, config, tokenizer, optimizer state of the same step):
        # built beside the folder and swapped in; other files in it (a model card) stay
        with staged_dir(folder, CHECKPOINT_FILES, "Trainer.save", strict=False, force=force) as tmp:
            save_checkpoint(self.model, tmp, extra=info)
            if optimizer_state:  # without it, a stale state of the previous set would resume the wrong step
                state = {
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "batch_gen": self.batch_gen.get_state(),
                    "torch_rng": torch.get_rng_state(),
                    "step": self.step,
                }
                atomic_save(tmp / STATE_FILE, lambda t: torch.save(state, t))
        return folder

    @classmethod
    def resume(
        cls, folder: str | Path, train_ids: Tensor, heldout_ids: Tensor, tc: TrainConfig | None = None
    ) -> Trainer:
        """Rebuild a Trainer from a checkpoint written by ``save`` (with optimizer state). ``tc``
        may extend ``steps``; by default the saved training config is used."""
        folder = Path(folder)
        state_path = folder / STATE_FILE
        if not state_path.exists():
            raise FileNotFoundError(
                f"{folder} has no {STATE_FILE}: it was saved without optimizer state, so it cannot resume"
            )
        meta = read_checkpoint_meta(folder).get("extra", {})
        tc = tc or TrainConfig.from_dict(meta["training"])
        model = load_checkpoint(folder).train()
        trainer = cls(model, train_ids, heldout_ids, tc)
        state = _load_state(state_path)
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.scheduler.load_state_dict(state["scheduler"])
        trainer.batch_gen.set_state(state["batch_gen"])
        torch.set_rng_state(state["torch_rng"])
        trainer.step = state["step"]
        trainer.history = list(meta.get("history", []))
        return trainer


STATE_KEYS = ("optimizer", "scheduler", "batch_gen", "torch_rng", "step")


def _load_state(path: Path) -> dict:
    """``trainer_state.pt`` read as tensors and plain data only (``weights_only=True``: a pickle
    that would build any other object, code included, is refused, never run)."""
    import pickle

    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"{path}: holds more than tensors and plain data ({first}), so it is not loaded: a trainer state "
            "the toolkit wrote never does; remove the file to use the weights without resuming"
        ) from None
    except (RuntimeError, EOFError) as e:
        raise ValueError(f"{path}: not a readable trainer state ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(state, dict) or sorted(state) != sorted(STATE_KEYS) or not isinstance(state["step"], int):
        raise ValueError(f"{path}: not a trainer state (expected the keys {', '.join(STATE_KEYS)})")
    return state


def read_config(path: str | Path) -> dict:
    """A training config file as a dict with a [model] table and optional [training] and [data]:
    JSON, or TOML when the name ends in .toml; a pipe (``--config <(...)``) is read once, as JSON if
    it starts with ``{`` and TOML otherwise. Errors are one line naming the file (and line):
    missing, not UTF-8, a JSON or TOML syntax error, not a table of tables. A UTF-8 byte-order mark
    is accepted."""
    import json
    import re

    from interp.io import decode_text, readable_input

    path = readable_input(path, "config file", "a .json or .toml training config")
    regular = path.is_file()
    if regular and path.suffix not in (".toml", ".json"):
        raise ValueError(f"config {path}: use a .json or .toml file")

    text = decode_text(path.read_bytes(), path)
    toml = path.suffix == ".toml" if path.suffix in (".toml", ".json") else not text.lstrip().startswith("{")
    if toml:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            msg = str(e)
            at = re.search(r"\(at line (\d+), column (\d+)\)", msg)
            where = f"{path}:{at[1]}:{at[2]}" if at else str(path)
            msg = msg.replace(at[0], "").strip() if at else msg
            raise ValueError(f"{where}: TOML syntax error: {msg}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}:{e.colno}: JSON syntax error: {e.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: expected an object with [model], [training] and [data] tables, got a {type(data).__name__}"
        )
    unknown = sorted(set(data) - {"model", "training", "data"})
    if unknown or "model" not in data:
        raise ValueError(
            f"config {path}: needs a [model] table and may have [training] and [data]; unexpected {unknown}"
        )
    return data


def train(
    model: Transformer,
    train_ids: Tensor,
    heldout_ids: Tensor,
    tc: TrainConfig,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> list[dict]:
    """One call: train ``model`` in place for ``tc.steps`` steps and return the history."""
    return Trainer(model, train_ids, heldout_ids, tc).train(out_dir=out_dir, progress=progress)
