"""Provides the answers of `mnemo mcp`'s tools over a `Backend`, as the hosted package words them (no SDK here).

Each tool is a method taking the call's arguments (already checked against the tool's input schema) and
returning the answer (`Reply`): its text, and the same answer as data for the tool's `outputSchema`
(`shapes.py`); a `MnemoError` it raises becomes an error answer in `sdk.py`. Every answer's text is shown
through the CLI's one sanitizer (an agent host often prints it in a terminal) and holds at most BUDGET
characters as shown (`budget.py`, docs/mcp.md "Budgets"); its data is machine-exact (the stored values).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec

from mnemo_tui import timefmt
from mnemo_tui.agents.budget import BUDGET, CONCEPTS_SHOWN, MORE_ROOM, cut_line, finish, fit, listing, more_line, size
from mnemo_tui.backends import Backend
from mnemo_tui.catchup import empty_reports
from mnemo_tui.errors import MnemoError, NotFound, ValidationError
from mnemo_tui.limits import MAX_DOMAIN, room_of
from mnemo_tui.values.model import Entry, RecentQuery, RoomRef
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest

# memory_list_recent's page: sub-requests of at most CHUNK entries, accepted while the page's text stays within
# the budget, each ending on the cursor the backend issued for it (the package's limits, src/limits.ts).
PAGE_CHUNK = 10
PAGE_MAX_REQUESTS = 16
EARLY_STOP_NOTE = (
    "\n\n(This page stopped early — the request for the next batch of older entries did not come back usable, "
    "so this page holds fewer entries than asked for. The cursor above is unaffected: continue from it.)"
)
END_OF_FEED = "\n\n(end of feed — nothing older)"
MORE = "\n\nMore older entries exist — pass cursor: "
CLIENT_ENV = "mcp"
_PLAIN = re.compile(r"[\w.:@/+-]{1,200}")
_CURSOR = re.compile(r"[A-Za-z0-9_=-]{1,512}")
P = ParamSpec("P")
Data = dict[str, Any]


class Reply(str):
    """A tool's answer: its text (bounded and sanitized), and `data`, the same answer for its `outputSchema`
    (the stored values exact, never sanitized: a machine reads them)."""

    data: Data

    def __new__(cls, text: str, data: Data) -> Reply:
        reply = super().__new__(cls, text)
        reply.data = data
        return reply


def _answer(method: Callable[Concatenate[Answers, P], tuple[str, Data]]) -> Callable[Concatenate[Answers, P], Reply]:
    """A tool method whose text is `finish`ed: the one place every answer is bounded and sanitized."""

    def answer(self: Answers, /, *args: P.args, **kwargs: P.kwargs) -> Reply:
        text, data = method(self, *args, **kwargs)
        return Reply(finish(text), data)

    answer.__doc__ = method.__doc__
    return answer


def _literal(name: str) -> str:
    """A domain or room name on one line: as it is when plain, else quoted exactly (JSON escapes)."""
    return name if _PLAIN.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _inline(value: object, cap: int = 64) -> str:
    """An author's name reduced to safe characters (the package's `safeInline`)."""
    if not isinstance(value, str):
        return ""
    return " ".join(re.sub(r"[^\w .@:+/-]", " ", value).split())[:cap]


def _date(created_at: int) -> str:
    iso = timefmt.to_iso(created_at)
    return f"{iso[:10]} {iso[11:16]}Z"


def _tags(entry: Entry) -> tuple[str, str]:
    """The concepts and domain/author tags of one entry, as the package's renderer spells them."""
    data = entry.data
    concepts = [str(c) for c in data.get("concepts") or []]
    head = f" ({_concepts(concepts)})" if concepts else ""
    domain = str(data.get("domain") or "")
    if len(domain) > MAX_DOMAIN:  # only an endpoint's answer can hold one this long
        domain = fit(domain, MAX_DOMAIN, cut_line)
    if domain and domain != "general":
        head += f" @{_literal(domain)}"
    prov = data.get("provenance") or {}
    who = _inline(prov.get("agent_name") or prov.get("agent") or prov.get("client_env") or "")
    if who:
        head += f" [by {who} · external]" if prov.get("is_external") else f" [by {who}]"
    return head, f"\n   id: {entry.atom_id}"


def _concepts(concepts: list[str]) -> str:
    """The concepts joined, as many whole ones as CONCEPTS_SHOWN characters take (at least one, cut if need be)."""
    joined = ", ".join(concepts)
    if len(joined) <= CONCEPTS_SHOWN:
        return joined
    taken: list[str] = []
    used = 0
    for concept in concepts:
        if used + len(concept) + 2 > CONCEPTS_SHOWN:
            break
        taken.append(concept)
        used += len(concept) + 2
    if not taken:
        taken = [fit(concepts[0], CONCEPTS_SHOWN, cut_line)]
    left = len(concepts) - len(taken)
    return ", ".join(taken) + (f", … and {left} more concept{'s' if left != 1 else ''}" if left else "")


def recent_item(entry: Entry, index: int, content: str | None = None) -> str:
    tags, id_line = _tags(entry)
    return f"{index + 1}. [{_date(entry.created_at)}] {entry.content if content is None else content}{tags}{id_line}"


def read_item(entry: Entry, index: int, content: str | None = None) -> str:
    tags, id_line = _tags(entry)
    return f"{index + 1}. {entry.content if content is None else content}{tags} · {_date(entry.created_at)}{id_line}"


def clipped(entry: Entry, room: int, render: Callable[[str], str]) -> str:
    """The content of an entry whose line does not fit `room` on its own, cut so that it does, saying where to
    read it whole (the resource gives the stored text exactly)."""

    def tail(cut: int) -> str:
        return f" … [{cut:,} more characters: read it whole at memory://item/{entry.atom_id}]"

    frame = size(render(""))
    return fit(entry.content, max(0, room - frame), tail)


def recent_page(items: list[Entry], next_cursor: str | None, first: str | None = None) -> str:
    """One page of the feed: its entries (`first`: the first one's content as shown, when cut), then where the
    walk goes on (or that it ended)."""
    body = "\n\n".join(recent_item(e, i, first if i == 0 else None) for i, e in enumerate(items))
    if next_cursor is None:
        return body + END_OF_FEED
    if _CURSOR.fullmatch(next_cursor):
        return body + MORE + next_cursor
    return body + (
        "\n\nMore entries exist but the continuation token could not be displayed — narrow the window with "
        "since/until instead"
    )


def _hits(entries: list[Entry]) -> tuple[str, int]:
    """memory_read's matches, as many whole as the budget takes, then how many more there are and how to narrow;
    and how many it shows."""
    text, used = "", -2
    for index, entry in enumerate(entries):
        item = read_item(entry, index)
        used += 2 + size(item)  # sizes add up across the separators (as in `budget.listing`)
        if used + MORE_ROOM <= BUDGET:
            text = item if index == 0 else f"{text}\n\n{item}"
            continue
        if index == 0:  # one match over the budget on its own: its content cut to fit, said so
            first = clipped(entry, BUDGET - MORE_ROOM, functools.partial(read_item, entry, 0))
            text, index = read_item(entry, 0, first), 1
        left = len(entries) - index
        if left:
            text += (
                f"\n\n({left} more match{'es' if left != 1 else ''} not shown: an answer holds at most {BUDGET:,} "
                "characters. Narrow the call with a lower top_k, a domain, since/until or a more specific query; "
                "memory_list_recent pages through a whole scope.)"
            )
        return text, index
    return text, len(entries)


def scope_label(domain: str | None) -> str:
    if domain is None:
        return "your own domains"
    return "that room" if room_of(domain) is not None else f"the domain {_literal(domain)}"


def _time(value: str | None, field: str) -> int | None:
    """An ISO-8601 instant (naive = UTC) as microseconds; None when not given."""
    return None if value is None else timefmt.parse_iso(value, field=field, utc=True)


class Answers:
    """The ten tools, the prompts' companion resource, over one backend as its principal.

    Args:
        backend: whatever the CLI selected (embedded store, database or endpoint).
        agent_name: written into every write's provenance, beside `client_env` `mcp` (None: none).
    """

    def __init__(self, backend: Backend, agent_name: str | None = None) -> None:
        self.backend = backend
        self.agent_name = agent_name

    def tools(self) -> dict[str, Callable[..., Reply]]:
        return {
            "memory_write": self.memory_write,
            "memory_read": self.memory_read,
            "memory_list_recent": self.memory_list_recent,
            "memory_feedback": self.memory_feedback,
            "memory_stats": self.memory_stats,
            "memory_create_room": self.memory_create_room,
            "memory_invite_to_room": self.memory_invite_to_room,
            "memory_join_room": self.memory_join_room,
            "memory_list_rooms": self.memory_list_rooms,
            "vault_list": self.vault_list,
        }

    # -- memory -------------------------------------------------------------------------------

    @_answer
    def memory_write(
        self, content: str, concepts: list[str] | None = None, domain: str | None = None
    ) -> tuple[str, Data]:
        request = WriteRequest(
            content,
            domain=domain if domain is not None else "general",
            concepts=tuple(concepts or ()),
            agent_name=self.agent_name,
            client_env=CLIENT_ENV,
        )
        result = self.backend.write(request)
        # mnemo keeps every write (no importance gate): the package's "unknown" stands for the missing score.
        return f"Stored (importance: unknown). ID: {result.atom_id}", {"stored": True, "memory_id": result.atom_id}

    @_answer
    def memory_read(
        self,
        query: str,
        top_k: int | None = None,
        domain: str | None = None,
        order_by: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_author: str | None = None,
    ) -> tuple[str, Data]:
        if not query.strip():
            raise ValidationError("query must not be blank: memory_read searches; for a feed use memory_list_recent")
        search = SearchQuery(
            query,
            scope=domain,
            order_by="recency" if order_by == "recency" else "relevance",
            since=_time(since, "since"),
            until=_time(until, "until"),
            exclude_author=exclude_author,
            top_k=top_k if top_k is not None else 5,
        )
        hits = self.backend.search(search)
        if hits:
            text, shown = _hits([h.entry for h in hits])
            items = [{**h.entry.data, "relevance": h.relevance} for h in hits[:shown]]
            return text, {"scope": domain, "items": items, "not_shown": len(hits) - shown, "unsearched_rooms": None}
        where = scope_label(domain)
        if since or until or exclude_author:
            head = f"Nothing in {where} matches within the given time/author filters."
        else:
            head = f"Nothing in {where} matches {json.dumps(query, ensure_ascii=False)}."
        note, rooms = self._scope_note(domain)
        return head + note, {"scope": domain, "items": [], "not_shown": 0, "unsearched_rooms": rooms}

    @_answer
    def memory_list_recent(
        self,
        domain: str | None = None,
        since: str | None = None,
        until: str | None = None,
        exclude_author: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> tuple[str, Data]:
        """A page of at most `limit` entries within BUDGET characters as shown, from sub-requests of at most
        PAGE_CHUNK entries; the page ends where a sub-request ended, on the cursor the backend issued there.

        A page of long entries is shorter than `limit` and its cursor skips nothing: an over-budget batch is
        never trimmed but dropped whole and asked again narrower (down to one entry), so the cursor handed back
        is always the one issued after the last entry shown. (The package stops at the first over-budget batch
        once the page holds an entry; narrowing there too fills a page of long entries closer to the budget.)
        """
        ceiling = limit if limit is not None else 20
        base = RecentQuery(
            scope=domain,
            since=_time(since, "since"),
            until=_time(until, "until"),
            exclude_author=exclude_author,
            limit=min(PAGE_CHUNK, ceiling),
            cursor=cursor,
        ).validated()
        room = BUDGET - len(EARLY_STOP_NOTE)
        accepted: list[Entry] = []
        accepted_cursor: str | None = None
        used = -2  # the accepted entries' size as shown, with their separators (sizes add up across them)
        position = cursor
        ask = min(PAGE_CHUNK, ceiling)
        stopped_early = False
        for _ in range(PAGE_MAX_REQUESTS):
            try:
                page = self.backend.recent(base.replace(limit=ask, cursor=position))
            except MnemoError:
                if not accepted:
                    raise
                stopped_early = True  # what is in hand stands; its cursor is the backend's, unaffected
                break
            batch, issued = page.items, page.next_cursor
            grown = used + sum(2 + size(recent_item(e, len(accepted) + i)) for i, e in enumerate(batch))
            if max(grown, 0) + size(recent_page([], issued)) <= room:
                used = grown
                accepted += batch
                accepted_cursor = issued
                position = issued
                if not issued or not batch or len(accepted) >= ceiling:
                    break
                ask = min(PAGE_CHUNK, ceiling - len(accepted))
                continue
            narrower = max(1, min(ask // 2, len(batch) - 1))
            if len(batch) > 1 and narrower < ask:
                ask = narrower  # the batch is dropped whole and asked again smaller, never trimmed
                continue
            if not accepted:
                # One entry over the budget on its own is a page of one, its content cut to fit (said so).
                accepted += batch
                accepted_cursor = issued
            break
        if not accepted:
            head, rooms = self._empty_recent(domain, since, until, exclude_author, cursor)
            data: Data = {"scope": domain, "items": [], "next_cursor": None, "stopped_early": False}
            return head, {**data, "unsearched_rooms": rooms}
        page_text = recent_page(accepted, accepted_cursor)
        if size(page_text) > room:
            entry = accepted[0]
            first = clipped(entry, room, lambda content: recent_page([entry], accepted_cursor, content))
            page_text = recent_page([entry], accepted_cursor, first)
        data = {
            "scope": domain,
            "items": [e.data for e in accepted],
            "next_cursor": accepted_cursor,
            "stopped_early": stopped_early,
            "unsearched_rooms": None,
        }
        return page_text + (EARLY_STOP_NOTE if stopped_early else ""), data

    def _empty_recent(
        self, domain: str | None, since: str | None, until: str | None, exclude_author: str | None, cursor: str | None
    ) -> tuple[str, list[Data] | None]:
        where = scope_label(domain)
        if cursor:
            head = f"Nothing further in {where} past this cursor: the walk has reached the end of the feed."
        elif since and not until and not exclude_author:
            head = f"Nothing new in {where} since your watermark."
        elif since or until or exclude_author:
            head = f"Nothing in {where} matches within the given time/author filters."
        else:
            head = f"No memories in {where} yet."
        note, rooms = self._scope_note(domain)
        return head + note, rooms

    def _scope_note(self, domain: str | None) -> tuple[str, list[Data] | None]:
        """Under an unscoped empty answer: the rooms it did not search, and how to read them (also as data;
        None when scoped, where no room went unsearched)."""
        if domain is None:
            rooms = empty_reports.unsearched_rooms(self.backend)
            data = [{"name": r.name, "address": r.address} for r in rooms]
            return self._rooms_note(rooms), data
        return "", None

    @staticmethod
    def _rooms_note(rooms: tuple[RoomRef, ...]) -> str:
        prefix = (
            "\n\nScope: your own domains only. Shared rooms are separate stores and are NOT included in an "
            "unscoped read"
        )
        if not rooms:
            return prefix + "; you belong to no shared rooms, so no room went unsearched."
        lines = [f'  - {json.dumps(r.name, ensure_ascii=False)} — domain="{r.address}"' for r in rooms]
        plural = "" if len(rooms) == 1 else "s"
        return (
            f"{prefix} — {len(rooms)} room{plural} went unsearched:\n"
            + "\n".join(lines)
            + "\nRe-run with domain set to one of these to read it."
        )

    @_answer
    def memory_feedback(self, atom_ids: list[str], outcome: float) -> tuple[str, Data]:
        count = self.backend.feedback(atom_ids, float(outcome))
        return self._rated(atom_ids, outcome, count), {"outcome": outcome, "updated": count}

    @staticmethod
    def _rated(atom_ids: list[str], outcome: float, count: int | None) -> str:
        sent = (
            f"Rating sent: +{outcome:g} (helpful)."
            if outcome > 0
            else f"Rating sent: {outcome:g} (unhelpful)."
            if outcome < 0
            else "Rating sent: 0 (neutral)."
        )
        if count is None:
            return (
                f"{sent} The backend accepted the call but did not report how many memories it updated, so "
                "whether any changed is unknown from here. Do not re-send the same rating on the strength of it."
            )
        if count == 0:
            return (
                "No feedback was recorded — none of those ids matched a memory in your own domains. Possible "
                "causes: the ids came from a shared room (this tool takes no domain argument and cannot reach room "
                "atoms, so rating them is a no-op); the memory was deleted; or the id came from somewhere other "
                "than a memory_read result."
            )
        noun = f"{count} memor{'y' if count == 1 else 'ies'}"
        short = len(atom_ids) - count
        missed = f" {short} of the ids you sent matched nothing in your own domains." if short > 0 else ""
        return f"{sent} The service reports {noun} updated.{missed}"

    @_answer
    def memory_stats(self) -> tuple[str, Data]:
        s = self.backend.stats()
        rest = "\n".join(
            [
                f"Avg quality: valence {s.avg_valence:.2f} (how well recalls turned out, -1..1)",
                f"Feedback: {s.feedback} memories rated",
            ]
        )
        head = f"Memories: {s.total_atoms}\nAssociations: {s.concept_edges} concept edges\nDomains: "
        names = [_literal(d) for d in s.domains]
        shown = "(none)" if not names else ", ".join(names)
        count = len(names)
        if size(head + shown + rest) + 1 > BUDGET:  # many domains: as many whole names as fit, then how many more
            room = BUDGET - MORE_ROOM - size(head + rest) - 1
            taken: list[str] = []
            used = -2
            for name in names:
                used += 2 + size(name)  # sizes add up across ", " (as in `listing`)
                if used > room:
                    break
                taken.append(name)
            left, count = len(names) - len(taken), len(taken)
            shown = ", ".join(taken) + (
                f" … and {left} more domain{'s' if left != 1 else ''} not shown (an answer holds at most "
                f"{BUDGET:,} characters; memory_stats takes no arguments)"
            )
        data = {
            "memories": s.total_atoms,
            "concept_edges": s.concept_edges,
            "domains": s.domains[:count],
            "domains_not_shown": len(s.domains) - count,
            "avg_valence": s.avg_valence,
            "feedback": s.feedback,
        }
        return f"{head}{shown}\n{rest}", data

    # -- rooms ----------------------------------------------------------------------------------

    @_answer
    def memory_create_room(self, name: str, description: str | None = None) -> tuple[str, Data]:
        room = self.backend.create_room(name, description)
        data = {"room_id": room.room_id, "name": room.name, "address": room.address}
        text = (
            f"Created shared room {json.dumps(room.name, ensure_ascii=False)}. Address: {room.address}\n"
            f'Use it now: pass domain="{room.address}" on memory_write / memory_read.\n'
            f'To add someone: call memory_invite_to_room with room_id="{room.room_id}".'
        )
        return text, data

    @_answer
    def memory_invite_to_room(
        self, room_id: str, scope: str | None = None, expires_in_days: int | None = None
    ) -> tuple[str, Data]:
        invite = self.backend.invite(
            room_id, scope=scope or "read_write", expires_days=expires_in_days if expires_in_days is not None else 7
        )
        data = invite.wire()
        return f"Invite ready. Forward this message to the person you're inviting:\n\n{data['share_message']}", data

    @_answer
    def memory_join_room(self, code: str) -> tuple[str, Data]:
        joined = self.backend.join(code)
        name = json.dumps(joined.name, ensure_ascii=False)
        head = f"You're already a member of {name}." if joined.already_member else f"Joined {name} ({joined.scope})."
        if joined.scope == "read_write":
            usage = f'Use it: pass domain="{joined.address}" on memory_write / memory_read to read and write the shared room.'
        else:
            usage = (
                f'Use it: pass domain="{joined.address}" on memory_read to read it; this membership is read-only, '
                "so memory_write to that address will be refused."
            )
        data = {
            "room_id": joined.room_id,
            "name": joined.name,
            "address": joined.address,
            "scope": joined.scope,
            "already_member": joined.already_member,
        }
        return f"{head}\n{usage}", data

    @_answer
    def memory_list_rooms(self) -> tuple[str, Data]:
        rooms = self.backend.rooms()
        if not rooms:
            return (
                "You have no shared rooms yet. Create one with memory_create_room, or join one with "
                "memory_join_room and an invite code."
            ), {"rooms": [], "not_shown": 0}
        lines: list[str] = []
        for r in rooms:
            if r.archived:
                tail = " [archived] — every read is refused while it is archived"
            elif r.scope == "read_write":
                tail = f' — use domain="{r.address}" to read and write it'
            else:
                tail = (
                    f' — use domain="{r.address}" on memory_read only; this membership is read-only, so '
                    "memory_write to it will be refused"
                )
            lines.append(f"- {json.dumps(r.name, ensure_ascii=False)} ({r.role}, {r.scope}){tail}")
        text, shown = listing(f"Your shared rooms ({len(rooms)}):", lines, more_line("room", "mnemo rooms list"))
        return text, {"rooms": [r.wire() for r in rooms[:shown]], "not_shown": len(rooms) - shown}

    # -- vault ----------------------------------------------------------------------------------

    @_answer
    def vault_list(self) -> tuple[str, Data]:
        secrets = self.backend.vault_list()
        if not secrets:
            return "No secrets are stored in your Vault yet.", {"secrets": [], "not_shown": 0}
        lines = [f"- {s.alias} — {s.context}" if s.context else f"- {s.alias}" for s in secrets]
        head = f"Your Vault secrets ({len(secrets)}) — alias and purpose only, never the value:"
        text, shown = listing(head, lines, more_line("secret", "mnemo vault list"))
        listed = [{"alias": s.alias, "context": s.context} for s in secrets[:shown]]
        return text, {"secrets": listed, "not_shown": len(secrets) - shown}

    # -- the resource ---------------------------------------------------------------------------

    def memory_item(self, memory_id: str) -> str:
        """`memory://item/{memory_id}`: one entry's id, content and domain, as JSON (NotFound when unreadable)."""
        try:
            entry = self.backend.get(memory_id)
        except ValidationError:
            raise NotFound(f"no memory with id {memory_id!r}") from None
        return json.dumps(
            {"memory_id": entry.atom_id, "content": entry.content, "domain": entry.domain}, ensure_ascii=False
        )

    def feed(self, scope: str | None) -> str:
        """`memory://feed[/{scope}]`: the scope's newest page as `memory_list_recent` answers it (its budget,
        its cursor), as JSON: its structured answer (Forbidden for a room the principal is not a member of)."""
        return json.dumps(self.memory_list_recent(domain=scope, limit=FEED_LIMIT).data, ensure_ascii=False)


FEED_LIMIT = 20  # entries a feed resource's page holds at most (memory_list_recent's default page)


def arguments(schema: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments a tool method takes: the schema's properties that were given."""
    return {k: v for k, v in given.items() if k in schema.get("properties", {})}
