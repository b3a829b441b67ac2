"""Hook machinery shared by every model of the toolkit.

Built on ``transformer_lens``'s ``HookPoint`` and ``HookedRootModule`` so that ``run_with_hooks``,
``run_with_cache``, the ``hooks()`` context manager and names filters behave exactly as
TransformerLens users expect. What this module adds: an unknown hook name is an error that lists
the nearest real names (TransformerLens raises a bare ``KeyError``), and a names filter given as
strings is checked the same way instead of silently caching nothing; ``run_with_cache`` returns
TransformerLens's ``ActivationCache`` (the subclass below), whose unknown keys are explained too;
and a forward hook that returns a tensor of another shape, dtype or device than its input is refused
with one line naming the hook and both (``HookReturnError``), instead of flowing on silently (a
``x[:, :1]`` on ``hook_resid_pre`` gave logits of one position) or failing later in a torch error
that names no hook.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor
from transformer_lens import ActivationCache as _TLActivationCache
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint as _TLHookPoint

NamesFilter = None | str | Sequence[str] | Callable[[str], bool]
# a lazy cache entry (``HookedModule.lazy_cache_entries``): its source hook name, or a tuple of them,
# and the function of their values that gives the entry's value
LazyEntry = tuple[str | tuple[str, ...], Callable[..., Tensor]]

__all__ = [
    "ActivationCache",
    "HookPoint",
    "HookReturnError",
    "HookedModule",
    "LazyCacheDict",
    "QueryRows",
    "UnknownHookError",
    "near_names",
    "check_hook_names",
]


class UnknownHookError(KeyError, ValueError):
    """A hook name that the model does not have. The message lists the nearest real names.

    A ``KeyError`` (what TransformerLens code catches) and a ``ValueError`` (bad input: the command
    line prints it as one line, exit status 2, not a traceback)."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class HookReturnError(ValueError):
    """A forward hook returned something other than None or a tensor of its input's shape, dtype
    and device."""


def _check_return(returned: object, given: Tensor, name: str | None) -> None:
    if not isinstance(returned, Tensor):
        raise HookReturnError(
            f"a hook on {name} returned a {type(returned).__name__}; a hook returns None (keep the value) or a "
            f"tensor like its input, shape {list(given.shape)}"
        )
    if returned.shape != given.shape or returned.dtype != given.dtype or returned.device != given.device:
        raise HookReturnError(
            f"a hook on {name} returned shape {list(returned.shape)} ({returned.dtype}, {returned.device}), its input "
            f"has shape {list(given.shape)} ({given.dtype}, {given.device}); a hook must return None or a tensor of "
            "its input's shape, dtype and device"
        )


class QueryRows(NamedTuple):
    """Which query rows a hook on ``hook_attn_scores`` / ``hook_pattern`` was handed when the eager
    attention runs in query blocks (``models.blockwise.pattern_blocks``): rows ``start:stop`` of the
    ``n`` query rows, i.e. the value is ``full[:, :, start:stop]``."""

    start: int
    stop: int
    n: int

    @property
    def rows(self) -> slice:
        return slice(self.start, self.stop)

    @property
    def last(self) -> bool:
        """The block that completes the layer's rows (blocks arrive in order)."""
        return self.stop == self.n


class HookPoint(_TLHookPoint):
    """TransformerLens's ``HookPoint``, whose forward hooks' returns are checked (``HookReturnError``).

    The check wraps each forward hook when it is added, so an unhooked forward pass costs nothing
    more, and a hook that returns None (caching, reading) or its own input pays one identity test.
    ``query_rows``: None when the hook gets every query row (always, except under query blocks),
    else the ``QueryRows`` of the block it is being handed."""

    query_rows: QueryRows | None = None

    def add_hook(self, hook: Callable, dir: str = "fwd", *args: Any, **kwargs: Any) -> Any:
        if dir != "fwd":
            return super().add_hook(hook, dir, *args, **kwargs)
        user_hook = hook

        def checked(activation: Tensor, hook: _TLHookPoint) -> Any:
            returned = user_hook(activation, hook=hook)
            if returned is not None and returned is not activation:
                _check_return(returned, activation, hook.name)
            return returned

        checked.__name__ = getattr(user_hook, "__name__", type(user_hook).__name__)
        handle = super().add_hook(checked, dir, *args, **kwargs)
        if handle is not None and hasattr(handle, "user_hook"):
            handle.user_hook = user_hook  # what TransformerLens records: the hook as the user gave it
        return handle


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

    def run_with_cache(
        self, *model_args: Any, return_cache_object: bool = True, remove_batch_dim: bool = False, **kwargs: Any
    ) -> tuple[Any, Any]:
        """Run the model and cache activations: ``(output, cache)``. The cache is an
        ``ActivationCache`` below (TransformerLens's, with near-name errors), as
        TransformerLens's ``HookedTransformer`` returned; ``return_cache_object=False`` gives the
        plain ``{name: tensor}`` dict. ``names_filter`` (a name, a list of names or a predicate),
        ``device`` (where to store the activations) and ``remove_batch_dim`` (batch of one) work
        as in TransformerLens.

        Derived entries (``lazy_cache_entries``: e.g. ``attn.hook_result``, n_heads times the size of
        the attention output, computed from ``hook_z``; the per-head reader inputs, copies of the
        residual) are cached as their sources and computed on first read of the ``ActivationCache``,
        the same operation on the same tensors, so the same bits; see ``LazyCacheDict`` (the plain
        dict of ``return_cache_object=False`` has them computed). A hook point is cached the ordinary
        way whenever anything else watches it or one of its sources (an attached hook, ``incl_bwd``),
        or ``device``/``pos_slice`` are given."""
        names_filter = kwargs.get("names_filter")
        if isinstance(names_filter, str):
            check_hook_names([names_filter], self.hook_dict)
        elif isinstance(names_filter, (list, tuple)):
            check_hook_names(names_filter, self.hook_dict)
        why = self.uncacheable(_as_predicate(names_filter))
        if why:
            raise ValueError(f"run_with_cache: {why}")
        lazy = self._lazy_plan(kwargs)
        if not lazy:
            out, cache = super().run_with_cache(*model_args, remove_batch_dim=remove_batch_dim, **kwargs)
        else:
            wanted = _as_predicate(names_filter)
            kwargs["names_filter"] = lambda name: wanted(name) and name not in lazy
            seen: dict[str, tuple[Tensor, int]] = {}  # source name -> (its value, cache size when it fired)
            cache_so_far: dict[str, Tensor] = {}

            def record(tensor: Tensor, hook: _TLHookPoint) -> None:
                seen[hook.name] = (tensor.detach(), len(cache_so_far))

            sources = sorted({source for entry in lazy.values() for source in _sources(entry)})
            with self.hooks(fwd_hooks=[(name, record) for name in sources]):
                out, cache_so_far = self._run_caching(cache_so_far, model_args, remove_batch_dim, kwargs)
            cache = LazyCacheDict.build(cache_so_far, lazy, seen, remove_batch_dim)
            if not return_cache_object:  # the plain dict TransformerLens promises: computed now
                return out, cache.copy()
        if not return_cache_object:
            return out, cache
        return out, ActivationCache(cache, self, has_batch_dim=not remove_batch_dim)

    def _run_caching(
        self, cache: dict[str, Tensor], model_args: tuple, remove_batch_dim: bool, kwargs: dict[str, Any]
    ) -> tuple[Any, dict[str, Tensor]]:
        """TransformerLens's ``run_with_cache``, filling ``cache`` (so a recording hook can see how
        many entries precede it)."""
        kwargs = dict(kwargs)
        reset, clear = kwargs.pop("reset_hooks_end", True), kwargs.pop("clear_contexts", False)
        names_filter = kwargs.pop("names_filter")
        for handled in ("incl_bwd", "device", "pos_slice"):  # False / None here (see _lazy_plan)
            kwargs.pop(handled, None)
        _, fwd, _ = HookedRootModule.get_caching_hooks(
            self, names_filter, False, None, remove_batch_dim=remove_batch_dim, cache=cache
        )
        with self.hooks(fwd_hooks=fwd, reset_hooks_end=reset, clear_contexts=clear):
            out = self(*model_args, **kwargs)
        return out, cache

    def uncacheable(self, wanted: Callable[[str], bool]) -> str | None:
        """Why ``run_with_cache`` cannot cache the ``wanted`` hook points as the model is set up now
        (None: it can). None by default; the toolkit's transformer refuses patterns computed in query
        blocks, of which a caching hook would keep only the last block."""
        return None

    def lazy_cache_entries(self, wanted: Callable[[str], bool]) -> dict[str, LazyEntry]:
        """``{name: (sources, compute)}`` for the ``wanted`` hook points whose cached value
        ``run_with_cache`` may compute on read as ``compute(*values of sources)``; ``sources`` is one
        hook name or a tuple of them, in the order ``compute`` takes their values. ``compute`` must be
        the very operation the forward pass applies, on the weights as they are now, and an entry is
        declared only where its value is that function of its sources under the hooks attached now
        (``run_with_cache`` checks that neither the entry nor its sources have a hook). None by
        default; the toolkit's transformer declares ``attn.hook_result``, the reader inputs and
        ``hook_scale``."""
        return {}

    def _lazy_plan(self, kwargs: dict[str, Any]) -> dict[str, LazyEntry]:
        """The derived entries this ``run_with_cache`` call may compute on read (see there)."""
        if kwargs.get("incl_bwd") or kwargs.get("device") is not None or kwargs.get("pos_slice") is not None:
            return {}
        wanted = _as_predicate(kwargs.get("names_filter"))
        entries = self.lazy_cache_entries(wanted)
        if not entries:
            return {}
        hooks = self.hook_dict

        def quiet(name: str) -> bool:
            hp = hooks[name]
            return not (hp._forward_hooks or hp._backward_hooks)

        return {n: e for n, e in entries.items() if quiet(n) and all(quiet(s) for s in _sources(e))}

    def get_caching_hooks(self, names_filter: NamesFilter = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(names_filter, str):
            check_hook_names([names_filter], self.hook_dict)
        elif isinstance(names_filter, (list, tuple)):
            check_hook_names(names_filter, self.hook_dict)
            names_filter = list(names_filter)
        return super().get_caching_hooks(names_filter, *args, **kwargs)


def _sources(entry: LazyEntry) -> tuple[str, ...]:
    """The source hook names of a lazy entry, as a tuple."""
    source = entry[0]
    return (source,) if isinstance(source, str) else tuple(source)


def _as_predicate(names_filter: NamesFilter) -> Callable[[str], bool]:
    """A names filter (None, a name, a list of names, a predicate) as a predicate, as
    TransformerLens reads it."""
    if names_filter is None:
        return lambda name: True
    if isinstance(names_filter, str):
        return lambda name: name == names_filter
    if isinstance(names_filter, (list, tuple)):
        chosen = set(names_filter)
        return lambda name: name in chosen
    if callable(names_filter):
        return names_filter
    raise ValueError("names_filter must be a string, a list of strings or a function of a hook name")


class _Pending:
    """A cache entry not computed yet: ``compute()`` gives its value."""

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[], Tensor]) -> None:
        self.compute = compute


class LazyCacheDict(dict):
    """The ``{name: tensor}`` dict ``run_with_cache`` fills, some of whose entries are computed on
    first read (and kept): ``attn.hook_result`` is n_heads times the size of the attention output
    (1.3 GB over SmolLM2 at 32 x 64 tokens), and it is ``hook_z @ W_O`` per head, so the cache keeps
    ``hook_z`` and computes the result when asked, with the operation and the tensors the forward
    pass uses (the same bits); ``hook_q_input`` is n_heads copies of ``hook_resid_pre``, and a norm's
    ``hook_scale`` a function of tensors the cache holds anyway. Every way of reading a value
    (``[]``, ``get``, ``values``, ``items``, ``pop``, ``copy``, ``dict(...)``) gives the computed
    tensor; keys and their order are those of an ordinary cache."""

    @classmethod
    def build(
        cls,
        cache: dict[str, Tensor],
        lazy: dict[str, LazyEntry],
        seen: dict[str, tuple[Tensor, int]],
        remove_batch_dim: bool,
    ) -> LazyCacheDict:
        """Insert each derived entry where the ordinary cache would have it: right after its last
        source if that is cached, else where it fired (``lazy`` lists entries in forward order, which
        orders the entries that land at one place)."""
        from transformer_lens.utilities import remove_batch_dim as drop_batch_dim

        after: dict[int, list[tuple[str, _Pending]]] = {}
        names = list(cache)
        where = {name: i + 1 for i, name in enumerate(names)}
        for name, entry in lazy.items():
            sources, compute = _sources(entry), entry[1]
            if any(source not in seen for source in sources):  # a source never fired (e.g. a stop_at_layer run)
                continue
            values = tuple(seen[source][0] for source in sources)
            at = max(where.get(source, seen[source][1]) for source in sources)

            def thunk(values: tuple[Tensor, ...] = values, compute: Callable[..., Tensor] = compute) -> Tensor:
                with torch.no_grad():
                    out = compute(*values)
                return drop_batch_dim(out) if remove_batch_dim else out

            after.setdefault(at, []).append((name, _Pending(thunk)))
        ordered = cls()
        for i in range(len(names) + 1):
            for name, pending in after.get(i, []):
                dict.__setitem__(ordered, name, pending)
            if i < len(names):
                dict.__setitem__(ordered, names[i], cache[names[i]])
        return ordered

    def __getitem__(self, key: str) -> Tensor:
        value = dict.__getitem__(self, key)
        if isinstance(value, _Pending):
            value = value.compute()
            dict.__setitem__(self, key, value)
        return value

    def _settle(self) -> None:
        for key in [k for k, v in dict.items(self) if isinstance(v, _Pending)]:
            self[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def values(self) -> Any:
        self._settle()
        return dict.values(self)

    def items(self) -> Any:
        self._settle()
        return dict.items(self)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            dict.pop(self, key)
            return value
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, Tensor]:
        key = next(reversed(self))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        dict.__setitem__(self, key, default)
        return default

    def copy(self) -> dict[str, Tensor]:
        self._settle()
        return dict(dict.items(self))

    def __iter__(self) -> Any:  # overridden so dict(cache) goes through keys() and __getitem__
        return dict.__iter__(self)

    def keys(self) -> Any:
        return dict.keys(self)

    def __eq__(self, other: object) -> bool:
        self._settle()
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._settle()
        return dict.__repr__(self)

    def __reduce__(self) -> Any:  # pickles (and deep-copies) as the plain dict of computed values
        return (dict, (self.copy(),))


# --------------------------------------------------------------------------------------------------
# The cache run_with_cache returns
#
# TransformerLens's own ``ActivationCache`` (a subclass), so ``cache["pattern", 3]``,
# ``stack_head_results``, ``decompose_resid``, ``accumulated_resid``, ``apply_ln_to_stack`` and
# ``logit_attrs`` are TransformerLens's code running on our activations. What the subclass adds:
#
# * a key that is not in the cache raises ``UnknownHookError`` naming the nearest cached names, or
#   saying that the model has that hook but the names filter left it out (TransformerLens raises a
#   bare ``KeyError``);
# * dict behaviour the rest of the toolkit relies on: ``name in cache``, ``cache.get(name)``;
# * for models whose position information does not enter the residual stream (RoPE, ALiBi, none),
#   ``hook_pos_embed`` holds zeros and is left out of ``decompose_resid``, as TransformerLens leaves
#   it out for such models (they have no such hook there);
# * on post-norm models (BERT/MiniLM), whose norms sit on the residual stream itself, the "apply the
#   layer norm to a stack" methods refuse with an explanation instead of dividing by a scale that
#   belongs to a different stream.
#
# It reads the model's ``cfg`` by TransformerLens's names (and ``norm_placement``), nothing else.

_NO_RESIDUAL_POSITIONS = ("rotary", "alibi", "none")


class ActivationCache(_TLActivationCache):
    """``transformer_lens.ActivationCache`` with near-name errors; see the comment above."""

    def __init__(self, cache_dict: dict[str, Tensor], model: Any, has_batch_dim: bool = True) -> None:
        super().__init__(cache_dict, model, has_batch_dim=has_batch_dim)
        cfg = getattr(model, "cfg", None)
        if getattr(cfg, "positional_embedding_type", None) in _NO_RESIDUAL_POSITIONS:
            self.has_pos_embed = False  # the hook holds zeros: nothing of the residual stream

    def _resolve(self, key: Any) -> str | None:
        """The hook name ``key`` stands for (a name, a short name, or (name, layer, ...)), or None."""
        from transformer_lens.utilities import get_act_name

        try:
            if isinstance(key, str):
                return key if key in self.cache_dict or "." in key else get_act_name(key)
            key = tuple(key)
            if len(key) > 1 and key[1] is not None and key[1] < 0:
                key = (key[0], self.model.cfg.n_layers + key[1], *key[2:])
            return get_act_name(*key)
        except Exception:  # noqa: BLE001 - a key TransformerLens cannot parse is simply unknown
            return None

    def __getitem__(self, key: Any) -> Tensor:
        try:
            return super().__getitem__(key)
        except (KeyError, TypeError, ValueError, AssertionError):
            pass
        name = self._resolve(key)
        shown = repr(key) if name is None or name == key else f"{key!r} ({name})"
        model_hooks = getattr(self.model, "hook_dict", {}) or {}
        if name is not None and name in model_hooks:
            raise UnknownHookError(
                f"{shown} is a hook of the model but not in this cache: the names filter of run_with_cache "
                f"left it out (the cache holds {len(self.cache_dict)} names)"
            )
        near = near_names(name if name is not None else str(key), self.cache_dict)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise UnknownHookError(f"no activation {shown} in the cache{hint} (cache.keys() lists all {len(self)})")

    def __contains__(self, key: Any) -> bool:
        if isinstance(key, str):
            return key in self.cache_dict
        name = self._resolve(key)
        return name is not None and name in self.cache_dict

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default

    def _refuse_post_norm(self, what: str) -> None:
        cfg = getattr(self.model, "cfg", None)
        if getattr(cfg, "norm_placement", "pre") == "post":
            raise ValueError(
                f"{what} divides a residual stack by a pre-norm's cached scale; {getattr(cfg, 'name', 'this model')!r} "
                "is post-norm (its norms act on the residual stream itself, so resid_mid and resid_post are already "
                "normalised and no norm reads a sum of components). Use apply_ln=False"
            )

    def apply_ln_to_stack(
        self, residual_stack: Tensor, layer: int | None = None, mlp_input: bool = False, *args: Any, **kwargs: Any
    ) -> Tensor:
        self._refuse_post_norm("apply_ln_to_stack")
        return super().apply_ln_to_stack(residual_stack, layer, mlp_input, *args, **kwargs)
