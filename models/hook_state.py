"""Whether a hook point is watched, and whether its hooks edited the value they were handed: what
lets a hook point that costs something (``attn.hook_result``, ``ln*.hook_scale``, the reader inputs
of ``models/split_inputs.py``) compute its value only when a hook is attached, and lets the forward
keep its fast path when the hooks only read. Private helpers of ``models.transformer`` and
``models.split_inputs``."""

from __future__ import annotations

import torch
from torch import Tensor

from interp.hooks import HookPoint

__all__: list[str] = []


# The one source of every hook point's shape, by its last name component (the HookPoint comments in
# models/transformer.py and the docs/hooks.md table are tested against it: tests/models/test_hook_shapes.py).
_HOOK_SHAPES = {
    "hook_embed": "[batch, pos, d_model]",
    "hook_pos_embed": "[batch, pos, d_model]",
    "hook_token_type_embed": "[batch, pos, d_model]",
    "hook_resid_pre": "[batch, pos, d_model]",
    "hook_attn_in": "[batch, pos, d_model]",
    "hook_q_input": "[batch, pos, head, d_model]",
    "hook_k_input": "[batch, pos, kv_head, d_model]",
    "hook_v_input": "[batch, pos, kv_head, d_model]",
    "hook_mlp_in": "[batch, pos, d_model]",
    "hook_scale": "[batch, pos, 1]",
    "hook_normalized": "[batch, pos, d_model]",
    "hook_q": "[batch, pos, head, d_head]",
    "hook_k": "[batch, pos, kv_head, d_head]",
    "hook_v": "[batch, pos, kv_head, d_head]",
    "hook_q_normed": "[batch, pos, head, d_head]",
    "hook_k_normed": "[batch, pos, kv_head, d_head]",
    "hook_rot_q": "[batch, pos, head, d_head]",
    "hook_rot_k": "[batch, pos, kv_head, d_head]",
    "hook_attn_scores": "[batch, head, query_pos, key_pos]",
    "hook_pattern": "[batch, head, query_pos, key_pos]",
    "hook_z": "[batch, pos, head, d_head]",
    "hook_result": "[batch, pos, head, d_model]",
    "hook_attn_out": "[batch, pos, d_model]",
    "hook_resid_mid": "[batch, pos, d_model]",
    "hook_pre": "[batch, pos, d_mlp]",
    "hook_pre_linear": "[batch, pos, d_mlp]",
    "hook_post": "[batch, pos, d_mlp]",
    "hook_router_logits": "[batch, pos, expert]",
    "hook_expert_weights": "[batch, pos, expert]",
    "hook_expert_indices": "[batch, pos, top_k]",
    "hook_routing_weights": "[batch, pos, top_k]",
    "hook_expert_out": "[batch, pos, top_k, d_model]",
    "hook_mlp_out": "[batch, pos, d_model]",
    "hook_resid_post": "[batch, pos, d_model]",
}


def _hooked(hook: HookPoint) -> bool:
    """Whether anything will read or edit this hook point's value on this call."""
    return bool(hook._forward_hooks)


def _watched(hook: HookPoint) -> bool:
    """Whether a forward or a backward hook is attached: either needs the value to exist."""
    return bool(hook._forward_hooks or hook._backward_hooks)


def _snapshot(computed: Tensor) -> Tensor | int:
    """What ``_untouched`` compares against after the hooks ran: the tensor's version counter
    (every in-place edit bumps it), or, for a tensor made under ``torch.inference_mode()`` (which
    has no version counter), a copy of its values."""
    return computed.clone() if computed.is_inference() else computed._version


_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(a: Tensor, b: Tensor) -> bool:
    """Bitwise equality (NaN equals a NaN with the same bits, -0.0 differs from 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    as_int = _INT_OF_SIZE.get(a.element_size()) if a.is_floating_point() else None
    return torch.equal(a.view(as_int), b.view(as_int)) if as_int is not None else torch.equal(a, b)


def _untouched(returned: Tensor, computed: Tensor, before: Tensor | int) -> bool:
    """True when the hooks handed back the very tensor they got and did not edit it in place;
    ``before`` is ``_snapshot(computed)`` taken before the hooks ran."""
    if returned is not computed:
        return False
    if isinstance(before, Tensor):  # inference mode: compare the values
        return _same_bits(computed, before)
    return computed._version == before
