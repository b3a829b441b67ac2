"""Hook names: the one place that spells ``blocks.{layer}...``.

>>> act_name(3, "attn.hook_pattern")
'blocks.3.attn.hook_pattern'
>>> act_name(3, "pattern")                 # TransformerLens's short names work too
'blocks.3.attn.hook_pattern'
>>> [act_name(l, "attn.hook_z") for l in range(2)]
['blocks.0.attn.hook_z', 'blocks.1.attn.hook_z']
"""

from __future__ import annotations

__all__ = ["act_name", "layer_of"]


def act_name(layer: int, name: str) -> str:
    """The full hook name of ``name`` in block ``layer``. ``name`` is either the hook's path inside
    a block (``"attn.hook_z"``, ``"hook_resid_pre"``, ``"ln1.hook_normalized"``) or one of
    TransformerLens's short names (``"z"``, ``"pattern"``, ``"resid_pre"``, ``"attn_scores"``),
    which ``transformer_lens.utilities.get_act_name`` resolves."""
    layer = int(layer)
    if layer < 0:
        raise ValueError(f"layer must be >= 0, got {layer}")
    if "hook_" in name:
        return f"blocks.{layer}.{name}"
    from transformer_lens.utilities import get_act_name

    return get_act_name(name, layer)


def layer_of(hook_name: str) -> int:
    """The block index of a ``blocks.{layer}.…`` hook name."""
    parts = hook_name.split(".")
    if len(parts) < 3 or parts[0] != "blocks" or not parts[1].isdigit():
        raise ValueError(f"{hook_name!r} is not a per-block hook name (blocks.<layer>.<hook>)")
    return int(parts[1])
