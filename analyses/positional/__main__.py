"""``python -m analyses.positional``: the positional-encoding study, the same command as ``interp
positional`` (``analyses.cli.positional``: the same parser and code). An entry point, so it sits with
the command line (tests/test_architecture.py).

``python -m`` imports this package, and with it torch, before this file runs: OpenMP has read its
environment by then, so when ``OMP_WAIT_POLICY`` is unset it is set to PASSIVE and the interpreter
started again with the same arguments (``passive_openmp(restart=True)``); a user's own setting stays."""

import sys

from analyses.cli.common import passive_openmp

passive_openmp(restart=True)

from analyses.cli import main  # noqa: E402

sys.exit(main(["positional", *sys.argv[1:]]))
