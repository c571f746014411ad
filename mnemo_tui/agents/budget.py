"""Provides the budget of `mnemo mcp`'s answers: at most BUDGET characters as shown (after the CLI's sanitizer,
whose escapes are longer than what they stand for), whole items kept, the rest counted (docs/mcp.md, "Budgets").
"""

from __future__ import annotations

from collections.abc import Callable

from mnemo_tui import sanitize

# Every answer's budget, in characters as shown (after the sanitizer): the package's feed page (src/limits.ts),
# tighter than its 25K-token cap on the other tools.
BUDGET = 40_000
# An entry's concepts are shown up to this many characters (256 concepts of any length are valid).
CONCEPTS_SHOWN = 2_000
# Room kept for the line that says how many more there are.
MORE_ROOM = 400


def size(text: str) -> int:
    """The length of `text` as an answer shows it (the sanitizer's escapes are longer than what they stand for).

    Text longer than the budget is not shown to be measured: its own length, already past any budget, stands in
    (a shown character is never shorter than its source), so a hostile megabyte costs nothing to refuse.
    """
    return len(text) if len(text) > BUDGET else len(sanitize.block(text))


def fit(text: str, budget: int, tail: Callable[[int], str]) -> str:
    """`text` whole when it shows within `budget` characters, else its longest head that does, followed by
    `tail(number of characters cut)`."""
    if size(text) <= budget:
        return text
    low, high = 0, min(len(text), budget)  # a shown character is never shorter than its source
    while low < high:
        middle = (low + high + 1) // 2
        if size(text[:middle] + tail(len(text) - middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + tail(len(text) - low)


def _cut_answer(cut: int) -> str:
    return f"\n\n(… {cut:,} more characters not shown: an answer holds at most {BUDGET:,} characters.)"


def finish(text: str) -> str:
    """The text an answer carries: within the budget, then through the sanitizer (the CLI's rule for a terminal)."""
    if len(text) <= BUDGET:
        shown = sanitize.block(text)
        if len(shown) <= BUDGET:
            return shown
    return sanitize.block(fit(text, BUDGET, _cut_answer))


def listing(head: str, lines: list[str], more: Callable[[int], str]) -> tuple[str, int]:
    """`head`, then as many whole `lines` as the budget takes, then `more(how many were left out)` if any were;
    and how many lines it shows (the first one, cut, counts)."""
    text, used = head, size(head)
    for index, line in enumerate(lines):
        # Sizes add up across a newline (the sanitizer never joins a character with the next but \r\n, which
        # only shrinks), so a long listing is measured once per line.
        used += 1 + size(line)
        if used + MORE_ROOM <= BUDGET:
            text += "\n" + line
            continue
        if index == 0:  # one line over the budget on its own: its head, said so
            text += "\n" + fit(line, BUDGET - MORE_ROOM - size(text) - 1, cut_line)
            index = 1
        return text + (more(len(lines) - index) if index < len(lines) else ""), index
    return text, len(lines)


def more_line(noun: str, command: str) -> Callable[[int], str]:
    """The last line of a listing the budget cut: how many more, and where to see them all (no argument narrows)."""

    def more(left: int) -> str:
        return (
            f"\n… and {left} more {noun}{'s' if left != 1 else ''} not shown: an answer holds at most {BUDGET:,} "
            f"characters and this tool takes no arguments to narrow it; `{command}` lists them all."
        )

    return more


def cut_line(cut: int) -> str:
    return f" … ({cut:,} more characters)"
