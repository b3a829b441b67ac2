"""interp.hooks on a hand-made module: helpful unknown-name errors on top of TransformerLens hooks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from interp.hooks import HookedModule, HookPoint, UnknownHookError, check_hook_names, near_names


class Toy(HookedModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.hook_in = HookPoint()
        self.inner = nn.Module()
        self.inner.hook_pattern = HookPoint()
        self.hook_out = HookPoint()
        self.setup()

    def forward(self, x):
        x = self.hook_in(x)
        x = self.inner.hook_pattern(self.lin(x))
        return self.hook_out(x * 2)


def attached(m):
    return sum(len(h._forward_hooks) for h in m.hook_dict.values())


def test_hook_names():
    assert Toy().hook_names() == ["hook_in", "inner.hook_pattern", "hook_out"]


def test_near_names():
    names = ["blocks.0.attn.hook_pattern", "blocks.0.attn.hook_z", "blocks.1.attn.hook_pattern"]
    assert near_names("blocks.0.attn.hook_patern", names)[0] == "blocks.0.attn.hook_pattern"
    # nothing close as a whole: names ending in the same component
    assert near_names("model.layers.hook_z", names) == ["blocks.0.attn.hook_z"]


def test_check_hook_names():
    check_hook_names(["a.b"], ["a.b", "c"])
    with pytest.raises(UnknownHookError) as err:
        check_hook_names(["a.c"], ["a.b", "a.bc"])
    msg = str(err.value)
    assert msg.startswith("unknown hook name 'a.c'") and "a.b" in msg and not msg.startswith('"')


def test_unknown_names_raise_everywhere():
    m = Toy()
    x = torch.ones(2, 3)
    with pytest.raises(UnknownHookError, match="hook_out"):
        m.run_with_hooks(x, fwd_hooks=[("hook_outt", lambda v, hook: v)])
    with pytest.raises(UnknownHookError, match="inner.hook_pattern"):
        m.run_with_cache(x, names_filter="inner.hook_patern")
    with pytest.raises(UnknownHookError, match="hook_in"):
        m.run_with_cache(x, names_filter=("hook_in", "hook_inn"))
    with pytest.raises(UnknownHookError):
        m.add_hook("nope", lambda v, hook: v)
    assert attached(m) == 0


def test_filters_and_temporary_hooks():
    m = Toy()
    x = torch.randn(2, 3)
    base = m(x)
    out, cache = m.run_with_cache(x, names_filter=["hook_out"])
    assert set(cache) == {"hook_out"} and torch.equal(out, base) and torch.equal(cache["hook_out"], base)
    _, cache = m.run_with_cache(x, names_filter=lambda n: n.startswith("inner"))
    assert set(cache) == {"inner.hook_pattern"}
    doubled = m.run_with_hooks(x, fwd_hooks=[("hook_in", lambda v, hook: 2 * v)])
    assert not torch.allclose(doubled, base)
    assert attached(m) == 0

    def boom(v, hook):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        m.run_with_hooks(x, fwd_hooks=[("hook_out", boom)])
    with pytest.raises(RuntimeError, match="boom"):
        with m.hooks(fwd_hooks=[("hook_in", boom)]):
            m(x)
    assert attached(m) == 0
    assert torch.equal(m(x), base)
