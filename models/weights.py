"""Weight views: what ``attn.W_Q``, ``mlp.W_in``, ``model.W_U`` and the other per-head weights
return. Each is a view of a parameter stored the way Hugging Face stores it, in TransformerLens
orientation; reading or editing it (under ``torch.no_grad()``) reads or edits the model."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["WeightEditError", "WeightView"]


class WeightEditError(RuntimeError):
    """An in-place edit of a weight view while autograd is recording (outside ``torch.no_grad()``)."""


class WeightView(Tensor):
    """What ``attn.W_Q``, ``mlp.W_in``, ``model.W_U`` and the other weight views return: a view of
    a parameter that computes like a plain tensor (every result is a plain ``Tensor``). The one
    difference: an in-place edit made while autograd is recording raises ``WeightEditError``, which
    says what to do, instead of torch's "a view of a leaf Variable that requires grad is being used
    in an in-place operation". Views of it (``W_Q[3]``, ``W_Q.T``) are ``WeightView``s too."""

    _weight_name = "a weight view"

    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: Iterable[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            try:
                out = func(*args, **kwargs)
            except RuntimeError as e:
                views = [a for a in args if isinstance(a, WeightView)]
                message = str(e)
                leaf_edit = "leaf Variable that requires grad" in message
                view_edit = "is a view and is being modified inplace" in message
                if not views or not torch.is_grad_enabled() or not (leaf_edit or view_edit):
                    raise
                name = views[0]._weight_name
                raise WeightEditError(
                    f"in-place edit of {name} while autograd is recording: {name} is a view of a parameter, so "
                    f"edit it under `with torch.no_grad():` (or assign a whole new value: module.{name} = new)"
                ) from None
            first = args[0] if args else None
            if isinstance(first, WeightView):  # a view of the weight (W_Q[3], W_Q.T) stays a WeightView
                base = first._base
                if isinstance(out, Tensor):
                    out = _as_weight_view(out, first._weight_name, base)
                elif isinstance(out, (tuple, list)):  # unbind, chunk, split
                    name = first._weight_name
                    out = type(out)(_as_weight_view(o, name, base) if isinstance(o, Tensor) else o for o in out)
        return out


def _as_weight_view(t: Tensor, name: str, base: Tensor | None) -> Tensor:
    if isinstance(t, WeightView) or base is None or t._base is not base:  # in place, or a plain result
        return t
    view = t.as_subclass(WeightView)
    view._weight_name = name
    return view


def _weight_view(t: Tensor | None, name: str) -> Tensor | None:
    """``t`` (a view of a parameter, or the parameter itself) as a ``WeightView`` named ``name``."""
    if t is None:
        return None
    view = t.as_subclass(WeightView)
    view._weight_name = name
    return view


def _view_param(name: str, doc: str) -> property:
    """A property that exposes ``_view_<name>()`` and copies into it on assignment, so that
    ``attn.W_Q = new`` and ``attn.W_Q[3].zero_()`` (under ``torch.no_grad()``) both edit the stored
    parameter."""

    def fget(self: nn.Module) -> Tensor | None:
        return _weight_view(getattr(self, f"_view_{name}")(), name)

    def fset(self: nn.Module, value: Tensor | ArrayLike) -> None:
        view = fget(self)
        if view is None:
            raise AttributeError(f"{name} does not exist in this architecture (no bias here)")
        value = torch.as_tensor(value, dtype=view.dtype, device=view.device)
        if tuple(value.shape) != tuple(view.shape):
            raise ValueError(f"{name} has shape {tuple(view.shape)}; got {tuple(value.shape)}")
        with torch.no_grad():
            view.copy_(value)

    return property(fget, fset, doc=doc)
