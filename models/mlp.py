"""The MLP sublayers of the toolkit's transformer: the dense MLP (standard or gated) and the
mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE, Granite-MoE, gpt-oss), each in its Hugging Face
counterpart's operation order, so the bits are its bits.

Mixture-of-experts hooks (TransformerLens's names where it has them):

==============================  ============================  ======================================
hook                            shape                         what it is
==============================  ============================  ======================================
``mlp.hook_router_logits``      ``[batch, pos, expert]``      the router's logits
``mlp.hook_expert_weights``     ``[batch, pos, expert]``      their softmax (fp32), TransformerLens's
                                                              (not on gpt-oss and Granite-MoE, whose
                                                              softmax runs over the top k only)
``mlp.hook_expert_indices``     ``[batch, pos, top_k]``       the chosen experts, largest weight first
``mlp.hook_routing_weights``    ``[batch, pos, top_k]``       the weights the chosen outputs are summed with
``mlp.hook_expert_out``         ``[batch, pos, top_k, d_model]``  each chosen expert's output, unweighted
==============================  ============================  ======================================

Each fires on every forward (``hook_expert_out`` only when hooked: it costs a copy per chosen
expert); an edit to any of them is what the layer then uses (e.g. force an expert by editing
``hook_expert_indices``, silence one by zeroing its ``hook_routing_weights`` column). A shared expert
(Qwen2-MoE) is a dense ``MLP`` at ``mlp.shared`` with its own hooks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.hooks import HookPoint
from models.config import Config
from models.hook_state import _hooked, _snapshot, _untouched
from models.weights import _view_param

__all__ = ["MLP", "MoE"]


def _gelu_new(x: Tensor) -> Tensor:
    """GPT-2's GELU, Hugging Face's ``NewGELUActivation`` formula op for op (its bits; PyTorch's
    ``gelu(approximate="tanh")``, ``gelu_pytorch_tanh``, is the same function with other last bits)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


_ACTS = {
    "gelu": F.gelu,
    "gelu_new": _gelu_new,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


def _strided_gate(gate: Tensor) -> Tensor:
    """``gate`` [..., d_mlp] as the first half of a [..., 2 d_mlp] tensor, the layout Phi-3's fused
    ``gate_up_proj(x).chunk(2)`` hands its activation: PyTorch's SiLU gives other last bits on a
    strided input than on a contiguous one, so the split weights keep Hugging Face's bits this way."""
    both = gate.new_empty(*gate.shape[:-1], 2 * gate.shape[-1])
    both[..., : gate.shape[-1]] = gate
    return both[..., : gate.shape[-1]]


class MLP(nn.Module):
    """Standard: W_out(act(W_in x)). Gated (SwiGLU): W_out(act(W_gate x) * (W_in x)).

    Stored as Hugging Face stores them (``in_weight`` [d_mlp, d_model], ...); ``W_in``, ``W_gate``
    [d_model, d_mlp] and ``W_out`` [d_mlp, d_model] are views in TransformerLens orientation.
    """

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.act = _ACTS[cfg.act]
        gated = cfg.mlp == "gated"
        self.in_weight = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model))
        self.gate_weight = nn.Parameter(torch.empty(cfg.d_mlp, cfg.d_model)) if gated else None
        self.out_weight = nn.Parameter(torch.empty(cfg.d_model, cfg.d_mlp))
        self.in_bias = nn.Parameter(torch.zeros(cfg.d_mlp)) if cfg.mlp_bias else None
        self.gate_bias = nn.Parameter(torch.zeros(cfg.d_mlp)) if cfg.mlp_bias and gated else None
        self.out_bias = nn.Parameter(torch.zeros(cfg.d_model)) if cfg.mlp_bias else None
        self.hook_pre = HookPoint()  # [batch, pos, d_mlp] pre-activation (the gate's, if gated)
        if gated:
            self.hook_pre_linear = HookPoint()  # [batch, pos, d_mlp] gated only: W_in x
        self.hook_post = HookPoint()  # [batch, pos, d_mlp] what W_out reads

    def _view_W_in(self):
        return self.in_weight.T

    def _view_W_gate(self):
        return None if self.gate_weight is None else self.gate_weight.T

    def _view_W_out(self):
        return self.out_weight.T

    def _view_b_in(self):
        return self.in_bias

    def _view_b_gate(self):
        return self.gate_bias

    def _view_b_out(self):
        return self.out_bias

    W_in = _view_param("W_in", "[d_model, d_mlp]")
    W_gate = _view_param("W_gate", "[d_model, d_mlp] or None")
    W_out = _view_param("W_out", "[d_mlp, d_model]")
    b_in = _view_param("b_in", "[d_mlp] or None")
    b_gate = _view_param("b_gate", "[d_mlp] or None")
    b_out = _view_param("b_out", "[d_model] or None")

    def forward(self, x: Tensor) -> Tensor:
        if self.gate_weight is None:
            pre = self.hook_pre(F.linear(x, self.in_weight, self.in_bias))
            post = self.hook_post(self.act(pre))
        else:  # Hugging Face Llama: down(act(gate(x)) * up(x))
            pre = self.hook_pre(F.linear(x, self.gate_weight, self.gate_bias))
            linear = self.hook_pre_linear(F.linear(x, self.in_weight, self.in_bias))
            post = self.hook_post(self.act(_strided_gate(pre) if self.cfg.gate_up_fused else pre) * linear)
        return F.linear(post, self.out_weight, self.out_bias)


class MoE(nn.Module):
    """A router over ``cfg.n_experts`` gated experts; each token's output is the sum of its
    ``cfg.top_k`` chosen experts' outputs, weighted by the router (Hugging Face's sparse MoE block:
    the experts in index order, each on the tokens that chose it, added into zeros with
    ``index_add_``). Stored as Hugging Face stores them: ``router_weight`` [expert, d_model],
    ``gate_up_weight`` [expert, 2 d_expert, d_model] (gate rows first), ``down_weight`` [expert,
    d_model, d_expert]. gpt-oss (``cfg.expert_kind == "gpt_oss"``) stores ``gate_up_weight``
    [expert, d_model, 2 d_expert] (gate and up columns interleaved) and ``down_weight`` [expert,
    d_expert, d_model], and adds ``router_bias``, ``gate_up_bias`` and ``down_bias``."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.act = _ACTS[cfg.act]
        e, m, d = cfg.n_experts, cfg.d_model, cfg.d_expert or cfg.d_mlp
        self.oss = cfg.expert_kind == "gpt_oss"
        self.router_weight = nn.Parameter(torch.empty(e, m))
        self.router_bias = nn.Parameter(torch.zeros(e)) if self.oss else None
        if self.oss:  # x @ W + b, as gpt-oss multiplies
            self.gate_up_weight = nn.Parameter(torch.empty(e, m, 2 * d))
            self.down_weight = nn.Parameter(torch.empty(e, d, m))
        else:  # F.linear(x, W)
            self.gate_up_weight = nn.Parameter(torch.empty(e, 2 * d, m))
            self.down_weight = nn.Parameter(torch.empty(e, m, d))
        self.gate_up_bias = nn.Parameter(torch.zeros(e, 2 * d)) if self.oss else None
        self.down_bias = nn.Parameter(torch.zeros(e, m)) if self.oss else None
        self.shared = MLP(cfg.replace(d_mlp=cfg.d_shared_expert)) if cfg.d_shared_expert else None
        self.shared_gate_weight = nn.Parameter(torch.empty(1, m)) if cfg.d_shared_expert else None
        self.hook_router_logits = HookPoint()  # [batch, pos, expert]
        if cfg.router == "softmax_topk":  # a top-k-then-softmax router has no softmax over every expert
            self.hook_expert_weights = HookPoint()  # [batch, pos, expert]
        self.hook_expert_indices = HookPoint()  # [batch, pos, top_k]
        self.hook_routing_weights = HookPoint()  # [batch, pos, top_k]
        self.hook_expert_out = HookPoint()  # [batch, pos, top_k, d_model]

    # per-expert views in TransformerLens orientation (edits through them edit the experts)
    def _view_W_gate(self):
        if self.oss:
            return self.gate_up_weight[:, :, ::2]
        return self.gate_up_weight[:, : self.gate_up_weight.shape[1] // 2].transpose(1, 2)

    def _view_W_in(self):
        if self.oss:
            return self.gate_up_weight[:, :, 1::2]
        return self.gate_up_weight[:, self.gate_up_weight.shape[1] // 2 :].transpose(1, 2)

    def _view_W_out(self):
        return self.down_weight if self.oss else self.down_weight.transpose(1, 2)

    def _view_W_router(self):
        return self.router_weight.T

    def _view_b_gate(self):
        return None if self.gate_up_bias is None else self.gate_up_bias[:, ::2]

    def _view_b_in(self):
        return None if self.gate_up_bias is None else self.gate_up_bias[:, 1::2]

    def _view_b_out(self):
        return self.down_bias

    def _view_b_router(self):
        return self.router_bias

    W_gate = _view_param("W_gate", "[expert, d_model, d_expert]")
    W_in = _view_param("W_in", "[expert, d_model, d_expert]")
    W_out = _view_param("W_out", "[expert, d_expert, d_model]")
    W_router = _view_param("W_router", "[d_model, expert]")
    b_gate = _view_param("b_gate", "[expert, d_expert] or None (gpt-oss only)")
    b_in = _view_param("b_in", "[expert, d_expert] or None (gpt-oss only)")
    b_out = _view_param("b_out", "[expert, d_model] or None (gpt-oss only)")
    b_router = _view_param("b_router", "[expert] or None (gpt-oss only)")

    def route(self, flat: Tensor, shape: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """(chosen experts [tokens, top_k], their weights [tokens, top_k]) of the tokens ``flat``
        [tokens, d_model], through the router hooks (``shape``: batch, pos)."""
        cfg, (b, p) = self.cfg, shape
        logits = F.linear(flat, self.router_weight, self.router_bias)
        logits = self.hook_router_logits(logits.view(b, p, -1)).reshape(-1, cfg.n_experts)
        if cfg.router == "topk_softmax":  # the top k logits, then a softmax over those k
            if self.oss:  # gpt-oss: in the model's dtype
                top, chosen = torch.topk(logits, cfg.top_k, dim=-1)
                top = F.softmax(top, dim=1, dtype=top.dtype)
            else:  # Granite-MoE: in fp32, cast back
                top, chosen = torch.topk(logits.float(), cfg.top_k, dim=-1)
                top = torch.softmax(top, dim=-1).type_as(flat)
        else:
            probs = F.softmax(logits, dim=-1, dtype=torch.float32)
            probs = self.hook_expert_weights(probs.view(b, p, -1)).reshape(-1, cfg.n_experts)
            top, chosen = torch.topk(probs, cfg.top_k, dim=-1)
            if cfg.norm_topk:
                top /= top.sum(dim=-1, keepdim=True)
            if not cfg.router_fp32:  # Qwen casts the weights to the model's dtype; Mixtral keeps fp32
                top = top.to(logits.dtype)
        chosen = self.hook_expert_indices(chosen.view(b, p, -1)).reshape(-1, cfg.top_k)
        top = self.hook_routing_weights(top.view(b, p, -1)).reshape(-1, cfg.top_k)
        return chosen, top

    def expert(self, e: int, x: Tensor) -> Tensor:
        """Expert ``e``'s output on tokens ``x`` [n, d_model], unweighted (HF's op order: one fused
        gate/up projection, chunked, the activation on the strided gate half; gpt-oss's clamped
        SwiGLU on its interleaved halves)."""
        if self.oss:
            gate_up = x @ self.gate_up_weight[e] + self.gate_up_bias[e]
            limit = self.cfg.swiglu_limit
            gate = gate_up[..., ::2].clamp(min=None, max=limit)
            up = gate_up[..., 1::2].clamp(min=-limit, max=limit)
            glu = gate * torch.sigmoid(gate * self.cfg.swiglu_alpha)
            return ((up + 1) * glu) @ self.down_weight[e] + self.down_bias[e]
        gate, up = F.linear(x, self.gate_up_weight[e]).chunk(2, dim=-1)
        return F.linear(self.act(gate) * up, self.down_weight[e])

    def forward(self, x: Tensor) -> Tensor:
        b, p, m = x.shape
        flat = x.reshape(-1, m)
        chosen, weights = self.route(flat, (b, p))
        out = torch.zeros_like(flat)
        with torch.no_grad():  # [expert + 1, top_k, tokens]: which token chose which expert in which slot
            mask = F.one_hot(chosen, num_classes=self.cfg.n_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()[:, 0].tolist()
        hit = [e for e in hit if e < self.cfg.n_experts]
        per_slot = None
        if _hooked(self.hook_expert_out):  # each chosen expert's output, placed in its token's slot
            computed = flat.new_zeros(b * p, self.cfg.top_k, m)
            for e in hit:
                slot, token = torch.where(mask[e])
                computed[token, slot] = self.expert(e, flat[token])
            before = _snapshot(computed)
            per_slot = self.hook_expert_out(computed.view(b, p, -1, m)).reshape(-1, self.cfg.top_k, m)
            if _untouched(per_slot, computed, before):
                per_slot = computed
        for e in hit:
            slot, token = torch.where(mask[e])
            y = self.expert(e, flat[token]) if per_slot is None else per_slot[token, slot]
            y = y * weights[token, slot, None]
            out.index_add_(0, token, y.to(out.dtype))
        if self.shared is not None:  # Qwen2-MoE: + sigmoid(gate(x)) * shared(x)
            out = out + F.sigmoid(F.linear(flat, self.shared_gate_weight)) * self.shared(x).reshape(-1, m)
        return out.view(b, p, m)
