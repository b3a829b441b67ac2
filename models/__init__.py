"""The toolkit's hookable transformer and its loaders.

>>> import models
>>> model = models.load("minilm")          # or "smollm2", or a folder
>>> logits, cache = model.run_with_cache("The cat sleeps.")
>>> cache["blocks.0.attn.hook_pattern"].shape
"""

from models.config import Config
from models.loading import (
    KNOWN_MODELS,
    CheckpointError,
    from_hf,
    load,
    load_checkpoint,
    load_state_dict_checked,
    save_checkpoint,
)
from models.tokenizer import Batch, Tokenizer
from models.transformer import Transformer, alibi_slopes, rope_planes

__all__ = [
    "Config",
    "Transformer",
    "Tokenizer",
    "Batch",
    "load",
    "from_hf",
    "save_checkpoint",
    "load_checkpoint",
    "load_state_dict_checked",
    "CheckpointError",
    "KNOWN_MODELS",
    "alibi_slopes",
    "rope_planes",
]
