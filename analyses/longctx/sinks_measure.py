"""The attention sink and the previous-token / induction roles by context length (issue 26, part 2):
the measurement (``run``: the pattern reducer, the inputs, the forwards) and its tables (per head, per
layer, by length, persistence across lengths, by query position). ``analyses.longctx.sinks_report``
draws and writes them; ``analyses.longctx.sinks`` is the analysis' face.

Definitions are the head probe's (``analyses.heads.scoring``), not new ones:

* ``attention_sink``: the mean attention a head puts on the sink position (position 0, the
  ``<|endoftext|>`` that ``heads.adapt`` prepends to SmolLM2's text), over the query rows other
  than the sink's own (``token_plan``'s ``set_rows``), its baseline a uniform head on the same keys.
* ``previous_token``: attention on the previous token (TransformerLens's "mul" score).
* ``induction``: TransformerLens's "mul" score against the detection pattern of the sequence's own
  tokens (``duplicate_detection``): attention on the token after an earlier copy of the query's.

A head carries a role at a length when its mean score over windows minus the uniform baseline
exceeds the probe's minimum effect for mass roles (``probe_items``' ``mass_margin``, 0.1): the
effect size the probe's labels test for. (The probe's labels add a test, Holm and a random-weights
null on hundreds of short items; with 3-8 windows per length a count by effect size is what can be
measured, with an interval over windows.)

Inputs per length n (exactly n tokens each, the sink included): ``text``, the sink then n - 1
tokens of real English (``longctx.text.long_windows``: shuffled BoolQ passages); ``repeated``, the
sink, the window's first n // 2 text tokens, then the same tokens again, cut to n (the second half
repeats the first). Induction is scored on ``repeated``; the sink and previous-token scores on
``text``. Real text rather than the probe's random repeated tokens (``random_repeated_tokens``):
the question is how heads behave at long context on the text a model reads, and random tokens at
4,096 positions are far from it (the sink is known to behave differently on them); on real text the
first half also holds natural repeats ("the", names), which the detection pattern counts as
TransformerLens's does.

Memory: nothing is cached. ``PatternReducer`` reduces each layer's pattern to per-head sums inside
its ``hook_pattern`` hook, and also accepts a block of query rows q0..q1 (``update(layer, rows,
q0)``), so a blockwise eager path can feed it rows as it computes them; block-fed sums equal the
whole-pattern ones (tested).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from analyses.contract import head_table as keyed_head_table
from analyses.contract import make_info
from analyses.heads.adapter import adapt
from analyses.heads.probe import probe_items
from analyses.heads.roles import SET_ROLES
from analyses.heads.scoring import TokenPlan, duplicate_detection, token_plan, token_role_scores
from analyses.longctx.text import long_windows

__all__ = [
    "LENGTHS",
    "N_WINDOWS",
    "ROLES",
    "LEARNED_SINK",
    "ROLE_INPUT",
    "has_learned_sinks",
    "INPUTS",
    "MASS_MARGIN",
    "GU_EPSILON",
    "POSITION_BINS",
    "PatternReducer",
    "sequence_plan",
    "repeated_window",
    "SinksResult",
    "run",
    "check_arguments",
    "combine",
    "main_rows",
    "head_table",
    "layer_table",
    "length_summary",
    "persistence",
    "position_table",
]

LENGTHS = (64, 512, 2048, 4096)
# few windows at the long lengths: an eager SmolLM2 forward at 4,096 tokens costs ~45 s on 2 cores
N_WINDOWS = (8, 8, 4, 3)
ROLES = ("attention_sink", "previous_token", "induction")
# a model with learned sink logits (gpt-oss, Config.attn_sinks) also gets each head's learned sink share:
# the part of each softmax row its sink logit takes, 1 - the pattern's row sum (a uniform head: 0)
LEARNED_SINK = "learned_sink"
ROLE_INPUT = {"attention_sink": "text", "previous_token": "text", "induction": "repeated", LEARNED_SINK: "text"}
INPUTS = ("text", "repeated")
# the probe's minimum attention mass above a uniform head for a mass-role label: read from its
# signature, so there is one number
MASS_MARGIN = float(inspect.signature(probe_items).parameters["mass_margin"].default)
# Gu et al. (2024, "When attention sink emerges"): a head has a sink where its mean attention on the
# first token exceeds this threshold; ``length_summary``'s gu_ratio is the share of such heads
GU_EPSILON = 0.3
# query-position bins for the sink profile: [1, 2), [2, 4), ..., [2048, 4096)
POSITION_BINS = tuple(2**i for i in range(13))
_SINK = SET_ROLES.index("attention_sink")


def sequence_plan(ids: Tensor) -> TokenPlan:
    """The probe's ``TokenPlan`` for causal sequences [batch, pos] of real tokens (no padding) whose
    position 0 is the sink: the attention_sink set is position 0 (as the probe's ``_token_sets``
    makes it), the other sets are empty, and the duplicate/induction detection patterns come from
    the tokens themselves."""
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"ids must be [batch, pos] with at least 2 positions, got shape {tuple(ids.shape)}")
    b, t = ids.shape
    mask = torch.ones(b, t, dtype=torch.bool)
    sets = torch.zeros(b, t, len(SET_ROLES), dtype=torch.bool)
    sets[:, 0, _SINK] = True
    return token_plan(mask, causal=True, sets=sets, detect=duplicate_detection(ids))


class PatternReducer:
    """Per-head scores of ``ROLES`` for one batch of sequences, reduced from ``hook_pattern`` as it
    comes, layer by layer: no pattern is kept.

    ``update(layer, rows, q0)``: ``rows`` [batch, head, q1 - q0, key_pos] are the pattern's query
    rows q0..q1 (every key); a whole pattern is q0 = 0 and all rows, and is scored by the probe's
    own ``token_role_scores``. Blocks are scored row by row with the same plan weights; each
    layer must receive every row exactly once (``scores`` checks). ``hook(layer)`` is the
    ``run_with_hooks`` hook for a whole pattern. Sums are kept in float64.

    Also kept: each head's sink mass per query row (``sink_rows``, [batch, layer, head, pos]), for
    the profile by query position."""

    def __init__(self, plan: TokenPlan, n_layers: int, n_heads: int, roles: Sequence[str] = ROLES):
        unknown = [r for r in roles if r not in (*ROLES, LEARNED_SINK)]
        if unknown:
            raise ValueError(f"PatternReducer scores {[*ROLES, LEARNED_SINK]}; got {unknown}")
        self.plan, self.roles = plan, tuple(roles)
        self.n_layers, self.n_heads = n_layers, n_heads
        b, t = plan.mask.shape
        self.n_pos = t
        self.sums = {r: torch.zeros(b, n_layers, n_heads, dtype=torch.float64) for r in self.roles}
        self.covered = torch.zeros(n_layers, t, dtype=torch.int32)
        self.sink_rows = torch.zeros(b, n_layers, n_heads, t, dtype=torch.float32)
        self._sink_keys = plan.sets[..., _SINK]  # [batch, key_pos] float
        self._n_real = plan.mask.float().sum(-1)  # [batch]

    def hook(self, layer: int):
        def fn(pattern, hook=None):
            rows = getattr(hook, "query_rows", None)  # a block of rows under models.blockwise.pattern_blocks
            self.update(layer, pattern.detach(), 0 if rows is None else rows.start)

        return fn

    def update(self, layer: int, rows: Tensor, q0: int = 0) -> None:
        b, h, nq, nk = rows.shape
        if not 0 <= layer < self.n_layers or h != self.n_heads or nk != self.n_pos or not 0 <= q0 <= nk - nq:
            raise ValueError(
                f"pattern rows of shape {tuple(rows.shape)} at q0={q0}, layer {layer} do not fit this reducer "
                f"({self.n_layers} layers, {self.n_heads} heads, {self.n_pos} positions)"
            )
        q1 = q0 + nq
        p = rows.float()
        sink = self._sink_mass(p)  # [b, h, q]: each row's weight on the sink
        self.sink_rows[:, layer, :, q0:q1] = sink
        probe_roles = tuple(r for r in self.roles if r != LEARNED_SINK)
        if q0 == 0 and nq == nk:  # the whole pattern: the probe's own scorer
            got = token_role_scores(p, self.plan, probe_roles)
            for r in probe_roles:
                self.sums[r][:, layer] += got[r].double()
        else:
            for r, v in self._block_scores(p, sink, q0, q1).items():
                self.sums[r][:, layer] += v.double()
        if LEARNED_SINK in self.roles:  # the rows the sink share is scored on, weighted as it is
            learned = (1.0 - p.sum(-1)).clamp(min=0.0)  # [b, h, q]
            w = self.plan.set_rows[:, q0:q1, _SINK]
            self.sums[LEARNED_SINK][:, layer] += (learned * w[:, None]).sum(-1).double()
        self.covered[layer, q0:q1] += 1

    def _block_scores(self, p: Tensor, sink: Tensor, q0: int, q1: int) -> dict:
        """token_role_scores' sums restricted to query rows q0..q1 (they add up over blocks)."""
        plan, out = self.plan, {}
        if "attention_sink" in self.roles:
            w = plan.set_rows[:, q0:q1, _SINK]  # [b, q]: the probe's row weights for the sink set
            out["attention_sink"] = (sink * w[:, None]).sum(-1)
        if "previous_token" in self.roles:
            q = torch.arange(max(q0, 1), q1)  # row q attends to key q - 1; row 0 has none
            diag = p[:, :, q - q0, q - 1]  # [b, h, len(q)]
            out["previous_token"] = (diag * plan.rows[:, q][:, None]).sum(-1)
        if "induction" in self.roles:
            det = plan.detect["induction"][:, q0:q1].float() * plan.mask[:, q0:q1, None]
            out["induction"] = torch.einsum("bhqk,bqk->bh", p, det) / self._n_real[:, None]
        return out

    def _sink_mass(self, p: Tensor) -> Tensor:
        return torch.einsum("bhqk,bk->bhq", p, self._sink_keys.to(p))

    def scores(self) -> dict:
        """role -> [batch, layer, head] float64 scores; raises unless every layer got every row once."""
        bad = (self.covered != 1).any(-1).nonzero().flatten().tolist()
        if bad:
            c = self.covered[bad[0]]
            raise ValueError(
                f"layer {bad[0]} (of {len(bad)} incomplete layers) got rows {int((c == 0).sum())} times none and "
                f"{int((c > 1).sum())} more than once; every query row must be given exactly once"
            )
        return dict(self.sums)

    def baselines(self) -> dict:
        """role -> [batch] the probe's uniform-head baseline on these sequences (a learned sink: 0)."""
        b = self.plan.mask.shape[0]
        return {
            r: torch.zeros(b, dtype=torch.float64) if r == LEARNED_SINK else self.plan.uniform[r].double()
            for r in self.roles
        }


# --------------------------------------------------------------------------------------------------
# Inputs and the measurement


def has_learned_sinks(model) -> bool:
    """Whether ``model`` (the toolkit's transformer) has learned per-head sink logits (gpt-oss)."""
    return bool(getattr(getattr(model, "cfg", None), "attn_sinks", False))


def repeated_window(ids: Sequence[int]) -> list[int]:
    """A window whose second half repeats its first: ``ids[0]`` (the sink), then the text tokens
    ``ids[1 : 1 + n // 2]`` twice, cut to ``n = len(ids)`` tokens."""
    n = len(ids)
    if n < 4:
        raise ValueError(f"a repeated window needs at least 4 tokens (sink, two halves), got {n}")
    half = list(ids[1 : 1 + n // 2])
    return [ids[0], *(half + half)[: n - 1]]


@dataclass
class SinksResult:
    """What ``run`` returns: per-window scores (``windows``: input, length, window, layer, head,
    role, score, baseline), each head's sink mass by query-position bin on the text input
    (``positions``: length, window, layer, head, pos_lo, pos_hi, sink), the cost of the forwards
    (``cost``: input, length, n_windows, batch, cpu_s, wall_s), the run's settings the report cites
    (``attrs``: sink, seed, mass margin, shape) and ``info`` (``analyses.contract.make_info``: the
    analysis, the model, the seed and the parameters). ``heads``: the per-head table of the contract
    (``head_table`` keyed model, layer, head first)."""

    model: str
    windows: pd.DataFrame
    positions: pd.DataFrame
    cost: pd.DataFrame
    attrs: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def heads(self) -> pd.DataFrame:
        """One row per head, role and length (``head_table``), the columns model, layer, head first."""
        return keyed_head_table(head_table(self), self.model)


def _batches(n_tokens: int, n_windows: int) -> list[range]:
    # as many windows per forward as keep one layer's pattern near 300 MB (9 heads, fp32): all of
    # them at 64 and 512 tokens, 2 at 2,048, 1 at 4,096
    per = max(1, min(n_windows, (1 << 23) // (n_tokens * n_tokens)))
    return [range(i, min(i + per, n_windows)) for i in range(0, n_windows, per)]


def run(
    model,
    lengths: Sequence[int] = LENGTHS,
    n_windows: Sequence[int] = N_WINDOWS,
    seed: int = 0,
    progress: bool = True,
    tokenizer=None,
    inputs: Sequence[str] = INPUTS,
    checkpoint=None,
    query_block: int | None = None,
) -> SinksResult:
    """Score every head on ``n_windows[i]`` windows of ``lengths[i]`` tokens (the sink included),
    on the text input and the repeated one (module docstring). Eager attention (the pattern hooks
    need it); each layer's pattern is reduced in its hook. ``tokenizer`` overrides the model's (as
    ``heads.adapt`` takes it). With one seed every length draws its windows from the passages in
    the same shuffled order, so the lengths share text (window 0 of a shorter length is a prefix of
    window 0 of a longer one): they are not independent samples of each other, which the
    comparison between lengths does not need. ``inputs``: a subset of ``INPUTS`` (a long run split
    over processes); ``checkpoint``: called with the ``SinksResult`` so far after every forward (to save
    partial results of a long run); ``query_block``: the eager attention computes the pattern that
    many query rows at a time (``models.blockwise.pattern_blocks``; the toolkit's own transformer
    only), so a layer's pattern costs block x n memory instead of n^2 (the scores are the same sums,
    tested)."""
    from tqdm.auto import tqdm

    lengths, n_windows = [int(x) for x in lengths], [int(x) for x in n_windows]
    check_arguments(lengths, n_windows, inputs, query_block)
    adapter = adapt(model, tokenizer)
    if not adapter.is_causal:
        raise ValueError(f"{adapter.name} is not a causal model; the sink-by-length analysis scores causal LMs")
    if adapter.n_ctx is not None and max(lengths) > adapter.n_ctx:
        raise ValueError(f"length {max(lengths)} exceeds {adapter.name}'s context of {adapter.n_ctx} tokens")
    tok = adapter.tokenizer
    sink_id = _sink_id(tok)
    if sink_id is None:
        raise ValueError(
            f"{adapter.name}'s tokenizer puts no special token first and knows none to prepend "
            "(heads.sink_tokenizer: <|endoftext|> or its BOS); the sink analysis needs one at position 0"
        )
    L, H = adapter.n_layers, adapter.n_heads
    roles = (*ROLES, LEARNED_SINK) if has_learned_sinks(model) else ROLES
    frames, profiles, cost = [], [], []
    bar = tqdm(total=len(inputs) * sum(n_windows), desc="sink windows", unit="window", disable=not progress)
    attrs = dict(sink=adapter.sink, seed=seed, mass_margin=MASS_MARGIN, n_layers=L, n_heads=H, roles=list(roles))
    params = dict(lengths=lengths, n_windows=n_windows, inputs=list(inputs), query_block=query_block)
    info = make_info("longctx.sinks", adapter.name, seed, **params)

    def so_far() -> SinksResult:
        return SinksResult(
            model=adapter.name,
            windows=pd.concat(frames, ignore_index=True),
            positions=pd.concat(profiles, ignore_index=True) if profiles else pd.DataFrame(),
            cost=pd.DataFrame(cost),
            attrs=attrs,
            info=info,
        )

    for n, k in zip(lengths, n_windows):
        text = [[sink_id, *w] for w in long_windows(tok.hf, n - 1, k, seed)]
        seqs = {"text": text, "repeated": [repeated_window(w) for w in text]}
        for name in inputs:
            for rng in _batches(n, k):
                ids = torch.tensor([seqs[name][i] for i in rng], dtype=torch.long)
                red = PatternReducer(sequence_plan(ids), L, H, roles)
                c0, w0 = time.process_time(), time.perf_counter()
                with torch.inference_mode(), _blocks(model, query_block):
                    adapter.view.run_with_hooks(
                        ids.to(adapter.device),
                        fwd_hooks=[(adapter.hook_name(l), red.hook(l)) for l in range(L)],
                        return_type=None,
                    )
                cost.append(
                    dict(
                        input=name,
                        length=n,
                        n_windows=len(rng),
                        batch=len(rng),
                        cpu_s=time.process_time() - c0,
                        wall_s=time.perf_counter() - w0,
                    )
                )
                frames.append(_window_frame(red, name, n, list(rng)))
                if name == "text":
                    profiles.append(_profile_frame(red, n, list(rng)))
                bar.update(len(rng))
                if checkpoint is not None:
                    checkpoint(so_far())
    bar.close()
    return so_far()


def check_arguments(
    lengths: Sequence[int], n_windows: Sequence[int], inputs: Sequence[str] = INPUTS, query_block: int | None = None
) -> None:
    """``run``'s settings checked without a model (``interp sinks`` calls it before loading one):
    one window count (>= 2) per distinct length (>= 4 tokens), inputs from ``INPUTS``, and a
    ``query_block`` of at least one row (or None)."""
    if len(lengths) != len(n_windows) or not lengths:
        raise ValueError(f"give one window count per length: {len(lengths)} lengths, {len(n_windows)} window counts")
    if len(set(lengths)) != len(lengths) or any(n < 4 for n in lengths):
        raise ValueError(f"lengths must be distinct and at least 4 tokens, got {list(lengths)}")
    if not inputs or any(i not in INPUTS for i in inputs):
        raise ValueError(f"inputs must be a non-empty subset of {list(INPUTS)}, got {list(inputs)}")
    if any(k < 2 for k in n_windows):
        raise ValueError(f"need at least 2 windows per length for an interval over windows, got {list(n_windows)}")
    if query_block is not None and (
        isinstance(query_block, bool) or not isinstance(query_block, int) or query_block < 1
    ):
        raise ValueError(f"query_block={query_block!r}: give the query rows per block, a whole number >= 1 (or None)")


def _sink_id(tok) -> int | None:
    """The id of the special token at position 0 of every sequence under ``tok`` (the adapter's
    tokenizer): the token it prepends (SmolLM2's ``<|endoftext|>``), or the special token its own
    post-processor puts first (Gemma's ``<bos>``, BERT's ``[CLS]``); None without one."""
    if getattr(tok, "prepend_bos", False) and tok.bos_token_id is not None:
        return int(tok.bos_token_id)
    hf = tok.hf
    ids = list(hf("x")["input_ids"])
    special = set(hf.all_special_ids) - {hf.unk_token_id}
    return int(ids[0]) if ids and ids[0] in special else None


def _blocks(model, query_block: int | None):
    """``pattern_blocks(model, query_block)``, or nothing when no block size is asked for."""
    if query_block is None:
        return contextlib.nullcontext()
    from models.blockwise import pattern_blocks

    return pattern_blocks(model, query_block)


def combine(runs: Sequence[SinksResult]) -> SinksResult:
    """One run from runs of the same model and seed over other lengths or inputs (``run``'s
    ``inputs`` split a long run over processes); ``info``'s parameters list the runs' lengths and
    inputs together."""
    if len({(r.model, r.attrs.get("seed")) for r in runs}) != 1:
        raise ValueError("combine needs runs of one model and one seed")
    w = pd.concat([r.windows for r in runs], ignore_index=True)
    if w.duplicated(["input", "length", "window", "layer", "head", "role"]).any():
        raise ValueError("the runs overlap: a window was measured twice")
    params = [r.info.get("params", {}) for r in runs]
    info = dict(runs[0].info, params=dict(params[0], combined=params)) if runs[0].info else {}
    return SinksResult(
        model=runs[0].model,
        windows=w,
        positions=pd.concat([r.positions for r in runs], ignore_index=True),
        cost=pd.concat([r.cost for r in runs], ignore_index=True),
        attrs=runs[0].attrs,
        info=info,
    )


def _window_frame(red: PatternReducer, name: str, n: int, windows: list[int]) -> pd.DataFrame:
    scores, base = red.scores(), red.baselines()
    b, L, H = next(iter(scores.values())).shape
    w, layer, head = np.meshgrid(np.asarray(windows), np.arange(L), np.arange(H), indexing="ij")
    parts = []
    for r in red.roles:
        parts.append(
            pd.DataFrame(
                dict(
                    input=name,
                    length=n,
                    window=w.ravel(),
                    layer=layer.ravel(),
                    head=head.ravel(),
                    role=r,
                    score=scores[r].numpy().ravel(),
                    baseline=np.repeat(base[r].numpy(), L * H),
                )
            )
        )
    return pd.concat(parts, ignore_index=True)


def _profile_frame(red: PatternReducer, n: int, windows: list[int]) -> pd.DataFrame:
    rows = red.sink_rows  # [b, layer, head, pos]
    b, L, H, _ = rows.shape
    parts = []
    for lo, hi in zip(POSITION_BINS[:-1], POSITION_BINS[1:]):
        if lo >= n:
            break
        m = rows[..., lo : min(hi, n)].mean(-1).numpy()  # [b, L, H]
        w, layer, head = np.meshgrid(np.asarray(windows), np.arange(L), np.arange(H), indexing="ij")
        parts.append(
            pd.DataFrame(
                dict(
                    length=n,
                    window=w.ravel(),
                    layer=layer.ravel(),
                    head=head.ravel(),
                    pos_lo=lo,
                    pos_hi=min(hi, n),
                    sink=m.ravel(),
                )
            )
        )
    return pd.concat(parts, ignore_index=True)


# --------------------------------------------------------------------------------------------------
# Tables


def main_rows(windows: pd.DataFrame) -> pd.DataFrame:
    """Each role on its own input (ROLE_INPUT)."""
    keep = windows["input"] == windows["role"].map(ROLE_INPUT)
    return windows[keep]


def _t_interval(mean: np.ndarray, sd: np.ndarray, n: np.ndarray, level: float = 0.95):
    from scipy import stats as st

    half = st.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    return mean - half, mean + half


def head_table(run: SinksResult) -> pd.DataFrame:
    """One row per role, length and head: the mean score over windows with a 95% t interval over
    windows (none from one window), the uniform baseline, effect = score - baseline and ``label``
    (effect > MASS_MARGIN)."""
    g = main_rows(run.windows).groupby(["role", "length", "layer", "head"], sort=True)
    t = g.agg(
        input=("input", "first"),
        score=("score", "mean"),
        sd=("score", "std"),
        n_windows=("score", "size"),
        baseline=("baseline", "mean"),
    ).reset_index()
    t["ci_low"], t["ci_high"] = _t_interval(t["score"].to_numpy(), t["sd"].to_numpy(), t["n_windows"].to_numpy())
    t["effect"] = t["score"] - t["baseline"]
    t["label"] = t["effect"] > MASS_MARGIN
    t.insert(0, "model", run.model)
    return t


def layer_table(heads: pd.DataFrame) -> pd.DataFrame:
    """One row per role, length and layer: the mean score over the layer's heads, and how many carry the role."""
    g = heads.groupby(["role", "length", "layer"])
    return g.agg(score=("score", "mean"), n_label=("label", "sum"), n_heads=("label", "size")).reset_index()


def length_summary(run: SinksResult, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per role and length: the mean score over heads (95% t interval over windows of the
    per-window head mean), the heads carrying the role (``n_label``, with a percentile bootstrap
    interval that resamples windows) and the CPU seconds per forward of one window."""
    rows = []
    main = main_rows(run.windows)
    rng = np.random.default_rng(seed)
    for (role, n), g in main.groupby(["role", "length"], sort=True):
        k = g["window"].nunique()
        per = g.pivot_table(index="window", columns=["layer", "head"], values="score").to_numpy()  # [win, heads]
        e = g.assign(e=g["score"] - g["baseline"])
        effw = e.pivot_table(index="window", columns=["layer", "head"], values="e").to_numpy()
        head_means = per.mean(1)
        lo, hi = _t_interval(
            np.array([head_means.mean()]), np.array([head_means.std(ddof=1) if k > 1 else np.nan]), np.array([k])
        )
        boot = rng.integers(0, k, size=(n_boot, k))
        # one window: no interval (a resample of one window is that window)
        counts = (effw[boot].mean(1) > MASS_MARGIN).sum(-1) if k > 1 else np.full(n_boot, np.nan)
        c = run.cost[(run.cost["length"] == n) & (run.cost["input"] == ROLE_INPUT[role])]
        rows.append(
            dict(
                model=run.model,
                role=role,
                input=ROLE_INPUT[role],
                length=n,
                n_windows=k,
                mean_score=float(head_means.mean()),
                ci_low=float(lo[0]),
                ci_high=float(hi[0]),
                n_label=int((effw.mean(0) > MASS_MARGIN).sum()),
                n_label_low=float(np.quantile(counts, 0.025)),
                n_label_high=float(np.quantile(counts, 0.975)),
                n_heads=effw.shape[1],
                # Gu et al. (2024)'s metric beside the project's: the share of heads whose mean attention on
                # the first token exceeds GU_EPSILON (the sink rows only)
                gu_ratio=float((per.mean(0) > GU_EPSILON).mean()) if role == "attention_sink" else np.nan,
                cpu_s_per_window=float(c["cpu_s"].sum() / c["n_windows"].sum()),
                wall_s_per_window=float(c["wall_s"].sum() / c["n_windows"].sum()),
            )
        )
    return pd.DataFrame(rows)


def persistence(heads: pd.DataFrame) -> pd.DataFrame:
    """Do roles persist across lengths? Per role and pair of lengths (the shortest against each
    other, and each against the next): Spearman's rank correlation of the heads' mean scores, the
    heads carrying the role at each length and at both, and the share of the first length's heads
    that keep the role (``kept``)."""
    from scipy import stats as st

    rows = []
    for role, g in heads.groupby("role", sort=True):
        lengths = sorted(g["length"].unique())
        pairs = [(lengths[0], b) for b in lengths[1:]]
        pairs += [(a, b) for a, b in zip(lengths[1:], lengths[2:])]
        by = {n: g[g["length"] == n].set_index(["layer", "head"]).sort_index() for n in lengths}
        for a, b in pairs:
            x, y = by[a].align(by[b], join="inner", axis=0)
            la, lb = x["label"].to_numpy(bool), y["label"].to_numpy(bool)
            rho = st.spearmanr(x["score"], y["score"]).statistic
            rows.append(
                dict(
                    role=role,
                    length_a=a,
                    length_b=b,
                    spearman=float(rho),
                    n_label_a=int(la.sum()),
                    n_label_b=int(lb.sum()),
                    n_both=int((la & lb).sum()),
                    kept=float((la & lb).sum() / la.sum()) if la.any() else np.nan,
                )
            )
    return pd.DataFrame(rows)


def position_table(run: SinksResult) -> pd.DataFrame:
    """The sink mass by query-position bin, one row per length and bin: the mean over heads and
    windows, and the heads whose mean over windows exceeds its bin's uniform share by MASS_MARGIN
    (a uniform row at query q gives the sink 1 / (q + 1))."""
    p = run.positions
    per_head = p.groupby(["length", "pos_lo", "pos_hi", "layer", "head"])["sink"].mean().reset_index()
    per_head["uniform"] = [
        float((1.0 / np.arange(lo + 1, hi + 1)).mean()) for lo, hi in zip(per_head.pos_lo, per_head.pos_hi)
    ]
    g = per_head.groupby(["length", "pos_lo", "pos_hi"])
    out = g.agg(sink=("sink", "mean"), uniform=("uniform", "first")).reset_index()
    out["n_sink"] = g.apply(
        lambda d: int((d["sink"] - d["uniform"] > MASS_MARGIN).sum()), include_groups=False
    ).to_numpy()
    return out
