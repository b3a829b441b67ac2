"""Reading Hugging Face weights from disk: a folder, a hub snapshot or a GGUF file, safetensors only
(never a pickle) and never the folder's own code; every tensor the converted model uses must come
from the file. And the cache of plain Hugging Face folders dequantised once from a GGUF
(``gguf_hf_dir``: SmolLM2, Gemma 3).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from interp.io import atomic_dir
from models.convert import CONVERTERS, _unsupported
from models.families import CheckpointError, UnsupportedModelError

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["cache_dir", "gguf_hf_dir"]


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
# The dequantised GGUF cache


def cache_dir() -> Path:
    root = os.environ.get("INTERP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "interp-toolkit"
    )
    return Path(root)


def gguf_hf_dir(name: str, gguf: Path) -> Path:
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
