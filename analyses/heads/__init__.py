"""Head roles (``interp probe``): ``roles`` (names and table columns), ``scoring`` (scorers on
tensors), ``probe`` (the probe over a dataset, with statistics), ``report`` (heads.csv, report.md,
report.html, figures). Every public name of ``roles``, ``scoring`` and ``probe`` is importable from here.

>>> import models
>>> from analyses import heads
>>> df = heads.probe_heads(models.load("minilm"), n=200, seed=0)
"""

from analyses.heads.examples import *  # noqa: F403
from analyses.heads.probe import *  # noqa: F403
from analyses.heads.roles import *  # noqa: F403
from analyses.heads.scoring import *  # noqa: F403
