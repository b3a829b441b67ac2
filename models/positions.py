"""Positional schemes of the toolkit's transformer: rotary (RoPE), ALiBi and sinusoidal, each in
Hugging Face's (or the paper's) operation order, so that the angles and biases are bitwise theirs."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from models.config import Config

__all__ = ["alibi_slopes", "apply_rope", "rope_cos_sin", "rope_inv_freq", "rope_planes", "sinusoidal"]


def rope_inv_freq(cfg: Config, theta: float | None = None) -> Tensor:
    """RoPE's inverse frequencies for base ``theta`` (None: ``cfg.rope_theta``)."""
    dim = cfg.rot_dim
    base = cfg.rope_theta if theta is None else theta
    # Hugging Face's expression, so the angles are bitwise identical.
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))


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
