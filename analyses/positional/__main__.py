"""``python -m analyses.positional``: the positional-encoding study (see ``analyses.positional.study``)."""

import sys

from analyses.positional.study import main

sys.exit(main())
