"""Provides the hints `recent` and `catchup` say on stderr: the command that continues, the room or author meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui import sanitize, timefmt
from mnemo_tui.cli import output
from mnemo_tui.limits import DEFAULT_LIMIT, MAX_LIMIT
from mnemo_tui.values.model import RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend
    from mnemo_tui.cli.options import RootOptions
    from mnemo_tui.values.model import EmptyReport


def room_name_hint(backend: Backend, report: EmptyReport) -> None:
    """Under an empty own-domain read: the rooms of that name, or the nearest domain or room (stderr)."""
    from mnemo_tui.catchup import empty_reports

    for line in empty_reports.scope_hints(backend, report):
        output.hint(line)


def author_hint(backend: Backend, query: RecentQuery) -> None:
    """Under an empty `--author` read: the AUTHOR forms it was probably meant as (stderr).

    `--author build-bot` matches a principal or a whole `principal/agent`, so it finds nothing where
    the AUTHOR column shows `local/build-bot`. The newest page of the same read without the author
    is looked at: an author whose agent or principal is the value (any case), or which is the value
    in another case, is suggested with the flag that matches it, as a near scope is.
    """
    if not query.author:
        return
    wanted = query.author.casefold()
    page = backend.recent(query.replace(author=None, cursor=None, limit=MAX_LIMIT))
    forms = sorted(
        {e.author for e in page.items if wanted in (e.author.casefold(), *e.author.casefold().split("/", 1))}
    )
    for form in forms[:3]:
        output.hint(f"Did you mean author {sanitize.quoted(form)}? --author {sanitize.line(output.shell_quote(form))}")


def root_words(root: RootOptions | None) -> list[str]:
    """The root options given on the command line that chose the backend (and `--utc`), as a shell's words.

    A command a person is told to run repeats them: a cursor is bound to its store or endpoint. The
    environment and config.toml need no repeating (the same shell reads them again). No secret is
    repeated: an API key is never an option, and a database URL's password is left out (libpq then
    reads `PGPASSWORD` or `~/.pgpass`).
    """
    if root is None:
        return []
    words: list[str] = []
    for flag, value in (("--profile", root.profile), ("--store", root.store), ("--endpoint", root.endpoint)):
        if value is not None:
            words.append(f"{flag} {output.shell_quote(value)}")
    if root.database is not None:
        from mnemo_tui.dburl import repeatable

        words.append(f"--database {output.shell_quote(repeatable(root.database))}")
    if root.utc:
        words.append("--utc")
    return words


def continue_hint(query: RecentQuery, next_cursor: str, root: list[str] | None = None) -> str:
    """The command that reads the next page: the root options `root` (`root_words`), the same scope and filters
    (times made absolute) and the cursor."""
    args = ["mnemo", *(root or []), "recent"]
    if query.scope:
        args.append(f"--scope {output.shell_quote(query.scope)}")
    if query.since is not None:
        args.append(f"--since {timefmt.to_iso(query.since)}")
    if query.until is not None:
        args.append(f"--until {timefmt.to_iso(query.until)}")
    if query.author:
        args.append(f"--author {output.shell_quote(query.author)}")
    if query.exclude_author:
        args.append(f"--exclude-author {output.shell_quote(query.exclude_author)}")
    if query.include_history:
        args.append("--include-history")
    if query.limit != DEFAULT_LIMIT:
        args.append(f"--limit {query.limit}")
    args.append(f"--cursor {output.shell_quote(next_cursor)}")
    # The cursor comes from the endpoint and the scope may name a stored domain: one safe line.
    command = sanitize.line(" ".join(args))
    return "More entries remain. Continue with:\n  " + command + "\n(or add --all to read to the end)"
