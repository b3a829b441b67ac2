"""The probe's defaults, in one record that every entry point reads: ``probe_items``,
``probe_heads``, ``analyses.heads.run`` and (through the parser's defaults, checked equal by a
test) ``interp probe``. The one-liner and the command line therefore score the same tests and label
the same heads: both weightings (``weighting = ("attention", "norm")``), so a boundary label
(attention_sink, delimiter, punctuation, sep_eos) needs the norm lens too.

>>> from analyses.heads import DEFAULTS, n_repeat_for
>>> DEFAULTS.weighting, n_repeat_for(DEFAULTS.n)
(('attention', 'norm'), 100)
"""

from __future__ import annotations

from dataclasses import dataclass

from analyses.heads.roles import SPECIALS, WEIGHTINGS

__all__ = ["ProbeDefaults", "DEFAULTS", "n_repeat_for"]


@dataclass(frozen=True)
class ProbeDefaults:
    """What a probe run takes when it is not told otherwise."""

    n: int = 100  # items per relation (``interp probe --n``): ~2 min for minilm on 2 CPU cores
    seed: int = 0
    n_boot: int = 200  # bootstrap replicates
    alpha: float = 0.05  # family-wise error rate per role (Holm)
    margin: float = 0.05  # minimum accuracy gain over the best baseline (word relations)
    mass_margin: float = 0.1  # minimum attention mass above a uniform head (mass roles)
    batch_size: int = 32
    repeat_length: int = 20  # tokens of each random sequence, repeated once (at most n_ctx / 2)
    null_n: int | None = 150  # sentences for the randomly initialised null model (None: all)
    specials: tuple[str, ...] = SPECIALS  # the first carries the labels
    weighting: tuple[str, ...] = WEIGHTINGS  # attention first (it carries the labels), then the norm lens


DEFAULTS = ProbeDefaults()


def n_repeat_for(n: int) -> int:
    """The random repeated-token sequences (duplicate-token and induction roles) of a run with ``n``
    items per relation: ``n``, at least 20 and at most 200."""
    return max(20, min(n, 200))
