"""Reading Hugging Face weights from disk: a folder, a hub snapshot or a GGUF file, safetensors only
(never a pickle) and never the folder's own code; every tensor the converted model uses must come
from the file. And the cache of plain Hugging Face folders dequantised once from a GGUF
(``gguf_hf_dir``: SmolLM2, Gemma 3).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from interp.io import _umask, atomic_dir, atomic_write, sha256_file
from models.convert import CONVERTERS, _unsupported
from models.families import CheckpointError, UnsupportedModelError

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["cache_dir", "cached_folder", "check_model_folder", "gguf_hf_dir"]


# Tensors a folder may lack because the conversion never reads them (BERT's pooler: a checkpoint
# saved from BertForMaskedLM has none), and tensors it may hold that belong to another task's head
# (BertForPreTraining's ``cls.*``, a classifier): neither reaches the converted model.
_UNREAD = ("pooler.",)
_OTHER_TASK_HEADS = ("cls.", "classifier.", "qa_outputs.", "score.")
# the encoders' masked-LM and pre-training heads (RoBERTa's lm_head, ELECTRA's discriminator head,
# DistilBERT's vocab_*, ModernBERT's head and decoder): an encoder loads as its bare AutoModel
_ENCODER_HEADS = (
    "lm_head.", "discriminator_predictions.", "generator_predictions.", "generator_lm_head.",
    "vocab_transform.", "vocab_layer_norm.", "vocab_projector.", "head.", "decoder.",
)  # fmt: skip
# model_types loaded as Hugging Face's bare encoder (AutoModel), not AutoModelForCausalLM
ENCODER_TYPES = ("bert", "roberta", "distilbert", "electra", "modernbert")


def _check_loading_info(info: dict, where: str) -> None:
    """Every tensor the converted model uses must come from the weights, with the shape the config
    implies: ``transformers`` would fill a missing or misshapen one with random values and carry on."""

    def more(keys: list) -> str:
        return f" (and {len(keys) - 1} more: {keys[1:4]})" if len(keys) > 1 else ""

    missing = sorted(k for k in info.get("missing_keys", ()) if not k.startswith(_UNREAD))
    if missing:
        raise _missing_error(where, missing)
    mismatched = sorted(info.get("mismatched_keys", ()), key=lambda m: m[0])
    if mismatched:
        key, found, expected = mismatched[0]
        raise _shape_error(where, key, found, expected, more([m[0] for m in mismatched]))
    unexpected = sorted(
        k for k in info.get("unexpected_keys", ()) if not k.startswith(_OTHER_TASK_HEADS + _ENCODER_HEADS)
    )
    if unexpected:
        raise CheckpointError(
            f"{where}: the weights hold tensor {unexpected[0]!r}{more(unexpected)}, which a model built from "
            "its config.json does not have; the weights and config.json disagree"
        )


def _missing_error(where: str, missing: list[str]) -> CheckpointError:
    more = f" (and {len(missing) - 1} more: {missing[1:4]})" if len(missing) > 1 else ""
    return CheckpointError(
        f"{where}: the weights lack tensor {missing[0]!r}{more}, which config.json calls for; "
        "transformers would fill it with random values"
    )


def _shape_error(
    where: str, key: str, found: Sequence[int], expected: Sequence[int], more: str = ""
) -> CheckpointError:
    return CheckpointError(
        f"{where}: tensor {key!r} has shape {tuple(found)} in the weights, config.json implies {tuple(expected)}{more}"
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

# The files of a model folder that are read whole, and the most bytes each may hold: a config is a
# few kB, a tokenizer a few tens of MB (Gemma 3's tokenizer.json: 33 MB). Weights are mapped, not
# read whole, and their headers are checked by safetensors.
_CONFIG_FILES = ("config.json", "generation_config.json", "interp_config.json", "tokenizer_config.json")
_CONFIG_FILES += ("model.safetensors.index.json",)  # a sharded model's map of tensors to files
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "merges.txt", "tokenizer.model", "spiece.model")
# the tokenizer's settings beside its vocabulary (tokenizer_config.json is among the configs above)
_TOKENIZER_SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
_CAPS = dict.fromkeys(_CONFIG_FILES + _TOKENIZER_SETTINGS + ("chat_template.jinja",), 16 << 20)
_CAPS |= dict.fromkeys(_TOKENIZER_FILES, 512 << 20)


def _one_line(e: BaseException, limit: int = 300) -> str:
    """A library's (possibly multi-line) message as one line of at most ``limit`` characters."""
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# What transformers raises, besides ValueError, for a config it cannot build a model of: a head or
# key/value head count of 0 (ZeroDivisionError), an unknown hidden_act or rope_type (KeyError), a
# pad_token_id outside the vocabulary (AssertionError)
_CONFIG_FAULTS = (ValueError, TypeError, KeyError, IndexError, ArithmeticError, AssertionError)


def _fault(e: BaseException) -> str:
    """``_one_line(e)``, prefixed with the exception's name where the message alone says little (KeyError: 'nope')."""
    return _one_line(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {_one_line(e)}"


def check_model_folder(folder: Path) -> None:
    """Every file of a model folder is a regular file, as ``interp.io.readable_input`` checks the
    other inputs, but no pipe either: a FIFO ``config.json`` would block the read for ever, a link to
    /dev/zero would be read until memory ran out. A link to a regular file is fine (the hub cache
    links its snapshots into blobs); a link to nothing is left to the loader, which names it if it
    needs the file. The files read whole (configs, tokenizers) are capped in size."""
    from interp.io import readable_input

    for entry in sorted(folder.iterdir()):
        if entry.is_dir() or not entry.exists():
            continue
        cap = _CAPS.get(entry.name)
        expected = "a regular file" + (f" of at most {cap >> 20} MiB" if cap else "") + ", not a pipe or a device"
        readable_input(entry, "model folder file", expected, pipe=False, max_bytes=cap)


def _read_config_json(folder: Path) -> dict:
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        raw = {}  # transformers reports an unreadable config.json itself
    return raw if isinstance(raw, dict) else {}


def _hf_config(path_or_name: str, kw: dict) -> PretrainedConfig:
    """The folder's (or hub model's) config, refused in one line before any weight is read when
    the toolkit cannot convert it, when its weights are pickles only, or when it asks for custom
    code it cannot do without. The toolkit never runs a folder's code (``trust_remote_code=False``)
    and never unpickles weights (safetensors only)."""
    import transformers
    from huggingface_hub.errors import StrictDataclassError

    folder = Path(path_or_name)
    raw: dict = {}
    if folder.is_dir() and not kw:
        check_model_folder(folder)
        raw = _read_config_json(folder)
        if not any(folder.glob("*.safetensors")) and (pickles := sorted(p for g in _PICKLED for p in folder.glob(g))):
            raise CheckpointError(
                f"{folder} holds its weights only as {pickles[0].name}, a pickle, which can run code when read; the "
                "toolkit reads safetensors only: convert it where you trust it (save_pretrained writes safetensors)"
            )
    if "model_type" in raw and raw["model_type"] not in CONVERTERS:  # null too: transformers says "update"
        raise UnsupportedModelError(_unsupported(raw["model_type"], str(folder)))
    try:
        hf_cfg = transformers.AutoConfig.from_pretrained(path_or_name, trust_remote_code=False, **kw)
    except (*_CONFIG_FAULTS, StrictDataclassError) as e:  # e.g. heads that do not divide the width
        raise CheckpointError(f"{path_or_name}: config.json is not a valid model config ({_fault(e)})") from None
    if hf_cfg.model_type not in CONVERTERS:
        raise UnsupportedModelError(_unsupported(hf_cfg.model_type, path_or_name))
    if raw.get("auto_map") or getattr(hf_cfg, "auto_map", None):
        warnings.warn(
            f"{path_or_name}: config.json asks to run the folder's own code (auto_map); the toolkit never runs a "
            f"folder's code and loads the standard {hf_cfg.model_type!r} architecture",
            stacklevel=3,
        )
    return hf_cfg


# a layer's index in a tensor name: model.layers.3., encoder.layer.3., transformer.h.3.
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks)\.(\d+)\.")


def _header_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """{tensor name: shape} of every safetensors file in ``folder``, read from the headers only."""
    from safetensors import safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            shapes |= {key: tuple(f.get_slice(key).get_shape()) for key in f.keys()}  # noqa: SIM118
    return shapes


def _check_header(folder: Path, hf_cfg: PretrainedConfig, auto: type, where: str) -> None:
    """config.json against the weights' safetensors headers, before any tensor is allocated: a
    ``hidden_size`` the weights do not have would otherwise allocate gigabytes before the refusal,
    a ``num_hidden_layers`` of a million would build layers for ever. The layer count is bounded by
    the layers the weights hold; then the model is built on the meta device (shapes, no memory)
    and every tensor both name must have one shape. Tensors only one side names are left to
    ``_check_loading_info`` after the load."""
    shapes = _header_shapes(folder)
    held = 1 + max((int(m.group(1)) for k in shapes if (m := _LAYER_INDEX.search(k))), default=-1)
    layers = getattr(hf_cfg, "num_hidden_layers", None)
    if isinstance(layers, int) and layers > held:
        raise CheckpointError(
            f"{where}: config.json has num_hidden_layers={layers}, the weights hold {held}; "
            "the weights and config.json disagree"
        )
    try:
        with torch.device("meta"):
            meta = auto.from_config(hf_cfg, trust_remote_code=False)
    except (*_CONFIG_FAULTS, RuntimeError) as e:
        raise CheckpointError(f"{where}: config.json describes no model transformers can build ({_fault(e)})") from None
    tensors = meta.state_dict(keep_vars=True)  # Parameters themselves: tied ones are one object
    expected = {k: tuple(v.shape) for k, v in tensors.items()}
    prefix = getattr(meta, "base_model_prefix", "")
    compared, renamed = set(), []  # the model's tensors the weights name; the weights' tensors it does not
    for key, shape in sorted(shapes.items()):
        ours = next((k for k in (key, key.removeprefix(f"{prefix}."), f"{prefix}.{key}") if k in expected), None)
        if ours is not None and expected[ours] != shape:
            raise _shape_error(where, key, shape, expected[ours])
        if ours is None:
            renamed.append(key)
        else:
            compared.add(ours)
    if getattr(hf_cfg, "quantization_config", None):
        return  # packed weights hold fewer numbers than the model they fill
    # Tensors the weights store under other names are not compared above (Mixtral's per-expert w1, w2,
    # w3, which transformers fuses into one tensor of every expert: num_local_experts=1000000 would
    # allocate gigabytes). A model needs no more numbers than the weights hold (less: a tied copy, a
    # task head), so count them: a config that asks for more is refused before anything is allocated.
    unique = {id(t): (k, t) for k, t in tensors.items() if not k.removeprefix(f"{prefix}.").startswith(_UNREAD)}
    needed = sum(t.numel() for _, t in unique.values())
    held_numbers = sum(math.prod(shape) for shape in shapes.values())
    if needed > held_numbers:
        unnamed = [kt for kt in unique.values() if kt[0] not in compared]
        if unnamed and not renamed:  # the weights name only tensors of the model: the others are missing
            raise _missing_error(where, sorted(k for k, _ in unnamed))
        key, t = max(unnamed or unique.values(), key=lambda kt: kt[1].numel())
        raise CheckpointError(
            f"{where}: config.json describes a model of {needed:,} parameters, its weights hold {held_numbers:,} "
            f"(the largest tensor: {key!r} of shape {tuple(t.shape)}); the weights and config.json disagree"
        )


def _tokenizer(path_or_name: str, kw: dict, where: str) -> PreTrainedTokenizerBase | None:
    """The folder's (or GGUF's) tokenizer; None for a folder without tokenizer files (the model
    then runs on token ids only). Tokenizer files that cannot be read, or settings without the
    vocabulary they belong to, are an error naming them, never a model loaded without its tokenizer."""
    import transformers

    folder = Path(path_or_name)
    present = [] if kw else [n for n in _TOKENIZER_FILES + _TOKENIZER_SETTINGS if (folder / n).is_file()]
    files = [kw["gguf_file"]] if kw else present
    fix = "repair or replace them, or remove them to load the model without a tokenizer (token ids only)"
    if files and not kw and not any(n in _TOKENIZER_FILES for n in files):
        # transformers would build a tokenizer of special tokens only, or fail, and the model would load without one
        raise CheckpointError(
            f"{where}: it holds the tokenizer settings {', '.join(files)} but no vocabulary (tokenizer.json, or "
            "vocab.txt, vocab.json + merges.txt, tokenizer.model); add the vocabulary, or remove the settings to load "
            "the model without a tokenizer (token ids only)"
        )
    try:
        tok = transformers.AutoTokenizer.from_pretrained(path_or_name, trust_remote_code=False, **kw)
    except Exception as e:  # noqa: BLE001 - tokenizers and transformers raise KeyError, Exception, ...
        if not files:
            return None  # a bare weights folder: the model still runs on token ids
        for name in (n for n in files if n.endswith(".json")):  # the file at fault, where it is one we can tell
            try:
                json.loads((folder / name).read_bytes().decode("utf-8-sig"))
            except ValueError as bad:  # JSONDecodeError, UnicodeDecodeError
                raise CheckpointError(
                    f"{where}: its tokenizer file {folder / name} is not valid JSON ({_one_line(bad)}); repair or "
                    "replace it, or remove the tokenizer's files to load the model without a tokenizer (token ids only)"
                ) from None
        raise CheckpointError(
            f"{where}: its tokenizer ({', '.join(files)}) cannot be read ({_one_line(e)}); {fix}"
        ) from None
    if len(tok.get_vocab()) <= len(set(tok.all_special_ids)):
        # transformers 5 builds a tokenizer of special tokens only for a folder without tokenizer
        # files; it would turn every text into nothing
        if files:
            raise CheckpointError(f"{where}: its tokenizer ({', '.join(files)}) holds no vocabulary; {fix}")
        return None
    return tok


def _hf_load(path_or_name: str, gguf_file: str | None = None) -> tuple[PreTrainedModel, PreTrainedTokenizerBase | None]:
    import transformers
    from safetensors import SafetensorError

    kw = {"gguf_file": gguf_file} if gguf_file else {}
    hf_cfg = _hf_config(path_or_name, kw)
    auto = transformers.AutoModel if hf_cfg.model_type in ENCODER_TYPES else transformers.AutoModelForCausalLM
    where = f"Hugging Face model {path_or_name}" + (f" ({gguf_file})" if gguf_file else "")
    try:
        if not kw and Path(path_or_name).is_dir():
            _check_header(Path(path_or_name), hf_cfg, auto, where)
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
    except (MemoryError, RuntimeError) as e:
        if not isinstance(e, MemoryError) and "alloc" not in str(e).lower():
            raise
        raise CheckpointError(
            f"{where}: not enough memory for the model config.json describes ({_one_line(e)})"
        ) from None
    _check_loading_info(info, where)
    return hf_model.eval(), _tokenizer(path_or_name, kw, where)


# --------------------------------------------------------------------------------------------------
# The dequantised GGUF cache
#
# A cached folder is keyed by what it is made from (the GGUF's sha256 and the recipe's version),
# never by a path, so every clone and virtual environment on a machine shares one. When it is
# written, each file's size, sha256 and times are recorded in CACHE_RECORD; every load compares the
# sizes and times (a stat per file) and hashes a file again only when they differ. So any write to
# a file (bits flipped, truncated, replaced; even with its modification time put back, since the
# change time cannot be) is caught, and the folder rebuilt with a one-line warning. Not caught: a
# disk that decays below the file system without changing a time (a hash on every load would
# catch it too, for 0.8 s on SmolLM2's 538 MB and 1.6 s on Gemma 3's 1.07 GB per load).

CACHE_RECORD = "interp-cache.json"
_CAPS[CACHE_RECORD] = 16 << 20  # read whole, as the configs are
_RECIPE = 2  # bump when the dequantising recipe changes (the folders of the old one are then unused)


def cache_dir() -> Path:
    root = os.environ.get("INTERP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "interp-toolkit"
    )
    return Path(root)


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def _seal(folder: Path) -> None:
    """Give every file of a freshly built cache folder one mode, an ordinary file's under the umask
    (safetensors writes its file owner-only), and record each file's size, sha256 and times."""
    mode = 0o666 & ~_umask()
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file():
            os.chmod(path, mode)
            files[path.name] = {"sha256": sha256_file(path)} | _stamp(path)
    atomic_write(folder / CACHE_RECORD, json.dumps({"files": files}, indent=1, sort_keys=True))


def _read_record(folder: Path) -> dict:
    """The cache record's {file name: {size, sha256, times}}, checked; ValueError if damaged."""
    check_model_folder(folder)  # no pipe or device in the folder, the record capped in size
    record = json.loads((folder / CACHE_RECORD).read_text(encoding="utf-8"))
    files = record.get("files") if isinstance(record, dict) else None
    present = {p.name for p in folder.iterdir() if p.name != CACHE_RECORD}
    keys = {"sha256", "size", "mtime_ns", "ctime_ns"}
    if (
        not isinstance(files, dict)
        or set(files) != present
        or not all(isinstance(v, dict) and keys <= set(v) for v in files.values())
    ):
        raise ValueError("it does not list the folder's files")
    return files


def _cache_problem(folder: Path) -> str | None:
    """None when ``folder`` holds exactly the files its record lists, each as it was written; else
    what is wrong, naming the file. Times that moved over an unchanged file (a copy) are recorded anew."""
    try:
        files = _read_record(folder)
    except (OSError, ValueError) as e:
        return f"its record {folder / CACHE_RECORD} is missing or damaged ({_one_line(e, 120)})"
    moved = False
    for name, want in sorted(files.items()):
        path = folder / name
        now = _stamp(path)
        if now["size"] != want["size"]:
            return f"{path} is truncated or changed ({now['size']:,} bytes, {want['size']:,} when written)"
        if any(now[k] != want[k] for k in now):
            if sha256_file(path) != want["sha256"]:
                return f"{path} is corrupt (its sha256 is not the one recorded when it was written)"
            want.update(now)
            moved = True
    if moved:
        with contextlib.suppress(OSError):  # a read-only cache is still used; it is hashed again next time
            atomic_write(folder / CACHE_RECORD, json.dumps({"files": files}, indent=1, sort_keys=True))
    return None


def cached_folder(name: str, key: str, build: Callable[[Path], None]) -> Path:
    """``cache_dir()/<name>-hf-<key>``, checked against its record (see above). When it is absent,
    ``build(tmp)`` fills a temporary folder that is then sealed and renamed into place; when a file
    fails its check, one warning names it and the folder is built again the same way."""
    folder = cache_dir() / f"{name}-hf-{key}"
    exists = folder.exists()
    problem = _cache_problem(folder) if exists else None
    if exists and problem is None:
        return folder
    if problem is not None:
        warnings.warn(f"the cached {name} model: {problem}; rebuilding {folder}", stacklevel=3)
    with atomic_dir(folder, replace=exists) as tmp:  # absent: another process may finish first, keep theirs
        build(tmp)
        _seal(tmp)
    return folder


def gguf_hf_dir(name: str, gguf: Path | Callable[[], Path], sha256: str) -> Path:
    """A plain Hugging Face folder for a GGUF model, made once per machine and cached (SmolLM2,
    Gemma 3): ``cached_folder`` keyed by the GGUF's ``sha256`` (what its package recorded) and the
    recipe's version. ``gguf``: the file, or a function that returns it, called only when the folder
    is built (Gemma 3's GGUF is assembled then). The GGUF's sha256 is checked before it is
    dequantised: a damaged one is refused, never turned into a cache of wrong weights."""

    def build(folder: Path) -> None:
        path = gguf() if callable(gguf) else gguf
        found = sha256_file(path)
        if found != sha256:
            raise CheckpointError(
                f"{path} is damaged: its sha256 is {found[:16]}..., its package recorded {sha256[:16]}...; "
                "reinstall the package that ships it"
            )
        _dequantise(path, folder)

    return cached_folder(name, f"{sha256[:16]}-r{_RECIPE}", build)


def _dequantise(gguf: Path, folder: Path) -> None:
    """Dequantising a GGUF through ``transformers`` takes tens of seconds, so it is done once per
    machine: load the GGUF, drop the quantisation marker from the config, copy the fp32 state dict
    into a model built from that config, ``save_pretrained`` into ``folder`` (with the tokenizer).
    TransformerLens's bridge boots from the folder too."""
    import transformers

    hf_model, tok = _hf_load(str(gguf.parent), gguf_file=gguf.name)
    config = hf_model.config.to_dict()
    config.pop("quantization_config", None)
    plain = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(**config), dtype=torch.float32, trust_remote_code=False
    )
    plain.load_state_dict(hf_model.state_dict())
    plain.save_pretrained(str(folder))
    if tok is not None:
        tok.save_pretrained(str(folder))
