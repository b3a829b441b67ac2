"""Model-agnostic core: hooks, hook names, token-to-word alignment, streaming reducers, statistics,
interventions, the model view and the toolkit's file writing.

Imports nothing from ``models`` or ``analyses``. Names load lazily: ``import interp`` alone imports
neither torch nor TransformerLens.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HookPoint": "interp.hooks",
    "HookedModule": "interp.hooks",
    "UnknownHookError": "interp.hooks",
    "check_hook_names": "interp.hooks",
    "near_names": "interp.hooks",
    "split_words": "interp.alignment",
    "join_words": "interp.alignment",
    "token_to_word": "interp.alignment",
    "word_attention": "interp.alignment",
    "word_matrix": "interp.alignment",
    "act_name": "interp.names",
    "ActivationCache": "interp.hooks",
    "ModelView": "interp.view",
    "view": "interp.view",
    "atomic_write": "interp.io",
    "atomic_dir": "interp.io",
}
_SUBMODULES = {"alignment", "hooks", "interventions", "io", "names", "reducers", "stats", "view"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"interp.{name}")
    raise AttributeError(f"module 'interp' has no attribute {name!r}")
