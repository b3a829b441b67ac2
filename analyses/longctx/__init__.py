"""Heads at long context: long windows of real text (``text``), retrieval heads on a
needle-in-a-haystack task (``niah``; ``retrieval``, the analysis' face, over ``retrieval_measure`` and
``retrieval_report``), the attention sink and roles by context length (``sinks``, over
``sinks_measure`` and ``sinks_report``); ``deprecated`` serves the names House v4 renamed.

Modules import each other by their full module name (``from analyses.longctx.text import ...``),
never through this file.
"""
