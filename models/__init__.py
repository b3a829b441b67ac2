"""The toolkit's hookable transformer and its loaders.

>>> import models
>>> model = models.load("minilm")          # or "smollm2", or a folder
>>> logits, cache = model.run_with_cache("The cat sleeps.")
>>> cache["blocks.0.attn.hook_pattern"].shape

Every public name is re-exported here explicitly from the module that defines it (one style,
``from models.x import a, b``); the submodules ``models.bpe`` and ``models.training`` are imported
by name where they are needed.
"""

from models.config import Config
from models.generate import KVCache
from models.loading import (
    DTYPES,
    KNOWN_MODELS,
    CheckpointError,
    from_hf,
    gemma3_gguf,
    gemma3_hf_dir,
    load,
    load_checkpoint,
    load_state_dict_checked,
    minilm_dir,
    resolve_device,
    resolve_dtype,
    save_checkpoint,
    smollm2_gguf,
    smollm2_hf_dir,
)
from models.positions import alibi_slopes, rope_planes
from models.tokenizer import Batch, LostWordsWarning, Tokenizer, UnreadableTextError
from models.transformer import Transformer
from models.weights import WeightEditError

__all__ = [
    "DTYPES",
    "KNOWN_MODELS",
    "Batch",
    "CheckpointError",
    "Config",
    "KVCache",
    "LostWordsWarning",
    "UnreadableTextError",
    "Tokenizer",
    "Transformer",
    "WeightEditError",
    "alibi_slopes",
    "from_hf",
    "gemma3_gguf",
    "gemma3_hf_dir",
    "load",
    "load_checkpoint",
    "load_state_dict_checked",
    "minilm_dir",
    "resolve_device",
    "resolve_dtype",
    "rope_planes",
    "save_checkpoint",
    "smollm2_gguf",
    "smollm2_hf_dir",
]
