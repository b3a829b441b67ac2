"""``interp explore``: a local web app that runs the model on the text you type. Rooms: ``session``
(one model in memory, requests serialised, input checked before any forward pass; ``catalogue``
reads and checks ``--catalogue`` for it) -> ``server``
(Starlette routes only) -> ``templates/`` and ``assets/`` (the page). ``limits`` holds the numbers
the command line needs without importing torch, which is why this file re-exports only those
(``from analyses.explore.session import Session``)."""

from analyses.explore.limits import DEFAULT_MAX_TOKENS, MAX_BODY, PATTERN_MAX_TOKENS

__all__ = ["DEFAULT_MAX_TOKENS", "MAX_BODY", "PATTERN_MAX_TOKENS"]
