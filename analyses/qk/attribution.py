"""QK attribution: which components of the residual stream make a head attend where it does.

A head's score of query position i on key position j is the bilinear form ``q_i . k_j * scale``
(the seeds' ``x W_Q W_K^T y^T``). On a pre-norm model the stream that layer L reads is a sum of
components: the token embedding (``input``), an absolute position embedding where the model has one
(``pos``), each earlier head's output (``a{l}.h{h}``, the circuits' node names), each earlier MLP's
output (``m{l}``) and the constants (``bias``: the attention output biases; on a sandwich or reordered
model what ``ln1_post`` adds). With every normalisation's scale *frozen* at its value in the run (the
convention of direct logit attribution), the query and the key are linear in those components:

    q_i = rot_i( qknorm_frozen( ln1_frozen(sum_a x_a) @ W_Q + b_Q ) ),

RoPE is a rotation, so ``score(i, j) = sum_a sum_b T[a, b]`` with ``T[a, b] = scale * q_i(a) . k_j(b)``
exactly: a matrix of (query-side component) x (key-side component) terms whose sum is the model's own
``hook_attn_scores`` (up to float rounding: the terms are computed in float64 from the fp32 run).
The ``bias`` row and column carry every constant (b_Q, b_K, a LayerNorm's bias passed through W_Q /
W_K, the residual's biases); ALiBi's distance penalty is a constant of the pair, ``offset``.

What is frozen, per architecture (``models.Config.norm_placement``):

* pre-norm (Llama, SmolLM2, GPT-2): ln1's scale at i and at j (LayerNorm's centring is linear, so it
  is applied to every component);
* sandwich (Gemma 2/3): also each earlier layer's ``ln1_post`` scale (the heads' outputs are summed,
  then rescaled, before they reach the stream), and the embedding factor is inside ``input``
  (``hook_embed`` is scaled); ``hook_mlp_out`` is already after ``ln2_post``, so an MLP is one
  component as it is;
* reordered (OLMo-2): the same without ln1 (attention reads the stream itself);
* QK-norm (Qwen3, Gemma 3: per head; OLMo-2: over the whole projection): the norm's scale at i and j.

Parallel blocks (GPT-J, NeoX: attention and MLP both read the block's input) change nothing here: the
stream a layer reads is still the sum of the earlier sublayers' outputs. Granite's residual multiplier
scales each head's output (and b_O) before the residual add, so the head components are taken times it
(``hook_mlp_out`` is already after it). Layers without RoPE (``rope_layers``) and fixed scaled RoPE
rotate as the model's own ``rotate`` does.

Refused in one line (``refusal``, on ``analyses.architecture``'s features): post-norm models (BERT,
MiniLM: the norms rescale the stream itself, which is then not a sum of components), soft-capped scores
(Gemma 2: tanh of the bilinear form is no sum), a norm right after the embeddings, clamped q/k
(``clip_qkv``: a clamp is not linear), scaled RoPE whose frequencies depend on the prompt's length
("dynamic", "longrope": a position's rotation is not its own).

Grouped-query attention is native: a query head's key side is its kv head's (``head // group_size``),
shared by the heads of its group.

``frozen_scale_check`` measures what the frozen scales leave out: it removes one component from the
stream layer L reads at the key (or query) position only, reruns, and compares the score's change
with minus that component's marginal.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from analyses.architecture import refuse, setting, uses_rope
from analyses.circuits.nodes import INPUT, head_name, mlp_name

__all__ = ["QKAttribution", "qk_attribution", "qk_attributions", "components_of", "frozen_scale_check",
           "frozen_scale_checks", "refusal", "BIAS", "POS"]  # fmt: skip

BIAS = "bias"  # the constants: b_Q / b_K, a LayerNorm's bias through W_Q / W_K, the stream's biases
POS = "pos"  # an absolute position embedding (learned, sinusoidal); RoPE models have none in the stream
_SIDES = ("query", "key")


# the features whose scores do not split into component terms, and why (``analyses.architecture.refuse``)
_REFUSED = {
    "post_norm": "its norms rescale the residual stream itself, so the stream a layer reads is not a sum of "
    "components and no score splits into component terms (use a pre-norm model, e.g. smollm2)",
    "attn_softcap": "a tanh of the bilinear form is not a sum",
    "embed_norm": "the norm right after them rescales the embedding, so the embedding is not one component",
    "bidirectional": "QK attribution here reads causal models (query i on an earlier key j)",
    "clip_qkv": "a clamped query or key is not the sum of its components' queries or keys, so no score splits "
    "into component terms",
    "runtime_rope": "a position's rotation depends on the prompt's length, not on the position alone, so a "
    "component's query or key cannot be rotated on its own",
}


def refusal(model: Any) -> str | None:
    """Why ``model``'s scores do not split into component terms (one line), or None where they do.
    Parallel blocks, Granite's residual multiplier, layers without RoPE and fixed scaled RoPE split
    (the stream is still a sum of the sublayers' outputs; RoPE is the model's own ``rotate``)."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(model, "blocks"):
        return f"{type(model).__name__} is not a models.Transformer; QK attribution reads the toolkit's own model"
    return refuse(cfg, _REFUSED)


@dataclass
class QKAttribution:
    """The terms of one head's score of ``query_pos`` on ``key_pos`` (per prompt) and, where
    ``other_pos`` was given, of the difference score(key) - score(other).

    ``terms`` [batch, n_query_components, n_key_components] (float64): ``terms.sum((1, 2)) + offset``
    is the score; ``score`` the model's own ``hook_attn_scores`` there. ``query_marginal`` [batch,
    n_query] sums each query-side component's terms over the key side (what it contributes), and
    ``key_marginal`` [batch, n_key] the other way. ``difference`` is the same object for
    score(key) - score(other) (its ``score`` the model's difference), or None."""

    model: str
    layer: int
    head: int
    kv_head: int
    components: list[str]  # both sides' components, in stream order (the same list on both sides)
    query_pos: Tensor  # [batch]
    key_pos: Tensor  # [batch]
    terms: Tensor  # [batch, n, n] float64
    score: Tensor  # [batch] the model's hook_attn_scores[b, head, query_pos, key_pos]
    offset: Tensor  # [batch] constants of the pair outside the bilinear form (ALiBi), 0 otherwise
    difference: QKAttribution | None = None
    other_pos: Tensor | None = None
    info: dict = field(default_factory=dict)
    capture: Any = field(default=None, repr=False)  # the run's captured components (frozen_scale_checks reads them)

    @property
    def query_marginal(self) -> Tensor:
        return self.terms.sum(-1)

    @property
    def key_marginal(self) -> Tensor:
        return self.terms.sum(-2)

    @property
    def total(self) -> Tensor:
        """The sum of the terms and the offset [batch]: equals ``score`` up to rounding."""
        return self.terms.sum((-2, -1)) + self.offset

    def error(self) -> Tensor:
        """|total - score| [batch]."""
        return (self.total - self.score.double()).abs()

    def marginals(self) -> pd.DataFrame:
        """Long table: one row per prompt, side and component, with the marginal ``term``."""
        rows = []
        for side, values in (("query", self.query_marginal), ("key", self.key_marginal)):
            v = values.cpu().numpy()
            for b in range(v.shape[0]):
                rows += [(b, side, c, float(v[b, k])) for k, c in enumerate(self.components)]
        return pd.DataFrame(rows, columns=["prompt", "side", "component", "term"])


def _gather(x: Tensor, pos: Tensor) -> Tensor:
    """x [batch, pos, ...] at one position per row -> [batch, ...]."""
    return x[torch.arange(x.shape[0], device=x.device), pos.to(x.device)]


def components_of(model: Any, layer: int) -> list[str]:
    """The components of the stream layer ``layer`` reads, in the order of the term matrix's rows and
    columns: ``input``, ``pos`` (absolute positions only), every head and MLP of the earlier layers,
    ``bias``."""
    cfg = model.cfg
    out = [INPUT] + ([POS] if cfg.positional in ("learned", "sinusoidal") else [])
    for l in range(layer):
        out += [head_name(l, h) for h in range(cfg.n_heads)] + [mlp_name(l)]
    return [*out, BIAS]


def _as_positions(pos: int | Sequence[int] | Tensor, batch: int, n: int, what: str) -> Tensor:
    t = torch.as_tensor(pos, dtype=torch.long).reshape(-1)
    if t.numel() == 1:
        t = t.expand(batch).clone()
    if t.numel() != batch:
        raise ValueError(f"{what}: {t.numel()} positions for {batch} prompts; give one, or one per prompt")
    t = torch.where(t < 0, t + n, t)
    if bool(((t < 0) | (t >= n)).any()):
        raise ValueError(f"{what} {pos!r} is outside the prompts of {n} tokens (0..{n - 1}, or negative from the end)")
    return t


def _tokens(model: Any, tokens: Any) -> Tensor:
    if isinstance(tokens, (str, list)) and (isinstance(tokens, str) or (tokens and isinstance(tokens[0], str))):
        tokens = model.to_tokens(tokens)
    tokens = torch.as_tensor(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or tokens.shape[1] == 0 or tokens.shape[0] == 0:
        raise ValueError(f"tokens must be [batch, pos] with at least one token, got shape {tuple(tokens.shape)}")
    if tokens.is_floating_point():
        raise ValueError(f"tokens must be integer ids, got {tokens.dtype}")
    return tokens


class _Capture:
    """Hook functions that keep one position per row of the hooked activations (and the full value
    where asked), so memory is O(components x d_model) per prompt whatever the length."""

    def __init__(self, positions: dict[str, Tensor]) -> None:
        self.positions = positions  # side -> [batch]
        self.values: dict[tuple[str, str], Tensor] = {}

    def at(self, name: str, act: Tensor) -> None:
        for side, pos in self.positions.items():
            self.values[(name, side)] = _gather(act, pos).detach()

    def hook(self, name: str):
        def fn(act: Tensor, hook: Any = None) -> None:
            self.at(name, act)

        return fn


def _frozen_norm(norm: Any, x: Tensor, scale: Tensor, constant: bool) -> Tensor:
    """A Norm with its divisor frozen at ``scale`` [batch, 1] applied to components ``x`` [batch, n,
    d_model] (no bias: a LayerNorm's bias is a constant, added once where ``constant``)."""
    cfg = norm.cfg
    x = x - x.mean(-1, keepdim=True) if norm.kind == "layernorm" else x
    out = x / scale[:, None]
    if norm.w is not None:  # None: a norm without weights (OLMo's non-parametric LayerNorm)
        out = out * (norm.w.double() + cfg.norm_offset)
    if constant and norm.b is not None:
        out = out.clone()
        out[:, -1] = out[:, -1] + norm.b.double()
    return out


def _qk_norm_frozen(attn: Any, v: Tensor, full: Tensor, head: int, w: Tensor) -> Tensor:
    """QK-norm of per-component vectors ``v`` [batch, n, d_head] of one head with the scale frozen at
    the full projection's (``full`` [batch, heads, d_head], the run's q or k before the norm)."""
    cfg = attn.cfg
    d = cfg.d_head
    if cfg.qk_norm == "head":
        s = torch.sqrt(full[:, head].double().pow(2).mean(-1) + cfg.eps)  # [batch]
        weight = w.double()
    else:  # over the whole projection (OLMo-2): one scale per position, the weight's slice of this head
        s = torch.sqrt(full.double().flatten(1).pow(2).mean(-1) + cfg.eps)
        weight = w.double()[head * d : (head + 1) * d]
    return v / s[:, None, None] * (weight + cfg.norm_offset)


def _check_head(cfg: Any, layer: int, head: int) -> None:
    if not 0 <= layer < cfg.n_layers or not 0 <= head < cfg.n_heads:
        raise ValueError(
            f"qk_attribution: head ({layer}, {head}) does not exist; {cfg.name!r} has layers 0..{cfg.n_layers - 1} "
            f"and heads 0..{cfg.n_heads - 1}"
        )


def _check_keys(cfg: Any, layer: int, q_pos: Tensor, keys: Tensor, what: str) -> None:
    if bool((keys > q_pos).any()):
        raise ValueError(f"qk_attribution: a {what} position lies after its query position; a causal head sees none")
    window = cfg.window(layer)
    if window is not None and bool((q_pos - keys >= window).any()):
        raise ValueError(
            f"qk_attribution: a {what} position lies outside layer {layer}'s sliding window of {window} tokens "
            "(the head cannot see it: its score there is -inf)"
        )


def _capture_hooks(model: Any, top_layer: int, cap: _Capture) -> list[tuple[str, Any]]:
    """The hooks that keep, at the capture's positions, every component of the streams up to layer
    ``top_layer`` and what freezing the norms needs."""
    hooks: list[tuple[str, Any]] = [("hook_embed", cap.hook("input"))]
    if model.W_token_type is not None:
        hooks.append(("hook_token_type_embed", cap.hook("token_type")))
    if model.cfg.positional in ("learned", "sinusoidal"):
        hooks.append(("hook_pos_embed", cap.hook(POS)))
    for l in range(top_layer):
        hooks.append((f"blocks.{l}.attn.hook_result", cap.hook(f"result{l}")))
        hooks.append((f"blocks.{l}.hook_mlp_out", cap.hook(mlp_name(l))))
        if model.blocks[l].ln1_post is not None:
            hooks.append((f"blocks.{l}.ln1_post.hook_scale", cap.hook(f"post_scale{l}")))
    return hooks


@torch.no_grad()
def qk_attributions(
    model: Any,
    tokens: Any,
    heads: Sequence[tuple[int, int]],
    query_pos: int | Sequence[int] | Tensor,
    key_pos: int | Sequence[int] | Tensor,
    other_pos: Any = None,
) -> dict[tuple[int, int], QKAttribution]:
    """``qk_attribution`` of several heads from one forward pass: {(layer, head): QKAttribution}.
    ``other_pos``: one position (or one per prompt) for every head, or a dict {(layer, head): positions}."""
    why = refusal(model)
    if why:
        raise ValueError(f"qk_attribution: {why}")
    cfg = model.cfg
    heads = [(int(l), int(h)) for l, h in heads]
    if not heads:
        raise ValueError("qk_attribution: no head given")
    for l, h in heads:
        _check_head(cfg, l, h)
    tokens = _tokens(model, tokens).to(model.W_E.device)
    b, n = tokens.shape
    q_pos = _as_positions(query_pos, b, n, "query_pos")
    k_pos = _as_positions(key_pos, b, n, "key_pos")
    others: dict = {}
    if other_pos is not None:
        given = other_pos if isinstance(other_pos, dict) else {hd: other_pos for hd in heads}
        others = {hd: _as_positions(given[hd], b, n, "other_pos") for hd in heads}
    sides = {"query": q_pos, "key": k_pos}
    for hd, pos in others.items():
        sides[f"other{hd}"] = pos
    for l, h in heads:
        _check_keys(cfg, l, q_pos, k_pos, "key")
        if (l, h) in others:
            _check_keys(cfg, l, q_pos, others[(l, h)], "other")
    cap = _Capture(sides)
    layers = sorted({l for l, _ in heads})
    hooks = _capture_hooks(model, max(layers), cap)
    scores: dict = {}

    def keep_scores(act: Tensor, hook: Any = None, layer: int = 0) -> None:
        rows = act[torch.arange(b), :, q_pos]  # [batch, head, key_pos]
        for l, h in heads:
            if l == layer:
                scores[(l, h, "key")] = rows[torch.arange(b), h, k_pos].detach()
                if (l, h) in others:
                    scores[(l, h, "other")] = rows[torch.arange(b), h, others[(l, h)]].detach()

    for l in layers:
        if model.blocks[l].ln1 is not None:
            hooks.append((f"blocks.{l}.ln1.hook_scale", cap.hook(f"ln1_scale{l}")))
        hooks += [
            (f"blocks.{l}.hook_resid_pre", cap.hook(f"resid{l}")),
            (f"blocks.{l}.attn.hook_q", cap.hook(f"q{l}")),
            (f"blocks.{l}.attn.hook_k", cap.hook(f"k{l}")),
            (f"blocks.{l}.attn.hook_attn_scores", functools.partial(keep_scores, layer=l)),
        ]
    model.run_with_hooks(tokens, fwd_hooks=hooks, return_type=None)

    out = {}
    for l, h in heads:
        names = components_of(model, l)
        kv = h // cfg.group_size
        q = _side_vectors(model, l, h, "query", cap)

        def attribution(side: str, pos: Tensor, score: Tensor) -> QKAttribution:
            k = _side_vectors(model, l, kv, side, cap, pos)  # noqa: B023 - used at once
            offset = torch.zeros(b, dtype=torch.float64)
            if cfg.positional == "alibi":
                offset = -float(model.blocks[l].attn.alibi_slopes[h]) * (q_pos - pos).abs().double()  # noqa: B023
            return QKAttribution(
                model=cfg.name, layer=l, head=h, kv_head=kv, components=names, query_pos=q_pos,  # noqa: B023
                key_pos=pos, terms=torch.einsum("bad,bcd->bac", q, k) * cfg.scale, score=score.double().cpu(),  # noqa: B023
                offset=offset,
            )  # fmt: skip

        a = attribution("key", k_pos, scores[(l, h, "key")])
        if (l, h) in others:
            o = attribution(f"other{(l, h)}", others[(l, h)], scores[(l, h, "other")])
            a.other_pos = o.key_pos
            a.difference = QKAttribution(
                model=cfg.name, layer=l, head=h, kv_head=kv, components=names, query_pos=q_pos, key_pos=k_pos,
                terms=a.terms - o.terms, score=a.score - o.score, offset=a.offset - o.offset, other_pos=o.key_pos,
            )  # fmt: skip
        resid = cap.values[(f"resid{l}", "query")].double()
        stream = _stream_components(model, l, cap, "query").sum(1)
        a.info = {"stream_error": float((stream - resid).abs().max()), "stream_scale": float(resid.abs().max())}
        a.capture = cap
        out[(l, h)] = a
    return out


def qk_attribution(
    model: Any,
    tokens: Any,
    layer: int,
    head: int,
    query_pos: int | Sequence[int] | Tensor,
    key_pos: int | Sequence[int] | Tensor,
    other_pos: int | Sequence[int] | Tensor | None = None,
) -> QKAttribution:
    """The terms of head (``layer``, ``head``)'s score of ``query_pos`` on ``key_pos``, per prompt of
    ``tokens`` ([batch, pos] ids, or text; prompts of one length, or right-padded: padding after the
    query changes nothing in a causal model): see the module's docstring. ``query_pos`` / ``key_pos``
    / ``other_pos``: one position for every prompt or one per prompt (negative: from the end);
    ``other_pos`` adds ``difference``, the terms of score(key) - score(other), the quantity the
    pattern's choice between the two keys depends on. ``qk_attributions`` does several heads in one
    forward pass."""
    if refusal(model) is None:
        _check_head(model.cfg, layer, head)
    return qk_attributions(model, tokens, [(layer, head)], query_pos, key_pos, other_pos)[(layer, head)]


def _stream_components(model: Any, layer: int, cap: _Capture, side: str) -> Tensor:
    """The components of the stream layer ``layer`` reads at ``side``'s position, [batch, n, d_model]
    float64, in ``components_of`` order; their sum is ``hook_resid_pre``."""
    v = cap.values

    def get(name: str) -> Tensor:
        return v[(name, side)].double()

    embed = get("input")
    if ("token_type", side) in v:
        embed = embed + get("token_type")
    parts = [embed]
    if (POS, side) in v:
        parts.append(get(POS))
    bias = torch.zeros_like(embed)
    m = float(setting(model.cfg, "residual_multiplier"))  # Granite: attention's output times m before the add
    for l in range(layer):
        block = model.blocks[l]
        heads = get(f"result{l}")  # [batch, head, d_model]
        b_o = None if block.attn.b_O is None else block.attn.b_O.double().expand_as(embed)
        if m != 1.0:
            heads, b_o = heads * m, None if b_o is None else b_o * m
        if block.ln1_post is not None:  # the heads' sum (+ b_O) is rescaled before it reaches the stream
            scale = get(f"post_scale{l}")  # [batch, 1]
            stacked = torch.cat([heads, (b_o if b_o is not None else torch.zeros_like(embed))[:, None]], 1)
            normed = _frozen_norm(block.ln1_post, stacked, scale, constant=True)
            heads, b_o = normed[:, :-1], normed[:, -1]
        parts += list(heads.unbind(1))
        parts.append(get(mlp_name(l)))
        if b_o is not None:
            bias = bias + b_o
    parts.append(bias)
    return torch.stack(parts, 1)


def _side_vectors(model: Any, layer: int, head: int, side: str, cap: _Capture, pos: Tensor | None = None) -> Tensor:
    """Each component's query (side "query", ``head`` a query head) or key (``head`` a kv head)
    vector of head ``head`` at ``pos``, as the score sees it (frozen norms, RoPE): [batch, n, d_head]
    float64; the constants are in the last component (``bias``)."""
    cfg = model.cfg
    block = model.blocks[layer]
    attn = block.attn
    x = _stream_components(model, layer, cap, side)  # [batch, n, d_model]
    if block.ln1 is not None:
        x = _frozen_norm(block.ln1, x, cap.values[(f"ln1_scale{layer}", side)].double(), constant=True)
    is_q = side == "query"
    pos = cap.positions[side] if pos is None else pos
    w = (attn.W_Q if is_q else attn.W_K)[head].double()  # [d_model, d_head]
    bias = attn.b_Q if is_q else attn.b_K
    vec = x @ w
    if bias is not None:
        vec = vec.clone()
        vec[:, -1] = vec[:, -1] + bias[head].double()
    if cfg.qk_norm != "none":
        full = cap.values[(f"q{layer}" if is_q else f"k{layer}", side)]  # [batch, heads, d_head]
        norm_w = attn.q_norm_w if is_q else attn.k_norm_w
        vec = _qk_norm_frozen(attn, vec, full, head, norm_w)
    if uses_rope(cfg, layer):  # a rotation at the position: each component rotates alone
        n = vec.shape[1]
        positions = pos.to(vec.device)[:, None]  # [batch, 1]
        rotated = model.rotate(vec.to(torch.float64)[:, :, None], positions, layer=layer)  # [batch, n, 1, d_head]
        vec = rotated[:, :, 0].reshape(vec.shape[0], n, -1)
    return vec


@torch.no_grad()
def frozen_scale_checks(
    model: Any, tokens: Any, attributions: dict, asks: Sequence[tuple[tuple[int, int], str, str]]
) -> pd.DataFrame:
    """What freezing the norms' scales leaves out, measured. For each ask ((layer, head), component,
    side) the component is removed from the stream that layer reads at the key (``side="key"``) or
    query position only (its value subtracted from ``blocks.L.hook_resid_pre`` there, so nothing else
    in the run changes), the model reruns, and the score's change is set beside minus the
    component's marginal term (what the frozen scales predict). ``attributions``: ``qk_attributions``'s
    result on the same ``tokens``. The asks run as one batch (the prompts repeated once per ask).
    One row per ask and prompt: ``predicted``, ``measured`` and their ``ratio``."""
    tokens = _tokens(model, tokens).to(model.W_E.device)
    b = tokens.shape[0]
    plans = []
    streams: dict[tuple[int, int, str], Tensor] = {}
    for hd, component, side in asks:
        if side not in _SIDES:
            raise ValueError(f"side={side!r}: use 'query' or 'key'")
        a = attributions[tuple(hd)]
        if component not in a.components:
            near = [c for c in a.components if c.startswith(component[:2])][:5]
            raise ValueError(f"component {component!r} is not one of the stream's; e.g. {', '.join(near)}")
        k = a.components.index(component)
        key = (a.layer, a.head, side)
        if key not in streams:  # one stream per head and side, whatever the number of asks on it
            streams[key] = _stream_components(model, a.layer, a.capture, side)
        value = streams[key][:, k]  # [batch, d_model]
        plans.append((a, k, side, value))
    if not plans:
        return pd.DataFrame(columns=["layer", "head", "prompt", "side", "component", "predicted", "measured", "ratio"])
    rows = torch.arange(b)
    got: dict = {}

    def remove(act: Tensor, hook: Any = None, layer: int = 0) -> Tensor:
        act = act.clone()
        for r, (a, _, side, value) in enumerate(plans):
            if a.layer == layer:
                pos = a.key_pos if side == "key" else a.query_pos
                act[r * b + rows, pos] = (act[r * b + rows, pos].double() - value).to(act.dtype)
        return act

    def keep(act: Tensor, hook: Any = None, layer: int = 0) -> None:
        for r, (a, _, _, _) in enumerate(plans):
            if a.layer == layer:
                got[r] = act[r * b + rows, a.head, a.query_pos, a.key_pos].detach().double().cpu()

    hooks = []
    for layer in sorted({a.layer for a, *_ in plans}):
        hooks += [(f"blocks.{layer}.hook_resid_pre", functools.partial(remove, layer=layer)),
                  (f"blocks.{layer}.attn.hook_attn_scores", functools.partial(keep, layer=layer))]  # fmt: skip
    model.run_with_hooks(tokens.repeat(len(plans), 1), fwd_hooks=hooks, return_type=None)
    frames = []
    for r, (a, k, side, _) in enumerate(plans):
        marginal = (a.key_marginal if side == "key" else a.query_marginal)[:, k]
        predicted = -marginal.cpu().numpy()
        measured = (got[r] - a.score).numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = measured / predicted
        frames.append(pd.DataFrame({"layer": a.layer, "head": a.head, "prompt": np.arange(b), "side": side,
                                    "component": a.components[k], "predicted": predicted, "measured": measured,
                                    "ratio": ratio}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def frozen_scale_check(
    model: Any, tokens: Any, attribution: QKAttribution, component: str, side: str = "key"
) -> pd.DataFrame:
    """``frozen_scale_checks`` for one head and component."""
    hd = (attribution.layer, attribution.head)
    return frozen_scale_checks(model, tokens, {hd: attribution}, [(hd, component, side)])
