"""The architecture features of ``analyses.architecture`` and the refusals built on them, on config
stand-ins carrying the fields the new families bring (parallel blocks, Granite's multipliers,
clip_qkv, layers without RoPE, scaled RoPE): each analysis takes a feature or refuses it in one line
that names it, whether or not the installed ``models.Config`` has the field yet (a missing field
reads as its default). tests/analyses/test_family_walk.py walks the real families."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import analyses.invariance as invariance
import analyses.qk as qk
from analyses.architecture import FEATURES, present, refuse, rope_type, uses_rope
from analyses.circuits.edges import edge_refusal
from tests.factories import TINY, tiny_config


class Stand:
    """A real tiny config with extra fields on top (the ones a newer ``Config`` has)."""

    def __init__(self, cfg: Any, **extra: Any) -> None:
        self._cfg, self._extra = cfg, extra

    def __getattr__(self, name: str) -> Any:
        return self._extra[name] if name in self._extra else getattr(self._cfg, name)


LLAMA = tiny_config(name="tiny", **TINY["llama_like"])
DYNAMIC = (("factor", 4.0), ("rope_type", "dynamic"))

# extra fields -> (the feature's words in a refusal, who refuses it: edges, qk, invariance)
CASES = {
    "parallel": (dict(parallel_block=True), "parallel_block", {"edges"}),
    "granite": (dict(residual_multiplier=0.22, logit_divisor=8.0), "residual_multiplier", {"edges"}),
    "clip_qkv": (dict(clip_qkv=8.0), "clip_qkv", {"qk", "invariance"}),
    "dynamic": (dict(rope_scaling=DYNAMIC), "'dynamic'", {"qk", "invariance"}),
    "longrope": (
        dict(rope_scaling={"rope_type": "longrope", "long_factor": [2.0]}),
        "'longrope'",
        {"qk", "invariance"},
    ),
    "linear": (dict(rope_scaling={"rope_type": "linear", "factor": 2.0}), "", set()),
    "no_rope_layer": (dict(rope_layers=(True, False)), "", set()),
    "cohere_scale": (dict(logit_scale=0.0625, parallel_block=True), "parallel_block", {"edges"}),
}


def _refusals(cfg: Any) -> dict[str, str | None]:
    model = SimpleNamespace(cfg=cfg, blocks=[])
    return {"edges": edge_refusal(cfg) or None, "qk": qk.refusal(model), "invariance": invariance.refusal(model)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_new_feature_is_taken_or_refused_in_one_line_naming_it(case):
    extra, words, refused_by = CASES[case]
    got = _refusals(Stand(LLAMA, **extra))
    assert {k for k, why in got.items() if why} == refused_by, got
    for analysis in refused_by:
        why = got[analysis]
        assert words in why and "'tiny'" in why and "\n" not in why, (analysis, why)


def test_the_plain_model_is_refused_by_none_and_present_is_empty():
    assert _refusals(LLAMA) == {"edges": None, "qk": None, "invariance": None}
    assert present(LLAMA) == []
    assert present(Stand(LLAMA, parallel_block=True, rope_layers=(True, False))) == ["parallel_block", "rope_layers"]


def test_the_old_refusals_keep_their_words():
    """The features that were refused before keep their lines (other tests match on them)."""
    bert = tiny_config(name="bert_like", **TINY["bert_like"])
    assert "is post-norm (BERT): its norms sit on the residual stream itself" in edge_refusal(bert)
    assert "post-norm" in qk.refusal(SimpleNamespace(cfg=bert, blocks=[]))
    capped = tiny_config(name="capped", attn_softcap=2.0)
    assert qk.refusal(SimpleNamespace(cfg=capped, blocks=[])) == (
        "'capped' soft-caps its scores (tanh, cap 2.0): a tanh of the bilinear form is not a sum"
    )


def test_rope_type_and_uses_rope_read_both_spellings():
    assert rope_type(LLAMA) is None
    assert rope_type(Stand(LLAMA, rope_scaling=DYNAMIC)) == "dynamic"
    assert rope_type(Stand(LLAMA, rope_scaling={"type": "linear", "factor": 2.0})) == "linear"
    assert rope_type(Stand(LLAMA, rope_scaling={"rope_type": "default"})) is None
    assert [uses_rope(Stand(LLAMA, rope_layers=(True, False)), l) for l in (0, 1)] == [True, False]
    assert [uses_rope(LLAMA, l) for l in (0, 1)] == [True, True]
    assert not uses_rope(tiny_config(), 0)  # learned positions


def test_refuse_follows_the_analysis_order_and_every_feature_names_itself():
    cfg = Stand(LLAMA, parallel_block=True, residual_multiplier=0.5)
    first = refuse(cfg, {"residual_multiplier": "why one", "parallel_block": "why two"})
    assert first == "'tiny' scales each sublayer's output by residual_multiplier=0.5: why one"
    every = Stand(LLAMA, parallel_block=True, residual_multiplier=0.5, clip_qkv=8.0, rope_layers=(True, False),
                  rope_scaling=DYNAMIC, logit_scale=0.5, attn_softcap=30.0, final_softcap=50.0)  # fmt: skip
    for name, feature in FEATURES.items():
        assert feature.says(every) and "\n" not in feature.says(every), name
    assert FEATURES["rope_layers"].says(every) == "has layers without RoPE (1: rope_layers)"
