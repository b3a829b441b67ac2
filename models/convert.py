"""Hugging Face -> ``Transformer`` conversion: one converter per Hugging Face ``model_type``, in
``CONVERTERS``, and ``from_hf``, which runs the one that fits an in-memory model.

A converter is a function ``(hf_config, state_dict, name) -> (Config, state)``: it reads the
Hugging Face config into a ``Config`` and renames (and splits, transposes) the tensors into the
toolkit's names, refusing what the toolkit does not implement with ``UnsupportedModelError``. BERT
and GPT-2 have theirs here; the Llama-like decoder families share one (``models/families.py``, a
row of ``FAMILIES`` each). A new architecture adds its converter beside these and a row in
``CONVERTERS``. Conversions only rearrange tensors (per-head split, transposes); they never fold,
centre or rescale weights, so a converted model computes exactly what the source model computes.

Also here, for every loader: ``load_state_dict_checked`` (a strict copy whose errors name the
tensor) and the check for non-finite weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from models.config import Config
from models.decoders import DECODERS
from models.encoders import ENCODERS, post_norm_encoder
from models.families import FAMILIES, CheckpointError, UnsupportedModelError, _decoder, _expect, _get, _strip_prefix
from models.tokenizer import Tokenizer
from models.transformer import Transformer

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["CONVERTERS", "from_hf", "load_state_dict_checked", "CheckpointError", "UnsupportedModelError"]


# --------------------------------------------------------------------------------------------------
# State dicts


def load_state_dict_checked(model: Transformer, state: dict[str, Tensor], source: str = "checkpoint") -> None:
    """Copy ``state`` into ``model``; every missing, unexpected or misshapen tensor is an error that
    names it (with both shapes)."""
    expected = dict(model.state_dict())
    missing = [k for k in expected if k not in state]
    if missing:
        k = missing[0]
        raise CheckpointError(
            f"{source} is missing tensor {k!r} (expected shape {tuple(expected[k].shape)})"
            + (f" and {len(missing) - 1} more: {missing[1:6]}" if len(missing) > 1 else "")
        )
    unexpected = [k for k in state if k not in expected]
    if unexpected:
        raise CheckpointError(f"{source} has tensors the model does not: {unexpected[:6]}")
    for k, v in state.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise CheckpointError(
                f"{source} tensor {k!r} has shape {tuple(v.shape)}, the model expects {tuple(expected[k].shape)}"
            )
    model.load_state_dict({k: v.to(expected[k].dtype) for k, v in state.items()}, strict=True)


class _Unfilled(Transformer):
    """A ``Transformer`` built without its random initialisation, for loaders that overwrite every
    tensor (``load_state_dict_checked`` is strict: a tensor the weights lack is an error, never left
    as ``torch.empty`` made it). Drawing GPT-2's init only to throw it away was about a third of a
    SmolLM2 conversion's time, and advanced the global RNG on every load."""

    def init_weights(self, seed: int | None = None) -> Transformer:
        return self


def _unfilled(cfg: Config, tokenizer: Tokenizer | None) -> Transformer:
    """A plain ``Transformer`` (its class is set back: it pickles, copies and reads as one) whose
    parameters hold whatever ``torch.empty`` gave them: fill every one before use."""
    model = _Unfilled(cfg, tokenizer=tokenizer)
    model.__class__ = Transformer
    return model


# --------------------------------------------------------------------------------------------------
# Hugging Face architectures


def _bert(
    hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str, family: str = "BERT", prefix: str = "bert."
) -> tuple[Config, dict[str, Tensor]]:
    """BERT, and the encoders that share its layout: RoBERTa (``_roberta``: learned positions stored
    from row padding_idx + 1) and ELECTRA's discriminator (``_electra``)."""
    if getattr(hf_cfg, "is_decoder", False):  # BertModel then masks causally
        raise UnsupportedModelError(f"{family} is_decoder=True (a causal {family}) is not supported; only the encoder")
    if getattr(hf_cfg, "position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModelError(
            f"{family} position_embedding_type={hf_cfg.position_embedding_type!r}: only 'absolute'"
        )
    act = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_pytorch_tanh"}.get(
        hf_cfg.hidden_act
    )
    if act is None:
        raise UnsupportedModelError(f"{family} hidden_act={hf_cfg.hidden_act!r} is not supported")
    # RoBERTa numbers positions from padding_idx + 1 (fairseq's make_positions): rows 0..padding_idx
    # of its table serve padding only, so the model's position p reads row p + padding_idx + 1
    offset = hf_cfg.pad_token_id + 1 if family == "RoBERTa" else 0
    h = hf_cfg.num_attention_heads
    cfg = post_norm_encoder(
        d_model=hf_cfg.hidden_size, n_layers=hf_cfg.num_hidden_layers, n_heads=h, d_head=hf_cfg.hidden_size // h,
        d_mlp=hf_cfg.intermediate_size, d_vocab=hf_cfg.vocab_size, n_ctx=hf_cfg.max_position_embeddings - offset,
        act=act, eps=hf_cfg.layer_norm_eps, n_token_types=hf_cfg.type_vocab_size, pad_token_id=hf_cfg.pad_token_id,
        name=name,
    )  # fmt: skip
    sd = _strip_prefix(sd, (prefix,))
    src = f"{family} checkpoint {name!r}"
    g = lambda k: _get(sd, k, src)  # noqa: E731
    out = {
        "W_E": g("embeddings.word_embeddings.weight"),
        "W_pos": g("embeddings.position_embeddings.weight")[offset:],
        "W_token_type": g("embeddings.token_type_embeddings.weight"),
        "ln_embed.w": g("embeddings.LayerNorm.weight"),
        "ln_embed.b": g("embeddings.LayerNorm.bias"),
    }
    for l in range(cfg.n_layers):
        p, q = f"encoder.layer.{l}.", f"blocks.{l}."
        for ours, theirs in (("q", "query"), ("k", "key"), ("v", "value")):
            out[f"{q}attn.{ours}_weight"] = g(f"{p}attention.self.{theirs}.weight")
            out[f"{q}attn.{ours}_bias"] = g(f"{p}attention.self.{theirs}.bias")
        out[f"{q}attn.o_weight"] = g(f"{p}attention.output.dense.weight")
        out[f"{q}attn.o_bias"] = g(f"{p}attention.output.dense.bias")
        out[f"{q}ln1.w"] = g(f"{p}attention.output.LayerNorm.weight")
        out[f"{q}ln1.b"] = g(f"{p}attention.output.LayerNorm.bias")
        out[f"{q}mlp.in_weight"] = g(f"{p}intermediate.dense.weight")
        out[f"{q}mlp.in_bias"] = g(f"{p}intermediate.dense.bias")
        out[f"{q}mlp.out_weight"] = g(f"{p}output.dense.weight")
        out[f"{q}mlp.out_bias"] = g(f"{p}output.dense.bias")
        out[f"{q}ln2.w"] = g(f"{p}output.LayerNorm.weight")
        out[f"{q}ln2.b"] = g(f"{p}output.LayerNorm.bias")
    return cfg, out


def _roberta(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """RoBERTa: BERT's layout, positions from padding_idx + 1 (``n_ctx`` is the table less those rows)."""
    if hf_cfg.pad_token_id is None or not 0 <= hf_cfg.pad_token_id < hf_cfg.max_position_embeddings - 1:
        raise UnsupportedModelError(f"RoBERTa pad_token_id={hf_cfg.pad_token_id!r}: its positions start after it")
    return _bert(hf_cfg, sd, name, "RoBERTa", "roberta.")


def _electra(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    """ELECTRA's discriminator (``ElectraModel``): BERT's layout under ``electra.``."""
    if hf_cfg.embedding_size != hf_cfg.hidden_size:
        raise UnsupportedModelError(
            f"ELECTRA embedding_size={hf_cfg.embedding_size} != hidden_size={hf_cfg.hidden_size} (a projection "
            "after the embeddings: ELECTRA-small) is not supported; only embedding_size == hidden_size"
        )
    return _bert(hf_cfg, sd, name, "ELECTRA", "electra.")


def _gpt2(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    if getattr(hf_cfg, "scale_attn_by_inverse_layer_idx", False):
        raise UnsupportedModelError("GPT-2 scale_attn_by_inverse_layer_idx=True is not supported")
    act = {"gelu_new": "gelu_new", "gelu": "gelu", "relu": "relu", "gelu_pytorch_tanh": "gelu_pytorch_tanh"}.get(
        hf_cfg.activation_function
    )
    if act is None:
        raise UnsupportedModelError(f"GPT-2 activation_function={hf_cfg.activation_function!r} is not supported")
    m, h = hf_cfg.n_embd, hf_cfg.n_head
    d = m // h
    sd = _strip_prefix(sd, ("transformer.",)) | (
        {"lm_head.weight": sd["lm_head.weight"]} if "lm_head.weight" in sd else {}
    )
    src = f"GPT-2 checkpoint {name!r}"
    g = lambda k: _get(sd, k, src)  # noqa: E731
    cfg = Config(
        d_model=m,
        n_layers=hf_cfg.n_layer,
        n_heads=h,
        d_head=d,
        d_mlp=hf_cfg.n_inner or 4 * m,
        d_vocab=hf_cfg.vocab_size,
        n_ctx=hf_cfg.n_positions,
        attention="causal",
        positional="learned",
        norm="layernorm",
        norm_placement="pre",
        act=act,
        mlp="standard",
        eps=hf_cfg.layer_norm_epsilon,
        attn_bias=True,
        attn_out_bias=True,
        mlp_bias=True,
        lm_head=True,
        tie_embeddings=True,
        attn_scale=None if getattr(hf_cfg, "scale_attn_weights", True) else 1.0,
        bos_token_id=getattr(hf_cfg, "bos_token_id", None),
        eos_token_id=getattr(hf_cfg, "eos_token_id", None),
        name=name,
    )
    out = {
        "W_E": g("wte.weight"),
        "W_pos": g("wpe.weight"),
        "ln_final.w": g("ln_f.weight"),
        "ln_final.b": g("ln_f.bias"),
    }
    for l in range(cfg.n_layers):
        p, q = f"h.{l}.", f"blocks.{l}."
        # GPT-2's Conv1D stores [in, out]; ours is nn.Linear's [out, in]
        W = _expect(g(f"{p}attn.c_attn.weight"), (m, 3 * m), f"{p}attn.c_attn.weight", src)
        b = g(f"{p}attn.c_attn.bias")
        for i, ours in enumerate("qkv"):
            out[f"{q}attn.{ours}_weight"] = W[:, i * m : (i + 1) * m].T
            out[f"{q}attn.{ours}_bias"] = b[i * m : (i + 1) * m]
        out[f"{q}attn.o_weight"] = g(f"{p}attn.c_proj.weight").T
        out[f"{q}attn.o_bias"] = g(f"{p}attn.c_proj.bias")
        out[f"{q}ln1.w"], out[f"{q}ln1.b"] = g(f"{p}ln_1.weight"), g(f"{p}ln_1.bias")
        out[f"{q}ln2.w"], out[f"{q}ln2.b"] = g(f"{p}ln_2.weight"), g(f"{p}ln_2.bias")
        out[f"{q}mlp.in_weight"], out[f"{q}mlp.in_bias"] = g(f"{p}mlp.c_fc.weight").T, g(f"{p}mlp.c_fc.bias")
        out[f"{q}mlp.out_weight"], out[f"{q}mlp.out_bias"] = g(f"{p}mlp.c_proj.weight").T, g(f"{p}mlp.c_proj.bias")
    return cfg, out


def _finite(v: Tensor) -> bool:
    low, high = torch.aminmax(v)
    return bool(torch.isfinite(low) & torch.isfinite(high))


def _warn_non_finite(state: dict[str, Tensor], source: str) -> None:
    """One warning naming the tensors that hold NaN or inf (the model still loads). A tensor's
    minimum and maximum are NaN when it holds a NaN and +-inf when it holds an inf: one pass without
    the full-size boolean tensor ``isfinite(v).all()`` makes (4x less time on SmolLM2's weights)."""
    bad = [k for k, v in state.items() if v.is_floating_point() and v.numel() and not _finite(v)]
    if bad:
        more = f" and {len(bad) - 1} more ({bad[1:4]})" if len(bad) > 1 else ""
        warnings.warn(
            f"{source}: tensor {bad[0]!r}{more} holds NaN or inf values; what reads it is NaN or inf, except where "
            "the fused attention path (like Hugging Face's SDPA) hides a NaN that eager attention shows",
            stacklevel=3,
        )


def _unsupported(model_type: object, where: str) -> str:
    hint = " (Gemma 3's text model, Gemma3ForCausalLM, is 'gemma3_text')" if model_type == "gemma3" else ""
    return (
        f"{where}: model_type {model_type!r} is not supported{hint}; the toolkit converts "
        f"{', '.join(sorted(CONVERTERS))} (docs/models.md)"
    )


# model_type -> converter: BERT, RoBERTa, ELECTRA and GPT-2 here, the decoder families through
# models/families.py and models/decoders.py, DistilBERT and ModernBERT through models/encoders.py
CONVERTERS: dict[str, Callable] = (
    {"bert": _bert, "roberta": _roberta, "electra": _electra, "gpt2": _gpt2}
    | dict.fromkeys(FAMILIES, _decoder)
    | DECODERS
    | ENCODERS
)


def from_hf(
    hf_model: PreTrainedModel,
    tokenizer: Tokenizer | PreTrainedTokenizerBase | None = None,
    name: str | None = None,
    prepend_bos: bool | None = None,
) -> Transformer:
    """Convert an in-memory Hugging Face model (``BertModel``, ``LlamaForCausalLM``,
    ``GPT2LMHeadModel``, ...) into a ``Transformer`` computing the same function."""
    hf_cfg = hf_model.config
    kind = hf_cfg.model_type
    if kind not in CONVERTERS:
        raise UnsupportedModelError(_unsupported(kind, "the model"))
    name = name or getattr(hf_cfg, "name_or_path", None) or kind
    sd = {k: v.detach().float() for k, v in hf_model.state_dict().items()}
    cfg, state = CONVERTERS[kind](hf_cfg, sd, str(name))
    _warn_non_finite(state, f"converted {kind} {name!r}")
    tok = None
    if tokenizer is not None:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer(tokenizer, prepend_bos=prepend_bos)
    model = _unfilled(cfg, tok)
    load_state_dict_checked(model, {k: v.contiguous() for k, v in state.items()}, source=f"converted {kind} {name!r}")
    return model.eval()
