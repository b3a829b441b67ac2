"""Reader-input hooks, TransformerLens's names: each reader of the residual stream gets its own copy.

==========================  ====================================  ==================================
hook                        shape                                 what it is
==========================  ====================================  ==================================
``blocks.l.hook_attn_in``   ``[batch, pos, d_model]``             the residual the attention reads
``blocks.l.hook_q_input``   ``[batch, pos, head, d_model]``       one copy per query head
``blocks.l.hook_k_input``   ``[batch, pos, kv_head, d_model]``    one copy per key/value head
``blocks.l.hook_v_input``   ``[batch, pos, kv_head, d_model]``    one copy per key/value head
``blocks.l.hook_mlp_in``    ``[batch, pos, d_model]``             the residual the MLP reads
==========================  ====================================  ==================================

In pre-norm models the inputs are the residual stream *before* the norm (as TransformerLens's
``use_split_qkv_input`` / ``use_attn_in`` / ``use_hook_mlp_in`` give them): each reader normalises
its own copy, so editing one head's ``hook_q_input`` changes that head's queries only. In post-norm
models (BERT/MiniLM) the residual is already normalised and the copies are read as they are.

Grouped-query attention: key/value head ``g`` serves query heads ``g*group .. (g+1)*group-1``, and
its k and v are computed once from one input, so ``hook_k_input`` and ``hook_v_input`` have one copy
per *kv* head (``[batch, pos, kv_head, d_model]``). An edit there changes the keys (values) that all
the group's query heads see; an edge into a kv head's k input is one edge, not one per query head.

Cost and parity. With no hook on any of them (and split inputs not switched on) a block runs the
code path it always runs, bitwise equal to Hugging Face. ``hook_attn_in`` and ``hook_mlp_in`` hand
the hook a copy and the sublayer reads that copy: unedited, bitwise the same values. The q/k/v
inputs fire with per-head copies; if the hooks only read them (same tensor back, not edited in
place, no backward hook), the block then takes its usual path, so caching keeps the output bitwise
identical. When a hook edits one, when a backward hook is attached (the gradient must flow through
the per-head copies), or under ``use_split_inputs(model)``, the split path runs: each copy is
normalised by the layer's ``ln1`` (its weights; its ``hook_scale``/``hook_normalized`` do not fire
there) and projected by its own head's ``W_Q``/``W_K``/``W_V``. That is the same function by other
kernels: logits agree to float rounding (fp32: about 1e-6 relative on the tiny models; tested),
not bitwise.

Caching. ``run_with_cache`` attaches no hook to a reader input that no other hook watches: it caches
``hook_resid_pre`` / ``hook_resid_mid`` (which it holds anyway) and makes the copies on first read
of the cache (``lazy_attention_inputs``, ``lazy_mlp_input``; ``interp.hooks.LazyCacheDict``), with
the functions below that make them in the forward pass, so the same bits. The block then runs its
usual path: caching every hook point costs no per-head copies (n_heads x the residual, per layer)
and no trip through the split path. A hook attached to a reader input (or to ``hook_attn_in``, for
the q/k/v inputs) makes it fire for real, as above, and its edit takes effect.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from einops import rearrange
from torch import Tensor, nn

from models.hook_state import _snapshot, _untouched, _watched
from models.norms import norm as norm_fn

if TYPE_CHECKING:
    from interp.hooks import HookPoint, LazyEntry

__all__ = [
    "READER_HOOKS",
    "attention_reads_residual",
    "lazy_attention_inputs",
    "lazy_mlp_input",
    "per_head_copies",
    "reader_copy",
    "reads_inputs",
    "split_block_forward",
    "split_inputs",
    "use_split_inputs",
]

READER_HOOKS = ("hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input", "hook_mlp_in")
_QKV = ("hook_q_input", "hook_k_input", "hook_v_input")
_FLAG = "_split_inputs"  # a plain attribute of each block: the split path always


def use_split_inputs(model: nn.Module, on: bool = True) -> None:
    """Run every block's attention on per-head q/k/v input copies even without a hook (what
    TransformerLens's ``set_use_split_qkv_input(True)`` does); ``on=False`` switches it off."""
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        raise TypeError(f"use_split_inputs needs a models.Transformer (with .blocks), got {type(model).__name__}")
    for block in blocks:
        block.__dict__[_FLAG] = bool(on)


@contextmanager
def split_inputs(model: nn.Module) -> Iterator[nn.Module]:
    """``use_split_inputs(model)`` inside the block, the previous setting restored after it."""
    before = [block.__dict__.get(_FLAG, False) for block in model.blocks]
    use_split_inputs(model, True)
    try:
        yield model
    finally:
        for block, was in zip(model.blocks, before):
            block.__dict__[_FLAG] = was


def reads_inputs(block: nn.Module) -> bool:
    """Whether this block must hand out reader inputs: one of them is hooked, or split is on."""
    return block.__dict__.get(_FLAG, False) or any(_watched(getattr(block, name)) for name in READER_HOOKS)


def reader_copy(x: Tensor) -> Tensor:
    """``hook_attn_in``'s / ``hook_mlp_in``'s value: a copy of the residual ``x`` [batch, pos, d_model]."""
    return x.clone()


def per_head_copies(x: Tensor, n: int) -> Tensor:
    """``hook_q_input``'s (n = head) / ``hook_k_input``'s, ``hook_v_input``'s (n = kv_head) value:
    ``n`` copies of ``x`` [batch, pos, d_model] -> [batch, pos, n, d_model], contiguous."""
    b, p, m = x.shape
    return x[:, :, None].expand(b, p, n, m).clone()


def _copy_for(hook: HookPoint, x: Tensor) -> Tensor:
    """The reader's own copy of ``x`` through its hook (``x`` itself when nothing watches it)."""
    return hook(reader_copy(x)) if _watched(hook) else x


def attention_reads_residual(block: nn.Module) -> bool:
    """Whether, under the hooks attached now, the attention of ``block`` reads ``hook_resid_pre``'s
    value as it is (through ``ln1`` and its hooks, where there is one): no hook on ``hook_attn_in``
    or the q/k/v inputs (a hook there may edit them) and split inputs off (the split path applies
    ``ln1``'s function without its hooks)."""
    return not block.__dict__.get(_FLAG, False) and not any(_watched(getattr(block, n)) for n in READER_HOOKS[:4])


def lazy_attention_inputs(block: nn.Module, prefix: str, wanted: Callable[[str], bool]) -> dict[str, LazyEntry]:
    """The ``wanted`` attention reader inputs of ``block`` (hook names starting ``prefix``) as lazy
    cache entries (``interp.hooks.HookedModule.lazy_cache_entries``): copies of ``hook_resid_pre``,
    made on read by the functions the split path makes them with (the same bits). The q/k/v inputs
    copy ``hook_attn_in``'s value, so they qualify only while no hook watches ``hook_attn_in``."""
    cfg, source = block.cfg, f"{prefix}hook_resid_pre"
    entries: dict[str, LazyEntry] = {}
    if wanted(f"{prefix}hook_attn_in"):
        entries[f"{prefix}hook_attn_in"] = (source, reader_copy)
    if not _watched(block.hook_attn_in):
        for name, n in zip(_QKV, (cfg.n_heads, cfg.kv_heads, cfg.kv_heads)):
            if wanted(prefix + name):
                entries[prefix + name] = (source, functools.partial(per_head_copies, n=n))
    return entries


def lazy_mlp_input(block: nn.Module, prefix: str, wanted: Callable[[str], bool]) -> dict[str, LazyEntry]:
    """``hook_mlp_in`` of ``block`` as a lazy cache entry where ``wanted``: a copy of ``hook_resid_mid``."""
    name = f"{prefix}hook_mlp_in"
    source = "hook_resid_pre" if block.cfg.parallel_block else "hook_resid_mid"  # a parallel MLP reads resid_pre
    return {name: (f"{prefix}{source}", reader_copy)} if wanted(name) else {}


def _normalise(norm: nn.Module | None, x: Tensor) -> Tensor:
    """``norm``'s function on ``x`` [..., d_model] without its hooks (any leading axes)."""
    return x if norm is None else norm_fn(norm.cfg, x, norm.w, norm.b)


def _project(inputs: Tensor, weight: Tensor, bias: Tensor | None, d_head: int) -> Tensor:
    """Per-head projection: inputs [batch, pos, head, d_model] -> [batch, pos, head, d_head]."""
    per_head = rearrange(weight, "(h d) m -> h m d", d=d_head)
    out = torch.einsum("bphm,hmd->bphd", inputs, per_head)
    return out if bias is None else out + bias.view(-1, d_head)


def _attention(block: nn.Module, attn_in: Tensor, positions: Tensor, masks: Any, rope: Any, kv: Any, exact: bool):
    """The attention sublayer's output from its input copy, through the q/k/v input hooks."""
    cfg, attn = block.cfg, block.attn
    norm = block.ln1 if cfg.norm_placement != "post" else None  # None too where there is no ln1 (OLMo-2)
    hooks = [getattr(block, name) for name in _QKV]
    forced = block.__dict__.get(_FLAG, False)
    if not forced and not any(_watched(h) for h in hooks):
        return attn(norm(attn_in) if norm is not None else attn_in, positions, masks, rope, kv, exact)
    computed = [per_head_copies(attn_in, n) for n in (cfg.n_heads, cfg.kv_heads, cfg.kv_heads)]
    before = [_snapshot(c) for c in computed]
    given = [hook(c) for hook, c in zip(hooks, computed)]
    backward = any(h._backward_hooks for h in hooks)
    if not forced and not backward and all(_untouched(g, c, s) for g, c, s in zip(given, computed, before)):
        return attn(norm(attn_in) if norm is not None else attn_in, positions, masks, rope, kv, exact)
    q_in, k_in, v_in = (_normalise(norm, g) for g in given)
    q = _project(q_in, attn.q_weight, attn.q_bias, cfg.d_head)
    k = _project(k_in, attn.k_weight, attn.k_bias, cfg.d_head)
    v = _project(v_in, attn.v_weight, attn.v_bias, cfg.d_head)
    return attn.attend(q, k, v, positions, masks, rope, kv, exact)


def split_block_forward(
    block: nn.Module, x: Tensor, positions: Tensor, masks: Any, rope: Any, kv: Any = None, exact: bool = False
) -> Tensor:
    """``Block.forward`` after ``hook_resid_pre`` when ``reads_inputs(block)``: the same sublayers,
    each reading its own copy of the residual (the residual itself carries on unedited)."""
    cfg = block.cfg
    pre = cfg.norm_placement != "post"  # pre, sandwich, reordered: the norms sit off the residual
    m = cfg.residual_multiplier  # Granite's; 1.0 elsewhere (x * 1.0 is x, bit for bit)
    attn_in = _copy_for(block.hook_attn_in, x)
    attn_out = _attention(block, attn_in, positions, masks, rope, kv, exact)
    attn_out = block.hook_attn_out(attn_out * m if block.ln1_post is None else block.ln1_post(attn_out))
    if cfg.parallel_block:  # the MLP reads its own copy of resid_pre, through ln2 or the shared ln1
        mlp_in = _copy_for(block.hook_mlp_in, x)
        normed = _normalise(block.ln1, mlp_in) if block.ln2 is None else block.ln2(mlp_in)
        mlp_out = block.hook_mlp_out(block.mlp(normed))
        return block.hook_resid_post(block.parallel_sum(x, attn_out, mlp_out))
    mid = block.hook_resid_mid(x + attn_out if pre else block.ln1(attn_out + x))
    mlp_in = _copy_for(block.hook_mlp_in, mid)
    mlp_out = block.mlp(block.ln2(mlp_in) if pre and block.ln2 is not None else mlp_in)
    mlp_out = block.hook_mlp_out(mlp_out * m if block.ln2_post is None else block.ln2_post(mlp_out))
    return block.hook_resid_post(mid + mlp_out if pre else block.ln2(mlp_out + mid))
