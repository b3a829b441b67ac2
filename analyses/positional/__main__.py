"""``python -m analyses.positional``: the positional-encoding study (see ``analyses.positional.runs``)."""

import sys

from analyses.positional.runs import main

sys.exit(main())
