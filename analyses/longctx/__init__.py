"""Heads at long context: long windows of real text (``text``), retrieval heads on a
needle-in-a-haystack task (``retrieval``), the attention sink and roles by context length (``sinks``).

Modules import each other by their full module name (``from analyses.longctx.text import ...``),
never through this file.
"""
