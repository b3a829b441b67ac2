"""Old names of the long-context analyses, served with a DeprecationWarning (House v4 renamed them
to the contract's ``run`` and ``<Name>Result``; see docs/long_context.md)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renamed_getattr"]


def renamed_getattr(module: str, renamed: Mapping[str, str], space: dict) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` (its globals ``space``) that serves each old name of
    ``renamed`` (old -> new) as the new one's object, with a DeprecationWarning naming both."""

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new = renamed[name]
        warnings.warn(f"{module}.{name} is deprecated; use {module}.{new}", DeprecationWarning, stacklevel=2)
        return space[new]

    return __getattr__
