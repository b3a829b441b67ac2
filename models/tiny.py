"""Tiny random configs of every architecture the toolkit converts, saved the way a user's folder
is: what ``interp parity`` and tests/models/test_families.py check against Hugging Face.

``ARCHITECTURES`` maps a key (a ``model_type``, or ``<model_type>_<variant>`` for a second setting
of one) to a ``Tiny``: how to build the Hugging Face config and model class with the *installed*
transformers, and the ``Config`` fields the conversion must produce (the settings that set the family
apart, at non-default values). A family the installed transformers lacks is reported by
``available`` as "needs transformers >= X", never an error.

``save_tiny`` randomly initialises the model, perturbs every tensor (a zero bias or a unit norm
weight could hide a conversion mistake), and saves it with ``save_pretrained``; ``tiny_inputs``
gives the token batches (unpadded, right- and left-padded) the checks run on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel

__all__ = ["ARCHITECTURES", "Tiny", "V", "N", "WINDOW", "available", "eager_experts", "save_tiny", "tiny_inputs"]

V = 97  # vocabulary
N = 13  # tokens per row: longer than the window
WINDOW = 4
_COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_attention_heads=4, max_position_embeddings=64)


@dataclass(frozen=True)
class Tiny:
    """One tiny architecture. ``config``: the HF config class's name and its arguments; ``model``: the
    HF model class's name; ``expect``: Config fields the conversion must produce; ``since``: the
    transformers version that added the family (for the "needs" line); ``encoder``: bidirectional;
    ``tol``: per check, the largest difference accepted where HF's ops cannot be matched (``note`` says why)."""

    model_type: str
    config: str
    kwargs: dict[str, Any]
    model: str
    expect: dict[str, Any] = field(default_factory=dict)
    since: str = ""
    encoder: bool = False
    # check -> the largest |difference| accepted where Hugging Face's ops cannot be matched bit for bit
    # (empty: every check bitwise); ``note`` says why
    tol: dict[str, float] = field(default_factory=dict)
    note: str = ""
    # check -> why the matrix measures it but claims nothing (shown as information, never a failure)
    unclaimed: dict[str, str] = field(default_factory=dict)

    def build(self) -> tuple[PretrainedConfig, type[PreTrainedModel]]:
        """(HF config, HF model class) with the installed transformers; AttributeError if it lacks them."""
        import transformers

        return getattr(transformers, self.config)(**self.kwargs), getattr(transformers, self.model)


# why a mixture of experts is not bitwise on the eager path with left padding
_MOE_PADDING = (
    "a left-padded token's query sees no key: ours gives it a zero pattern, HF's eager a uniform row over "
    "its masked keys; the two different hidden states route to experts, and an expert's GEMM over other "
    "rows gives the real tokens other last bits (measured 4.8e-7 on the logits); unpadded, right-padded "
    "and fused: bitwise"
)
_BATCH_ROPE = (
    "the frequencies follow the batch's largest position, in Hugging Face as here: a short row padded beside a "
    "long one is rotated as the long one"
)


def _dec(
    model_type: str, config: str, model: str, expect: dict | None = None, since: str = "",
    unclaimed: dict | None = None, tol: dict | None = None, note: str = "", **kw: Any,
) -> Tiny:  # fmt: skip
    kwargs = dict(_COMMON, num_hidden_layers=2, num_key_value_heads=2, pad_token_id=0) | kw
    if kwargs["num_key_value_heads"] is None:  # a family without grouped-query attention
        del kwargs["num_key_value_heads"]
    extra = dict(tol=tol or {}, note=note, unclaimed=unclaimed or {})
    return Tiny(model_type, config, kwargs, model, expect or {}, since, **extra)


ARCHITECTURES: dict[str, Tiny] = {
    "bert": Tiny(
        "bert", "BertConfig",
        dict(_COMMON, num_hidden_layers=2, type_vocab_size=2, hidden_act="gelu"), "BertModel",
        dict(norm_placement="post", positional="learned", n_token_types=2), encoder=True,
    ),
    "roberta": Tiny(  # positions from padding_idx + 1 (pad 3, not RoBERTa's 1: an offset of 4), one token type
        "roberta", "RobertaConfig",
        dict(_COMMON, num_hidden_layers=2, type_vocab_size=1, pad_token_id=3, bos_token_id=0, eos_token_id=2),
        "RobertaModel", dict(norm_placement="post", positional="learned", n_token_types=1, n_ctx=60, pad_token_id=3),
        encoder=True,
    ),
    "electra": Tiny(  # the discriminator; embedding_size == hidden_size (a projection is refused)
        "electra", "ElectraConfig",
        dict(_COMMON, num_hidden_layers=2, embedding_size=32, type_vocab_size=3, hidden_act="gelu_new"),
        "ElectraModel", dict(norm_placement="post", n_token_types=3, act="gelu_new"), encoder=True,
    ),
    "distilbert": Tiny(  # no token types, eps 1e-12, the sinusoidal table HF writes (then perturbed)
        "distilbert", "DistilBertConfig",
        dict(vocab_size=V, dim=32, hidden_dim=48, n_heads=4, n_layers=2, max_position_embeddings=64,
             sinusoidal_pos_embds=True, activation="relu", pad_token_id=0),
        "DistilBertModel", dict(norm_placement="post", n_token_types=0, eps=1e-12, act="relu", embed_norm=True),
        encoder=True,
    ),
    "modernbert": Tiny(  # 3 layers: global, local, local (2 tokens each side), two RoPE bases, no biases
        "modernbert", "ModernBertConfig",
        dict(_COMMON, num_hidden_layers=3, global_attn_every_n_layers=3, local_attention=2 * (WINDOW // 2),
             global_rope_theta=160_000.0, local_rope_theta=10_000.0, norm_bias=False, hidden_activation="gelu",
             pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2),
        "ModernBertModel",
        dict(norm_placement="pre", positional="rope", mlp="gated", gate_up_fused=True, norm_bias=False,
             first_attn_norm=False, embed_norm=True, final_norm=True, layer_types=("full", "sliding", "sliding"),
             sliding_window=WINDOW // 2, rope_theta=160_000.0, rope_local_theta=10_000.0, attn_bias=False),
        encoder=True,
    ),
    "modernbert_bias": Tiny(  # every bias on (norms, attention, MLP), global and local alternating
        "modernbert", "ModernBertConfig",
        dict(_COMMON, num_hidden_layers=2, global_attn_every_n_layers=2, local_attention=WINDOW,
             norm_bias=True, attention_bias=True, mlp_bias=True, pad_token_id=0),
        "ModernBertModel",
        dict(norm_bias=True, attn_bias=True, attn_out_bias=True, mlp_bias=True, layer_types=("full", "sliding")),
        encoder=True,
    ),
    "gpt2": Tiny(
        "gpt2", "GPT2Config", dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64), "GPT2LMHeadModel",
        dict(act="gelu_new", positional="learned", norm="layernorm", tie_embeddings=True),
    ),
    "llama": _dec("llama", "LlamaConfig", "LlamaForCausalLM", dict(n_kv_heads=2), num_key_value_heads=2),
    "qwen3": _dec(
        "qwen3", "Qwen3Config", "Qwen3ForCausalLM",
        dict(qk_norm="head", norm_placement="pre", layer_types=None, d_head=16), num_key_value_heads=2, head_dim=16,
    ),
    "qwen3_window": _dec(  # layer 1 slides (max_window_layers=1)
        "qwen3", "Qwen3Config", "Qwen3ForCausalLM",
        dict(qk_norm="head", layer_types=("full", "sliding"), sliding_window=WINDOW),
        num_key_value_heads=2, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1,
    ),
    "gemma2": _dec(  # soft-capping on (HF's defaults 50 and 30, scaled down so they bite)
        "gemma2", "Gemma2Config", "Gemma2ForCausalLM",
        dict(
            norm_placement="sandwich", norm_offset=1.0, attn_softcap=2.0, final_softcap=3.0,
            layer_types=("sliding", "full"), attn_scale=6**-0.5, embed_scale=32**0.5, act="gelu_pytorch_tanh",
        ),
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=6, sliding_window=WINDOW,
        attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
    ),
    "gemma2_nocap": _dec(
        "gemma2", "Gemma2Config", "Gemma2ForCausalLM",
        dict(attn_softcap=None, final_softcap=None, layer_types=("sliding", "full")),
        num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=6, sliding_window=WINDOW,
        attn_logit_softcapping=None, final_logit_softcapping=None,
    ),
    "gemma3_text": _dec(
        "gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM",
        dict(
            norm_placement="sandwich", qk_norm="head", norm_offset=1.0, rope_theta=1_000_000.0,
            rope_local_theta=10_000.0, layer_types=("sliding", "full", "sliding"), kv_heads=1,
        ),
        num_hidden_layers=3, num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8,
        sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
    ),
    "gemma3_text_linear": _dec(  # Gemma 3 4B and up: the global layers' RoPE scaled linearly, the sliding not
        "gemma3_text", "Gemma3TextConfig", "Gemma3ForCausalLM",
        dict(rope_scaling=(("factor", 8.0), ("max_position_embeddings", 64), ("rope_type", "linear")),
             rope_local_theta=10_000.0, layer_types=("sliding", "full")),
        num_key_value_heads=1, head_dim=8, query_pre_attn_scalar=8,
        sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        },
    ),
    "phi3": _dec(
        "phi3", "Phi3Config", "Phi3ForCausalLM",
        dict(rotary_dim=4, layer_types=("sliding", "sliding"), sliding_window=WINDOW, norm_placement="pre"),
        num_key_value_heads=2, sliding_window=WINDOW, pad_token_id=0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
    ),
    "olmo2": _dec(
        "olmo2", "Olmo2Config", "Olmo2ForCausalLM",
        dict(norm_placement="reordered", qk_norm="full", norm_scale_fp32=True), num_key_value_heads=2,
    ),
    "mistral": _dec(
        "mistral", "MistralConfig", "MistralForCausalLM",
        dict(layer_types=("sliding", "sliding"), sliding_window=WINDOW), num_key_value_heads=2, sliding_window=WINDOW,
    ),
    "qwen2": _dec(
        "qwen2", "Qwen2Config", "Qwen2ForCausalLM",
        dict(layer_types=("sliding", "sliding"), sliding_window=WINDOW, attn_bias=True),
        num_key_value_heads=2, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0,
    ),
    "gemma": _dec(
        "gemma", "GemmaConfig", "GemmaForCausalLM",
        dict(norm_offset=1.0, embed_scale=32**0.5, act="gelu_pytorch_tanh", norm_placement="pre", attn_scale=None),
        num_key_value_heads=1, head_dim=8,
    ),
    "granite": _dec(  # every multiplier away from 1
        "granite", "GraniteConfig", "GraniteForCausalLM",
        dict(embed_multiplier=3.0, residual_multiplier=0.4, attn_scale=0.3, logit_divisor=2.5),
        num_key_value_heads=2, embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3,
        logits_scaling=2.5,
    ),
    "olmo": _dec(  # non-parametric LayerNorm, q/k/v clipped at a value the perturbed weights reach
        "olmo", "OlmoConfig", "OlmoForCausalLM",
        dict(norm="layernorm", norm_weight=False, norm_fp32=True, clip_qkv=1.5, rope_fp32=True),
        num_key_value_heads=2, clip_qkv=1.5,
    ),
    "olmo3": _dec(
        "olmo3", "Olmo3Config", "Olmo3ForCausalLM",
        dict(norm_placement="reordered", qk_norm="full", layer_types=("sliding", "full"), sliding_window=WINDOW),
        num_key_value_heads=2, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
    ),
    "smollm3": _dec(  # layer 1 without RoPE
        "smollm3", "SmolLM3Config", "SmolLM3ForCausalLM", dict(rope_layers=(True, False)),
        num_key_value_heads=2, no_rope_layers=[1, 0],
    ),
    "cohere": _dec(
        "cohere", "CohereConfig", "CohereForCausalLM",
        dict(
            parallel_block=True, shared_norm=True, residual_first=True, norm="layernorm", norm_bias=False,
            norm_explicit=True, rope_interleaved=True, logit_scale=0.0625,
        ),
        num_key_value_heads=2,
    ),
    "cohere2": _dec(  # sliding layers rotate, the full layer does not
        "cohere2", "Cohere2Config", "Cohere2ForCausalLM",
        dict(parallel_block=True, layer_types=("sliding", "full"), rope_layers=(True, False), sliding_window=WINDOW),
        num_key_value_heads=2, sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
    ),
    "stablelm": _dec(
        "stablelm", "StableLmConfig", "StableLmForCausalLM",
        dict(norm="layernorm", rotary_dim=2, parallel_block=False, attn_bias=True),
        num_key_value_heads=2, use_qkv_bias=True,
    ),
    "stablelm_parallel": _dec(
        "stablelm", "StableLmConfig", "StableLmForCausalLM",
        dict(parallel_block=True, shared_norm=True, residual_first=True), use_parallel_residual=True,
    ),
    "llama_llama3": _dec(  # Llama 3.1/3.2's RoPE scaling, a context of 64 over an original 16
        "llama", "LlamaConfig", "LlamaForCausalLM", dict(rope_scaling=(
            ("factor", 8.0), ("high_freq_factor", 4.0), ("low_freq_factor", 1.0),
            ("max_position_embeddings", 64), ("original_max_position_embeddings", 16), ("rope_type", "llama3"),
        )),
        num_key_value_heads=2, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
        },
    ),
    "llama_linear": _dec(
        "llama", "LlamaConfig", "LlamaForCausalLM",
        dict(rope_scaling=(("factor", 4.0), ("max_position_embeddings", 64), ("rope_type", "linear"))),
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    ),
    "llama_dynamic": _dec(  # max_position_embeddings 8 < the 13 tokens: the NTK base grows with the sequence
        "llama", "LlamaConfig", "LlamaForCausalLM",
        dict(rope_scaling=(("factor", 8.0), ("max_position_embeddings", 8), ("rope_type", "dynamic"))),
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 8.0},
        unclaimed={"padding": _BATCH_ROPE},
        max_position_embeddings=8,
    ),
    "qwen2_yarn": _dec(
        "qwen2", "Qwen2Config", "Qwen2ForCausalLM", dict(attn_bias=True),
        rope_parameters={
            "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16,
        },
    ),
    "phi3_longrope": _dec(  # original length 8 < 13 tokens: the long factors apply
        "phi3", "Phi3Config", "Phi3ForCausalLM", dict(rotary_dim=4),
        num_key_value_heads=2, pad_token_id=0, original_max_position_embeddings=8,
        rope_parameters={
            "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 1.3], "long_factor": [2.0, 3.5], "original_max_position_embeddings": 8,
        },
        unclaimed={"padding": _BATCH_ROPE},
    ),
    "gpt_neox": _dec(  # Pythia: parallel attention and MLP with two norms, a quarter of each head rotated
        "gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
        dict(parallel_block=True, shared_norm=False, rotary_dim=2, norm="layernorm", act="gelu", mlp="standard"),
        num_key_value_heads=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
    ),
    "gpt_neox_sequential": _dec(
        "gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM", dict(parallel_block=False),
        num_key_value_heads=None, use_parallel_residual=False,
    ),
    "gptj": Tiny(  # parallel with one norm, half of each head rotated in (2i, 2i+1) pairs, a bias on the logits
        "gptj", "GPTJConfig", dict(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, rotary_dim=4),
        "GPTJForCausalLM",
        dict(
            parallel_block=True, shared_norm=True, rope_interleaved=True, rotary_dim=4, act="gelu_new",
            lm_head_bias=True,
        ),
    ),
    "phi": _dec(  # phi-1/2: parallel with one norm, half of each head rotated, gelu_new
        "phi", "PhiConfig", "PhiForCausalLM",
        dict(parallel_block=True, shared_norm=True, rotary_dim=4, act="gelu_new", lm_head_bias=True, attn_bias=True),
        num_key_value_heads=4,
    ),
    "opt": Tiny(  # learned positions offset by 2, queries scaled before q k^T, ReLU
        "opt", "OPTConfig",
        dict(vocab_size=V, hidden_size=32, ffn_dim=48, num_attention_heads=4, num_hidden_layers=2,
             max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=1),
        "OPTForCausalLM", dict(scale_queries=True, positional="learned", act="relu", tie_embeddings=True),
    ),
    "mixtral": _dec(  # top-2 of 4 experts, weights renormalised and kept fp32
        "mixtral", "MixtralConfig", "MixtralForCausalLM",
        dict(n_experts=4, top_k=2, norm_topk=True, router_fp32=True, d_expert=None, moe_layers=None),
        num_local_experts=4, num_experts_per_tok=2, tol={"eager": 1e-6}, note=_MOE_PADDING,
    ),
    "qwen2_moe": _dec(  # top-3 of 6 experts, not renormalised, a shared expert; layer 0 dense (mlp_only_layers)
        "qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
        dict(n_experts=6, top_k=3, norm_topk=False, d_expert=16, d_shared_expert=24, moe_layers=(False, True)),
        num_experts=6, num_experts_per_tok=3, moe_intermediate_size=16, shared_expert_intermediate_size=24,
        mlp_only_layers=[0], norm_topk_prob=False, attention_bias=True, tol={"eager": 1e-6}, note=_MOE_PADDING,
    ),
    "qwen3_moe": _dec(  # top-2 of 4, renormalised, QK-norm
        "qwen3_moe", "Qwen3MoeConfig", "Qwen3MoeForCausalLM",
        dict(n_experts=4, top_k=2, norm_topk=True, d_expert=16, qk_norm="head", router_fp32=False),
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, norm_topk_prob=True,
        tol={"eager": 1e-6}, note=_MOE_PADDING,
    ),
    "granitemoe": _dec(  # top-2 of 4, softmax over the top-2 logits, Granite's four multipliers
        "granitemoe", "GraniteMoeConfig", "GraniteMoeForCausalLM",
        dict(n_experts=4, top_k=2, router="topk_softmax", embed_multiplier=3.0, residual_multiplier=0.4,
             attn_scale=0.3, logit_divisor=2.5),
        num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=3.0, residual_multiplier=0.4,
        attention_multiplier=0.3, logits_scaling=2.5, tol={"eager": 1e-6}, note=_MOE_PADDING,
    ),
    "gpt_oss": _dec(  # learned sinks, top-2 of 4 biased experts with the clamped SwiGLU (limit 1.5 binds on
        # the perturbed weights), sliding and full layers, YaRN past an original context of 8
        "gpt_oss", "GptOssConfig", "GptOssForCausalLM",
        dict(attn_sinks=True, expert_kind="gpt_oss", router="topk_softmax", n_experts=4, top_k=2,
             swiglu_limit=1.5, layer_types=("sliding", "full"), sliding_window=WINDOW,
             attn_bias=True, attn_out_bias=True, norm_scale_fp32=True),
        num_key_value_heads=2, head_dim=8, num_local_experts=4, num_experts_per_tok=2, swiglu_limit=1.5,
        sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"], attention_bias=True,
        rope_parameters={
            "rope_type": "yarn", "rope_theta": 150000.0, "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "truncate": False, "original_max_position_embeddings": 8,
        },
    ),
    "falcon": Tiny(  # Falcon 7B's layout: multi-query, parallel with one norm. d_head 16, not 8: the one k
        # (v) head's rows of the fused projection, computed alone, are a GEMM with 8 outputs, which this CPU's
        # BLAS rounds differently from the same rows inside the fused GEMM (3.8e-6 measured); 16 and up match
        "falcon", "FalconConfig",
        dict(vocab_size=V, hidden_size=64, num_attention_heads=4, num_hidden_layers=2, max_position_embeddings=64,
             ffn_hidden_size=48, pad_token_id=0),
        "FalconForCausalLM", dict(parallel_block=True, shared_norm=True, kv_heads=1, attn_bias=False),
    ),
    "falcon_new": Tiny(  # Falcon 40B/180B: two kv heads, each with its group's queries in one block; two norms
        "falcon", "FalconConfig",
        dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, max_position_embeddings=64,
             ffn_hidden_size=48, pad_token_id=0, new_decoder_architecture=True, num_kv_heads=2),
        "FalconForCausalLM", dict(parallel_block=True, shared_norm=False, kv_heads=2),
    ),
    "falcon_sequential": Tiny(
        "falcon", "FalconConfig",
        dict(vocab_size=V, hidden_size=32, num_attention_heads=4, num_hidden_layers=2, max_position_embeddings=64,
             ffn_hidden_size=48, pad_token_id=0, multi_query=False, parallel_attn=False),
        "FalconForCausalLM", dict(parallel_block=False, kv_heads=4),
    ),
}  # fmt: skip


def available(key: str) -> str | None:
    """None when the installed transformers has the architecture, else why not ("needs ...")."""
    import transformers

    tiny = ARCHITECTURES[key]
    missing = [n for n in (tiny.config, tiny.model) if not hasattr(transformers, n)]
    if not missing:
        return None
    need = f">= {tiny.since}" if tiny.since else "a version that has it"
    return f"needs transformers {need} (installed {transformers.__version__} lacks {missing[0]})"


def save_tiny(key: str, folder: str | Path, seed: int = 0) -> tuple[Path, PreTrainedModel]:
    """Build ``key``'s tiny model with seed ``seed``, perturb every tensor, save it under ``folder``;
    (the folder, the Hugging Face model in eval mode)."""
    cfg, cls = ARCHITECTURES[key].build()
    torch.manual_seed(seed)
    hf = cls(cfg).eval()
    eager_experts(hf)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in hf.parameters():  # norm weights, biases and all: nothing left at its init value
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    folder = Path(folder)
    hf.save_pretrained(str(folder))
    return folder, hf


def eager_experts(hf: PreTrainedModel) -> PreTrainedModel:
    """A mixture-of-experts model set to Hugging Face's "eager" experts (each expert on the tokens
    that chose it, in expert order: the reference the toolkit's ``MoE`` matches bit for bit); its
    default "grouped_mm" kernels give other last bits (measured: up to 1.2e-6 on the tiny models'
    fp32 logits). Other models are returned as they are."""
    if getattr(hf.config, "num_experts_per_tok", None) and hasattr(hf, "set_experts_implementation"):
        hf.set_experts_implementation("eager")
    return hf


def tiny_inputs(padding: str, batch: int = 3, n: int = N, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, attention mask) [batch, n] of random ids 1..V-1: "none", "right" (rows 1 and 2 end
    early) or "left" (they start late) padding."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, V, (batch, n), generator=gen)
    mask = torch.ones_like(tokens)
    if padding == "right":
        mask[1, 9:] = 0
        mask[2, 5:] = 0
    elif padding == "left":
        mask[1, :4] = 0
        mask[2, :7] = 0
    elif padding != "none":
        raise ValueError(f"padding={padding!r}; use 'none', 'right' or 'left'")
    return tokens, mask
