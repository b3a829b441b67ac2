"""The architecture features an analysis's exact decomposition may not survive, in one place.

Some analyses take a model apart exactly: QK attribution splits a score into residual-stream terms,
edge attribution (EAP) needs every writer's output to be a term of every later reader's input, the
invariance checks rotate W_Q/W_K and shift RoPE's positions. A family that breaks such an identity
must be refused up front, in one line that names the feature and says why, never analysed into wrong
numbers. ``FEATURES`` lists the features of ``models.Config`` that matter to some analysis (old and
new: a field the installed ``Config`` does not have yet reads as its default, so this module works
before a family that sets it arrives); each analysis keeps its own refusal function, which maps the
features it cannot take to its reason and calls ``refuse``:

* ``analyses.qk.refusal`` (QK attribution), ``analyses.circuits.edges.edge_refusal`` (edge level),
  ``analyses.circuits.run.circuit_refusal`` (node level), ``analyses.invariance.refusal``;
* the probe (attention patterns) and the catalogue (patching and node attribution) read the model's
  own hooks, whatever computes them: they take every architecture.

``present(cfg)`` names the features a config has (tests/analyses/test_family_walk.py reports them
per family); ``uses_rope(cfg, layer)`` says whether a layer rotates its queries and keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from models.config import RUNTIME_ROPE_TYPES

__all__ = ["Feature", "FEATURES", "RUNTIME_ROPE_TYPES", "present", "refuse", "rope_type", "setting", "uses_rope"]

# RUNTIME_ROPE_TYPES: the scaled-RoPE types whose frequencies depend on the sequence's length
# (Hugging Face's "dynamic" NTK and LongRoPE): a position's rotation is not a function of that position alone

# the defaults of the Config fields read here: what a config without the field (an older Config, or
# a stand-in object) is taken to have
_DEFAULTS: dict[str, Any] = {
    "norm_placement": "pre",
    "attention": "causal",
    "attn_softcap": None,
    "final_softcap": None,
    "embed_norm": False,
    "parallel_block": False,
    "residual_multiplier": 1.0,
    "clip_qkv": None,
    "rope_layers": None,
    "rope_scaling": None,
    "logit_scale": 1.0,
    "logit_divisor": 1.0,
    "scores_fp32": False,
    "positional": "learned",
    "lm_head": True,
    "sliding_window": None,
    "layer_types": None,
}


def setting(cfg: Any, field: str) -> Any:
    """``cfg.<field>``, or the field's default where ``cfg`` has no such field."""
    return getattr(cfg, field, _DEFAULTS.get(field))


def rope_type(cfg: Any) -> str | None:
    """The scaled-RoPE type (``"linear"``, ``"dynamic"``, ``"yarn"``, ...) or None (unscaled). The
    scaling is a dict or (key, value) pairs, as Hugging Face's ``rope_scaling`` is."""
    scaling = setting(cfg, "rope_scaling")
    if not scaling:
        return None
    params = dict(scaling.items() if isinstance(scaling, Mapping) else scaling)
    kind = params.get("rope_type", params.get("type"))
    return None if kind in (None, "default") else str(kind)


def uses_rope(cfg: Any, layer: int) -> bool:
    """Whether ``layer`` rotates its queries and keys: a RoPE model's layer not switched off by
    ``rope_layers`` (SmolLM3's no-RoPE layers)."""
    if setting(cfg, "positional") != "rope":
        return False
    layers = setting(cfg, "rope_layers")
    return layers is None or bool(layers[layer])


@dataclass(frozen=True)
class Feature:
    """One architecture feature: ``has(cfg)``, and ``says(cfg)``, how a refusal names it (after the
    model's name: "'gemma2' soft-caps its scores (tanh, cap 50.0)")."""

    has: Callable[[Any], bool]
    says: Callable[[Any], str]


def _placement(kind: str) -> Callable[[Any], bool]:
    return lambda cfg: setting(cfg, "norm_placement") == kind


def _no_rope_layers(cfg: Any) -> str:
    off = [i for i, on in enumerate(setting(cfg, "rope_layers") or ()) if not on]
    return f"has layers without RoPE ({', '.join(map(str, off[:4]))}{', ...' if len(off) > 4 else ''}: rope_layers)"


FEATURES: dict[str, Feature] = {
    "post_norm": Feature(_placement("post"), lambda cfg: "is post-norm (BERT)"),
    "sandwich_norms": Feature(_placement("sandwich"), lambda cfg: "has sandwich norms (Gemma 2/3)"),
    "reordered_norms": Feature(
        _placement("reordered"), lambda cfg: "has reordered norms (OLMo-2: norms on the sublayer outputs only)"
    ),
    "bidirectional": Feature(lambda cfg: setting(cfg, "attention") != "causal", lambda cfg: "is bidirectional"),
    "attn_softcap": Feature(
        lambda cfg: setting(cfg, "attn_softcap") is not None,
        lambda cfg: f"soft-caps its scores (tanh, cap {setting(cfg, 'attn_softcap')})",
    ),
    "final_softcap": Feature(
        lambda cfg: setting(cfg, "final_softcap") is not None,
        lambda cfg: f"soft-caps its logits (tanh, cap {setting(cfg, 'final_softcap')})",
    ),
    "embed_norm": Feature(lambda cfg: bool(setting(cfg, "embed_norm")), lambda cfg: "normalises the embeddings"),
    "parallel_block": Feature(
        lambda cfg: bool(setting(cfg, "parallel_block")),
        lambda cfg: "has parallel blocks (attention and MLP both read the block's input: parallel_block)",
    ),
    "residual_multiplier": Feature(
        lambda cfg: setting(cfg, "residual_multiplier") != 1.0,
        lambda cfg: f"scales each sublayer's output by residual_multiplier={setting(cfg, 'residual_multiplier')}",
    ),
    "clip_qkv": Feature(
        lambda cfg: setting(cfg, "clip_qkv") is not None,
        lambda cfg: f"clamps q, k and v to +-{setting(cfg, 'clip_qkv')} (clip_qkv)",
    ),
    "rope_layers": Feature(
        lambda cfg: setting(cfg, "rope_layers") is not None and not all(setting(cfg, "rope_layers")), _no_rope_layers
    ),
    "runtime_rope": Feature(
        lambda cfg: rope_type(cfg) in RUNTIME_ROPE_TYPES,
        lambda cfg: f"scales RoPE by the sequence's length (rope_type {rope_type(cfg)!r})",
    ),
    "scaled_rope": Feature(
        lambda cfg: rope_type(cfg) is not None, lambda cfg: f"scales RoPE (rope_type {rope_type(cfg)!r})"
    ),
    "logit_scaling": Feature(
        lambda cfg: setting(cfg, "logit_scale") != 1.0 or setting(cfg, "logit_divisor") != 1.0,
        lambda cfg: (
            f"scales its logits (logit_scale {setting(cfg, 'logit_scale')}, "
            f"logit_divisor {setting(cfg, 'logit_divisor')})"
        ),
    ),
    "no_lm_head": Feature(lambda cfg: not setting(cfg, "lm_head"), lambda cfg: "has no LM head"),
    "bidirectional_window": Feature(
        lambda cfg: (
            setting(cfg, "attention") != "causal"
            and setting(cfg, "sliding_window") is not None
            and "sliding" in (setting(cfg, "layer_types") or ("sliding",))
        ),
        lambda cfg: f"has bidirectional sliding windows ({setting(cfg, 'sliding_window')} tokens each side)",
    ),
}


def present(cfg: Any) -> list[str]:
    """The names of the ``FEATURES`` that ``cfg`` has, in ``FEATURES``' order."""
    return [name for name, f in FEATURES.items() if f.has(cfg)]


def refuse(cfg: Any, reasons: Mapping[str, str]) -> str | None:
    """One line for the first feature of ``reasons`` (feature name -> why the analysis cannot take
    it, in the analysis's order of precedence) that ``cfg`` has: "'<model>' <feature>: <why>"; None
    where it has none of them."""
    for name, why in reasons.items():
        feature = FEATURES[name]
        if feature.has(cfg):
            return f"{getattr(cfg, 'name', 'this model')!r} {feature.says(cfg)}: {why}"
    return None
