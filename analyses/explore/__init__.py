"""``interp explore``: a local web app that runs the model on the text you type. Rooms: ``session``
(one model in memory, requests serialised, input checked before any forward pass) -> ``server``
(Starlette routes only) -> ``templates/`` and ``assets/`` (the page)."""

from analyses.explore.session import DEFAULT_MAX_TOKENS, MODES, REFERENCE_NAME, InputError, Session, TextTooLong

__all__ = ["Session", "InputError", "TextTooLong", "MODES", "REFERENCE_NAME", "DEFAULT_MAX_TOKENS"]
