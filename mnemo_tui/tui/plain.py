"""Provides stored text as Textual shows it: plain `Content`, never markup, never an action.

Every text from a store or an endpoint (entry fields, room and domain names, reports, error
messages) reaches a widget through here, made safe for the terminal by `mnemo_tui.sanitize` first:
`[`, `]`, `@click` and `\\` show as written; controls and bidi as visible escapes and marks.
"""

from __future__ import annotations

from textual.content import Content
from textual.markup import escape

from mnemo_tui import sanitize


def plain(value: str) -> Content:
    """One line of stored text as plain content (a newline shows as `⏎`)."""
    return Content(sanitize.line(value))


def plain_block(value: str) -> Content:
    """Stored text over several lines as plain content (newlines and tabs kept)."""
    return Content(sanitize.block(value))


def palette(value: str) -> str:
    """One line of stored text for the command palette, which reads its strings as markup: escaped."""
    return escape(sanitize.line(value))
