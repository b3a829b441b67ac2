"""Model-agnostic core: hooks, token-to-word alignment, streaming reducers.

Imports nothing from ``models`` or ``analyses``.
"""

from interp.alignment import join_words, split_words, token_to_word, word_attention, word_matrix
from interp.hooks import HookedModule, HookPoint, UnknownHookError, check_hook_names, near_names

__all__ = [
    "HookPoint",
    "HookedModule",
    "UnknownHookError",
    "check_hook_names",
    "near_names",
    "split_words",
    "join_words",
    "token_to_word",
    "word_attention",
    "word_matrix",
]
