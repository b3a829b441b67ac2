"""How the induction runs form and use their heads: head scores on the task's own sequences, the
route the trained model copies by, how abruptly a curve rises, and retrieval at long distance.

- ``own_head_scores``: per head (layer, head), mean attention from the second-copy positions of
  held-out ``InductionTask`` sequences to the previous token, to the earlier occurrence of the
  current token (duplicate-token) and to the token after it (induction target).
- ``route``: mean-ablation effects per head on the second-copy loss; for the decisive last-layer
  head, which layer-0 head feeds its induction attention, through its queries or its keys; a route
  label by the rule in ``route``'s docstring.
- ``rise``: the steps at which a logged curve first reaches, and stays past, 10%, 50% and 90% of
  its rise (linear interpolation between evaluations); width = t90 - t10.
- ``long_range``: top-1 accuracy on the second copy with the copy a controlled distance after the
  first, out to 8x the training length.

Ablations are *mean* ablations: a head's output (``hook_z``) is replaced by its mean over the
batch at the same position, which removes what the head reads from the tokens and keeps its
position-only part.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor

import models
from analyses.positional.tasks import IGNORE, InductionTask

EVAL_SEED = 12345  # every run is tested on the same held-out draws (synthetic uses this one)
ROLE_SCORE = 0.3  # a head "is" a previous-token / duplicate-token / induction head past this mean attention
CARRIES_COPY = 0.1  # nats: a route exists only when some head's ablation raises the second-copy loss this much
POSITIONAL_TV = 0.2  # ... and position-only when its rows differ from the batch mean by less than this (TV)


def copy_offsets(tokens: Tensor, mask: Tensor) -> Tensor:
    """d = q - p per row: q the first marked position, p where the repeated segment begins (the
    latest p <= q - segment whose tokens match)."""
    q = mask.float().argmax(1).long()
    s = int(mask[0].sum()) + 1
    out = torch.empty_like(q)
    for r in range(tokens.shape[0]):
        seg = tokens[r, q[r] : q[r] + s]
        p = next(p for p in range(int(q[r]) - s, -1, -1) if torch.equal(tokens[r, p : p + s], seg))
        out[r] = q[r] - p
    return out


def _patterns(model: models.Transformer, tokens: Tensor, hooks=()) -> list[Tensor]:
    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    store: dict[str, Tensor] = {}

    def keep(t: Tensor, hook) -> None:
        store[hook.name] = t.detach()

    with torch.no_grad():
        model.run_with_hooks(
            tokens, fwd_hooks=list(hooks) + [(n, keep) for n in names], return_type=None, allow_beyond_ctx=True
        )
    return [store[n] for n in names]


def _targets(tokens: Tensor, mask: Tensor) -> dict[str, tuple[Tensor, Tensor, Tensor]]:
    """(row, query, key) index triples of the three roles, over every second-copy position."""
    b, i = mask.nonzero(as_tuple=True)
    d = copy_offsets(tokens, mask)[b]
    return {"previous_token": (b, i, i - 1), "duplicate_token": (b, i, i - d), "induction": (b, i, i - d + 1)}


def own_head_scores(model: models.Transformer, task: InductionTask, batch: int = 64, seed: int = EVAL_SEED):
    """DataFrame (layer, head, previous_token, duplicate_token, induction, content_tv, top_offset,
    top_offset_attention): mean attention from each second-copy position to the three targets on
    held-out task sequences; content_tv is the mean total-variation distance of a row from the
    batch-mean row at the same query position (0: the head attends by position alone); top_offset:
    the relative offset o (query i to key i - o) that gets the most mean attention, and that mean;
    copy_shift: the c in 1..segment for which the head attends most to the c-th token after the
    earlier occurrence (c = 1: the induction target), and that mean."""
    tokens, _, mask = task.sample_with_mask(batch, torch.Generator().manual_seed(seed))
    model.eval()
    pats = _patterns(model, tokens)
    idx = _targets(tokens, mask)
    rows = []
    for layer, pat in enumerate(pats):
        scores = {k: pat[b, :, i, j].mean(0) for k, (b, i, j) in idx.items()}
        tv = 0.5 * (pat - pat.mean(0, keepdim=True)).abs().sum(-1).mean((0, 2))
        b, i, _ = idx["induction"]
        by_offset = torch.stack(
            [torch.where(i >= o, pat[b, :, i, (i - o).clamp(min=0)].T, 0.0).mean(1) for o in range(int(i.max()) + 1)]
        )  # [offset, head]: mean attention from the second-copy queries to i - offset
        d = i - idx["duplicate_token"][2]
        by_shift = {  # [head]: mean attention to i - d + c, the c-th token after the earlier occurrence
            c: torch.where(
                (i - d + c >= 0) & (i - d + c <= i), pat[b, :, i, (i - d + c).clamp(0, None).minimum(i)].T, 0.0
            ).mean(1)
            for c in range(1, task.segment + 1)
        }
        shifts = torch.stack(list(by_shift.values()))
        for h in range(pat.shape[1]):
            rows.append(
                {
                    "layer": layer,
                    "head": h,
                    **{k: float(v[h]) for k, v in scores.items()},
                    "content_tv": float(tv[h]),
                    "top_offset": int(by_offset[:, h].argmax()),
                    "top_offset_attention": float(by_offset[:, h].max()),
                    "copy_shift": int(shifts[:, h].argmax()) + 1,
                    "copy_shift_attention": float(shifts[:, h].max()),
                }
            )
    return pd.DataFrame(rows)


def _mean_ablate(layer: int, head: int):
    def fn(z: Tensor, hook) -> Tensor:
        z = z.clone()
        z[:, :, head] = z[:, :, head].mean(0, keepdim=True)
        return z

    return (f"blocks.{layer}.attn.hook_z", fn)


def copy_losses(model: models.Transformer, tokens: Tensor, targets: Tensor, mask: Tensor, hooks=()) -> tuple:
    """(mean loss on the second copy's predictions (``mask``), mean loss on every other asked
    prediction), with ``hooks`` on the forward pass."""
    with torch.no_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=list(hooks), return_type="logits")
    losses = F.cross_entropy(logits.flatten(0, 1), targets.clamp(min=0).flatten(), reduction="none").view_as(targets)
    return float(losses[mask].mean()), float(losses[(~mask) & (targets != IGNORE)].mean())


def _copy_loss(model: models.Transformer, tokens: Tensor, targets: Tensor, mask: Tensor, hooks=()) -> float:
    return copy_losses(model, tokens, targets, mask, hooks)[0]


def head_ablation(model: models.Transformer, task: InductionTask, batch: int = 64, seed: int = EVAL_SEED):
    """DataFrame (layer, head, loss_increase): the second-copy loss with the head mean-ablated minus
    the clean loss, on held-out task sequences."""
    tokens, targets, mask = task.sample_with_mask(batch, torch.Generator().manual_seed(seed))
    model.eval()
    clean = _copy_loss(model, tokens, targets, mask)
    rows = []
    for layer in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            hurt = _copy_loss(model, tokens, targets, mask, [_mean_ablate(layer, h)]) - clean
            rows.append({"layer": layer, "head": h, "loss_increase": hurt})
    return pd.DataFrame(rows)


def _composition(model: models.Transformer, tokens: Tensor, mask: Tensor, head: int, shift: int = 1) -> pd.DataFrame:
    """For last-layer head ``head``: its mean attention to the ``shift``-th token after the earlier
    occurrence (1: the induction target), clean and with each
    layer-0 head's content (its output minus its batch mean at each position) removed from the
    head's query input, key input, or both (the direct path from layer 0 only)."""
    last = model.cfg.n_layers - 1
    store: dict[str, Tensor] = {}

    def keep(t: Tensor, hook) -> None:
        store["z"] = t.detach()

    with torch.no_grad():
        model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", keep)], return_type=None)
    z = store["z"]
    W_O = model.blocks[0].attn.W_O.detach()  # [head, d_head, d_model]
    b, i, j = _targets(tokens, mask)["duplicate_token"]
    j = j + shift

    def score(hooks) -> float:
        return float(_patterns(model, tokens, hooks)[last][b, head, i, j].mean())

    def remove(delta: Tensor):
        def fn(x: Tensor, hook) -> Tensor:
            x = x.clone()
            x[:, :, head] -= delta
            return x

        return fn

    clean = score([])
    rows = []
    for src in range(model.cfg.n_heads):
        zs = z[:, :, src]
        delta = (zs - zs.mean(0, keepdim=True)) @ W_O[src]
        q, k = (f"blocks.{last}.hook_q_input", remove(delta)), (f"blocks.{last}.hook_k_input", remove(delta))
        rows.append(
            {
                "source": src,
                "clean": clean,
                "drop_both": clean - score([q, k]),
                "drop_query": clean - score([q]),
                "drop_key": clean - score([k]),
            }
        )
    return pd.DataFrame(rows)


def head_role(row: pd.Series) -> str:
    """A layer-0 head's role on the task's own sequences: previous-token if its previous-token
    score passes ``ROLE_SCORE``; else positional (with its top offset) if its rows hardly depend on
    the tokens (content_tv below ``POSITIONAL_TV``): it looks up fixed places, whatever they hold;
    else duplicate-token if its duplicate-token score passes ``ROLE_SCORE``; mixed otherwise."""
    if row.previous_token >= ROLE_SCORE:
        return "previous-token"
    if row.content_tv < POSITIONAL_TV:
        return f"positional (offset {int(row.top_offset)}: {row.top_offset_attention:.2f})"
    return "duplicate-token" if row.duplicate_token >= ROLE_SCORE else "mixed"


def route(model: models.Transformer, task: InductionTask, batch: int = 64, seed: int = EVAL_SEED) -> dict:
    """By which route the model copies. The rule:

    0. no route when no head's mean ablation raises the second-copy loss by ``CARRIES_COPY``;
    1. the decisive head is the last-layer head whose mean ablation raises the second-copy loss most;
    2. its target: the c-th token after the earlier occurrence of the current token, c in
       1..segment its ``copy_shift`` (c = 1: the induction target; c > 1: a "shifted" induction head,
       which finds a later token whose layer-0 heads hold copies of earlier tokens);
    3. if its mean attention to that target passes ``ROLE_SCORE``, its source is the layer-0 head
       whose content, removed from the decisive head's query and key inputs, cuts that attention
       most; composition is Q+K when removing the source from the queries alone and from the keys
       alone each cut it by at least half as much as the other, else K or Q, whichever cuts more;
    4. otherwise the last layer copies without attending to such a target, and the source is the
       layer-0 head whose mean ablation raises the second-copy loss most (composition: none);
    5. label: "<source role> L0Hx -> <induction|shifted induction (+c)|non-induction> L1Hy
       (<K|Q|Q+K>-composition | no induction attention in the last layer | no route ...)", the role by
       ``head_role``.

    The textbook circuit reads "previous-token L0Hx -> induction L1Hy (K-composition)"; a
    duplicate-token head read by the queries, which then find the next position by absolute
    position, reads "duplicate-token L0Hx -> induction L1Hy (Q-composition)"."""
    if model.cfg.n_layers < 2:
        raise ValueError(
            f"route needs at least 2 layers (a layer-0 source and a later reader); got {model.cfg.n_layers}"
        )
    last = model.cfg.n_layers - 1
    model.eval()
    scores = own_head_scores(model, task, batch, seed).set_index(["layer", "head"])
    ablation = head_ablation(model, task, batch, seed).set_index(["layer", "head"])
    decisive = int(ablation.loc[last].loss_increase.idxmax())
    reader_row = scores.loc[(last, decisive)]
    shift = int(reader_row.copy_shift) if reader_row.copy_shift_attention >= ROLE_SCORE else 1
    tokens, _, mask = task.sample_with_mask(batch, torch.Generator().manual_seed(seed))
    comp = _composition(model, tokens, mask, decisive, shift).set_index("source")
    if ablation.loss_increase.max() < CARRIES_COPY:
        src = int(ablation.loc[0].loss_increase.idxmax())
        kind, reader, how = "none", "non-induction", "no route: no head's ablation costs the copy 0.1 nats"
    elif comp.clean.iloc[0] >= ROLE_SCORE:
        src = int(comp.drop_both.idxmax())
        dq, dk = comp.loc[src, "drop_query"], comp.loc[src, "drop_key"]
        kind = "Q+K" if min(dq, dk) >= 0.5 * max(dq, dk) else "K" if dk > dq else "Q"
        reader = "induction" if shift == 1 else f"shifted induction (+{shift})"
        how = f"{kind}-composition"
    else:
        src = int(ablation.loc[0].loss_increase.idxmax())
        kind, reader, how = "none", "non-induction", "no induction attention in the last layer"
    role = head_role(scores.loc[(0, src)])
    return {
        "route": f"{role} L0H{src} -> {reader} L{last}H{decisive} ({how})",
        "route_source_role": role,
        "route_composition": kind,
        "route_decisive_head": f"L{last}H{decisive}",
        "route_decisive_loss_increase": float(ablation.loc[(last, decisive), "loss_increase"]),
        "route_source_loss_increase": float(ablation.loc[(0, src), "loss_increase"]),
        "route_decisive_shift": shift,
        "route_decisive_attention": float(comp.loc[src, "clean"]),
        "route_decisive_induction": float(reader_row.induction),
        "route_drop_both": float(comp.loc[src, "drop_both"]),
        "route_drop_query": float(comp.loc[src, "drop_query"]),
        "route_drop_key": float(comp.loc[src, "drop_key"]),
        "route_source_prev": float(scores.loc[(0, src), "previous_token"]),
        "route_source_dup": float(scores.loc[(0, src), "duplicate_token"]),
        "route_source_tv": float(scores.loc[(0, src), "content_tv"]),
        "route_source_offset": int(scores.loc[(0, src), "top_offset"]),
        "heads_own": scores.reset_index().to_dict("records"),
        "heads_ablation": ablation.reset_index().to_dict("records"),
    }


# --------------------------------------------------------------------------------------------------
# Retrieval at long distance


def distance_bins(length: int, segment: int, multiples: tuple[int, ...] = (2, 4, 8)) -> dict[str, tuple[int, int, int]]:
    """name -> (sequence length, d_min, d_max). "1L": the copy within the training length (sequences
    of the training length, d in [segment, length - segment]); "mL": d in ((m/2) L, m L], on
    sequences of m L + segment tokens (so the copy fits); "near<M>L" (M the largest multiple): d as in
    "1L" but in sequences of M L + segment tokens (length without distance)."""
    bins = {"1L": (length, segment, length - segment)}
    for m in multiples:
        bins[f"{m}L"] = (m * length + segment, (m // 2) * length + 1, m * length)
    if multiples:  # the control: a near copy (d as in "1L") in the longest sequences, so that a fall with
        m = max(multiples)  # distance can be told from a fall with sequence length (more keys, later positions)
        bins[f"near{m}L"] = (m * length + segment, segment, length - segment)
    return bins


def long_range(
    model: models.Transformer, task: InductionTask, multiples: tuple[int, ...] = (2, 4, 8), batch: int = 128
) -> dict:
    """{"lr_acc_<bin>": top-1 accuracy on the second-copy predictions} per ``distance_bins`` bin,
    and "lr_chance": 1 / d_vocab; held-out sequences (seed ``EVAL_SEED``). A learned-position model
    has no embedding past its table: NaN for every bin longer than it."""
    model.eval()
    out = {"lr_chance": 1 / task.d_vocab}
    for name, (n, lo, hi) in distance_bins(task.length, task.segment, multiples).items():
        if model.cfg.positional == "learned" and n > model.cfg.n_ctx:
            out[f"lr_acc_{name}"] = float("nan")
            continue
        tokens, targets, mask = task.sample_at_distance(batch, torch.Generator().manual_seed(EVAL_SEED), n, lo, hi)
        with torch.no_grad():
            pred = model(tokens, return_type="logits", allow_beyond_ctx=True).argmax(-1)
        out[f"lr_acc_{name}"] = float((pred == targets)[mask].double().mean())
    return out


# --------------------------------------------------------------------------------------------------
# How abruptly a curve rises


def rise(history: list[dict], column: str, falling: bool = False, plateau: int = 3) -> dict:
    """The rise of ``column`` over a run's history (logged ``step``, value): from the first logged
    value to the final plateau (the mean of the last ``plateau`` values); t10, t50, t90: the steps at
    which the curve first reaches f of the rise and stays there at every later evaluation, linearly
    interpolated between the last evaluation short of the level and the next; width = t90 - t10.
    ``falling``: the same for a curve that falls (a loss). NaN throughout when the curve does not
    move in that direction, and a level is NaN when the last evaluation is still short of it."""
    rows = [(float(h["step"]), float(h[column])) for h in history if h.get(column) is not None]
    nan = float("nan")
    out = {"start": nan, "final": nan, "t10": nan, "t50": nan, "t90": nan, "width": nan}
    if len(rows) < plateau + 1:
        return out
    t = np.array([r[0] for r in rows])
    v = np.array([r[1] for r in rows]) * (-1 if falling else 1)
    start, final = v[0], v[-plateau:].mean()
    sign = -1 if falling else 1
    out.update(start=sign * start, final=sign * final)
    if not final - start > 1e-9 * max(1.0, abs(start)):  # no rise (beyond float rounding of the plateau's mean)
        return out
    for f in (0.1, 0.5, 0.9):
        level = start + f * (final - start)
        short = np.flatnonzero(v < level)
        if short.size == 0:
            out[f"t{round(f * 100)}"] = t[0]
        elif short[-1] < len(v) - 1:
            k = short[-1]
            out[f"t{round(f * 100)}"] = t[k] + (level - v[k]) / (v[k + 1] - v[k]) * (t[k + 1] - t[k])
    out["width"] = out["t90"] - out["t10"]
    return {k: float(x) for k, x in out.items()}


def steepest_share(
    history: list[dict], column: str, window: float = 100, falling: bool = False, plateau: int = 3
) -> float:
    """The largest share of the whole rise (``rise``: first value to the final plateau) gained within
    any ``window`` steps: v[j] - v[i] over logged steps t_j - t_i <= window, divided by the rise. A
    rise that is spread evenly over T steps scores about window / T; a jump scores near 1, even when
    the curve also rises slowly elsewhere (a two-stage rise, whose 10-90% width spans both stages).
    NaN when the curve does not rise."""
    rows = [(float(h["step"]), float(h[column])) for h in history if h.get(column) is not None]
    if len(rows) < plateau + 1:
        return float("nan")
    t = np.array([r[0] for r in rows])
    v = np.array([r[1] for r in rows]) * (-1 if falling else 1)
    total = v[-plateau:].mean() - v[0]
    if not total > 1e-9 * max(1.0, abs(v[0])):
        return float("nan")
    gain = v[None, :] - v[:, None]  # [i, j]: v_j - v_i
    ok = (t[None, :] > t[:, None]) & (t[None, :] - t[:, None] <= window)
    return float(gain[ok].max() / total) if ok.any() else float("nan")


def abruptness(history: list[dict], formed: bool, column: str, prefix: str, falling: bool = False) -> dict:
    """``rise`` of ``column`` under keys ``<prefix>_t10`` ... ``<prefix>_width``, and
    ``<prefix>_width_over_t50``; all NaN unless ``formed`` (the rule: a rise is measured only in
    runs that met the formation criterion, otherwise there is no rise to time)."""
    r = rise(history, column, falling) if formed else {k: float("nan") for k in ("t10", "t50", "t90", "width")}
    keys = ("t10", "t50", "t90", "width")
    out = {f"{prefix}_{k}": r[k] for k in keys}
    t50 = r["t50"]
    out[f"{prefix}_width_over_t50"] = r["width"] / t50 if t50 and not math.isnan(t50) else float("nan")
    return out
