"""Probing data: the item type and its rules (``items``), generated sentence families and repeated
token sequences (``generated``), real text (``corpora``), poetry (``poetry``: Shakespeare's sonnets
and the CMU Pronouncing Dictionary), and the source registry (``sources``).

Every public name of the five modules is importable from here (``from analyses.data import Item``);
modules inside this package import each other by their full module name, never through this file.
"""

from analyses.data.corpora import *  # noqa: F403
from analyses.data.generated import *  # noqa: F403
from analyses.data.items import *  # noqa: F403
from analyses.data.poetry import *  # noqa: F403
from analyses.data.sources import *  # noqa: F403
