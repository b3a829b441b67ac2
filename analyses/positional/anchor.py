"""A real anchor for the study's loss-by-position curve: SmolLM2-135M's own held-out loss by
position on the same BoolQ passages. A trained model's curve is what "a model that uses its
context" looks like; the study's small models are read against it.

SmolLM2's tokenizer is not the study's BPE (4.4 characters per token on these passages against
3.0), so token positions do not line up. Each predicted token is one row (``char_offset_losses``):
the character where it starts (leading whitespace counts as the token's: its span runs from the
previous token's end), how many characters it covers, its loss. Two frames are built from it:

- **by character offset** (``binned_curve``), in nats per character (sum of the losses of the
  tokens starting in the bin / sum of their characters: comparable across tokenizers, so the
  figure's left panel uses it) and in nats per token (each tokenizer's own unit; across
  tokenizers it compares tokens of different sizes). The study's gain becomes a gain between two
  character ranges (``gain_ranges``): where study tokens 1-7 and 96-126 sit on average
  (``token_boundaries``). Caveat, measured: in this frame the per-character gain of the
  no-position model (0.33) is as large as RoPE's (0.35): the study BPE cuts a passage's first
  words into short tokens (its first word has no leading space), which costs nats per character
  whatever the model knows about context;
- **on the study's own tokens** (``token_frame``): every model's loss spread evenly over the
  characters of its tokens and summed over the characters of each study token, so SmolLM2 gets a
  loss per study token at each study position, and the study's gain itself (positions 1-7 minus
  96-126) is measured for it. A study model on its own tokens keeps its own losses exactly. This
  frame is the one that compares with the study's numbers and puts SmolLM2 on the study's figure
  (right panel; ``plot_anchor(ax, result, "token")``).

Intervals are percentile bootstraps over passages (``passage_bootstrap``): a passage's tokens are
not independent, so passages are resampled, not tokens.

Position 0 of every window is a document separator, as in ``study.passage_windows``: the study's
``<|endoftext|>`` and SmolLM2's own ``<|endoftext|>`` (its tokenizer adds no BOS; its BOS,
``<|im_start|>``, is the instruct model's chat-turn marker, while ``<|endoftext|>`` separated
documents in pre-training: measured on 128 passages, SmolLM2's loss on tokens 1-7 is 5.58 nats
after ``<|endoftext|>`` and 6.85 after ``<|im_start|>``); see ``start_token_id``.

>>> import models
>>> from analyses.positional.anchor import smollm2_anchor
>>> result = smollm2_anchor(models.load("checkpoints/positional/rope").tokenizer)  # ~1.5 CPU minutes
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

import analyses.positional.text_stats as T
import models
from analyses.data.corpora import english_passages

DOC_SEPARATOR = "<|endoftext|>"
UNITS = ("char", "token")
STUDY_CTX = 128  # the study's natural-text context (study.BUDGETS["full"].n_ctx)
# ~0.3 CPU-seconds per passage of 512 characters for SmolLM2-135M at 1 thread (see smollm2_anchor)
ANCHOR_PASSAGES = 256
ANCHOR_MAX_CHARS = 512  # 351 held-out passages have 512; the study BPE's 127 tokens end before it in each


# --------------------------------------------------------------------------------------------------
# Tokens and their character spans


def _hf(tokenizer):
    return tokenizer.hf if isinstance(tokenizer, models.Tokenizer) else tokenizer


def start_token_id(tokenizer) -> int:
    """The token a document starts with, for ``tokenizer`` (a toolkit or Hugging Face fast tokenizer).

    In order: the toolkit tokenizer's own ``bos`` when it prepends one; the special token the
    Hugging Face tokenizer itself puts first (Llama's ``<s>``); ``<|endoftext|>``, the document
    separator of the study's BPE (id 0) and of SmolLM2's pre-training; else BOS, else EOS."""
    if isinstance(tokenizer, models.Tokenizer) and tokenizer.prepend_bos and tokenizer.bos_token_id is not None:
        return int(tokenizer.bos_token_id)
    hf = _hf(tokenizer)
    own = list(hf("x")["input_ids"])
    special = set(hf.all_special_ids) - {hf.unk_token_id}
    if own and own[0] in special:
        return int(own[0])
    if DOC_SEPARATOR in set(hf.all_special_tokens):
        return int(hf.convert_tokens_to_ids(DOC_SEPARATOR))
    for tid in (hf.bos_token_id, hf.eos_token_id):
        if tid is not None:
            return int(tid)
    raise ValueError(f"{type(hf).__name__} has no {DOC_SEPARATOR}, BOS or EOS token to start a document with")


def token_spans(offsets: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(start, n_chars) per token from a fast tokenizer's offsets: token i covers the characters
    from the end of token i-1 (0 for the first) to its own end, so the spans tile the text with no
    gap whether or not the tokenizer trims whitespace from its offsets (the study's BPE does,
    SmolLM2's does not); bytes of one character split over tokens give the later ones 0 characters."""
    ends = np.maximum.accumulate(np.asarray([e for _, e in offsets], dtype=np.int64)) if len(offsets) else np.zeros(0)
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    return starts, (ends - starts).astype(np.int64)


def select_passages(texts: Sequence[str], max_chars: int, n_passages: int | None = None) -> list[int]:
    """Indices of the first ``n_passages`` texts with at least ``max_chars`` characters, in order
    (all of them when ``n_passages`` is None): the same passages for every model."""
    if max_chars < 1:
        raise ValueError(f"max_chars={max_chars}; it must be >= 1 (characters measured per passage)")
    chosen = [i for i, t in enumerate(texts) if len(t) >= max_chars]
    chosen = chosen if n_passages is None else chosen[:n_passages]
    if not chosen:
        raise ValueError(f"no passage has {max_chars} characters; use a smaller max_chars")
    return chosen


def _windows(model: models.Transformer, texts: Sequence[str], index: list[int], max_chars: int, start_id: int):
    """Per passage: (window ids, starts, n_chars) with the start token first and the passage's
    tokens that start before ``max_chars``, cut to the model's context."""
    hf = _hf(model.tokenizer)
    enc = hf([texts[i] for i in index], add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for ids, offsets in zip(enc["input_ids"], enc["offset_mapping"]):
        starts, n_chars = token_spans(offsets)
        k = min(int(np.searchsorted(starts, max_chars)), model.cfg.n_ctx - 1)
        out.append((torch.tensor([start_id] + list(ids[:k])), starts[:k], n_chars[:k]))
    return out


@torch.no_grad()
def char_offset_losses(
    model: models.Transformer,
    texts: Sequence[str],
    max_chars: int,
    n_passages: int | None = None,
    batch_size: int = 8,
    start_token: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """One row per predicted token of the first ``n_passages`` texts with >= ``max_chars``
    characters: ``passage`` (index in ``texts``), ``token`` (its index in the passage), ``char_start``,
    ``n_chars`` (``token_spans``), ``loss`` (nats). Each window is ``start_token`` (default
    ``start_token_id(model.tokenizer)``) then the passage's tokens that start before ``max_chars``,
    at most ``model.cfg.n_ctx`` in all (a study model's 128 may end before ``max_chars``)."""
    if model.tokenizer is None:
        raise ValueError("the model has no tokenizer; char_offset_losses needs one with character offsets")
    model.eval()
    index = select_passages(texts, max_chars, n_passages)
    start_id = start_token_id(model.tokenizer) if start_token is None else int(start_token)
    windows = _windows(model, texts, index, max_chars, start_id)
    pad = model.tokenizer.pad_token_id if isinstance(model.tokenizer, models.Tokenizer) else 0
    parts = []
    for s in tqdm(range(0, len(windows), batch_size), desc="char offset losses", disable=not progress):
        chunk = windows[s : s + batch_size]
        n = max(len(w[0]) for w in chunk)
        ids = torch.full((len(chunk), n), pad, dtype=torch.long)
        for b, (w, _, _) in enumerate(chunk):
            ids[b, : len(w)] = w
        logits = model(ids, return_type="logits").float()
        # the [tokens, vocab] layout: over a [batch, vocab, tokens] view the float32 log-sum-exp of
        # SmolLM2's 49,152 logits was measured 2e-4 nats off a float64 reference (this one: 1.5e-5)
        losses = torch.nn.functional.cross_entropy(
            logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten(), reduction="none"
        ).view(len(chunk), -1)
        for b, (w, starts, n_chars) in enumerate(chunk):
            k = len(w) - 1
            parts.append(
                pd.DataFrame(
                    {
                        "passage": index[s + b],
                        "token": np.arange(k),
                        "char_start": starts,
                        "n_chars": n_chars,
                        "loss": losses[b, :k].double().numpy(),
                    }
                )
            )
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# Curves, gains and their passage-bootstrap intervals


def _check_unit(unit: str) -> None:
    if unit not in UNITS:
        raise ValueError(f"unit={unit!r}; use 'char' (nats per character) or 'token' (nats per token)")


def _cluster_sums(table: pd.DataFrame, groups: pd.Series, cluster: str) -> tuple[np.ndarray, ...]:
    """[n_clusters, n_groups] sums of loss, tokens and characters; the group labels in order."""
    missing = {cluster, "loss", "n_chars"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks columns {sorted(missing)}; expected char_offset_losses' columns")
    t = table.assign(_group=groups.to_numpy(), _one=1.0)
    t = t[t["_group"].notna()]
    sums = t.groupby([cluster, "_group"])[["loss", "_one", "n_chars"]].sum().unstack("_group", fill_value=0.0)
    labels = list(sums["loss"].columns)
    return sums["loss"].to_numpy(), sums["_one"].to_numpy(), sums["n_chars"].to_numpy(dtype=float), labels


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def passage_bootstrap(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """[n_boot, n_clusters] counts: how often each cluster (passage) is drawn in each resample of
    ``n_clusters`` draws with replacement (``text_stats.resample_counts``, seeded). A statistic that
    is a ratio of per-passage sums is then one matrix product per sum, every bin and the gain on the
    same resamples."""
    if n_clusters < 2 or n_boot < 1:
        raise ValueError(f"a bootstrap needs >= 2 passages and >= 1 resample (got {n_clusters}, {n_boot})")
    return T.resample_counts(n_clusters, n_boot, np.random.default_rng(seed)).astype(float)


def binned_curve(
    table: pd.DataFrame,
    bin_chars: int = 32,
    unit: str = "char",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    cluster: str = "passage",
) -> pd.DataFrame:
    """Loss against character offset: one row per bin of ``bin_chars`` characters (by the
    character where each token starts): ``bin_start``, ``bin_mid``, ``loss`` (nats per character,
    ``unit="char"``, or per token, ``"token"``), ``low``/``high`` (percentile bootstrap over
    ``cluster``, the passages), ``tokens``, ``passages`` (that have a token in the bin)."""
    _check_unit(unit)
    if bin_chars < 1:
        raise ValueError(f"bin_chars={bin_chars}; it must be >= 1")
    bins = (table["char_start"] // bin_chars).astype(int)
    loss, tokens, chars, labels = _cluster_sums(table, bins, cluster)
    den = chars if unit == "char" else tokens
    counts = passage_bootstrap(loss.shape[0], n_boot, seed)
    low, high = T.interval(_ratio(counts @ loss, counts @ den), level)
    starts = np.asarray(labels) * bin_chars
    return pd.DataFrame(
        {
            "bin_start": starts,
            "bin_mid": starts + bin_chars / 2,
            "loss": _ratio(loss.sum(0), den.sum(0)),
            "low": low,
            "high": high,
            "tokens": tokens.sum(0).astype(int),
            "passages": (tokens > 0).sum(0),
        }
    )


def gain_tokens(n_ctx: int = STUDY_CTX) -> dict[str, tuple[int, int]]:
    """The study's gain in token positions [lo, hi) of an ``n_ctx`` passage-start window, as
    ``study.measure`` takes them: positions 1-7 (``early``) and the last quarter, 3 n_ctx / 4 to
    n_ctx - 2 (``late``; 96-126 at 128). Position t predicts passage token t (the window is EOS +
    the passage), so these are also the passage tokens' indices."""
    if n_ctx < 16:
        raise ValueError(f"n_ctx={n_ctx}; the gain needs a context of >= 16 tokens (positions 1-7 and a last quarter)")
    return {"early": (1, 8), "late": (3 * n_ctx // 4, n_ctx - 1)}


def token_boundaries(tokenizer, texts: Sequence[str], n_tokens: int = STUDY_CTX - 1) -> np.ndarray:
    """[n_tokens + 1]: entry t is the mean character offset where token t of a passage starts
    (``token_spans``; the last entry: where token n_tokens - 1 ends), over the texts that have
    ``n_tokens`` tokens (the study's 127 passage tokens of a 128-token window). Entry n / n is the
    mean characters per token."""
    enc = _hf(tokenizer)(list(texts), add_special_tokens=False, return_offsets_mapping=True)
    rows = []
    for offsets in enc["offset_mapping"]:
        if len(offsets) >= n_tokens:
            starts, n_chars = token_spans(offsets[:n_tokens])
            rows.append(np.append(starts, starts[-1] + n_chars[-1]))
    if not rows:
        raise ValueError(f"no text has {n_tokens} tokens; use a smaller n_tokens")
    return np.mean(rows, axis=0)


def gain_ranges(boundaries: np.ndarray) -> dict[str, tuple[int, int]]:
    """The character ranges [lo, hi) of the study's gain (``gain_tokens`` of a context of
    len(boundaries) tokens), from the study tokenizer's ``token_boundaries``: where tokens 1-7
    (``early``) and 96-126 (``late``, at 128) of a passage sit on average. Measured, not t x (mean
    characters per token): a passage's first tokens are shorter (its first word has no leading
    space; the study BPE's token 0 averages 1.2 characters, its tokens 3.0): tokens 1-7 sit at
    characters 1-19, not 3-24."""
    b = np.asarray(boundaries, dtype=float)
    if b.ndim != 1 or len(b) < 16 or np.any(np.diff(b) < 0):
        raise ValueError(f"boundaries must be >= 16 non-decreasing offsets (token_boundaries), got {b.shape}")
    return {k: (int(round(b[lo])), int(round(b[hi]))) for k, (lo, hi) in gain_tokens(len(b)).items()}


def char_gain(
    table: pd.DataFrame,
    ranges: Mapping[str, tuple[int, int]],
    unit: str = "char",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    cluster: str = "passage",
    empty: str = "raise",
) -> dict:
    """Loss over the tokens starting in ``ranges["early"]`` minus over ``ranges["late"]`` (character
    offsets [lo, hi)), in ``unit``, with a passage-bootstrap interval: {gain, low, high, early, late}.
    A range no token starts in (a model whose context ends before it) raises a ValueError, or with
    ``empty="nan"`` gives NaNs and a ``note`` saying which range."""
    _check_unit(unit)
    which = pd.Series(np.nan, index=table.index, dtype=object)
    for name in ("early", "late"):
        lo, hi = ranges[name]
        which[(table["char_start"] >= lo) & (table["char_start"] < hi)] = name
    loss, tokens, chars, labels = _cluster_sums(table, which, cluster)
    if labels != ["early", "late"]:
        why = f"no token starts in the {'early' if 'early' not in labels else 'late'} range {dict(ranges)}"
        if empty == "nan":
            return {key: float("nan") for key in ("gain", "low", "high", "early", "late")} | {"note": why}
        raise ValueError(why)
    den = chars if unit == "char" else tokens
    point = _ratio(loss.sum(0), den.sum(0))
    counts = passage_bootstrap(loss.shape[0], n_boot, seed)
    boot = _ratio(counts @ loss, counts @ den)
    low, high = T.interval(boot[:, :1] - boot[:, 1:], level)
    return {
        "gain": float(point[0] - point[1]),
        "low": float(low[0]),
        "high": float(high[0]),
        "early": float(point[0]),
        "late": float(point[1]),
    }


# --------------------------------------------------------------------------------------------------
# The study's own token frame: any model's losses re-aggregated onto the study tokenizer's tokens


def _cumulative_loss(rows: pd.DataFrame, reach: int) -> np.ndarray:
    """[reach + 1]: loss of the characters before offset x, each token's loss spread evenly over
    its characters (a token of 0 characters, a byte of a split character, on the character it
    starts at)."""
    density = np.zeros(reach + 1)
    starts, n, loss = rows.char_start.to_numpy(), rows.n_chars.to_numpy(), rows.loss.to_numpy()
    wide = n > 0
    np.add.at(density, starts[wide], loss[wide] / n[wide])
    np.add.at(density, starts[wide] + n[wide], -loss[wide] / n[wide])
    per_char = np.cumsum(density)[:reach]
    np.add.at(per_char, np.minimum(starts[~wide], reach - 1), loss[~wide])
    return np.concatenate([[0.0], np.cumsum(per_char)])


def study_token_losses(
    table: pd.DataFrame, texts: Sequence[str], study_tokenizer, n_tokens: int = STUDY_CTX - 1
) -> pd.DataFrame:
    """``table`` (``char_offset_losses`` of any model) on the study tokenizer's tokens: one row per
    passage and study token t < ``n_tokens`` (``passage``, ``token``, ``loss``): the loss of that
    token's characters (``token_spans``), each of the model's tokens spread evenly over its
    characters. For a study model's own table this is its own per-token loss exactly; for SmolLM2
    it is the loss SmolLM2 pays for the same text, counted in study tokens. Only passages with
    ``n_tokens`` study tokens, all inside the characters ``table`` covers for them."""
    passages = list(dict.fromkeys(table.passage.tolist()))
    enc = _hf(study_tokenizer)([texts[p] for p in passages], add_special_tokens=False, return_offsets_mapping=True)
    parts = []
    for p, offsets in zip(passages, enc["offset_mapping"]):
        rows = table[table.passage == p]
        reach = int((rows.char_start + rows.n_chars).max())
        if len(offsets) < n_tokens:
            continue
        starts, n_chars = token_spans(offsets[:n_tokens])
        if starts[-1] + n_chars[-1] > reach:
            continue
        cum = _cumulative_loss(rows, reach)
        loss = cum[starts + n_chars] - cum[starts]
        parts.append(pd.DataFrame({"passage": p, "token": np.arange(n_tokens), "loss": loss}))
    if not parts:
        raise ValueError(f"no passage has {n_tokens} study tokens inside the characters measured; raise max_chars")
    return pd.concat(parts, ignore_index=True)


def token_frame(
    table: pd.DataFrame,
    texts: Sequence[str],
    study_tokenizer,
    n_ctx: int = STUDY_CTX,
    bin_tokens: int = 8,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """A model on the study's own axes (``study_token_losses``), JSON-ready: loss by study-token
    position (nats per study token, bins of ``bin_tokens`` positions as the study's figure bins
    them, passage-bootstrap intervals) and the study's gain itself, positions 1-7 minus the last
    quarter (``gain_tokens``), comparable with ``study.measure``'s passage-start numbers; and
    ``gain_first_token_zeroed``, a lower bound that leaves out the model's first token (which may
    cover several study tokens)."""
    tokens = study_token_losses(table, texts, study_tokenizer, n_ctx - 1)
    as_table = tokens.assign(char_start=tokens.token, n_chars=1)  # one "character" per study token
    curve = binned_curve(as_table, bin_tokens, "token", n_boot, seed)
    curve = curve.rename(columns={"bin_start": "position_start", "bin_mid": "position_mid"}).drop(columns="tokens")
    # the model's first token (predicted from the separator alone: SmolLM2's, 3.3 characters and
    # 9.9 nats on average) spills onto study tokens 1-2 when it is longer than the study's token 0;
    # with its loss set to 0 the gain is a lower bound (those characters then cost nothing)
    first = table.assign(loss=table.loss.where(table.token > 0, 0.0))
    spill = study_token_losses(first, texts, study_tokenizer, n_ctx - 1)
    spill = spill.assign(char_start=spill.token, n_chars=1)
    return {
        "passages": int(tokens.passage.nunique()),
        "curve": curve.to_dict(orient="records"),
        "gain": char_gain(as_table, gain_tokens(n_ctx), "token", n_boot, seed),
        "gain_first_token_zeroed": char_gain(spill, gain_tokens(n_ctx), "token", n_boot, seed),
    }


# --------------------------------------------------------------------------------------------------
# The anchor run


def char_frame(
    model: models.Transformer,
    texts: Sequence[str],
    ranges: Mapping[str, tuple[int, int]],
    max_chars: int,
    n_passages: int | None,
    bin_chars: int = 32,
    n_boot: int = 1000,
    seed: int = 0,
    study_tokenizer=None,
    n_ctx: int = STUDY_CTX,
    progress: bool = False,
) -> dict:
    """One model in the character frame, JSON-ready: its curve (both units, intervals), its gain
    over ``ranges`` (both units), the passages, how many of them its windows cover to ``max_chars``;
    with ``study_tokenizer``, also ``token_frame``: the same losses on the study's own axes."""
    table = char_offset_losses(model, texts, max_chars, n_passages, progress=progress)
    char = binned_curve(table, bin_chars, "char", n_boot, seed)
    token = binned_curve(table, bin_chars, "token", n_boot, seed)
    curve = char.rename(columns={"loss": "nats_per_char", "low": "char_low", "high": "char_high"})
    curve = curve.assign(nats_per_token=token["loss"], token_low=token["low"], token_high=token["high"])
    reach = table.groupby("passage").apply(lambda p: (p.char_start + p.n_chars).max(), include_groups=False)
    return {
        "passages": int(table.passage.nunique()),
        "passage_index": [int(i) for i in table.passage.unique()],
        "tokens": int(len(table)),
        "chars_per_token": float(table.n_chars.sum() / len(table)),
        "covered_to_max_chars": float((reach >= max_chars).mean()),
        "start_token": _hf(model.tokenizer).convert_ids_to_tokens(start_token_id(model.tokenizer)),
        "curve": curve.to_dict(orient="records"),
        "gain_per_char": char_gain(table, ranges, "char", n_boot, seed, empty="nan"),
        "gain_per_token": char_gain(table, ranges, "token", n_boot, seed, empty="nan"),
        "token_frame": None
        if study_tokenizer is None
        else token_frame(table, texts, study_tokenizer, n_ctx, n_boot=n_boot, seed=seed),
    }


def smollm2_anchor(
    study_tokenizer,
    n_passages: int = ANCHOR_PASSAGES,
    max_chars: int = ANCHOR_MAX_CHARS,
    bin_chars: int = 16,
    n_ctx: int = STUDY_CTX,
    n_boot: int = 1000,
    seed: int = 0,
    study_models: Mapping[str, models.Transformer] | None = None,
    model: models.Transformer | None = None,
    progress: bool = False,
) -> dict:
    """The anchor run (deterministic, no training): SmolLM2-135M (``models.load("smollm2")``, or
    ``model``) in the character frame on the first ``n_passages`` held-out passages of at least
    ``max_chars`` characters (512: SmolLM2 then covers the 127 study tokens of every one). The
    gain's ranges come from where ``study_tokenizer``'s tokens sit in an ``n_ctx`` window
    (``gain_ranges``; the tokenizer saved with a study checkpoint, or ``study.prepare_data``'s).
    ``study_models`` ({name: model}): the same measurements for study models, on the same passages.
    Measured at 1 thread: ~65 CPU-seconds with the defaults (256 passages of 384 characters,
    SmolLM2 and the five study models). Returns a JSON-ready dict."""
    start = time.perf_counter()
    _, heldout = english_passages()
    bounds = token_boundaries(study_tokenizer, heldout, n_ctx - 1)
    c = float(bounds[-1] / (len(bounds) - 1))
    ranges = gain_ranges(bounds)
    if max_chars < ranges["late"][1]:
        raise ValueError(
            f"max_chars={max_chars} ends before the late range {ranges['late']}; use >= {ranges['late'][1]}"
        )
    smol = model if model is not None else models.load("smollm2")
    kw = dict(ranges=ranges, max_chars=max_chars, n_passages=n_passages, bin_chars=bin_chars, n_boot=n_boot, seed=seed)
    kw |= dict(study_tokenizer=study_tokenizer, n_ctx=n_ctx)
    result = {
        "model": "smollm2",
        "max_chars": max_chars,
        "bin_chars": bin_chars,
        "n_boot": n_boot,
        "seed": seed,
        "n_ctx": n_ctx,
        "gain_tokens": {k: list(v) for k, v in gain_tokens(n_ctx).items()},
        "chars_per_study_token": c,
        "early_chars": list(ranges["early"]),
        "late_chars": list(ranges["late"]),
        "figure_unit": "nats per character (comparable across tokenizers)",
        **char_frame(smol, heldout, progress=progress, **kw),
        "study": {name: char_frame(m, heldout, **kw) for name, m in (study_models or {}).items()},
    }
    result["seconds"] = time.perf_counter() - start
    return result


# --------------------------------------------------------------------------------------------------
# Figures


def plot_anchor(ax, result: Mapping, frame: str = "char", label: str = "SmolLM2-135M", color: str = "black", **line_kw):
    """Draw a model's curve from ``smollm2_anchor`` (or a ``char_frame`` dict, e.g. one of
    ``result["study"]``) with its passage-bootstrap band on ``ax``. ``frame="char"``: nats per
    character against the character offset (bins that fewer than half the passages reach are
    left out: a study model's 128 tokens end before ``max_chars`` in most passages).
    ``frame="token"``: nats per study token against the study-token position (``token_frame``),
    the axes of the study's loss-by-position figure, so the anchor can be drawn on it directly."""
    if frame == "token":
        curve = pd.DataFrame(result["token_frame"]["curve"])
        x, y, low, high = curve.position_mid, curve.loss, curve.low, curve.high
        xlabel, ylabel = "position in the passage (study tokens)", "loss (nats per study token)"
    elif frame == "char":
        curve = pd.DataFrame(result["curve"])
        curve = curve[curve.passages >= curve.passages.max() / 2]
        x, y, low, high = curve.bin_mid, curve.nats_per_char, curve.char_low, curve.char_high
        xlabel, ylabel = "character offset in the passage", "loss (nats per character)"
    else:
        raise ValueError(f"frame={frame!r}; use 'char' (by character offset) or 'token' (the study's token axes)")
    ax.plot(x, y, color=color, label=label, **line_kw)
    ax.fill_between(x, low, high, color=color, alpha=0.15, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return ax


def plot_char_frame(result: Mapping, path) -> object:
    """Two panels, the anchor and each study model of ``result["study"]`` with passage-bootstrap
    bands, the gain's two ranges shaded: nats per character by character offset, and nats per
    study token by study-token position (``token_frame``). Written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from interp.io import atomic_save

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    palette = sns.color_palette("colorblind", len(result.get("study", {})))
    frames = {"char": ("early_chars", "late_chars"), "token": ("early", "late")}
    for ax, (frame, spans) in zip(axes, frames.items()):
        if frame == "token" and not result.get("token_frame"):
            continue
        for (name, r), color in zip(result.get("study", {}).items(), palette):
            plot_anchor(ax, r, frame, label=name, color=color)
        plot_anchor(ax, result, frame, color="black", lw=2)
        for span in spans:
            lo, hi = result[span] if frame == "char" else result["gain_tokens"][span]
            ax.axvspan(lo, hi, color="grey", alpha=0.08)
        ax.legend(fontsize=8)
    axes[0].set_title("by character offset (any tokenizer)")
    axes[1].set_title("on the study's tokens (SmolLM2's loss per study token)")
    fig.suptitle("Held-out loss from the passage start: the study's models and SmolLM2-135M")
    fig.tight_layout()
    atomic_save(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path
