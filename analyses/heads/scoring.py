"""Scorers on tensors: what the probe's pattern hooks call, batch by batch (tests feed them
hand-made patterns). Token-level roles score attention mass over token sets; the word-level
relation roles score whether a row's largest weight lands on the gold word."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from analyses.heads.roles import OFFSET_ROLES, SET_ROLES, SINK_EXCLUDED_ROLES

__all__ = [
    "visible_keys",
    "TokenPlan",
    "token_plan",
    "broad_reference",
    "tl_detection_score",
    "token_role_scores",
    "duplicate_detection",
    "RelationPlan",
    "relation_scores",
    "relation_columns",
    "relation_finish",
    "word_columns",
    "special_columns",
    "value_norms",
    "norm_weighted",
]


def visible_keys(mask: Tensor, causal: bool) -> Tensor:
    """[batch, query_pos, key_pos] bool: the keys each real query may attend to."""
    real = mask.bool()
    vis = real[:, None, :] & real[:, :, None]
    if causal:
        vis = vis & torch.ones(mask.shape[1], mask.shape[1], dtype=torch.bool, device=mask.device).tril()
    return vis


@dataclass
class TokenPlan:
    """Head-independent tensors for the token-level roles of one batch."""

    mask: Tensor  # [batch, pos] bool
    rows: Tensor  # [batch, pos] float: 1/n_real on real rows (the TL "mul" normaliser)
    sets: Tensor  # [batch, pos, n_sets] float: key membership for SET_ROLES
    set_rows: Tensor  # [batch, pos, n_sets] float: row weights (real rows outside the set, normalised)
    set_valid: Tensor  # [batch, n_sets] bool: the sentence has such keys and such rows
    entropy_rows: Tensor  # [batch, pos] float: weights of rows with >= 2 visible keys
    log_visible: Tensor  # [batch, pos] log of the number of visible keys (1 where < 2)
    uniform: dict  # role -> [batch] baseline of a uniform head
    detect: dict | None = None  # "duplicate_token"/"induction" -> [batch, q, k] detection patterns
    sink: Tensor | None = None  # [batch, pos] float: the sink keys (SINK_EXCLUDED_ROLES leave them out)


def broad_reference(n_visible: Tensor) -> Tensor:
    """The expected normalised entropy H / ln n of a random attention row over n visible keys drawn
    uniformly from the simplex (Dirichlet(1, ..., 1)): (psi(n + 1) - psi(2)) / ln n, exactly
    (E[-x ln x] for x ~ Beta(1, n - 1) is (psi(n + 1) - psi(2)) / n). ``broad``'s per-row baseline:
    0.72 at 2 keys, 0.84 at 10, 0.87 at 20, rising to 1 only as ln n grows. Rows with fewer than
    two keys get 1 (they are not scored)."""
    n = n_visible.double().clamp(min=2)
    ref = (torch.special.digamma(n + 1) - torch.special.digamma(torch.full_like(n, 2.0))) / n.log()
    return torch.where(n_visible >= 2, ref, torch.ones_like(ref)).to(torch.float32)


def token_plan(mask: Tensor, causal: bool, sets: Tensor, detect: dict | None = None) -> TokenPlan:
    """``sets``: [batch, pos, len(SET_ROLES)] bool, which tokens are sink / sep_eos / punctuation /
    delimiter keys. ``detect``: optional detection patterns for duplicate/induction. The
    ``SINK_EXCLUDED_ROLES`` (delimiter) are scored on the row without the sink keys (the
    attention_sink set), renormalised: their keys, rows and uniform baseline leave the sink out."""
    mask = mask.bool()
    b, t = mask.shape
    real = mask.float()
    n_real = real.sum(-1, keepdim=True)
    vis = visible_keys(mask, causal).float()  # [b, q, k]
    n_vis = vis.sum(-1)  # [b, q]
    sink = sets[..., SET_ROLES.index("attention_sink")].float() * real
    excl = torch.tensor([r in SINK_EXCLUDED_ROLES for r in SET_ROLES])
    sets = sets & ~(excl[None, None, :] & sink.bool()[..., None])  # never a key of its own there
    inv_vis = torch.where(n_vis > 0, 1.0 / n_vis.clamp(min=1), torch.zeros_like(n_vis))
    rows = real / n_real
    uniform = {}
    for role, off in OFFSET_ROLES.items():
        diag = torch.diagonal(vis, offset=off, dim1=-2, dim2=-1)  # [b, t - |off|]
        per_row = torch.zeros(b, t)
        if off >= 0:
            per_row[:, : t - off] = diag
        else:
            per_row[:, -off:] = diag
        uniform[role] = (per_row * inv_vis * rows).sum(-1)
    uniform["local"] = uniform["previous_token"] + uniform["self_token"] + uniform["next_token"]
    sets_f = sets.float() * real[..., None]
    set_rows = real[..., None] * (1 - sets_f)  # [b, q, n_sets]
    # sink-excluded roles: the sink's own row and rows that see nothing but the sink are not scored
    vis_rest = vis * (1 - sink[:, None, :])
    n_rest = vis_rest.sum(-1)  # [b, q] visible keys other than the sink
    rest_rows = (1 - sink) * (n_rest > 0).float()
    set_rows = torch.where(excl[None, None, :], set_rows * rest_rows[..., None], set_rows)
    counts = set_rows.sum(1, keepdim=True)
    set_valid = (counts[:, 0] > 0) & (sets_f.sum(1) > 0)
    set_rows = set_rows / counts.clamp(min=1)
    uni_sets = torch.einsum("bqk,bks->bqs", vis, sets_f) * inv_vis[..., None]  # [b, q, n_sets]
    inv_rest = torch.where(n_rest > 0, 1.0 / n_rest.clamp(min=1), torch.zeros_like(n_rest))
    uni_rest = torch.einsum("bqk,bks->bqs", vis_rest, sets_f) * inv_rest[..., None]
    uni_sets = torch.where(excl[None, None, :], uni_rest, uni_sets)
    for i, role in enumerate(SET_ROLES):
        uniform[role] = (uni_sets[..., i] * set_rows[..., i]).sum(-1)
    ent_rows = real * (n_vis >= 2).float()
    ent_rows = ent_rows / ent_rows.sum(-1, keepdim=True).clamp(min=1)
    log_visible = torch.where(n_vis >= 2, n_vis.clamp(min=2).log(), torch.ones_like(n_vis))
    uniform["broad"] = (broad_reference(n_vis) * ent_rows).sum(-1)
    uniform["learned_sink"] = torch.zeros_like(uniform["broad"])  # a head without a learned sink gives it 0
    if detect:
        for role, pat in detect.items():
            uniform[role] = ((pat.float() * vis).sum(-1) * inv_vis * rows).sum(-1)
    return TokenPlan(
        mask=mask,
        rows=rows,
        sets=sets_f,
        set_rows=set_rows,
        set_valid=set_valid,
        entropy_rows=ent_rows,
        log_visible=log_visible,
        uniform=uniform,
        detect=detect,
        sink=sink,
    )


def tl_detection_score(pattern: Tensor, detection: Tensor, mask: Tensor | None = None) -> Tensor:
    """TransformerLens ``head_detector`` "mul" score, batched: sum(pattern * detection) / sum(pattern)
    over real query rows. pattern [batch, head, q, k]; detection [batch, q, k] -> [batch, head]."""
    p = pattern if mask is None else pattern * mask[:, None, :, None].to(pattern)
    return torch.einsum("bhqk,bqk->bh", p, detection.to(p)) / p.sum((-1, -2))


def token_role_scores(pattern: Tensor, plan: TokenPlan, roles: Sequence[str], rows: slice | None = None) -> dict:
    """Per-sentence, per-head scores [batch, head] of token-level roles from a pattern
    [batch, head, query_pos, key_pos] (float32 or float64). ``rows``: the pattern holds only those
    query rows (a query block, ``models.blockwise``); every score is a sum over query rows, so the
    scores of the blocks add up to the scores of the whole pattern."""
    p = pattern.float()
    b, h, t, k = p.shape
    q0 = 0 if rows is None else rows.start
    sel = slice(None) if rows is None else rows  # the plan's query axis, cut to the block
    out = {}
    offs = {}
    for role, off in OFFSET_ROLES.items():
        if role in roles or "local" in roles:
            if rows is None:
                diag = torch.diagonal(p, offset=off, dim1=-2, dim2=-1)  # [b, h, t - |off|]
                w = plan.rows[:, : t - off] if off >= 0 else plan.rows[:, -off:]
                offs[role] = (diag * w[:, None]).sum(-1)
            else:  # query q0 + i reads key q0 + i + off, where that key exists
                keys = torch.arange(q0, q0 + t, device=p.device) + off
                inside = (keys >= 0) & (keys < k)
                got = p.gather(-1, keys.clamp(0, k - 1)[None, None, :, None].expand(b, h, t, 1))[..., 0]
                offs[role] = (got * (plan.rows[:, sel] * inside)[:, None]).sum(-1)
    out.update({r: offs[r] for r in OFFSET_ROLES if r in roles})
    if "local" in roles:
        out["local"] = offs["previous_token"] + offs["self_token"] + offs["next_token"]
    wanted = [i for i, r in enumerate(SET_ROLES) if r in roles]
    set_rows = plan.set_rows[:, sel]
    if wanted:
        mass = p @ plan.sets[:, None]  # [b, h, q, n_sets]
        per = (mass * set_rows[:, None]).sum(2)  # [b, h, n_sets]
        for i in wanted:
            out[SET_ROLES[i]] = per[..., i]
        if plan.sink is not None and any(SET_ROLES[i] in SINK_EXCLUDED_ROLES for i in wanted):
            rest = 1 - (p @ plan.sink[:, None, :, None])[..., 0]  # [b, h, q]: weight off the sink
            for i in wanted:
                if SET_ROLES[i] in SINK_EXCLUDED_ROLES:  # renormalised; the weight itself kept beside it
                    share = torch.where(rest > 0, mass[..., i] / rest.clamp(min=1e-30), torch.zeros_like(rest))
                    out[f"{SET_ROLES[i]}:absolute"] = per[..., i]
                    out[SET_ROLES[i]] = (share * set_rows[:, None, :, i]).sum(-1)
    if "learned_sink" in roles:  # gpt-oss: what each row gave its learned sink logit, on the sink's rows
        share = (1.0 - p.sum(-1)).clamp(min=0.0)  # [b, h, q]
        out["learned_sink"] = (share * set_rows[:, None, :, SET_ROLES.index("attention_sink")]).sum(-1)
    if "broad" in roles:
        ent = -torch.special.xlogy(p, p).sum(-1) / plan.log_visible[:, None, sel]  # [b, h, q]
        out["broad"] = (ent * plan.entropy_rows[:, None, sel]).sum(-1)
    for role in ("duplicate_token", "induction"):
        if role in roles:
            if plan.detect is None or role not in plan.detect:
                raise ValueError(f"role {role!r} needs detection patterns in the plan (repeated token sequences)")
            # TL "mul": sum(pattern * detection) / sum(pattern); real rows sum to 1, padded ones count 0
            out[role] = (
                torch.einsum("bhqk,bqk->bh", p, plan.detect[role][:, sel].float() * plan.mask[:, sel, None])
                / plan.mask.float().sum(-1)[:, None]
            )
    return out


def duplicate_detection(tokens: Tensor, mask: Tensor | None = None) -> dict:
    """TransformerLens's duplicate-token and induction detection patterns, batched: [batch, q, k]."""
    eq = tokens[:, :, None] == tokens[:, None, :]
    if mask is not None:
        m = mask.bool()
        eq = eq & m[:, :, None] & m[:, None, :]
    t = tokens.shape[1]
    lower = torch.ones(t, t, dtype=torch.bool).tril(-1)
    dup = eq & lower
    ind = torch.zeros_like(dup)
    ind[:, :, 1:] = dup[:, :, :-1]
    ind = ind & torch.ones(t, t, dtype=torch.bool).tril()
    return {"duplicate_token": dup.float(), "induction": ind.float()}


@dataclass
class RelationPlan:
    """Head-independent tensors for the word-relation tests of one batch (R tests stacked)."""

    row_weights: Tensor  # [batch, R, pos] token weights of the row word (mean over its tokens)
    columns: Tensor  # [batch, pos, n_cols] token -> column (words, then one per special token)
    gold: Tensor  # [batch, R] long, gold column
    others: Tensor  # [batch, R, n_cols] bool: competing columns (existing, not the row word, not gold)
    valid: Tensor  # [batch, R] bool
    special_cols: Tensor | None = None  # [batch, n_cols] bool: columns that are special tokens
    exclude_specials: Tensor | None = None  # [R] bool: test r takes Clark et al.'s convention

    def take(self, tests: Sequence[int]) -> RelationPlan:
        """The plan of a subset of the stacked tests (indices into R), in that order."""
        idx = torch.as_tensor(list(tests), dtype=torch.long)
        return RelationPlan(
            row_weights=self.row_weights[:, idx],
            columns=self.columns,
            gold=self.gold[:, idx],
            others=self.others[:, idx],
            valid=self.valid[:, idx],
            special_cols=self.special_cols,
            exclude_specials=None if self.exclude_specials is None else self.exclude_specials[idx],
        )


def relation_scores(
    pattern: Tensor, plan: RelationPlan, specials: str | None = None, special_mass: bool = False
) -> tuple[Tensor, ...]:
    """(accuracy, gold mass), each [batch, R, head]: is the row word's largest weight (self
    excluded) on the gold word; and how much attention goes to the gold word (summed over its tokens).

    ``specials`` (the convention for special tokens: [CLS], [SEP], BOS): ``"include"`` lets them
    compete in the argmax as columns of their own, so a row whose largest weight goes to [SEP] is
    wrong; ``"exclude"`` (Clark et al., 2019, who take ``attn[1:-1, 1:-1]``) takes the largest
    weight among the sentence's other words only. ``None``: each test's own convention
    (``plan.exclude_specials``; include where the plan has none). ``special_mass=True`` adds a
    third tensor: the row word's attention to special tokens, [batch, R, head]. In query blocks:
    ``relation_columns`` per block, summed, then ``relation_finish``."""
    return relation_finish(relation_columns(pattern, plan), plan, specials, special_mass)


def relation_columns(pattern: Tensor, plan: RelationPlan, rows: slice | None = None) -> Tensor:
    """The row words' attention to each column, [batch, head, R, n_cols]: the mean over the row
    word's tokens of the weights, summed over each column's tokens. Linear in the pattern's rows, so
    the columns of query blocks (``rows``: the rows the pattern holds) add up to the whole one's."""
    p = pattern.float()
    weights = plan.row_weights if rows is None else plan.row_weights[:, :, rows]
    per_row = torch.matmul(weights.to(p)[:, None], p)  # [b, h, R, key_pos]: mean over row tokens
    return torch.matmul(per_row, plan.columns.to(p)[:, None])  # [b, h, R, n_cols]: sum over word tokens


def relation_finish(
    cols: Tensor, plan: RelationPlan, specials: str | None = None, special_mass: bool = False
) -> tuple[Tensor, ...]:
    """``relation_scores`` from the columns ``relation_columns`` gives."""
    if specials not in (None, "include", "exclude"):
        raise ValueError(f"specials must be 'include' or 'exclude', got {specials!r}")
    gold = cols.gather(-1, plan.gold.clamp(min=0)[:, None, :, None].expand(-1, cols.shape[1], -1, 1))[..., 0]
    others = plan.others
    if plan.special_cols is not None and specials != "include":
        n_rel = others.shape[1]
        if specials == "exclude":
            excl = torch.ones(n_rel, dtype=torch.bool, device=others.device)
        elif plan.exclude_specials is not None:
            excl = plan.exclude_specials.to(others.device)
        else:
            excl = torch.zeros(n_rel, dtype=torch.bool, device=others.device)
        others = others & ~(excl[None, :, None] & plan.special_cols.to(others.device)[:, None, :])
    other = cols.masked_fill(~others[:, None], float("-inf")).amax(-1)  # [b, h, R]
    out = ((gold > other).float().transpose(1, 2), gold.transpose(1, 2))
    if special_mass:
        if plan.special_cols is None:
            raise ValueError("special_mass needs plan.special_cols (which columns are special tokens)")
        sm = (cols * plan.special_cols.to(cols)[:, None, None, :]).sum(-1)  # [b, h, R]
        out += (sm.transpose(1, 2),)
    return out


def word_columns(token_to_word: Sequence[Sequence[int]], mask: Tensor, n_words: Sequence[int]) -> tuple[Tensor, Tensor]:
    """[batch, pos, n_cols] token -> column map (word w -> column w; special token at position t ->
    column max_words + t) and [batch, n_cols] which columns exist. Columns from ``max(n_words)`` on
    are the special tokens' (``special_columns``)."""
    b, t = mask.shape
    w_max = max(n_words)
    align = torch.tensor([list(a[:t]) + [-1] * (t - len(a[:t])) for a in token_to_word], dtype=torch.long)
    col = torch.where(align >= 0, align, w_max + torch.arange(t)[None, :])  # special token t -> its own column
    cols = torch.zeros(b, t, w_max + t)
    cols.scatter_(2, col[..., None], mask.bool()[..., None].float())  # padding rows stay all-zero
    exists = cols.sum(1) > 0
    return cols, exists


def special_columns(exists: Tensor, n_words: Sequence[int]) -> Tensor:
    """[batch, n_cols] bool: the existing columns that are special tokens (see ``word_columns``)."""
    cols = torch.arange(exists.shape[1], device=exists.device)
    return exists & (cols >= max(n_words))[None, :]


def value_norms(v: Tensor, W_O: Tensor) -> Tensor:
    """||f(x_j)|| per key position and head, [batch, pos, head]: the norm of what head h writes to
    the residual stream for key j at weight 1, f(x_j) = v_j W_O[h] (Kobayashi et al., 2020; the
    value bias is inside ``v``, the output bias belongs to no head).

    ``v`` [batch, pos, kv_head, d_head] (the ``attn.hook_v`` value), ``W_O`` [head, d_head, d_model].
    Grouped-query attention: query head h reads key/value head h // (head / kv_head). Computed as
    v^T (W_O W_O^T) v with a [head, d_head, d_head] Gram matrix, so nothing of size
    [batch, pos, head, d_model], let alone [batch, head, query, key, d_model], is built."""
    n_heads, n_kv = W_O.shape[0], v.shape[2]
    if n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads cannot share {n_kv} key/value heads evenly")
    w = W_O.to(torch.float64)
    gram = torch.matmul(w, w.transpose(1, 2))  # [head, d_head, d_head]
    vh = v.to(torch.float64).repeat_interleave(n_heads // n_kv, dim=2)  # [batch, pos, head, d_head]
    sq = torch.einsum("bphd,hde,bphe->bph", vh, gram, vh)
    return sq.clamp(min=0).sqrt().to(torch.float32)


def norm_weighted(pattern: Tensor, norms: Tensor) -> Tensor:
    """Kobayashi et al.'s (2020) norm-based attention, renormalised per row so that scores stay
    comparable with attention weights: w_ij = a_ij ||f(x_j)|| / sum_k a_ik ||f(x_k)||.

    ``pattern`` [batch, head, query_pos, key_pos], ``norms`` [batch, key_pos, head]
    (``value_norms``). A row whose keys all write nothing stays all zero."""
    w = pattern.float() * norms.permute(0, 2, 1)[:, :, None, :].to(pattern.device)
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp(min=1e-30), torch.zeros_like(w))
