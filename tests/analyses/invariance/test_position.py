"""Relative position: RoPE and ALiBi scores depend on distance only; absolute encodings do not."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from analyses.invariance import position as pos
from analyses.invariance.common import generator, tiny_model

FAST = settings(max_examples=15, deadline=None)


@FAST
@given(
    seed=st.integers(0, 1000),
    shift=st.integers(1, 3000),
    positional=st.sampled_from(["rope", "alibi"]),
    attention=st.sampled_from(["causal", "bidirectional"]),
    n_heads=st.sampled_from([2, 3, 4]),
)
def test_shift_invariance_for_relative_encodings(seed, shift, positional, attention, n_heads):
    m = tiny_model(positional, attention=attention, seed=seed, n_heads=n_heads, d_head=8, d_model=24, n_layers=1)
    tokens = torch.randint(0, m.cfg.d_vocab, (1, 10), generator=generator(seed))
    t = pos.shift_errors(m, tokens, shifts=[shift])
    r = t.iloc[0]
    assert r.value <= r.tolerance
    assert r.baseline > 100 * r.tolerance  # guard: moving only the queries changes the scores


@FAST
@given(seed=st.integers(0, 1000), shift=st.integers(1, 500), positional=st.sampled_from(["learned", "sinusoidal"]))
def test_absolute_encodings_are_not_shift_invariant(seed, shift, positional):
    m = tiny_model(positional, seed=seed, d_head=8, d_model=24, n_layers=1)
    if positional == "learned":
        with torch.no_grad():  # GPT-2 init gives positions of norm ~0.1: make them matter
            m.W_pos.mul_(20)
    tokens = torch.randint(0, m.cfg.d_vocab, (1, 10), generator=generator(seed))
    r = pos.shift_errors(m, tokens, shifts=[shift]).iloc[0]
    assert r.value > 100 * r.tolerance


def test_rope_tolerance_grows_with_shift_and_error_stays_below():
    m = tiny_model("rope", attention="causal", seed=0, n_layers=1)
    t = pos.shift_errors(m, shifts=[1, 100, 3000])
    assert t.tolerance.is_monotonic_increasing
    assert (t.value <= t.tolerance).all()
    assert t.value.iloc[-1] > t.value.iloc[0]  # the angle error really grows with position


def test_relative_position_checks_on_smollm2_use_its_own_rope(smollm2):
    from analyses.invariance.common import first_layers

    table, rows = pos.relative_position_checks(first_layers(smollm2, 4), shifts=(1, 1000))
    assert rows.passed.all(), rows
    assert set(table.positional) == {"rope", "alibi", "learned"}
    assert (table[table.positional == "rope"].subject == "smollm2[:4]").all()
    assert (rows[rows.quantity.str.startswith("learned")].expected == "breaks").all()
