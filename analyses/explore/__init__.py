"""``interp explore``: a local web app that runs the model on the text you type. Rooms: ``session``
(one model in memory, requests serialised, input checked before any forward pass) -> ``server``
(Starlette routes only) -> ``templates/`` and ``assets/`` (the page). ``limits`` holds the numbers
the command line needs without importing torch, which is why the rest is imported on first use."""

from analyses.explore.limits import DEFAULT_MAX_TOKENS, MAX_BODY

__all__ = ["Session", "InputError", "TextTooLong", "MODES", "REFERENCE_NAME", "DEFAULT_MAX_TOKENS", "MAX_BODY"]


def __getattr__(name: str):
    if name in __all__:
        from analyses.explore import session

        return getattr(session, name)
    raise AttributeError(f"module 'analyses.explore' has no attribute {name!r}")
