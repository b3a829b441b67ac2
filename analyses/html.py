"""The toolkit's HTML pages, rendered one way: jinja2 templates (``analyses/report/templates/``) in
one ``Environment`` with autoescape on, one stylesheet and one script (``analyses/report/assets/``),
markdown through markdown-it-py with raw HTML escaped, and figures inlined as data URIs.

It sits at the ``analyses`` package level (not in ``analyses.report``) because the invariance
report, a lower room, writes a page too; the templates are read by path, not imported.

Data embedded in a page goes through jinja's ``tojson`` filter, which writes ``<``, ``>``, ``&`` and
``'`` as ``\\u003c`` etc.: no text in the data (a model name, a role cell, a token) can end the
``<script>`` element or open a comment in it (issue 24, item 3).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["render", "render_markdown", "inline_images", "asset", "environment"]

_PACKAGE, _TEMPLATES, _ASSETS = "analyses", "report/templates", "report/assets"


@cache
def environment():  # a jinja2.Environment; jinja2 is imported on first use
    """The jinja2 Environment of every page: templates from the package, autoescape on, ``tojson``
    compact, in insertion order and refusing NaN (the data must be JSON, not JavaScript)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(
        loader=PackageLoader(_PACKAGE, _TEMPLATES),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":"), "allow_nan": False}
    env.globals["asset"] = asset
    return env


def render(template: str, **context: object) -> str:
    """``template`` (a file name under ``analyses/report/templates``) rendered with ``context``."""
    return environment().get_template(template).render(**context)


@cache
def asset(name: str) -> str:
    """The text of ``analyses/report/assets/<name>`` (page.css, explorer.js)."""
    return resources.files(_PACKAGE).joinpath(_ASSETS, name).read_text(encoding="utf-8")


_MD = None


def render_markdown(text: str, heading_shift: int = 0) -> str:
    """Markdown (CommonMark with GitHub tables) to HTML with markdown-it-py; raw HTML in the text is
    escaped, not passed through. ``heading_shift`` demotes headings (## -> ### for 1)."""
    global _MD
    if _MD is None:
        from markdown_it import MarkdownIt

        _MD = MarkdownIt("commonmark", {"html": False}).enable("table")
    if heading_shift:
        text = re.sub(r"(?m)^(#{1,6}) ", lambda m: "#" * min(6, len(m.group(1)) + heading_shift) + " ", text)
    return _MD.render(text)


def inline_images(page: str, base: Path | Mapping[str, bytes]) -> str:
    """Replace ``src="x.png"`` by a data URI of the PNG, read from ``base`` (a folder, or a mapping
    name -> bytes). An image that cannot be found keeps its (relative) src and its alt text."""

    def data(name: str) -> bytes | None:
        if isinstance(base, Mapping):
            return base.get(name)
        p = Path(base) / name
        return p.read_bytes() if p.is_file() else None

    def swap(m: re.Match) -> str:
        png = data(html.unescape(m.group(1)))
        return m.group(0) if png is None else f'src="data:image/png;base64,{base64.b64encode(png).decode()}"'

    return re.sub(r'src="([^":]+\.png)"', swap, page)
