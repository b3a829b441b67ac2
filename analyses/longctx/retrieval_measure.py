"""Retrieval heads (Wu et al. 2024, arXiv 2404.15574) on the needle-in-a-haystack task of
``analyses.longctx.niah``, measured: the model's own retrieval accuracy by length and depth, each
head's retrieval score, and the causal check that masking the top-k retrieval heads breaks retrieval
while masking k random heads of the same layers does not (``run``). ``analyses.longctx.retrieval_report``
draws and writes the result; ``analyses.longctx.retrieval`` is the analysis' face.

How a trial runs (``run_trial``): the prompt but its last token is prefilled on the fused path (no
hook on the scores or the pattern, so SDPA runs and no pattern exists), then greedy decoding with
the ``KVCache`` starts from the prompt's last token, so every generated token comes from a decode
step. Only on the decode steps do ``hook_pattern`` hooks run (one query row per head: cheap); each
keeps the argmax key position of each head, [layer, head], and nothing else (streaming).

Retrieval score (Wu et al.'s, on the steps that copy): a decode step copies when the token it
generates is one of the needle's code tokens; a head hits on that step when its largest attention
lands in the code span on the position whose token is the generated one. A head's score is its hits
over the copying steps, pooled over trials. (Wu et al. divide by the needle's length; the two agree
when the whole code is copied; the step count is the denominator the copies actually offer.)

Masking (``mask_hooks``): a head is masked by zeroing its output, ``hook_z`` [batch, pos, head,
d_head] set to 0 for that head at every position, in the prefill and in every decode step. SmolLM2's
attention has no output bias, so this removes the head's whole write to the residual stream. It
keeps the fused path (``hook_z`` is after the kernel).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from analyses.contract import make_info
from analyses.longctx.niah import Trial

__all__ = [
    "Decoded",
    "RetrievalResult",
    "RetrievalScores",
    "accuracy_table",
    "bootstrap_drop",
    "branch",
    "decode",
    "default_counts",
    "mask_hooks",
    "masking_table",
    "pool_scores",
    "prefill",
    "random_same_layer",
    "run",
    "run_trial",
    "score_step",
    "solved_lengths",
    "top_heads",
]


@dataclass
class Decoded:
    """A trial's greedy continuation: ``generated`` ids, and per step the argmax key position of
    every head ([step, layer, head], or None when patterns were not watched)."""

    trial: Trial
    generated: list[int]
    argmax: np.ndarray | None

    @property
    def exact(self) -> bool:
        """The first ``len(code)`` generated tokens are the code."""
        code = list(self.trial.code)
        return self.generated[: len(code)] == code

    @property
    def token_share(self) -> float:
        """The share of code tokens generated at their place (step i gives code token i)."""
        code = self.trial.code
        return sum(int(g == c) for g, c in zip(self.generated, code)) / len(code)


def score_step(argmax: np.ndarray, generated: int, tokens: Sequence[int], code_positions: range) -> np.ndarray | None:
    """One decode step's hits: None when ``generated`` is not a code token (the step does not copy
    from the needle); otherwise a bool array shaped like ``argmax`` (the heads' argmax key
    positions), True where a head's argmax is a code position holding the generated token."""
    if generated not in {tokens[p] for p in code_positions}:
        return None
    lo, hi = code_positions.start, code_positions.stop
    inside = (argmax >= lo) & (argmax < hi)
    tok = np.asarray(tokens)
    held = tok[np.clip(argmax, 0, len(tok) - 1)]
    return inside & (held == generated)


@dataclass
class RetrievalScores:
    """Streaming retrieval scores: hits [layer, head] and copying steps, added trial by trial."""

    n_layers: int
    n_heads: int
    hits: np.ndarray = field(init=False)
    copy_steps: int = 0
    steps: int = 0

    def __post_init__(self) -> None:
        self.hits = np.zeros((self.n_layers, self.n_heads), dtype=np.int64)

    def add(self, decoded: Decoded) -> None:
        if decoded.argmax is None:
            raise ValueError("this decode watched no patterns; run it with watch=True to score heads")
        t = decoded.trial
        for step, g in enumerate(decoded.generated):
            self.steps += 1
            hit = score_step(decoded.argmax[step], g, t.tokens, t.code_positions)
            if hit is not None:
                self.copy_steps += 1
                self.hits += hit

    @property
    def scores(self) -> np.ndarray:
        """hits / copying steps, [layer, head] (NaN before any step copied)."""
        if self.copy_steps == 0:
            return np.full(self.hits.shape, np.nan)
        return self.hits / self.copy_steps

    def table(self, model_name: str = "") -> pd.DataFrame:
        """One row per head: layer, head, retrieval (the score), hits, copy_steps, rank (1 = highest)."""
        s = self.scores
        rows = [
            {"model": model_name, "layer": layer, "head": h, "retrieval": s[layer, h], "hits": int(self.hits[layer, h])}
            for layer in range(self.n_layers)
            for h in range(self.n_heads)
        ]
        df = pd.DataFrame(rows)
        df["copy_steps"] = self.copy_steps
        order = df.sort_values(["retrieval", "layer", "head"], ascending=[False, True, True], kind="stable").index
        df.loc[order, "rank"] = np.arange(1, len(df) + 1)
        df["rank"] = df["rank"].astype(int)
        return df


def mask_hooks(model, heads: Iterable[tuple[int, int]]) -> list[tuple[str, Callable]]:
    """Forward hooks that zero the output (``hook_z``) of each (layer, head) in ``heads``."""
    by_layer: dict[int, list[int]] = {}
    for layer, h in heads:
        if not (0 <= layer < model.cfg.n_layers and 0 <= h < model.cfg.n_heads):
            raise ValueError(
                f"head ({layer}, {h}) does not exist: the model has layers 0..{model.cfg.n_layers - 1}, "
                f"heads 0..{model.cfg.n_heads - 1}"
            )
        by_layer.setdefault(layer, []).append(h)

    def zero(idx: list[int]) -> Callable:
        def hook(z: torch.Tensor, hook) -> torch.Tensor:
            z = z.clone()
            z[:, :, idx] = 0.0
            return z

        return hook

    return [(f"blocks.{layer}.attn.hook_z", zero(sorted(hs))) for layer, hs in sorted(by_layer.items())]


def prefill(model, trial: Trial, masked: Iterable[tuple[int, int]] = ()):
    """The ``KVCache`` of ``trial``'s prompt but its last token, on the fused path (no pattern hook),
    with the ``masked`` heads' outputs zeroed (``mask_hooks``)."""
    from models.tl_api import KVCache

    tokens = torch.tensor([trial.tokens[:-1]], device=model.W_E.device)
    cache = KVCache(model.cfg.n_layers)
    if tokens.shape[1]:
        with torch.inference_mode(), model.hooks(fwd_hooks=mask_hooks(model, masked)):
            model(tokens, past_kv_cache=cache, return_type=None)
    return cache


def branch(cache):
    """A copy of a ``KVCache`` that decoding may extend without changing ``cache`` (``KVCache.branch``:
    the tensors are shared until the copy's first update)."""
    return cache.branch()


def decode(
    model, trial: Trial, cache, n_new: int | None = None, watch: bool = False, masked: Iterable[tuple[int, int]] = ()
) -> Decoded:
    """Greedy decoding of ``n_new`` tokens (default: the code's length) from ``trial``'s last
    prompt token on, with ``cache`` holding the rest of the prompt (``prefill``; it is extended in
    place: pass ``branch(cache)`` to keep it). ``watch``: ``hook_pattern`` hooks on the decode steps
    keep each head's argmax key position. ``masked``: heads whose output is zeroed on these steps."""
    cfg = model.cfg
    n_new = len(trial.code) if n_new is None else n_new
    if n_new < 1:
        raise ValueError(f"n_new={n_new}: decode at least one token")
    if cache.length != len(trial.tokens) - 1:
        raise ValueError(
            f"the cache holds {cache.length} tokens; the trial's prompt but its last token has {len(trial.tokens) - 1}"
        )
    step_argmax = np.zeros((cfg.n_layers, cfg.n_heads), dtype=np.int64)
    argmax: list[np.ndarray] = []

    def keep(layer: int) -> Callable:
        def hook(pattern: torch.Tensor, hook) -> None:
            # pattern [batch=1, head, query_pos=1, key_pos]; the first maximum, as torch.argmax gives it
            step_argmax[layer] = pattern[0, :, -1].argmax(dim=-1).cpu().numpy()

        return hook

    hooks = mask_hooks(model, masked)
    if watch:
        hooks += [(f"blocks.{layer}.attn.hook_pattern", keep(layer)) for layer in range(cfg.n_layers)]
    current = torch.tensor([trial.tokens[-1:]], device=model.W_E.device)
    generated: list[int] = []
    with torch.inference_mode(), model.hooks(fwd_hooks=hooks):
        for _ in range(n_new):
            logits = model(current, past_kv_cache=cache, return_type="logits")
            nxt = int(logits[0, -1].argmax())
            generated.append(nxt)
            if watch:
                argmax.append(step_argmax.copy())
            current = torch.tensor([[nxt]], device=current.device)
    return Decoded(trial, generated, np.stack(argmax) if watch else None)


def run_trial(
    model, trial: Trial, n_new: int | None = None, watch: bool = False, masked: Iterable[tuple[int, int]] = ()
) -> Decoded:
    """``prefill`` then ``decode``: greedy decoding after ``trial``'s prompt, the prompt but its last
    token on the fused path, every generated token from a decode step with the KV cache; ``masked``
    heads zeroed in both (the heads removed from the whole run)."""
    masked = list(masked)
    return decode(model, trial, prefill(model, trial, masked), n_new, watch, masked)


def top_heads(table: pd.DataFrame, k: int) -> list[tuple[int, int]]:
    """The ``k`` heads of highest retrieval score (ties: lower layer, then lower head)."""
    if not 1 <= k <= len(table):
        raise ValueError(f"k={k}: choose 1..{len(table)} heads")
    top = table.sort_values(["retrieval", "layer", "head"], ascending=[False, True, True], kind="stable").head(k)
    return [(int(r.layer), int(r.head)) for r in top.itertuples()]


def check_ranking(ranking: pd.DataFrame, k: int, n_layers: int | None = None, n_heads: int | None = None) -> None:
    """A ranking (``read_retrieval``'s table) whose top ``k`` heads can be masked: at least ``k``
    scored heads (an unscored head has no rank), and, given the model's shape, every head inside it.
    ``interp retrieval --ranking`` checks the first before loading the model, ``run`` both before
    its first haystack."""
    scored = int(ranking["retrieval"].notna().sum())
    if scored < k:
        raise ValueError(f"the ranking scores {scored} heads, fewer than the k={k} to mask; give a smaller k")
    if n_layers is not None and n_heads is not None:
        bad = ranking[(ranking["layer"] >= n_layers) | (ranking["head"] >= n_heads)]
        if len(bad):
            r = bad.iloc[0]
            raise ValueError(
                f"the ranking names layer {int(r['layer'])}, head {int(r['head'])} ({len(bad)} heads outside), but the "
                f"model has {n_layers} layers of {n_heads} heads; give the retrieval.csv of a run on this model"
            )


def random_same_layer(
    heads: Sequence[tuple[int, int]], n_heads: int, rng: random.Random, exclude: Iterable[tuple[int, int]] = ()
) -> list[tuple[int, int]]:
    """As many random heads as ``heads``, layer for layer (a head of layer l for each chosen head of
    layer l), none of them in ``exclude`` (the top heads) and none twice."""
    excluded = set(exclude)
    out: list[tuple[int, int]] = []
    for layer, _ in heads:
        free = [(layer, h) for h in range(n_heads) if (layer, h) not in excluded and (layer, h) not in out]
        if not free:
            raise ValueError(f"layer {layer} has no head left to draw outside the excluded ones")
        out.append(rng.choice(free))
    return out


def bootstrap_drop(
    base: np.ndarray, masked: np.ndarray, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """The mean drop ``base - masked`` over trials (paired: the same trials with and without the
    mask; each trial its own haystack) and its 95% percentile bootstrap interval, resampling
    trials (``interp.stats.bootstrap_ci``): (drop, low, high)."""
    from interp.stats import bootstrap_ci

    base, masked = np.asarray(base, dtype=float), np.asarray(masked, dtype=float)
    if base.shape != masked.shape or base.ndim != 1 or len(base) == 0:
        raise ValueError(f"base and masked must be paired 1-d arrays; got shapes {base.shape} and {masked.shape}")
    diff = base - masked
    lo, hi = bootstrap_ci(diff, n_boot=n_boot, seed=seed)
    return float(diff.mean()), lo, hi


# --------------------------------------------------------------------------------------------------
# The study: accuracy by length and depth, the scores, the masking check


@dataclass
class RetrievalResult:
    """What ``run`` measured: per-trial rows (``trials``), the accuracy table by length and depth
    (``accuracy``), the per-head scores pooled over the lengths the model solves (``heads``: model,
    layer, head first, the contract's per-head table; ``scores_by_length`` per length), the masking
    table (``masking``, with per-trial rows in ``mask_trials``) and ``info``: the run's record
    (settings, chosen lengths, the heads masked, times; retrieval.json) and the contract's keys
    (``analyses.contract.make_info``: ``analysis`` and ``params``, beside ``model`` and ``seed``)."""

    trials: pd.DataFrame
    accuracy: pd.DataFrame
    heads: pd.DataFrame
    scores_by_length: dict[int, RetrievalScores]
    masking: pd.DataFrame
    mask_trials: pd.DataFrame
    info: dict


def default_counts(lengths: Sequence[int]) -> list[int]:
    """Haystacks per length when none are given: fewer where a prefill costs more (4 up to 1,024
    tokens, 3 up to 2,048, 2 beyond; a 4,096-token prefill is ~11 s on 2 idle cores)."""
    return [4 if n <= 1024 else 3 if n <= 2048 else 2 for n in lengths]


def accuracy_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Exact-match accuracy (with its Wilson 95% interval) and mean token share by length and depth,
    plus an ``all`` row per length (depth NaN)."""
    from interp.stats import wilson_interval

    rows = []
    for (length, depth), g in [*trials.groupby(["length", "depth"]), *((k, g) for k, g in _all_depths(trials))]:
        k, n = int(g["exact"].sum()), len(g)
        lo, hi = wilson_interval(k, n)
        rows.append(
            {
                "length": int(length),
                "depth": depth,
                "n": n,
                "exact": k / n,
                "exact_low": float(lo),
                "exact_high": float(hi),
                "token_share": float(g["token_share"].mean()),
            }
        )
    return pd.DataFrame(rows).sort_values(["length", "depth"], na_position="last").reset_index(drop=True)


def _all_depths(trials: pd.DataFrame):
    for length, g in trials.groupby("length"):
        yield (length, float("nan")), g


def solved_lengths(accuracy: pd.DataFrame, threshold: float = 0.5) -> list[int]:
    """The lengths whose exact-match accuracy over all depths is at least ``threshold``."""
    overall = accuracy[accuracy["depth"].isna()]
    return [int(r.length) for r in overall.itertuples() if r.exact >= threshold]


# the columns of trials.csv (``_trial_row``), of mask_trials.csv (those and the masking run's own) and
# of masking.csv (``masking_table``): what an empty table (no masking run) still writes as its header
TRIAL_COLUMNS = ["length", "depth", "window", "insert_at", "prompt_tokens", "code", "generated", "exact", "token_share"]
MASK_TRIAL_COLUMNS = [*TRIAL_COLUMNS, "trial", "condition", "draw"]
MASKING_COLUMNS = ["length", "condition", "draw", "k", "n"] + [
    f"{metric}{part}" for metric in ("exact", "token_share") for part in ("", "_drop", "_drop_low", "_drop_high")
]


def _trial_row(d: Decoded, tokenizer, **extra) -> dict:
    hf = getattr(tokenizer, "hf", tokenizer)
    t = d.trial
    return {
        "length": t.length,
        "depth": t.depth,
        "window": t.window,
        "insert_at": t.insert_at,
        "prompt_tokens": len(t.tokens),
        "code": hf.decode(list(t.code)),
        "generated": hf.decode(d.generated),
        "exact": d.exact,
        "token_share": d.token_share,
        **extra,
    }


def run(
    model,
    lengths: Sequence[int] = (512, 1024, 2048, 4096),
    n: int | Sequence[int] | None = None,
    mask_lengths: Sequence[int] = (2048,),
    mask_n: int = 20,
    k: int = 10,
    draws: int = 3,
    scope: str = "decode",
    threshold: float = 0.5,
    seed: int = 0,
    progress: bool = True,
    ranking: pd.DataFrame | None = None,
) -> RetrievalResult:
    """The whole measurement on one causal LM with a chat-capable tokenizer.

    1. Accuracy: ``n`` haystacks per length (or one count per length; None: ``default_counts``),
       each at every depth of ``niah.DEPTHS``, decoded with pattern watchers (the scores come
       from the same decodes), one prefill per trial.
    2. Scores: pooled over the lengths whose accuracy is >= ``threshold`` (none: no masking).
    3. Masking, at each of ``mask_lengths`` that is solved: ``mask_n`` other haystacks of that
       length (windows after the first ``n``: no passage shared with the scoring ones), haystack i
       at depth i mod 5; conditions: none, the top-``k`` heads, ``draws`` draws of k random heads
       of the same layers (none of them a top-k head). ``scope``: "decode" masks the heads on the
       decode steps only, so one prefill serves every condition (the KV cache is branched);
       "all" masks them in the prefill too (a prefill per condition). ``ranking``: a per-head table
       with ``layer, head, retrieval`` (an earlier run's retrieval.csv) whose top-k are masked
       instead of this run's (so a second run can mask the same heads another way)."""
    import time

    from tqdm.auto import tqdm

    from analyses.longctx.niah import DEPTHS
    from analyses.longctx.niah import trials as make_trials

    if scope not in ("decode", "all"):
        raise ValueError(f"scope={scope!r}; use 'decode' (mask on the decode steps) or 'all' (prefill too)")
    if not lengths:
        raise ValueError("lengths is empty: give at least one haystack length")
    cfg, tok = model.cfg, model.tokenizer
    if tok is None:
        raise ValueError("the model has no tokenizer; the haystack task needs one")
    room = max([*lengths, *mask_lengths]) + 200
    if room > cfg.n_ctx:
        raise ValueError(f"a haystack of {room - 200} tokens and its prompt do not fit the model's {cfg.n_ctx} tokens")
    counts = default_counts(lengths) if n is None else [n] * len(lengths) if isinstance(n, int) else list(n)
    if len(counts) != len(lengths) or min(counts) < 1:
        raise ValueError(f"n={n}: give one haystack count >= 1, or one per length ({len(lengths)})")
    if ranking is not None:  # before the first haystack, not after the accuracy run
        check_ranking(ranking, k, cfg.n_layers, cfg.n_heads)
    name = getattr(cfg, "name", "")
    info: dict = {
        "model": name,
        "lengths": list(lengths),
        "n_haystacks": counts,
        "depths": list(DEPTHS),
        "mask_lengths": list(mask_lengths),
        "mask_n": mask_n,
        "k": k,
        "draws": draws,
        "scope": scope,
        "threshold": threshold,
        "seed": seed,
        "masking": "zero-ablation of the head's output (hook_z = 0)",
        "threads": torch.get_num_threads(),
    }
    all_trials = {length: make_trials(tok, length, c, seed=seed) for length, c in zip(lengths, counts)}
    total = sum(map(len, all_trials.values()))
    rows, scores = [], {length: RetrievalScores(cfg.n_layers, cfg.n_heads) for length in lengths}
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with tqdm(total=total, desc="retrieval: accuracy and scores", disable=not progress) as bar:
        for length, ts in all_trials.items():
            for t in ts:
                d = run_trial(model, t, watch=True)
                scores[length].add(d)
                rows.append(_trial_row(d, tok))
                bar.update()
    info["accuracy_cpu_s"] = time.process_time() - cpu0
    info["accuracy_wall_s"] = time.perf_counter() - wall0
    trials_df = pd.DataFrame(rows)
    accuracy = accuracy_table(trials_df)
    solved = solved_lengths(accuracy, threshold)
    info["solved_lengths"] = solved
    pooled = pool_scores(scores, solved)
    heads = pooled.table(name)
    for length in lengths:  # each length's own score, beside the pooled one
        s = scores[length].scores
        heads[f"retrieval_{length}"] = [s[r.layer, r.head] for r in heads.itertuples()]
    masking, mask_trials = pd.DataFrame(columns=MASKING_COLUMNS), pd.DataFrame(columns=MASK_TRIAL_COLUMNS)
    to_mask = [length for length in mask_lengths if length in solved]
    info["masked_lengths"] = to_mask
    info["ranking"] = "given" if ranking is not None else "this run"
    rank_by = ranking if ranking is not None else heads
    if to_mask and (pooled.copy_steps or ranking is not None):
        skip = dict(zip(lengths, counts))
        masking, mask_trials = _masking(model, rank_by, to_mask, mask_n, skip, k, draws, scope, seed, progress, info)
    params = dict(lengths=list(lengths), n=n if n is None or isinstance(n, int) else list(n))
    params.update(mask_lengths=list(mask_lengths), mask_n=mask_n, k=k, draws=draws, scope=scope, threshold=threshold)
    contract = make_info("longctx.retrieval", name, seed, **params, ranking=info["ranking"])
    info.update(analysis=contract["analysis"], params=contract["params"])  # last: retrieval.json leaves them out
    return RetrievalResult(trials_df, accuracy, heads, scores, masking, mask_trials, info)


def pool_scores(scores: dict[int, RetrievalScores], lengths: Sequence[int]) -> RetrievalScores:
    """The scores of ``lengths`` (keys of ``scores``) pooled: their hits, copying steps and steps added."""
    first = next(iter(scores.values()))
    pooled = RetrievalScores(first.n_layers, first.n_heads)
    for length in lengths:
        pooled.hits += scores[length].hits
        pooled.copy_steps += scores[length].copy_steps
        pooled.steps += scores[length].steps
    return pooled


def _masking(model, heads, lengths, mask_n, skip, k, draws, scope, seed, progress, info) -> tuple:
    import time

    from tqdm.auto import tqdm

    from analyses.longctx.niah import trials as make_trials

    cfg, tok = model.cfg, model.tokenizer
    top = top_heads(heads, k)
    rng = random.Random(f"retrieval-random-{seed}")
    randoms = [random_same_layer(top, cfg.n_heads, rng, exclude=top) for _ in range(draws)]
    conditions = [("none", 0, []), ("top", 0, top)] + [("random", i + 1, r) for i, r in enumerate(randoms)]
    info["top_heads"] = [list(h) for h in top]
    info["random_heads"] = [[list(h) for h in r] for r in randoms]
    # haystacks after the scoring ones of the same length (or from 0 where that length was not scored)
    sets = {
        length: make_trials(tok, length, mask_n, seed=seed, skip=skip.get(length, 0), per_depth=False)
        for length in lengths
    }
    rows = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    total = sum(map(len, sets.values())) * len(conditions)
    with tqdm(total=total, desc=f"retrieval: masking ({scope})", disable=not progress) as bar:
        for ts in sets.values():
            for i, t in enumerate(ts):
                shared = prefill(model, t) if scope == "decode" else None
                for cond, draw, masked in conditions:
                    if shared is not None:
                        d = decode(model, t, branch(shared), masked=masked)
                    else:
                        d = run_trial(model, t, masked=masked)
                    rows.append(_trial_row(d, tok, trial=i, condition=cond, draw=draw))
                    bar.update()
    info["masking_cpu_s"] = time.process_time() - cpu0
    info["masking_wall_s"] = time.perf_counter() - wall0
    per = pd.DataFrame(rows)
    return masking_table(per, k, seed), per


def masking_table(per: pd.DataFrame, k: int, seed: int = 0) -> pd.DataFrame:
    """Per length and condition: exact-match accuracy and token share, and their drop from the
    unmasked run with a bootstrap 95% interval over haystacks (paired). ``random`` rows are each
    draw; ``random (mean)`` averages the draws per haystack first."""
    out = []
    for length, g in per.groupby("length"):
        base = g[g["condition"] == "none"].set_index("trial").sort_index()
        groups = [("none", 0), ("top", 0)] + [
            ("random", int(d)) for d in sorted(g.loc[g["condition"] == "random", "draw"].unique())
        ]
        for cond, draw in [*groups, ("random (mean)", -1)]:
            if cond == "random (mean)":
                sub = g[g["condition"] == "random"].groupby("trial")[["exact", "token_share"]].mean().sort_index()
                if sub.empty:
                    continue
            else:
                sub = g[(g["condition"] == cond) & (g["draw"] == draw)].set_index("trial").sort_index()
            row = {
                "length": int(length),
                "condition": cond,
                "draw": draw if draw >= 0 else "",
                "k": 0 if cond == "none" else k,
            }
            row["n"] = len(sub)
            for metric in ("exact", "token_share"):
                b, m = base[metric].astype(float).to_numpy(), sub[metric].astype(float).to_numpy()
                drop, lo, hi = bootstrap_drop(b, m, seed=seed)
                row[metric] = float(m.mean())
                row[f"{metric}_drop"], row[f"{metric}_drop_low"], row[f"{metric}_drop_high"] = drop, lo, hi
            out.append(row)
    return pd.DataFrame(out)
