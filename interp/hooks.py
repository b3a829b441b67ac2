"""Hook machinery shared by every model of the toolkit.

Built on ``transformer_lens``'s ``HookPoint`` and ``HookedRootModule`` so that ``run_with_hooks``,
``run_with_cache``, the ``hooks()`` context manager and names filters behave exactly as
TransformerLens users expect. What this module adds: an unknown hook name is an error that lists
the nearest real names (TransformerLens raises a bare ``KeyError``), and a names filter given as
strings is checked the same way instead of silently caching nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

NamesFilter = None | str | Sequence[str] | Callable[[str], bool]

__all__ = ["HookPoint", "HookedModule", "UnknownHookError", "near_names", "check_hook_names"]


class UnknownHookError(KeyError):
    """A hook name that the model does not have. The message lists the nearest real names."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


def near_names(name: str, names: Iterable[str], n: int = 5) -> list[str]:
    names = list(names)
    close = difflib.get_close_matches(name, names, n=n, cutoff=0.6)
    if not close:  # fall back to names sharing the last component, e.g. "hook_pattern"
        tail = name.rsplit(".", 1)[-1]
        close = [x for x in names if x.endswith(tail)][:n]
    return close


def check_hook_names(requested: Iterable[str], available: Iterable[str]) -> None:
    available = list(available)
    known = set(available)
    for name in requested:
        if name not in known:
            near = near_names(name, available)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise UnknownHookError(f"unknown hook name {name!r}{hint} (model.hook_names() lists all {len(known)})")


class HookedModule(HookedRootModule):
    """``HookedRootModule`` with helpful errors. Call ``self.setup()`` after building submodules."""

    def hook_names(self) -> list[str]:
        return list(self.hook_dict)

    def _enable_hook_with_name(self, name: str, hook: Callable, dir: str) -> Any:  # used by hooks() / run_with_hooks
        check_hook_names([name], self.hook_dict)
        return super()._enable_hook_with_name(name, hook, dir)

    def add_hook(
        self,
        name: str | Callable[[str], bool],
        hook: Callable,
        dir: str = "fwd",
        is_permanent: bool = False,
        level: int | None = None,
        prepend: bool = False,
    ) -> Any:
        if isinstance(name, str):
            check_hook_names([name], self.hook_dict)
        return super().add_hook(name, hook, dir=dir, is_permanent=is_permanent, level=level, prepend=prepend)

    def get_caching_hooks(self, names_filter: NamesFilter = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(names_filter, str):
            check_hook_names([names_filter], self.hook_dict)
        elif isinstance(names_filter, (list, tuple)):
            check_hook_names(names_filter, self.hook_dict)
            names_filter = list(names_filter)
        return super().get_caching_hooks(names_filter, *args, **kwargs)
