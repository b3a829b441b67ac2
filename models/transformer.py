"""One readable transformer with TransformerLens hook points everywhere.

Axis vocabulary (used in every shape comment and einops string):
``batch pos head kv_head d_model d_head d_mlp query_pos key_pos vocab``.

Weights are exposed per head, in TransformerLens orientation, so that an analysis can read or edit
one head:

=============  =================================  ==========================================
attribute      shape                              meaning
=============  =================================  ==========================================
``W_Q``        ``[head, d_model, d_head]``        q = x @ W_Q[h] + b_Q[h]
``W_K/W_V``    ``[kv_head, d_model, d_head]``     grouped-query attention: kv_head <= head
``W_O``        ``[head, d_head, d_model]``        head h writes z[h] @ W_O[h] to the residual
``W_in``       ``[d_model, d_mlp]``               (``W_gate`` too for gated MLPs)
``W_out``      ``[d_mlp, d_model]``
``W_E``        ``[vocab, d_model]``
``W_pos``      ``[n_ctx, d_model]``               learned absolute positions only
``W_U``        ``[d_model, vocab]``               ``W_E.T`` when embeddings are tied
=============  =================================  ==========================================

They are views of parameters stored the way Hugging Face stores them (``q_weight`` is
``[(head d_head), d_model]``, heads concatenated): in-place edits (under ``torch.no_grad()``;
outside it they raise ``WeightEditError``) and assignments through the views change the model.
The storage is chosen so that the unhooked forward runs the same kernels on the same memory
layouts as Hugging Face eager attention and is bitwise equal to it; SmolLM2's residual stream
reaches ~2e4, where one fp32 ulp is 2e-3, so nothing short of bitwise equality could meet a 1e-5
absolute parity bound there. Biases are ``None`` where the architecture has
none, so editing a bias that does not exist is an error rather than a silent no-op.

Two hook points compute their value only when a hook is attached, so an unhooked forward pass costs
what Hugging Face's does: ``attn.hook_result`` (each head's output in d_model; otherwise the heads
are summed inside one matrix product) and ``ln*.hook_scale`` (otherwise the fused norm runs). When a
hook reads them and leaves them unchanged, the forward still takes the fast path, so caching keeps
the output bitwise identical; when a hook replaces or edits them in place (detected through the
tensor's version counter, or under ``torch.inference_mode()`` by comparing a copy of the values),
the edited value is what the model uses. The full hook table is in ``docs/hooks.md``.

Input binding and checks live in ``models/inputs.py`` (a mixin: every refusal of bad input happens
there, before the first embedding). TransformerLens's user API (``to_tokens`` and the other token
helpers, the stacked ``model.W_Q`` and ``model.OV`` / ``model.QK`` circuits, ``inputs_bound``,
``generate`` with its ``KVCache``) lives in ``models/tl_api.py``, another mixin; ``run_with_cache``
returns TransformerLens's ``ActivationCache`` (``interp/hooks.py``), and ``model.cfg`` answers to
TransformerLens's field names.
"""

from __future__ import annotations

import copy
import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor, nn

from interp.hooks import HookedModule, HookPoint, QueryRows
from models.config import Config
from models.generate import KVCache, _LayerKV
from models.hook_state import _HOOK_SHAPES, _hooked, _snapshot, _untouched, _watched
from models.inputs import InputPreparation
from models.masks import Masks
from models.mlp import MLP, MoE
from models.norms import at_least_fp32, rms_norm
from models.norms import norm as norm_fn
from models.positions import (
    RUNTIME_ROPE_TYPES,
    alibi_slopes,
    apply_rope,
    rope_cos_sin,
    rope_inv_freq,
    scaled_rope,
    sinusoidal,
)
from models.split_inputs import (
    attention_reads_residual,
    lazy_attention_inputs,
    lazy_mlp_input,
    reads_inputs,
    split_block_forward,
)
from models.tl_api import TransformerLensAPI
from models.weights import _view_param, _weight_view

if TYPE_CHECKING:
    from interp.hooks import LazyEntry
    from models.tl_api import TokenIds
    from models.tokenizer import Batch, Text, Tokenizer


# --------------------------------------------------------------------------------------------------
# Normalisation


class Norm(nn.Module):
    """LayerNorm or RMSNorm with TransformerLens hooks.

    ``hook_scale`` [batch, pos, 1] is the divisor: sqrt(var + eps) for LayerNorm (after centring),
    sqrt(mean(x^2) + eps) for RMSNorm. ``hook_normalized`` [batch, pos, d_model] is the output,
    weight and bias applied. The weight ``w`` is stored as Hugging Face stores it: Gemma's scales by
    ``cfg.norm_offset + w`` (1 + w).
    """

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.kind = cfg.norm
        self.eps = cfg.eps
        affine = cfg.norm_weight
        self.w = nn.Parameter(torch.full((cfg.d_model,), 1.0 - cfg.norm_offset)) if affine else None
        biased = cfg.norm == "layernorm" and affine and cfg.norm_bias
        self.b = nn.Parameter(torch.zeros(cfg.d_model)) if biased else None
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def _centred(self, x: Tensor) -> Tensor:
        return x - x.mean(-1, keepdim=True) if self.kind == "layernorm" else x

    def _divisor(self, centred: Tensor) -> Tensor:
        return (centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()

    def scale_of(self, x: Tensor) -> Tensor:
        """``hook_scale``'s value [batch, pos, 1] for input ``x`` [batch, pos, d_model], by the ops
        ``forward`` computes it with (``run_with_cache`` computes a cached scale on read with it)."""
        return self._divisor(self._centred(x))

    def forward(self, x: Tensor) -> Tensor:
        if _hooked(self.hook_scale):
            centred = self._centred(x)
            computed = self._divisor(centred)
            before = _snapshot(computed)
            scale = self.hook_scale(computed)
            if not _untouched(scale, computed, before):  # a hook edited the scale: use it
                out = centred / scale
                out = out if self.w is None else out * (self.w + self.cfg.norm_offset)
                return self.hook_normalized(out if self.b is None else out + self.b)
        # the family's own kernel and op order (the fused F.layer_norm Hugging Face uses, ...)
        return self.hook_normalized(norm_fn(self.cfg, x, self.w, self.b))


# --------------------------------------------------------------------------------------------------
# Attention


class Attention(nn.Module):
    """Multi-head (optionally grouped-query) attention.

    Storage follows Hugging Face (``q_weight`` [(head d_head), d_model], ...), so the unhooked
    forward runs the same kernels on the same memory layouts as Hugging Face eager attention and
    is bitwise equal to it. ``W_Q``, ``W_K``, ``W_V``, ``W_O`` and ``b_*`` are per-head views in
    TransformerLens orientation; reading or editing them reads or edits the model.
    """

    def __init__(self, cfg: Config, layer: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        self.layer_type = cfg.layer_type(layer)  # "full" or "sliding" (Config.layer_types)
        self.use_rope = cfg.uses_rope(layer)  # False: a layer without RoPE (Config.rope_layers)
        self.window = cfg.window(layer)  # the sliding window in tokens, None for a full layer
        h, kv, m, d = cfg.n_heads, cfg.kv_heads, cfg.d_model, cfg.d_head
        self.q_weight = nn.Parameter(torch.empty(h * d, m))
        self.k_weight = nn.Parameter(torch.empty(kv * d, m))
        self.v_weight = nn.Parameter(torch.empty(kv * d, m))
        self.o_weight = nn.Parameter(torch.empty(m, h * d))
        self.q_bias = nn.Parameter(torch.zeros(h * d)) if cfg.attn_bias else None
        self.k_bias = nn.Parameter(torch.zeros(kv * d)) if cfg.attn_bias else None
        self.v_bias = nn.Parameter(torch.zeros(kv * d)) if cfg.attn_bias else None
        self.o_bias = nn.Parameter(torch.zeros(m)) if cfg.attn_out_bias else None
        if cfg.positional == "alibi":
            self.register_buffer("alibi_slopes", alibi_slopes(h), persistent=False)
        # gpt-oss: each head's learned sink logit, one more column of every softmax row (no value)
        self.sinks = nn.Parameter(torch.zeros(h)) if cfg.attn_sinks else None
        if cfg.qk_norm != "none":  # RMSNorm weights: one [d_head] shared by the heads, or the full width
            full = cfg.qk_norm == "full"
            self.q_norm_w = nn.Parameter(torch.full((h * d if full else d,), 1.0 - cfg.norm_offset))
            self.k_norm_w = nn.Parameter(torch.full((kv * d if full else d,), 1.0 - cfg.norm_offset))

        self.hook_q = HookPoint()  # [batch, pos, head, d_head]
        self.hook_k = HookPoint()  # [batch, pos, kv_head, d_head]
        self.hook_v = HookPoint()  # [batch, pos, kv_head, d_head]
        if cfg.qk_norm != "none":  # TransformerLens's bridge names: q and k after the QK-norm, before RoPE
            self.hook_q_normed = HookPoint()  # [batch, pos, head, d_head]
            self.hook_k_normed = HookPoint()  # [batch, pos, kv_head, d_head]
        self.hook_rot_q = HookPoint()  # [batch, pos, head, d_head]     q after RoPE (= q without it)
        self.hook_rot_k = HookPoint()  # [batch, pos, kv_head, d_head]  k after RoPE (= k without it)
        self.hook_attn_scores = HookPoint()  # [batch, head, query_pos, key_pos] scaled, masked, biased
        self.hook_pattern = HookPoint()  # [batch, head, query_pos, key_pos] softmax of the scores
        self.hook_z = HookPoint()  # [batch, pos, head, d_head] pattern-weighted values
        self.hook_result = HookPoint()  # [batch, pos, head, d_model] z[h] @ W_O[h]

    # per-head views, TransformerLens orientation
    def _view_W_Q(self):
        return rearrange(self.q_weight, "(h d) m -> h m d", d=self.cfg.d_head)

    def _view_W_K(self):
        return rearrange(self.k_weight, "(h d) m -> h m d", d=self.cfg.d_head)

    def _view_W_V(self):
        return rearrange(self.v_weight, "(h d) m -> h m d", d=self.cfg.d_head)

    def _view_W_O(self):
        return rearrange(self.o_weight, "m (h d) -> h d m", d=self.cfg.d_head)

    def _view_b_Q(self):
        return None if self.q_bias is None else self.q_bias.view(-1, self.cfg.d_head)

    def _view_b_K(self):
        return None if self.k_bias is None else self.k_bias.view(-1, self.cfg.d_head)

    def _view_b_V(self):
        return None if self.v_bias is None else self.v_bias.view(-1, self.cfg.d_head)

    def _view_b_O(self):
        return self.o_bias

    W_Q = _view_param("W_Q", "[head, d_model, d_head]")
    W_K = _view_param("W_K", "[kv_head, d_model, d_head]")
    W_V = _view_param("W_V", "[kv_head, d_model, d_head]")
    W_O = _view_param("W_O", "[head, d_head, d_model]")
    b_Q = _view_param("b_Q", "[head, d_head] or None")
    b_K = _view_param("b_K", "[kv_head, d_head] or None")
    b_V = _view_param("b_V", "[kv_head, d_head] or None")
    b_O = _view_param("b_O", "[d_model] or None")

    def forward(
        self,
        x: Tensor,  # [batch, pos, d_model]
        positions: Tensor,  # [batch, pos]
        masks: Masks,  # which keys each query may see
        rope: tuple[Tensor, Tensor] | None,  # cos, sin [batch, pos, rot_dim]
        kv: _LayerKV | None = None,  # the keys and values of earlier tokens (generation), or None
        exact: bool = False,  # the eager path even when no hook reads the scores or the pattern
    ) -> Tensor:
        cfg = self.cfg
        b, p, _ = x.shape
        # The op sequence below is Hugging Face's attention, step for step (views, transposes, GEMM
        # layouts): eager attention's when the scores or the pattern are hooked (or ``exact``), SDPA
        # attention's otherwise. That is what makes each path bitwise equal to its HF counterpart.
        q = F.linear(x, self.q_weight, self.q_bias).view(b, p, -1, cfg.d_head)
        k = F.linear(x, self.k_weight, self.k_bias).view(b, p, -1, cfg.d_head)
        v = F.linear(x, self.v_weight, self.v_bias).view(b, p, -1, cfg.d_head)
        return self.attend(q, k, v, positions, masks, rope, kv, exact)

    def clip(self, t: Tensor) -> Tensor:
        """q, k or v clamped to [-clip_qkv, clip_qkv] (OLMo's ``clip_qkv``; unchanged without it)."""
        c = self.cfg.clip_qkv
        return t if c is None else t.clamp(min=-c, max=c)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor, masks: Masks, rope: Any, kv: Any, exact: bool
    ) -> Tensor:
        """``forward`` from the projections on: q [batch, pos, head, d_head], k and v [batch, pos,
        kv_head, d_head] (what the split reader inputs of ``models/split_inputs.py`` compute)."""
        cfg, (b, p) = self.cfg, q.shape[:2]
        if cfg.clip_qkv is not None:
            q, k, v = self.clip(q), self.clip(k), self.clip(v)
        q, k, v = self.hook_q(q), self.hook_k(k), self.hook_v(v)
        if cfg.qk_norm != "none":
            q = self.hook_q_normed(self._qk_norm(q, self.q_norm_w))
            k = self.hook_k_normed(self._qk_norm(k, self.k_norm_w))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [batch, head, pos, d_head]
        if rope is not None and self.use_rope:
            if isinstance(rope, dict):  # one (cos, sin) per layer type (Gemma 3's two RoPE bases)
                rope = rope[self.layer_type]
            cos, sin = rope[0][:, None], rope[1][:, None]
            # .to: back to the model's dtype where cos/sin are fp32 (cfg.rope_fp32); a no-op otherwise
            if cfg.rope_upcast:  # Cohere rotates q and k in fp32 (a no-op in fp32 and fp64)
                q, k = at_least_fp32(q), at_least_fp32(k)
            q, k = apply_rope(cfg, q, cos, sin).to(v.dtype), apply_rope(cfg, k, cos, sin).to(v.dtype)
        # q and k as the scores see them: rotated under RoPE, the same as hook_q/hook_k otherwise
        q = self.hook_rot_q(q.transpose(1, 2)).transpose(1, 2)
        k = self.hook_rot_k(k.transpose(1, 2)).transpose(1, 2)
        if kv is not None:  # earlier tokens' keys (after RoPE) and values come first, as in HF's cache
            k, v = kv.update(k, v)
        if self.window is not None and masks.window != self.window:
            masks = masks.sliding  # the sliding layers' masks, built beside the full ones
        # soft-capped scores and learned sinks exist only on the eager path (HF's SDPA refuses both)
        eager = exact or cfg.attn_softcap is not None or cfg.attn_sinks
        if eager or _watched(self.hook_attn_scores) or _watched(self.hook_pattern):
            z = self._eager(q, k, v, positions, masks)
        else:
            z = self._fused(q, k, v, positions, masks)
        z = self.hook_z(z.transpose(1, 2))  # [batch, pos, head, d_head]
        if _hooked(self.hook_result):
            computed = self.result_from_z(z)
            before = _snapshot(computed)
            result = self.hook_result(computed)
            if not _untouched(result, computed, before):  # a hook edited a head's output: use it
                out = result.sum(dim=2)
                return out if self.o_bias is None else out + self.o_bias
        return F.linear(z.contiguous().reshape(b, p, -1), self.o_weight, self.o_bias)

    def result_from_z(self, z: Tensor, W_O: Tensor | None = None) -> Tensor:
        """``hook_result``'s value: each head's output in d_model, z[h] @ W_O[h], [batch, pos, head,
        d_model] from z [batch, pos, head, d_head] (``run_with_cache`` computes it from the cached z
        with this very function, so with the same bits)."""
        return torch.einsum("bqhd,hdm->bqhm", z, self._view_W_O() if W_O is None else W_O)

    def _qk_norm(self, x: Tensor, w: Tensor) -> Tensor:
        """QK-norm of q or k [batch, pos, head, d_head]: over each head's d_head (Qwen3, Gemma 3), or
        over the whole projection (OLMo-2, whose norm reads [batch, pos, (head d_head)])."""
        if self.cfg.qk_norm == "head":
            return rms_norm(self.cfg, x, w)
        return rms_norm(self.cfg, x.flatten(2), w).view(x.shape)

    def _repeat_kv(self, t: Tensor) -> Tensor:
        """[batch, kv_head, key_pos, d_head] -> [batch, head, key_pos, d_head]: key/value head g
        serves query heads g*group .. (g+1)*group-1 (Hugging Face's ``repeat_kv``)."""
        cfg = self.cfg
        if cfg.group_size == 1:
            return t
        b, _, n_keys, _ = t.shape
        grouped = t[:, :, None].expand(b, cfg.kv_heads, cfg.group_size, n_keys, cfg.d_head)
        return grouped.reshape(b, cfg.n_heads, n_keys, cfg.d_head)

    def _alibi_bias(self, positions: Tensor, dtype: torch.dtype, rows: slice | None = None) -> Tensor:
        """ALiBi's penalty slope * |query - key| [batch, head, query_pos, key_pos], subtracted from
        the scores; from positions, so padding is exact. ``rows``: only those query rows (a query
        block; elementwise, so each entry has the bits of the full bias)."""
        queries = positions if rows is None else positions[:, rows]
        distance = (queries[:, :, None] - positions[:, None, :]).abs().to(dtype)
        return self.alibi_slopes[None, :, None, None].to(dtype) * distance[:, None]

    # Query rows per block of the eager path (``models.blockwise.pattern_blocks``); None: all rows at
    # once. Blocks bound the scores and the pattern in memory by block x key_pos instead of query_pos x
    # key_pos; each block is handed to the hooks with ``hook.query_rows`` saying which rows it holds.
    query_block: int | None = None

    def _eager(self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor, masks: Masks) -> Tensor:
        """Scores and pattern materialised, the hooks on both fire: z [batch, head, query_pos, d_head].
        Under ``query_block`` the rows are computed block by block (softmax rows are independent)."""
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        n, step = q.shape[2], self.query_block
        if step is None or step >= n:
            return self._eager_rows(q, k, v, positions, masks, None)
        blocks = []
        try:
            for start in range(0, n, step):
                rows = QueryRows(start, min(start + step, n), n)
                self.hook_attn_scores.query_rows = self.hook_pattern.query_rows = rows
                blocks.append(self._eager_rows(q, k, v, positions, masks, rows.rows))
        finally:
            self.hook_attn_scores.query_rows = self.hook_pattern.query_rows = None
        return torch.cat(blocks, dim=2)

    def _eager_rows(
        self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor, masks: Masks, rows: slice | None
    ) -> Tensor:
        """z of the query rows ``rows`` (None: all, with exactly Hugging Face eager's ops), from k and
        v already repeated to every head: [batch, head, rows, d_head]."""
        cfg = self.cfg
        if rows is not None:
            q = q[:, :, rows]
        if cfg.scores_fp32:  # GPT-J upcasts q and k (a no-op in fp32 and fp64)
            q, k = at_least_fp32(q), at_least_fp32(k)
        if cfg.scale_queries:  # OPT scales the queries, then multiplies the scores by 1.0 (exact)
            scores = torch.matmul(q * cfg.scale, k.transpose(2, 3))
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) * cfg.scale  # [batch, head, query_pos, key_pos]
        if cfg.attn_softcap is not None:  # Gemma 2, before the mask as in HF
            scores = torch.tanh(scores / cfg.attn_softcap) * cfg.attn_softcap
        if cfg.positional == "alibi":
            scores = scores - self._alibi_bias(positions, scores.dtype, rows)
        allowed, empty_rows = masks.rows(rows)  # a block's rows only: no whole mask for a block
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        scores = self.hook_attn_scores(scores)

        if self.sinks is not None:  # gpt-oss: the sink logit as one more key, its share dropped after the softmax
            sink = self.sinks.reshape(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[2], -1)
            logits = torch.cat([scores, sink], dim=-1)
            logits = logits - logits.max(dim=-1, keepdim=True).values  # in the scores' dtype, as HF
            pattern = F.softmax(logits, dim=-1, dtype=logits.dtype)[..., :-1].to(v.dtype)
        else:  # softmax in fp32 at least (Hugging Face Llama's eager attention upcasts bf16/fp16; a no-op in fp32)
            pattern = F.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
        if empty_rows is not None:  # padded query rows that may see no key: zero, not NaN
            pattern = pattern.masked_fill(empty_rows, 0.0)
        pattern = self.hook_pattern(pattern)
        return torch.matmul(pattern, v)

    def _fused(self, q: Tensor, k: Tensor, v: Tensor, positions: Tensor, masks: Masks) -> Tensor:
        """``scaled_dot_product_attention`` called as Hugging Face's SDPA attention calls it (the
        causal flag without padding, a boolean mask with it, grouped heads passed as they are when
        there is no mask): z [batch, head, query_pos, d_head]; the scores and the pattern never exist."""
        cfg = self.cfg
        mask, causal = masks.sdpa()
        if cfg.positional == "alibi":  # the bias rides in a float mask, -inf where a key is not allowed
            bias = -self._alibi_bias(positions, q.dtype)
            allowed = masks.allowed
            mask = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
            causal = False
        gqa = {}
        if cfg.group_size > 1:
            if mask is None and cfg.d_head <= 256:  # HF's ``use_gqa_in_sdpa``
                gqa = {"enable_gqa": True}
            else:
                k, v = self._repeat_kv(k), self._repeat_kv(v)
        scale = cfg.scale
        if cfg.scale_queries:  # OPT hands SDPA scaled queries and a scale of 1
            q, scale = q * cfg.scale, 1.0
        z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **gqa)
        if masks.empty_rows is not None:  # zero on every backend (some return NaN for a row with no key)
            z = z.masked_fill(masks.empty_rows, 0.0)
        return z


# --------------------------------------------------------------------------------------------------
# Block


def _norm(norm: Norm | None, x: Tensor) -> Tensor:
    """``norm(x)``, or ``x`` where the architecture has no norm there (OLMo-2 has no ln1/ln2)."""
    return x if norm is None else norm(x)


class Block(nn.Module):
    """Pre-norm: resid_mid = resid_pre + attn_out; resid_post = resid_mid + mlp_out.

    Post-norm (BERT): resid_mid = ln1(resid_pre + attn_out); resid_post = ln2(resid_mid + mlp_out).
    In both, ``hook_attn_out`` and ``hook_mlp_out`` are the sublayers' own outputs, without the
    residual. Sandwich (Gemma 2/3): attn_out = ln1_post(attn(ln1(resid_pre))), mlp_out =
    ln2_post(mlp(ln2(resid_mid))); reordered (OLMo-2): the same without ln1 and ln2. There
    ``hook_attn_out``/``hook_mlp_out`` are after the post-norm (what is added to the residual, as in
    TransformerLens's bridge), so the heads' ``hook_result`` no longer sums to ``hook_attn_out``.
    """

    def __init__(self, cfg: Config, layer: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        placement = cfg.norm_placement
        # registration order is forward order, so hook_names() lists hooks as they fire
        self.hook_resid_pre = HookPoint()  # [batch, pos, d_model]
        # the reader inputs (models/split_inputs.py): each fires, and costs, only when hooked
        self.hook_attn_in = HookPoint()  # [batch, pos, d_model] attention's copy of the residual
        self.hook_q_input = HookPoint()  # [batch, pos, head, d_model] each query head's copy
        self.hook_k_input = HookPoint()  # [batch, pos, kv_head, d_model] each key head's copy
        self.hook_v_input = HookPoint()  # [batch, pos, kv_head, d_model] each value head's copy
        first = layer > 0 or cfg.first_attn_norm  # ModernBERT's block 0 has no ln1
        self.ln1 = Norm(cfg) if placement != "reordered" and first else None
        self.attn = Attention(cfg, layer)
        self.ln1_post = Norm(cfg) if placement in ("sandwich", "reordered") else None
        self.hook_attn_out = HookPoint()  # [batch, pos, d_model]
        if not cfg.parallel_block:  # a parallel block's MLP reads resid_pre: there is no resid_mid
            self.hook_resid_mid = HookPoint()  # [batch, pos, d_model]
        self.hook_mlp_in = HookPoint()  # [batch, pos, d_model] the MLP's copy, before ln2 (pre-norm)
        self.ln2 = Norm(cfg) if placement != "reordered" and not cfg.shared_norm else None
        self.mlp = MoE(cfg) if cfg.is_moe(layer) else MLP(cfg)  # models/mlp.py
        self.ln2_post = Norm(cfg) if placement in ("sandwich", "reordered") else None
        self.hook_mlp_out = HookPoint()  # [batch, pos, d_model]
        self.hook_resid_post = HookPoint()  # [batch, pos, d_model]

    def forward(
        self,
        x: Tensor,  # [batch, pos, d_model]
        positions: Tensor,  # [batch, pos]
        masks: Masks,  # which keys each query may see
        rope: tuple[Tensor, Tensor] | None,  # cos, sin [batch, pos, rot_dim]
        kv: _LayerKV | None = None,  # the keys and values of earlier tokens (generation), or None
        exact: bool = False,  # the eager attention path even without attention hooks
    ) -> Tensor:
        x = self.hook_resid_pre(x)
        if reads_inputs(self):  # a reader-input hook is attached, or split inputs are switched on
            return split_block_forward(self, x, positions, masks, rope, kv, exact)
        if self.cfg.parallel_block:
            h = self.ln1(x)
            attn_out = self.hook_attn_out(self.attn(h, positions, masks, rope, kv, exact))
            mlp_out = self.hook_mlp_out(self.mlp(h if self.ln2 is None else self.ln2(x)))
            return self.hook_resid_post(self.parallel_sum(x, attn_out, mlp_out))
        if self.cfg.residual_multiplier != 1.0:  # Granite: each output scaled before it is added
            m = self.cfg.residual_multiplier
            attn_out = self.hook_attn_out(self.attn(self.ln1(x), positions, masks, rope, kv, exact) * m)
            mid = self.hook_resid_mid(x + attn_out)
            mlp_out = self.hook_mlp_out(self.mlp(self.ln2(mid)) * m)
            return self.hook_resid_post(mid + mlp_out)
        if self.cfg.norm_placement != "post":
            attn_out = self.hook_attn_out(
                _norm(self.ln1_post, self.attn(_norm(self.ln1, x), positions, masks, rope, kv, exact))
            )
            mid = self.hook_resid_mid(x + attn_out)
            mlp_out = self.hook_mlp_out(_norm(self.ln2_post, self.mlp(_norm(self.ln2, mid))))
            return self.hook_resid_post(mid + mlp_out)
        attn_out = self.hook_attn_out(self.attn(x, positions, masks, rope, kv, exact))
        mid = self.hook_resid_mid(self.ln1(attn_out + x))
        mlp_out = self.hook_mlp_out(self.mlp(mid))
        return self.hook_resid_post(self.ln2(mlp_out + mid))

    def parallel_sum(self, x: Tensor, attn_out: Tensor, mlp_out: Tensor) -> Tensor:
        """A parallel block's output in its family's order (``Config.residual_first``)."""
        return (x + attn_out) + mlp_out if self.cfg.residual_first else (attn_out + mlp_out) + x


# --------------------------------------------------------------------------------------------------
# The model


class Transformer(InputPreparation, HookedModule, TransformerLensAPI):
    """A hookable transformer. ``forward`` takes token ids [batch, pos] (or [pos]), or text when a
    tokenizer is attached, and returns logits [batch, pos, vocab] (models with an LM head), the
    final hidden state [batch, pos, d_model] (``return_type="hidden"``, the default for encoders),
    or the mean next-token cross-entropy (``return_type="loss"``, causal models).
    """

    def __init__(self, cfg: Config, tokenizer: Tokenizer | None = None, seed: int | None = None) -> None:
        super().__init__()
        # The model owns its config: a copy (equal to ``cfg``), so that the device and dtype bound
        # to it (``cfg.device``, which TransformerLens code reads) are this model's.
        cfg = copy.copy(cfg)
        self.cfg = cfg
        self.tokenizer = tokenizer  # a models.tokenizer.Tokenizer, or None
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model))
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, cfg.d_model)) if cfg.positional == "learned" else None
        self.W_token_type = nn.Parameter(torch.empty(cfg.n_token_types, cfg.d_model)) if cfg.n_token_types else None
        self.hook_embed = HookPoint()  # [batch, pos, d_model] token embeddings
        self.hook_token_type_embed = HookPoint()  # [batch, pos, d_model] zeros without token types
        self.hook_pos_embed = HookPoint()  # [batch, pos, d_model] zeros for rope / alibi / none
        self.ln_embed = Norm(cfg) if cfg.embed_norm else None
        self.blocks = nn.ModuleList(Block(cfg, layer) for layer in range(cfg.n_layers))
        self.ln_final = Norm(cfg) if cfg.final_norm else None
        # [vocab, d_model] like Hugging Face's lm_head; W_U is its transpose (a view)
        self.unembed_weight = (
            nn.Parameter(torch.empty(cfg.d_vocab, cfg.d_model)) if cfg.lm_head and not cfg.tie_embeddings else None
        )
        self.b_U = nn.Parameter(torch.zeros(cfg.d_vocab)) if cfg.lm_head and cfg.lm_head_bias else None
        if cfg.positional == "rope":
            inv_freq, self.rope_attention_factor = scaled_rope(cfg) if cfg.rope_scaling else (rope_inv_freq(cfg), 1.0)
            self.register_buffer("rope_inv_freq", inv_freq, persistent=False)
            if cfg.rope_local_theta is not None:  # the sliding layers' own base (Gemma 3)
                self.register_buffer("rope_local_inv_freq", rope_inv_freq(cfg, cfg.rope_local_theta), persistent=False)

        self.setup()
        self.init_weights(seed)
        self._bound_inputs: tuple[Tensor, dict] | None = None  # see inputs_bound()
        # True: every layer runs eager attention (bitwise Hugging Face eager), also without hooks;
        # False: a layer none of whose score/pattern hooks is attached runs fused SDPA (see forward)
        self.exact = False
        self.cfg._bind(self.W_E.device, self.W_E.dtype)

    # .to(), .cuda(), .double(), ...: keep cfg.device/dtype true
    def _apply(self, fn: Callable[[Tensor], Tensor], *args: Any, **kwargs: Any) -> Transformer:
        out = super()._apply(fn, *args, **kwargs)
        self.cfg._bind(self.W_E.device, self.W_E.dtype)
        if self.cfg.positional == "rope" and self.rope_inv_freq.dtype != torch.float32:
            # RoPE's frequencies stay fp32 in a bf16/fp16 model, as Hugging Face keeps them: the
            # angles are computed in fp32 and only cos/sin are cast to the model's dtype
            fresh = scaled_rope(self.cfg)[0] if self.cfg.rope_scaling else rope_inv_freq(self.cfg)
            self.rope_inv_freq = fresh.to(self.rope_inv_freq.device)
            if self.cfg.rope_local_theta is not None:
                local = rope_inv_freq(self.cfg, self.cfg.rope_local_theta)
                self.rope_local_inv_freq = local.to(self.rope_inv_freq.device)
        return out

    # -- weights ---------------------------------------------------------------------------------

    @property
    def W_U(self) -> Tensor:
        """[d_model, vocab]. With tied embeddings a view of W_E.T, so edits to W_E show here."""
        if not self.cfg.lm_head:
            raise AttributeError("no LM head")  # __getattr__ below turns this into the full message
        return _weight_view((self.W_E if self.unembed_weight is None else self.unembed_weight).T, "W_U")

    def __getattr__(self, name: str) -> Tensor | nn.Module:
        # A property that raises AttributeError (W_U on an encoder) falls through to here, and
        # nn.Module would replace its message with a bare "no attribute"; keep the helpful one.
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "W_U" and not self.__dict__["cfg"].lm_head:
                raise AttributeError(
                    f"model {self.__dict__['cfg'].name!r} has no LM head (an encoder), so it has no W_U; "
                    "read the final residual with return_type='hidden'"
                ) from None
            raise

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> Transformer:
        """GPT-2 initialisation: N(0, 0.02), output projections scaled by 1/sqrt(2 n_layers), norm
        weights 1, biases 0. ``seed`` makes it repeatable without touching the global RNG."""
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        std = 0.02
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in ("w", "q_norm_w", "k_norm_w"):  # a norm's scale is 1 (Gemma stores it as w = 0)
                p.fill_(1.0 - self.cfg.norm_offset)
            elif leaf == "b" or leaf.endswith("bias") or leaf == "b_U":
                p.zero_()
            else:
                s = std / math.sqrt(2 * self.cfg.n_layers) if leaf in ("o_weight", "out_weight") else std
                p.copy_(torch.randn(p.shape, generator=gen) * s)
        return self

    # -- inputs ----------------------------------------------------------------------------------

    def to_words(self, text: Text | Sequence[Text], **kwargs: Any) -> Batch:
        """Tokenise text (or a list of texts / list of word lists) with the attached tokenizer and
        keep the token-to-word alignment. Returns a ``models.tokenizer.Batch`` (ids, attention_mask,
        token types, token-to-word map), right-padded. The analyses tokenise this way. The BOS
        default is the tokenizer's (``tokenizer.prepend_bos``; see ``to_tokens``)."""
        return self._require_tokenizer()(text, **kwargs)

    # -- the model (inputs are prepared and checked in models/inputs.py) ---------------------------

    def _embed(self, tokens: Tensor, token_type_ids: Tensor | None, positions: Tensor) -> Tensor:
        """What the first block reads: token (+ token type) (+ absolute position) embeddings,
        normalised where the architecture says so (BERT)."""
        cfg = self.cfg
        x = F.embedding(tokens, self.W_E)
        if cfg.embed_scale != 1.0:  # Vaswani et al., Gemma: token embeddings times sqrt(d_model)
            # the factor rounded to the model's dtype first, as Gemma's HF embedding does (bf16: 25.25, not 25.298)
            x = x * torch.tensor(cfg.embed_scale, dtype=x.dtype, device=x.device)
        if cfg.embed_multiplier != 1.0:  # Granite: times the Python float, as its HF model multiplies
            x = x * cfg.embed_multiplier
        x = self.hook_embed(x)
        if self.W_token_type is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(tokens)
            x = x + self.hook_token_type_embed(F.embedding(token_type_ids, self.W_token_type))
        else:
            self.hook_token_type_embed(torch.zeros_like(x))
        if cfg.positional == "learned":
            pos_embed = F.embedding(positions, self.W_pos)
        elif cfg.positional == "sinusoidal":
            pos_embed = sinusoidal(positions, cfg.d_model).to(x.dtype)
        else:
            pos_embed = torch.zeros_like(x)
        x = x + self.hook_pos_embed(pos_embed)
        return x if self.ln_embed is None else self.ln_embed(x)

    def _loss(self, logits: Tensor, tokens: Tensor, attention_mask: Tensor | None, per_token: bool = False) -> Tensor:
        """Mean next-token cross-entropy over the real tokens (both of a pair real); ``per_token``:
        each position's loss [batch, pos - 1] (TransformerLens's shape: position p predicts token
        p + 1), 0 where the pair is not real, as TransformerLens fills it."""
        target = tokens[:, 1:]
        keep = None if attention_mask is None else attention_mask[:, 1:] & attention_mask[:, :-1]
        # in fp32 whatever the model's dtype (``.float()`` is a no-op in fp32)
        losses = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), target.flatten(), reduction="none")
        if per_token:
            losses = losses.view_as(target)
            return losses if keep is None else losses.masked_fill(~keep, 0.0)
        if keep is None:
            return losses.mean()
        return (losses * keep.flatten()).sum() / keep.sum()

    def forward(
        self,
        tokens: TokenIds | Text | Sequence[Text],
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        return_type: str | None = "default",
        allow_beyond_ctx: bool = False,
        past_kv_cache: KVCache | None = None,
        exact: bool | None = None,
        loss_per_token: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor] | None:
        """Run the model.

        tokens: int ids [batch, pos] or [pos]; or a string / list of strings / list of word lists,
            tokenised with the attached tokenizer as ``to_words`` does (right padding; the mask and
            token types are then built for you; same ids as ``to_tokens(text)``).
        attention_mask: [batch, pos], 1 for real tokens and 0 for padding. Padded keys get exactly
            zero attention; positions follow the mask, so left and right padding give the same
            per-sequence results as no padding. Only with token ids: text input builds its own
            mask (and token types), so passing either with text is an error. An encoder refuses
            token ids that hold its padding id without a mask (it would attend to the padding);
            pass the mask (all ones if the pad id really is text).
        token_type_ids: [batch, pos] in 0..n_token_types-1 (BERT segments); None: all 0.
        return_type: "logits", "hidden" (final residual, after the final norm if any), "loss"
            (causal models with an LM head: mean next-token cross-entropy over real tokens),
            "both" (``(logits, loss)``, as TransformerLens returns them), "default" (logits if
            there is an LM head, else hidden) or None.
        loss_per_token: with "loss" or "both", each position's loss [batch, pos - 1] instead of
            the mean (TransformerLens's ``loss_per_token``; 0 where a pair holds padding).
        past_kv_cache: a ``KVCache`` (causal models): ``tokens`` continue the sequences it holds,
            and their keys and values are added to it (``attention_mask`` then covers the new
            tokens only). What ``generate`` uses.
        exact: which attention computation runs in a layer whose ``hook_attn_scores`` and
            ``hook_pattern`` have no hook (a layer with one always runs the eager path). False: the
            fused ``scaled_dot_product_attention`` (Hugging Face's default, SDPA), whose scores and
            pattern never exist; True: the eager path, bitwise equal to Hugging Face eager
            attention. None (default): ``model.exact``, which is False unless set.
        """
        inputs = self._prepare_inputs(
            tokens, attention_mask, token_type_ids, return_type, allow_beyond_ctx, past_kv_cache, exact
        )
        tokens, attention_mask = inputs.tokens, inputs.attention_mask
        batch, n = tokens.shape
        key_mask = attention_mask  # [batch, key_pos] over past and new tokens, None: all real
        if past_kv_cache is not None:
            key_mask = past_kv_cache._extend_mask(attention_mask, batch, n)
            past_kv_cache.length += n
        positions, masks, rope = self._attention_setup(batch, n, inputs.past, key_mask, self.W_E.device)
        x = self._embed(tokens, inputs.token_type_ids, positions)
        kv = [None] * self.cfg.n_layers if past_kv_cache is None else past_kv_cache.layers
        for block, layer_kv in zip(self.blocks, kv):
            x = block(x, positions, masks, rope, layer_kv, inputs.exact)
        if inputs.return_type not in ("loss", "both"):
            return self._finish(x, inputs.return_type)
        logits = self._finish(x, "logits")
        loss = self._loss(logits, tokens, attention_mask, per_token=loss_per_token)
        return (logits, loss) if inputs.return_type == "both" else loss

    def _attention_setup(
        self, batch: int, n: int, past: int, key_mask: Tensor | None, device: torch.device
    ) -> tuple[Tensor, Masks, tuple[Tensor, Tensor] | None]:
        """Positions [batch, n] (they follow the mask), the masks, and RoPE's cos/sin in the model's
        dtype (as Hugging Face casts them): what every block needs besides its input."""
        cfg = self.cfg
        if key_mask is None:
            positions = torch.arange(past, past + n, device=device).expand(batch, n)
        else:
            positions = (key_mask.long().cumsum(-1) - 1).clamp(min=0)[:, past:]
        masks = Masks.build(n, past, key_mask, cfg.is_causal, None, device)
        if cfg.has_sliding_layers:
            masks.sliding = Masks.build(n, past, key_mask, cfg.is_causal, cfg.sliding_window, device)
        rope = None
        if cfg.positional == "rope":
            dtype = torch.float32 if cfg.rope_fp32 else self.W_E.dtype  # as HF casts cos/sin (or not)
            rope = tuple(t.to(dtype) for t in self.rope_tables(positions))
            if cfg.rope_local_theta is not None:  # Gemma 3: the sliding layers rotate with their own base
                local = tuple(t.to(dtype) for t in self.rope_tables(positions, local=True))
                rope = {"full": rope, "sliding": local}
        return positions, masks, rope

    def rope_tables(self, positions: Tensor, local: bool = False) -> tuple[Tensor, Tensor]:
        """RoPE's cos and sin in fp32 [batch, pos, rot_dim] at ``positions`` [batch, pos]: the full
        layers' (scaled where ``cfg.rope_scaling`` says; "dynamic" and "longrope" choose their
        frequencies from the largest position), or with ``local`` the sliding layers' own base."""
        if local:
            return rope_cos_sin(self.cfg, positions, self.rope_local_inv_freq)
        inv_freq, factor = self.rope_inv_freq, self.rope_attention_factor
        scaling = dict(self.cfg.rope_scaling or ())
        if scaling.get("rope_type") in RUNTIME_ROPE_TYPES and positions.numel():
            inv_freq, factor = scaled_rope(self.cfg, seq_len=int(positions.max()) + 1)
        cos, sin = rope_cos_sin(self.cfg, positions, inv_freq.to(positions.device))
        return (cos, sin) if factor == 1.0 else (cos * factor, sin * factor)

    def _finish(self, x: Tensor, return_type: str | None) -> Tensor | None:
        """The final norm and, where asked for, the unembedding of the last block's output."""
        if self.ln_final is not None:
            x = self.ln_final(x)
        if return_type is None:
            return None
        if return_type == "hidden" or (return_type == "default" and not self.cfg.lm_head):
            return x
        return self._unembed(x)

    def _unembed(self, x: Tensor) -> Tensor:
        """Logits [..., vocab] of final-norm output ``x`` [..., d_model] (what ``generate`` reads),
        soft-capped where the architecture caps them (Gemma 2: cap * tanh(logits / cap))."""
        logits = F.linear(x, self.W_E if self.unembed_weight is None else self.unembed_weight, self.b_U)
        if self.cfg.logit_scale != 1.0:  # Cohere
            logits = logits * self.cfg.logit_scale
        if self.cfg.logit_divisor != 1.0:  # Granite
            logits = logits / self.cfg.logit_divisor
        cap = self.cfg.final_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap

    def run_from_layer(
        self,
        layer: int,
        resid: Tensor,
        attention_mask: Tensor | None = None,
        return_type: str | None = "default",
        exact: bool | None = None,
        past_kv_cache: KVCache | None = None,
    ) -> Tensor | None:
        """The rest of a forward pass from block ``layer``'s input (``blocks.{layer}.hook_resid_pre``,
        [batch, pos, d_model]) to the output: what an intervention at that layer or above needs,
        without recomputing the layers below it (they do not change). Hooks of the blocks run
        fire as usual. ``attention_mask`` is the token mask of the run ``resid`` came from;
        ``return_type`` and ``exact`` as in ``forward`` (no "loss": it needs the tokens).
        ``past_kv_cache`` (causal models): ``resid`` holds the positions that follow the ones the
        cache holds (``attention_mask`` then covers them only), and the blocks from ``layer`` on read
        and extend the cache's keys and values: one new row through the upper layers costs one row,
        not the sequence (``analyses.catalogue``'s answer-position patching)."""
        cfg = self.cfg
        if not 0 <= layer < cfg.n_layers:
            raise ValueError(f"layer {layer} does not exist: the model has layers 0..{cfg.n_layers - 1}")
        if resid.ndim != 3 or resid.shape[-1] != cfg.d_model:
            raise ValueError(f"resid must be [batch, pos, d_model={cfg.d_model}], got shape {tuple(resid.shape)}")
        if return_type not in ("default", "logits", "hidden", None):
            raise ValueError(f"return_type={return_type!r}; use 'logits', 'hidden', 'default' or None")
        batch, n, _ = resid.shape
        if attention_mask is not None:
            attention_mask = torch.as_tensor(attention_mask, device=resid.device).bool()
            if tuple(attention_mask.shape) != (batch, n):
                raise ValueError(
                    f"attention_mask has shape {tuple(attention_mask.shape)}, resid {(batch, n)}; they must match"
                )
            if attention_mask.all() and past_kv_cache is None:
                attention_mask = None
        past, kv = 0, [None] * cfg.n_layers
        if past_kv_cache is not None:
            past = self._check_cache(past_kv_cache, resid[..., 0])
            attention_mask = past_kv_cache._extend_mask(attention_mask, batch, n)
            past_kv_cache.length += n
            kv = past_kv_cache.layers
        positions, masks, rope = self._attention_setup(batch, n, past, attention_mask, resid.device)
        x = resid
        exact = self.exact if exact is None else exact
        for block, layer_kv in zip(self.blocks[layer:], kv[layer:]):
            x = block(x, positions, masks, rope, layer_kv, exact)
        return self._finish(x, return_type)

    # -- parts of the forward pass, for analyses that take the model apart -----------------------

    def position_embedding(self, positions: Tensor) -> Tensor:
        """The absolute position embedding [batch, pos, d_model] added to the token embedding at
        ``positions`` [batch, pos] (learned or sinusoidal); zeros for relative schemes (RoPE, ALiBi,
        none), which add nothing to the residual stream."""
        cfg = self.cfg
        if cfg.positional == "learned":
            return F.embedding(positions, self.W_pos)
        if cfg.positional == "sinusoidal":
            return sinusoidal(positions, cfg.d_model)
        return torch.zeros(*positions.shape, cfg.d_model, device=positions.device)

    def rotate(self, x: Tensor, positions: Tensor, layer: int | None = None) -> Tensor:
        """RoPE applied to queries or keys ``x`` [batch, head, pos, d_head] at ``positions``
        [batch, pos], exactly as the forward pass applies it (``x`` unchanged without RoPE), with
        the base of ``layer``'s type (Gemma 3's sliding layers have their own; None: the full layers')."""
        if self.cfg.positional != "rope" or (layer is not None and not self.cfg.uses_rope(layer)):
            return x
        local = layer is not None and self.cfg.rope_local_theta is not None and self.cfg.window(layer) is not None
        cos, sin = self.rope_tables(positions, local=local)
        dtype = torch.float32 if self.cfg.rope_fp32 else x.dtype
        y = at_least_fp32(x) if self.cfg.rope_upcast else x
        return apply_rope(self.cfg, y, cos[:, None].to(dtype), sin[:, None].to(dtype)).to(x.dtype)

    def attention_layer(
        self,
        layer: int,
        x: Tensor,
        *,
        positions: Tensor | None = None,
        causal: bool | None = None,
        rope: bool = True,
        exact: bool = True,
    ) -> Tensor:
        """Block ``layer``'s attention alone on its input ``x`` [batch, pos, d_model] (the attention
        output, before the residual add), with its hooks firing. ``positions`` default to 0..pos-1;
        ``causal`` defaults to the model's own masking; ``rope=False`` leaves RoPE out (a no-op for
        other schemes). ``exact`` (default True, unlike ``forward``): the eager attention path, the
        computation the patterns describe, which the invariance checks take apart; False: the fused
        SDPA path where no hook reads the scores or the pattern."""
        cfg = self.cfg
        if not 0 <= layer < cfg.n_layers:
            raise ValueError(f"layer {layer} does not exist: the model has layers 0..{cfg.n_layers - 1}")
        b, n, _ = x.shape
        if positions is None:
            positions = torch.arange(n, device=x.device).expand(b, n)
        causal = cfg.is_causal if causal is None else causal
        window = cfg.window(layer) if causal or not cfg.is_causal else None  # a sliding layer keeps its window
        masks = Masks.build(n, 0, None, causal, window, x.device)
        rot = None
        if rope and cfg.positional == "rope":
            local = window is not None and cfg.rope_local_theta is not None
            cos, sin = self.rope_tables(positions, local=local)
            dtype = torch.float32 if cfg.rope_fp32 else x.dtype
            rot = (cos.to(dtype), sin.to(dtype))
        return self.blocks[layer].attn(x, positions, masks, rot, None, exact)

    # -- conveniences ------------------------------------------------------------------------------

    def uncacheable(self, wanted: Callable[[str], bool]) -> str | None:
        """Under ``models.blockwise.pattern_blocks`` a hook on the scores or the pattern is called once
        per query block: a cache of them would hold the last block only, so it is refused."""
        for layer, block in enumerate(self.blocks):
            rows = block.attn.query_block
            names = [f"blocks.{layer}.attn.{h}" for h in ("hook_attn_scores", "hook_pattern")]
            if rows is not None and any(wanted(n) for n in names):
                return (
                    f"{names[1]} is computed in blocks of {rows} query rows (models.blockwise.pattern_blocks), "
                    "so a cache would hold only the last block; cache the patterns outside pattern_blocks, "
                    "or leave them out of names_filter and read the blocks with a hook (hook.query_rows)"
                )
        return None

    def lazy_cache_entries(self, wanted: Callable[[str], bool]) -> dict[str, LazyEntry]:
        """The ``wanted`` hook points ``run_with_cache`` computes on first read of the cache, from
        values it caches anyway, with the forward pass's own functions (the same bits), in forward
        order (see ``interp.hooks.HookedModule.lazy_cache_entries``):

        * ``attn.hook_result`` (n_heads times the attention output) from ``hook_z``:
          ``Attention.result_from_z`` on W_O as it is now (a copy with the same strides, taken only
          for the layers asked for, so a later weight edit changes neither the values nor their bits);
        * the reader inputs (``hook_attn_in``, ``hook_q/k/v_input``, ``hook_mlp_in``) from
          ``hook_resid_pre`` / ``hook_resid_mid`` (``models/split_inputs.py``): caching them then
          sends no block down the split path;
        * a norm's ``hook_scale`` (``Norm.scale_of``) from the cached tensors its input is made of:
          ``hook_resid_pre`` / ``hook_resid_mid`` (pre-norm ``ln1`` / ``ln2``, while no reader-input
          hook could change what the norm reads), ``hook_attn_out + hook_resid_pre`` and ``hook_mlp_out
          + hook_resid_mid`` (post-norm), the embeddings' sum (``ln_embed``), the last
          ``hook_resid_post`` (``ln_final``); only where those are cached by the same call, so the
          cache holds no residual only for a [batch, pos, 1] scale. The sandwich norms after a
          sublayer (``ln1_post``, ``ln2_post``) read an output no hook caches: they compute as before.

        Reads the hooks attached now: an entry a hook could change is not declared."""
        entries: dict[str, LazyEntry] = {}

        def scale(norm: Norm | None, name: str, sources: tuple[str, ...], combine: Callable[..., Tensor]) -> None:
            if norm is not None and wanted(name) and all(wanted(s) for s in sources):
                entries[name] = (sources, lambda *values: norm.scale_of(combine(*values)))

        def same(x: Tensor) -> Tensor:
            return x

        def add(*parts: Tensor) -> Tensor:  # left to right, as the forward pass adds them
            return functools.reduce(operator.add, parts)

        if self.ln_embed is not None:
            embeds = ("hook_embed", "hook_token_type_embed", "hook_pos_embed")
            scale(self.ln_embed, "ln_embed.hook_scale", embeds if self.W_token_type is not None else embeds[::2], add)
        post = self.cfg.norm_placement == "post"
        for layer, block in enumerate(self.blocks):
            at = f"blocks.{layer}."
            entries.update(lazy_attention_inputs(block, at, wanted))
            if not post and attention_reads_residual(block):
                scale(block.ln1, at + "ln1.hook_scale", (at + "hook_resid_pre",), same)
            name = at + "attn.hook_result"
            if wanted(name):
                W_O = block.attn._view_W_O().detach().clone()
                entries[name] = (at + "attn.hook_z", functools.partial(block.attn.result_from_z, W_O=W_O))
            if post:
                scale(block.ln1, at + "ln1.hook_scale", (at + "hook_attn_out", at + "hook_resid_pre"), add)
            entries.update(lazy_mlp_input(block, at, wanted))
            if not post and not _watched(block.hook_mlp_in):  # a parallel block's ln2 reads resid_pre
                source = at + ("hook_resid_pre" if self.cfg.parallel_block else "hook_resid_mid")
                scale(block.ln2, at + "ln2.hook_scale", (source,), same)
            if post:
                scale(block.ln2, at + "ln2.hook_scale", (at + "hook_mlp_out", at + "hook_resid_mid"), add)
        last = f"blocks.{self.cfg.n_layers - 1}.hook_resid_post"
        scale(self.ln_final, "ln_final.hook_scale", (last,), same)
        return entries

    def hook_table(self) -> list[tuple[str, str]]:
        """(name, shape comment) for every hook point, in forward order."""
        return [(name, _HOOK_SHAPES.get(name.rsplit(".", 1)[-1], "")) for name in self.hook_dict]

    def __repr__(self) -> str:
        c = self.cfg
        return (
            f"Transformer({c.name!r}: {c.n_layers} layers x {c.n_heads} heads"
            f"{f' ({c.kv_heads} kv)' if c.kv_heads != c.n_heads else ''}, d_model {c.d_model}, "
            f"{c.attention}, {c.positional} positions, {c.norm_placement}-{c.norm}, {c.mlp} {c.act} MLP)"
        )
