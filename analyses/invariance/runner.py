"""Invariance checks on real weights: one table, one row per measurement, a verdict per row.

>>> import models
>>> from analyses import invariance
>>> model = models.load("minilm")
>>> result = invariance.run(model)
>>> result.table[["check", "quantity", "value", "tolerance", "expected", "passed"]]
>>> invariance.write(result, "out/minilm/invariance")  # the files of ``invariance.OUTPUTS``

Columns of the table (``ROW_COLUMNS``): ``model, check, quantity, value, tolerance, expected,
passed, baseline, dtype, tolerance_rule, detail``. ``expected`` is ``holds`` (an invariance: value
must be <= tolerance, and the guard ``baseline`` — the same metric for a different input — must
be far above the tolerance) or ``breaks`` (a negative control: value must exceed the tolerance).

The checks live in four modules, each usable on its own:

* ``analyses.invariance.permutation``: order blindness (one layer, whole model, the causal mask's
  leak, per-head content vs position);
* ``analyses.invariance.rotation``: W_Q/W_K and W_V/W_O rotations, invertible A, RoPE planes,
  grouped-query groups, QK-norm; ``analyses.invariance.conditioning``: W_Q A, W_K A^-T and the
  condition number of A; ``analyses.invariance.interpretation``: what can be interpreted
  (FactoredMatrix);
* ``analyses.invariance.position``: relative position (RoPE, ALiBi) vs absolute;
* ``analyses.invariance.scale``: the 1/sqrt(d) scale.

Refused up front, in one line (``refusal``, on ``analyses.architecture``'s features): clamped q/k/v
(``clip_qkv``: rotations change what is clamped) and scaled RoPE whose frequencies depend on the
sequence's length ("dynamic", "longrope": a shift of every position is then no invariance).

The model passed in is never changed: edits happen on ``copy.deepcopy`` copies. ``result.heads``:
the per-head table (``model, layer, head``, then the TV distances of ``head_position_sensitivity``),
``result.info`` the run's parameters, seed and model (``analyses.contract``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

import analyses.invariance.conditioning as cond_mod
import analyses.invariance.interpretation as interp_mod
import analyses.invariance.permutation as perm_mod
import analyses.invariance.position as pos_mod
import analyses.invariance.rotation as rot_mod
import analyses.invariance.scale as scale_mod
from analyses.architecture import refuse
from analyses.contract import head_table, make_info
from analyses.invariance.common import ROW_COLUMNS, double_copy, model_tokens
from interp.view import view

__all__ = ["InvarianceResult", "refusal", "run", "run_all"]


@dataclass
class InvarianceResult:
    table: pd.DataFrame  # one row per check (ROW_COLUMNS)
    per_head: pd.DataFrame  # layer x head TV distances (content vs position)
    order_leak: pd.DataFrame  # causal order leak per layer
    conditioning: pd.DataFrame  # cond(A) sweep
    interpretation: pd.DataFrame  # what changes / what does not under rotation
    relative_position: pd.DataFrame  # per shift
    scale: pd.DataFrame  # sqrt(d) sweep
    extras: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)  # analyses.contract.make_info: model, seed, params

    @property
    def heads(self) -> pd.DataFrame:
        """The per-head table (``model, layer, head`` first): ``per_head``, one row per head and
        ``positions_removed``."""
        return head_table(self.per_head, self.info.get("model", ""))


# the features whose invariances do not hold as the checks state them, and why (``analyses.architecture``)
_REFUSED = {
    "clip_qkv": "the clamp acts coordinate by coordinate, so rotating W_Q, W_K or W_V changes what is clamped and "
    "the rotation invariances do not hold",
    "runtime_rope": "its rotary frequencies depend on the largest position, so shifting every position is not the "
    "relative-position invariance the checks measure",
    "bidirectional_window": "its local layers mask keys by index on both sides, so permuting the positions moves "
    "keys in and out of each query's window and the permutation checks have nothing they can hold fixed",
}


def refusal(model) -> str | None:
    """Why the invariance checks cannot run on ``model`` (one line), or None."""
    why = refuse(model.cfg, _REFUSED)
    return None if why is None else f"invariance: {why}"


def run(model, text: str | None = None, n_tokens: int = 16, seed: int = 0, progress: bool = False) -> InvarianceResult:
    """Run every check on ``model`` (never modified). ``n_tokens`` bounds the input length. A
    model the checks do not apply to is refused before any forward pass (``refusal``)."""
    from tqdm.auto import tqdm

    why = refusal(model)
    if why:
        raise ValueError(why)
    tokens = model_tokens(model, text, n_tokens=n_tokens, seed=seed)
    m64 = double_copy(model)
    steps = tqdm(total=8, desc=f"invariance {view(model).name}", disable=not progress)
    parts = []

    def step(df):
        parts.append(df)
        steps.update(1)

    step(perm_mod.layer_permutation(model, tokens, seed=seed, model64=m64))
    # ALiBi's bias cannot be removed by a hook, so model_permutation only measures "with positions"
    step(perm_mod.model_permutation(model, tokens, seed=seed, model64=m64))
    leak, leak_rows = perm_mod.causal_order_leak(model, tokens, seed=seed, model64=m64)
    step(leak_rows)
    per_head = perm_mod.head_position_sensitivity(model, tokens, seed=seed, model64=m64)
    nopos = (
        None
        if model.cfg.positional == "alibi"
        else perm_mod.head_position_sensitivity(model, tokens, seed=seed, model64=m64, remove_positions=True)
    )
    step(perm_mod.head_sensitivity_rows(model, per_head, nopos))
    step(rot_mod.model_rotation_checks(model, tokens, seed=seed, model64=m64))
    del m64
    sweep = cond_mod.conditioning_sweep(model, tokens, seed=seed)
    step(
        pd.concat([cond_mod.conditioning_rows(model, sweep), cond_mod.conditioning_negative(model, tokens, seed=seed)])
    )
    interp_tab = pd.concat(
        [interp_mod.interpretation_table(model, l, 0, tokens, seed=seed) for l in (0, model.cfg.n_layers - 1)]
    )
    rel_tab, rel_rows = pos_mod.relative_position_checks(model, seed=seed)
    step(pd.concat([interp_mod.interpretation_rows(interp_tab), rel_rows]))
    scale_tab = scale_mod.scale_sweep(model, seed=seed)
    step(scale_mod.scale_rows(view(model).name, scale_tab))
    steps.close()
    table = pd.concat(parts, ignore_index=True)[ROW_COLUMNS]
    if per_head is not None and nopos is not None:
        per_head = pd.concat([per_head, nopos], ignore_index=True)
    info = make_info("invariance", model, seed, text=text, n_tokens=n_tokens)
    return InvarianceResult(table, per_head, leak, sweep, interp_tab, rel_tab, scale_tab, info=info)


def run_all(*args, **kwargs) -> InvarianceResult:
    """Deprecated: ``run``."""
    import warnings

    warnings.warn(
        "analyses.invariance.run_all is deprecated; use analyses.invariance.run", DeprecationWarning, stacklevel=2
    )
    return run(*args, **kwargs)
