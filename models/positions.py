"""Positional schemes of the toolkit's transformer: rotary (RoPE), ALiBi and sinusoidal, each in
Hugging Face's (or the paper's) operation order, so that the angles and biases are bitwise theirs."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.config import RUNTIME_ROPE_TYPES, SCALED_ROPE_TYPES, Config

__all__ = [
    "alibi_slopes", "apply_rope", "rope_cos_sin", "rope_inv_freq", "rope_planes", "scaled_rope", "sinusoidal",
    "SCALED_ROPE_TYPES", "RUNTIME_ROPE_TYPES",
]  # fmt: skip


def rope_inv_freq(cfg: Config, theta: float | None = None) -> Tensor:
    """RoPE's inverse frequencies for base ``theta`` (None: ``cfg.rope_theta``)."""
    dim = cfg.rot_dim
    base = cfg.rope_theta if theta is None else theta
    # Hugging Face's expression, so the angles are bitwise identical.
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))


def scaled_rope(cfg: Config, seq_len: int | None = None) -> tuple[Tensor, float]:
    """(inverse frequencies, attention factor) of ``cfg.rope_scaling`` for a sequence whose largest
    position is ``seq_len - 1`` (None: the frequencies a model starts with), computed by Hugging
    Face's own ``ROPE_INIT_FUNCTIONS`` (the same bits, by construction; its formulas are not copied
    here). The factor multiplies cos and sin (YaRN, LongRoPE; 1.0 for the others).

    Sequence-dependent types, stateless here: "longrope" uses its long factors once a position
    reaches ``original_max_position_embeddings`` (as Hugging Face does); "dynamic" (NTK) rescales its
    base for ``seq_len`` beyond ``max_position_embeddings``. Hugging Face's dynamic RoPE keeps the
    longest length it has seen and does not go back until a short sequence, so after a long one it
    can differ; the toolkit's result depends on the current sequence alone."""
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = dict(cfg.rope_scaling or ())
    max_positions = params.pop("max_position_embeddings", cfg.n_ctx)  # the HF config's, which these read
    params.setdefault("rope_theta", cfg.rope_theta)
    if cfg.rot_dim != cfg.d_head:
        params["partial_rotary_factor"] = cfg.rot_dim / cfg.d_head
    hf = LlamaConfig(
        hidden_size=cfg.n_heads * cfg.d_head, num_attention_heads=cfg.n_heads, head_dim=cfg.d_head,
        max_position_embeddings=max_positions, rope_parameters=params,
    )  # fmt: skip
    rope_type = params["rope_type"]
    if rope_type == "longrope":
        original = params.get("original_max_position_embeddings", max_positions)
        long = original + 1 if (seq_len or 0) > original else None  # HF's long factors past the original length
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](hf, None, seq_len=long)
    elif rope_type == "dynamic" and seq_len is not None and seq_len > max_positions:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](hf, None, seq_len=seq_len)
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[rope_type](hf, None)
    return inv_freq.float(), float(factor)


def rope_cos_sin(cfg: Config, positions: Tensor, inv_freq: Tensor) -> tuple[Tensor, Tensor]:
    """cos, sin of shape [batch, pos, rot_dim], laid out to match ``apply_rope``."""
    freqs = positions[..., None].float() * inv_freq.to(positions.device)  # [batch, pos, rot_dim/2]
    if cfg.rope_interleaved:
        emb = torch.repeat_interleave(freqs, 2, dim=-1)
    else:
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def _rotate_every_two(x: Tensor) -> Tensor:
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def apply_rope(cfg: Config, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate the first ``rot_dim`` dimensions of each head of ``x`` [..., d_head] (cos and sin
    broadcast against it).

    Dimension pairs that rotate together: (i, i + rot_dim/2) by default (Llama/NeoX), (2i, 2i+1)
    when ``rope_interleaved`` (GPT-J). ``rope_planes`` lists them for analyses.
    """
    rot, rest = x[..., : cfg.rot_dim], x[..., cfg.rot_dim :]
    turn = _rotate_every_two if cfg.rope_interleaved else _rotate_half
    rot = rot * cos + turn(rot) * sin
    return torch.cat((rot, rest), dim=-1) if rest.shape[-1] else rot


def rope_planes(cfg: Config) -> list[tuple[int, int]]:
    """The (dim, dim) pairs of d_head that one rotary frequency rotates together."""
    half = cfg.rot_dim // 2
    if cfg.rope_interleaved:
        return [(2 * i, 2 * i + 1) for i in range(half)]
    return [(i, i + half) for i in range(half)]


def alibi_slopes(n_heads: int) -> Tensor:
    """Press et al. (2022): geometric slopes 2^(-8/n), and the interleaved extension for n not a
    power of two."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        slopes = power_of_two(n_heads)
    else:
        closest = 2 ** math.floor(math.log2(n_heads))
        slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float)


def sinusoidal(positions: Tensor, d_model: int) -> Tensor:
    """Vaswani et al. (2017): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    i = torch.arange(0, d_model, 2, dtype=torch.float, device=positions.device)
    angles = positions[..., None].float() / (10000.0 ** (i / d_model))  # [batch, pos, d_model/2]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[..., :d_model]
