"""Hugging Face -> ``Transformer`` converters of the encoders whose layout is not BERT's own:
DistilBERT (and ModernBERT). RoBERTa and ELECTRA share BERT's tensor names and are converted by
``models.convert._bert``. Each converter is ``(hf_config, state_dict, name) -> (Config, state)``,
registered in ``models.convert.CONVERTERS`` through ``ENCODERS``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor

from models.config import Config
from models.decoders import _act
from models.families import UnsupportedModelError, _get, _strip_prefix

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = ["ENCODERS"]


def _distilbert(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """DistilBERT: BERT's post-norm blocks without token types, LayerNorm eps 1e-12 (fixed in HF's
    code, not in the config). ``sinusoidal_pos_embds``: HF writes the sinusoid into the position
    table, which the weights hold; it is read as the learned table it is."""
    h, m = hf_cfg.n_heads, hf_cfg.dim
    cfg = Config(
        d_model=m,
        n_layers=hf_cfg.n_layers,
        n_heads=h,
        d_head=m // h,
        d_mlp=hf_cfg.hidden_dim,
        d_vocab=hf_cfg.vocab_size,
        n_ctx=hf_cfg.max_position_embeddings,
        attention="bidirectional",
        positional="learned",
        norm="layernorm",
        norm_placement="post",
        act=_act(hf_cfg, "DistilBERT", hf_cfg.activation),
        mlp="standard",
        eps=1e-12,
        embed_norm=True,
        final_norm=False,
        attn_bias=True,
        attn_out_bias=True,
        mlp_bias=True,
        lm_head=False,
        pad_token_id=hf_cfg.pad_token_id,
        name=name,
    )
    if m % h:
        raise UnsupportedModelError(f"DistilBERT dim={m} is not a multiple of n_heads={h}")
    sd = _strip_prefix(sd, ("distilbert.",))
    src = f"DistilBERT checkpoint {name!r}"
    g = lambda k: _get(sd, k, src)  # noqa: E731
    out = {
        "W_E": g("embeddings.word_embeddings.weight"),
        "W_pos": g("embeddings.position_embeddings.weight"),
        "ln_embed.w": g("embeddings.LayerNorm.weight"),
        "ln_embed.b": g("embeddings.LayerNorm.bias"),
    }
    for l in range(cfg.n_layers):
        p, q = f"transformer.layer.{l}.", f"blocks.{l}."
        for ours, theirs in (("q", "q_lin"), ("k", "k_lin"), ("v", "v_lin"), ("o", "out_lin")):
            out[f"{q}attn.{ours}_weight"] = g(f"{p}attention.{theirs}.weight")
            out[f"{q}attn.{ours}_bias"] = g(f"{p}attention.{theirs}.bias")
        out[f"{q}ln1.w"], out[f"{q}ln1.b"] = g(f"{p}sa_layer_norm.weight"), g(f"{p}sa_layer_norm.bias")
        out[f"{q}mlp.in_weight"], out[f"{q}mlp.in_bias"] = g(f"{p}ffn.lin1.weight"), g(f"{p}ffn.lin1.bias")
        out[f"{q}mlp.out_weight"], out[f"{q}mlp.out_bias"] = g(f"{p}ffn.lin2.weight"), g(f"{p}ffn.lin2.bias")
        out[f"{q}ln2.w"], out[f"{q}ln2.b"] = g(f"{p}output_layer_norm.weight"), g(f"{p}output_layer_norm.bias")
    return cfg, out


ENCODERS = {"distilbert": _distilbert}
