"""The toolkit's hookable transformer and its loaders.

>>> import models
>>> model = models.load("minilm")          # or "smollm2", or a folder
>>> logits, cache = model.run_with_cache("The cat sleeps.")
>>> cache["blocks.0.attn.hook_pattern"].shape
"""

from models.config import Config
from models.loading import *  # noqa: F403
from models.tokenizer import Batch, Tokenizer
from models.transformer import Transformer, alibi_slopes, rope_planes
