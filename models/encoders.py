"""Hugging Face -> ``Transformer`` converters of the encoders whose layout is not BERT's own:
DistilBERT and ModernBERT. RoBERTa and ELECTRA share BERT's tensor names and are converted by
``models.convert._bert``. Each converter is ``(hf_config, state_dict, name) -> (Config, state)``,
registered in ``models.convert.CONVERTERS`` through ``ENCODERS``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import Tensor

from models.config import Config
from models.decoders import _act
from models.families import UnsupportedModelError, _expect, _get, _strip_prefix

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = ["ENCODERS"]


def post_norm_encoder(**fields: Any) -> Config:
    """The Config of BERT's layout (BERT, RoBERTa, ELECTRA, DistilBERT): bidirectional, learned
    positions, post-norm LayerNorm blocks with an embedding norm and no final norm, biases everywhere,
    a standard MLP, no LM head; ``fields`` give the shapes and what differs (``n_token_types``, eps...)."""
    layout = dict(
        attention="bidirectional", positional="learned", norm="layernorm", norm_placement="post", mlp="standard",
        embed_norm=True, final_norm=False, attn_bias=True, attn_out_bias=True, mlp_bias=True, lm_head=False,
    )  # fmt: skip
    return Config(**(layout | fields))


def _distilbert(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """DistilBERT: BERT's post-norm blocks without token types, LayerNorm eps 1e-12 (fixed in HF's
    code, not in the config). ``sinusoidal_pos_embds``: HF writes the sinusoid into the position
    table, which the weights hold; it is read as the learned table it is."""
    h, m = hf_cfg.n_heads, hf_cfg.dim
    cfg = post_norm_encoder(
        d_model=m, n_layers=hf_cfg.n_layers, n_heads=h, d_head=m // h, d_mlp=hf_cfg.hidden_dim,
        d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.max_position_embeddings,
        act=_act(hf_cfg, "DistilBERT", hf_cfg.activation), eps=1e-12, pad_token_id=hf_cfg.pad_token_id, name=name,
    )  # fmt: skip
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


def _modernbert(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """ModernBERT: pre-norm LayerNorm (without bias by default), an embedding norm that stands in for
    block 0's ln1 (``first_attn_norm=False``), RoPE with a second base for the local layers, local
    layers (every layer but each ``global_attn_every_n_layers``-th) that see ``local_attention // 2``
    tokens on either side, a GeGLU MLP whose fused ``Wi`` holds the activated half first, a final norm.
    Hugging Face 5 runs eager and SDPA attention on the padded batch (no unpadding: that is only its
    flash-attention path)."""
    m, h = hf_cfg.hidden_size, hf_cfg.num_attention_heads
    if m % h:
        raise UnsupportedModelError(f"ModernBERT hidden_size={m} is not a multiple of num_attention_heads={h}")
    ropes = hf_cfg.rope_parameters
    kinds = {t: (ropes.get(t) or {}).get("rope_type", "default") for t in ("full_attention", "sliding_attention")}
    if set(kinds.values()) != {"default"}:
        raise UnsupportedModelError(f"ModernBERT rope_type {kinds}: only 'default' (unscaled) RoPE is supported")
    types = tuple("full" if t == "full_attention" else "sliding" for t in hf_cfg.layer_types)
    sliding = "sliding" in types
    d_mlp = int(hf_cfg.intermediate_size)
    cfg = Config(
        d_model=m,
        n_layers=hf_cfg.num_hidden_layers,
        n_heads=h,
        d_head=m // h,
        d_mlp=d_mlp,
        d_vocab=hf_cfg.vocab_size,
        n_ctx=hf_cfg.max_position_embeddings,
        attention="bidirectional",
        positional="rope",
        norm="layernorm",
        norm_placement="pre",
        norm_bias=bool(hf_cfg.norm_bias),
        act=_act(hf_cfg, "ModernBERT", hf_cfg.hidden_activation),
        mlp="gated",
        gate_up_fused=True,  # act(Wi(x).chunk(2)[0]): the activation reads a strided half
        eps=hf_cfg.norm_eps,
        embed_norm=True,
        final_norm=True,
        first_attn_norm=False,
        attn_bias=bool(hf_cfg.attention_bias),
        attn_out_bias=bool(hf_cfg.attention_bias),
        mlp_bias=bool(hf_cfg.mlp_bias),
        lm_head=False,
        rope_theta=float(ropes["full_attention"]["rope_theta"]),
        rope_local_theta=float(ropes["sliding_attention"]["rope_theta"]) if sliding else None,
        rope_upcast=True,  # q.float() * cos (cos/sin in the model's dtype), as HF's apply_rotary_pos_emb
        layer_types=types,
        sliding_window=hf_cfg.sliding_window if sliding else None,
        pad_token_id=hf_cfg.pad_token_id,
        bos_token_id=getattr(hf_cfg, "bos_token_id", None),
        eos_token_id=getattr(hf_cfg, "eos_token_id", None),
        name=name,
    )
    sd = _strip_prefix(sd, ("model.",))
    src = f"ModernBERT checkpoint {name!r}"
    g = lambda k: _get(sd, k, src)  # noqa: E731

    def norm(theirs: str, ours: str) -> dict[str, Tensor]:
        out = {f"{ours}.w": g(f"{theirs}.weight")}
        if cfg.norm_bias:
            out[f"{ours}.b"] = g(f"{theirs}.bias")
        return out

    out = {"W_E": g("embeddings.tok_embeddings.weight")} | norm("embeddings.norm", "ln_embed")
    out |= norm("final_norm", "ln_final")
    for l in range(cfg.n_layers):
        p, q = f"layers.{l}.", f"blocks.{l}."
        if l > 0:
            out |= norm(f"{p}attn_norm", f"{q}ln1")
        out |= norm(f"{p}mlp_norm", f"{q}ln2")
        W = _expect(g(f"{p}attn.Wqkv.weight"), (3 * m, m), f"{p}attn.Wqkv.weight", src)
        b = g(f"{p}attn.Wqkv.bias") if cfg.attn_bias else None
        for i, ours in enumerate("qkv"):  # Wqkv(x).view(..., 3, head, d_head): q, k, v blocks of rows
            out[f"{q}attn.{ours}_weight"] = W[i * m : (i + 1) * m]
            if b is not None:
                out[f"{q}attn.{ours}_bias"] = b[i * m : (i + 1) * m]
        out[f"{q}attn.o_weight"] = g(f"{p}attn.Wo.weight")
        Wi = _expect(g(f"{p}mlp.Wi.weight"), (2 * d_mlp, m), f"{p}mlp.Wi.weight", src)
        out[f"{q}mlp.gate_weight"], out[f"{q}mlp.in_weight"] = Wi[:d_mlp], Wi[d_mlp:]  # act(first) * second
        out[f"{q}mlp.out_weight"] = g(f"{p}mlp.Wo.weight")
        if cfg.attn_bias:
            out[f"{q}attn.o_bias"] = g(f"{p}attn.Wo.bias")
        if cfg.mlp_bias:
            bi = g(f"{p}mlp.Wi.bias")
            out[f"{q}mlp.gate_bias"], out[f"{q}mlp.in_bias"] = bi[:d_mlp], bi[d_mlp:]
            out[f"{q}mlp.out_bias"] = g(f"{p}mlp.Wo.bias")
    return cfg, out


ENCODERS = {"distilbert": _distilbert, "modernbert": _modernbert}
