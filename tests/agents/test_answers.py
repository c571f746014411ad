"""memory_list_recent's budgeted pages over a real embedded store, in process: each page ends on a cursor the
backend issued, so a short page skips nothing; a failing later sub-request stops the page early and says so.

Also the surface as data (without the SDK) against the hosted package's `tools/list`, and `mnemo mcp` without
the `mcp` extra.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo_tui.agents import surface
from mnemo_tui.agents.answers import EARLY_STOP_NOTE, Answers
from mnemo_tui.agents.budget import BUDGET, finish
from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.errors import Unavailable
from mnemo_tui.values.model import Entry, Page, RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.broken_backends import Wrapper

HOSTED = json.loads((Path(__file__).parent / "hosted-tools-list.json").read_text(encoding="utf-8"))
ID = re.compile(r"^   id: ([0-9a-f-]{36})$", re.MULTILINE)
CURSOR = re.compile(r"More older entries exist — pass cursor: (\S+)$")


class Counting(Wrapper):
    """Records every sub-request's limit and the cursor the backend issued for it."""

    def __init__(self, inner: Backend) -> None:
        super().__init__(inner)
        self.asked: list[int] = []
        self.issued: list[str | None] = []

    def recent(self, query: RecentQuery) -> Page:
        page = self.inner.recent(query)
        self.asked.append(query.limit)
        self.issued.append(page.next_cursor)
        return page


class FailsAfter(Wrapper):
    """Answers the first `good` sub-requests of each page, then is unavailable."""

    def __init__(self, inner: Backend, good: int) -> None:
        super().__init__(inner)
        self.good = good
        self.calls = 0

    def recent(self, query: RecentQuery) -> Page:
        self.calls += 1
        if self.calls > self.good:
            raise Unavailable("the endpoint did not answer")
        return self.inner.recent(query)


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    b = LocalBackend.open(tmp_path / "store.db", "local")
    yield b  # type: ignore[misc]
    b.close()


def fill(backend: Backend, sizes: list[int], domain: str = "d") -> list[str]:
    """Entries of the given lengths, oldest first; their ids."""
    return [
        backend.write(WriteRequest(f"{i:03d}" + "x" * (size - 3), domain=domain, client_env="mcp")).atom_id
        for i, size in enumerate(sizes)
    ]


def test_a_short_page_hands_back_the_cursor_issued_after_its_last_entry(backend: LocalBackend) -> None:
    # 30 entries of 3,000 characters: 100 would be ~90,000 characters; the budget takes about 13.
    written = fill(backend, [3_000] * 30)
    counting = Counting(backend)
    first = Answers(counting).memory_list_recent(domain="d", limit=100)
    shown = ID.findall(first)
    assert len(first) <= BUDGET and 0 < len(shown) < 30
    cursor = CURSOR.search(first).group(1)  # type: ignore[union-attr]
    assert cursor in counting.issued  # the backend's own cursor, not one past trimmed entries
    # the cursor continues right after the last entry shown: the next entry is the next older one
    after = backend.recent(RecentQuery(scope="d", limit=1, cursor=cursor)).items
    assert after[0].atom_id == written[::-1][len(shown)]
    assert all(limit <= 10 for limit in counting.asked)  # sub-requests, never one trimmed fetch of 100


def test_pages_of_mixed_lengths_cover_the_feed_exactly(backend: LocalBackend) -> None:
    sizes = [100, 9_000, 250, 9_500, 4_000, 8_000, 30, 7_777, 9_999, 1_000] * 3
    written = fill(backend, sizes)
    answers = Answers(backend)
    ids: list[str] = []
    cursor = None
    for _ in range(50):
        text = answers.memory_list_recent(domain="d", limit=100, cursor=cursor)
        assert len(text) <= BUDGET
        ids += ID.findall(text)
        match = CURSOR.search(text)
        if match is None:
            assert text.endswith("(end of feed — nothing older)")
            break
        cursor = match.group(1)
    assert ids == written[::-1]


def test_the_limit_is_a_ceiling(backend: LocalBackend) -> None:
    written = fill(backend, [50] * 25)
    text = Answers(backend).memory_list_recent(domain="d", limit=7)
    assert ID.findall(text) == written[::-1][:7]
    assert len(ID.findall(Answers(backend).memory_list_recent(domain="d"))) == 20  # the default


def test_an_over_budget_batch_is_asked_again_narrower_and_an_entry_over_the_budget_alone_is_cut_to_fit(
    backend: LocalBackend,
) -> None:
    # ~15,000 characters a page line as shown (each BEL is shown as the four characters \x07): two fit, not three.
    for _ in range(3):
        backend.write(WriteRequest("y" * 5_000 + "\x07" * 2_500, domain="d"))
    counting = Counting(backend)
    text = Answers(counting).memory_list_recent(domain="d", limit=3)
    assert len(ID.findall(text)) == 2 and len(text) <= BUDGET
    # three did not fit: one; then two did not fit: one; then the last one did not fit: left for the next page
    assert counting.asked == [3, 1, 2, 1, 1]
    # 40,000 characters as shown and more: one entry over the budget on its own is a page of one, cut to fit,
    # naming the resource that gives it whole; the walk goes on after it
    backend.write(WriteRequest("older", domain="big"))
    big = backend.write(WriteRequest("\x1b" * 9_990 + "tail", domain="big"))
    alone = Answers(backend).memory_list_recent(domain="big", limit=5)
    assert len(alone) <= BUDGET
    assert ID.findall(alone) == [big.atom_id]
    assert f"more characters: read it whole at memory://item/{big.atom_id}]" in alone
    assert "\x1b" not in alone.replace("\\x1b", "")  # no raw ESC: shown as the escape
    rest = Answers(backend).memory_list_recent(domain="big", cursor=CURSOR.search(alone).group(1))  # type: ignore[union-attr]
    assert rest.startswith("1. [") and "older" in rest


def test_a_long_list_of_concepts_is_shown_up_to_its_share_saying_how_many_more(backend: LocalBackend) -> None:
    concepts = tuple(f"c{j:04d}" * 20 for j in range(250))  # 250 concepts of 100 characters
    atom = backend.write(WriteRequest("many concepts", domain="d", concepts=concepts)).atom_id
    text = Answers(backend).memory_list_recent(domain="d")
    assert ID.findall(text) == [atom] and len(text) < 3_000
    shown = re.search(r"\((c0000.*), … and (\d+) more concepts\)", text)
    assert shown is not None
    assert len(shown.group(1).split(", ")) + int(shown.group(2)) == 250


def test_a_failing_later_sub_request_stops_the_page_early_with_its_cursor_unaffected(backend: LocalBackend) -> None:
    written = fill(backend, [50] * 30)
    text = Answers(FailsAfter(backend, good=1)).memory_list_recent(domain="d", limit=25)
    assert text.endswith(EARLY_STOP_NOTE)
    assert "This page stopped early" in text and "The cursor above is unaffected: continue from it." in text
    assert ID.findall(text) == written[::-1][:10]
    cursor = CURSOR.search(text.removesuffix(EARLY_STOP_NOTE)).group(1)  # type: ignore[union-attr]
    rest = Answers(backend).memory_list_recent(domain="d", limit=100, cursor=cursor)
    assert ID.findall(rest) == written[::-1][10:]


def test_a_failing_first_sub_request_is_an_error_not_an_empty_page(backend: LocalBackend) -> None:
    fill(backend, [50] * 3)
    with pytest.raises(Unavailable):
        Answers(FailsAfter(backend, good=0)).memory_list_recent(domain="d")


def test_the_surface_is_the_hosted_packages_tool_by_tool() -> None:
    hosted = HOSTED["tools"]
    assert [t["name"] for t in surface.TOOLS] == [t["name"] for t in hosted]
    for ours, theirs in zip(surface.TOOLS, hosted, strict=True):
        assert ours["inputSchema"] == theirs["inputSchema"], ours["name"]
        assert ours["annotations"] == theirs["annotations"], ours["name"]


BLOCK_MCP = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["mnemo", "mcp"]
from mnemo_tui.cli import run
run()
"""


def test_without_the_extra_mnemo_mcp_exits_2_naming_it(isolated_home: Path) -> None:
    done = subprocess.run([sys.executable, "-c", BLOCK_MCP], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "mnemo mcp needs the mcp extra, which is not installed here:" in done.stderr and "[mcp]'" in done.stderr


def test_nothing_but_the_protocol_on_stdout(tmp_path: Path, isolated_home: Path) -> None:
    from tests.support.mcp_client import MNEMO

    hello = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "memory_write", "arguments": {"content": "x"}},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_list_recent", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "memory_read", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [MNEMO, "--store", str(tmp_path / "s.db"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # messages go there; only stdout is the protocol's
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    try:
        for message in hello:  # one at a time, each answer read before the next request
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                answers.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        assert proc.stdout.read() == ""  # nothing after the answers either
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=300) == 0
    assert all(a["jsonrpc"] == "2.0" for a in answers)
    by_id = {a["id"]: a["result"] for a in answers if "id" in a}
    assert set(by_id) == {1, 2, 3, 4}
    assert by_id[1]["serverInfo"]["name"] == "mnemo"
    assert by_id[3]["content"][0]["text"].endswith("(end of feed — nothing older)")
    assert by_id[4]["isError"] is True


# -- a budget for every tool ----------------------------------------------------------------------


def test_memory_read_holds_whole_matches_within_the_budget_and_says_how_many_more(backend: LocalBackend) -> None:
    for i in range(50):
        backend.write(WriteRequest(f"needle {i:02d} " + "w" * 9_980, domain="d"))
    text = Answers(backend).memory_read(query="needle", top_k=50, domain="d")
    assert len(text) <= BUDGET
    shown = len(ID.findall(text))
    more = re.search(r"\n\n\((\d+) more matches not shown: an answer holds at most 40,000 characters\. Narrow", text)
    assert more is not None and 0 < shown < 50 and shown + int(more.group(1)) == 50
    assert "a lower top_k, a domain, since/until or a more specific query" in text
    # every match shown is whole: its content, then its id line
    assert text.count("w" * 9_980) == shown
    # the structured content holds the same matches, and counts the rest
    assert [i["atom_id"] for i in text.data["items"]] == ID.findall(text)
    assert text.data["not_shown"] == int(more.group(1)) and text.data["scope"] == "d"


def test_memory_read_of_matches_with_long_concepts_stays_within_the_budget(backend: LocalBackend) -> None:
    concepts = tuple(f"k{j:03d}" * 50 for j in range(256))  # 256 concepts of 200 characters, the most an entry holds
    for _ in range(5):
        backend.write(WriteRequest("haystack entry", domain="d", concepts=concepts))
    text = Answers(backend).memory_read(query="haystack", domain="d")
    assert len(text) <= BUDGET and len(ID.findall(text)) == 5
    assert text.count("… and 247 more concepts") == 5  # nine whole concepts fit CONCEPTS_SHOWN


def test_a_match_over_the_budget_alone_is_cut_to_fit_naming_the_resource(backend: LocalBackend) -> None:
    atom = backend.write(WriteRequest("needle " + "\x07" * 9_990, domain="d")).atom_id
    text = Answers(backend).memory_read(query="needle", domain="d")
    assert len(text) <= BUDGET and ID.findall(text) == [atom]
    assert f"more characters: read it whole at memory://item/{atom}]" in text


def test_memory_stats_lists_domains_within_the_budget_and_says_how_many_more(backend: LocalBackend) -> None:
    for i in range(600):
        backend.write(WriteRequest("x", domain=f"{i:03d}-" + "d" * 95))
    text = Answers(backend).memory_stats()
    assert len(text) <= BUDGET
    domains = re.search(r"^Domains: (.*) … and (\d+) more domains not shown", text, re.MULTILINE)
    assert domains is not None
    assert len(domains.group(1).split(", ")) + int(domains.group(2)) == 600
    assert len(text.data["domains"]) == len(domains.group(1).split(", "))
    assert text.data["domains_not_shown"] == int(domains.group(2)) and text.data["memories"] == 600
    assert text.endswith("memories rated")  # the lines after the domains are all there


def test_room_and_vault_listings_stop_within_the_budget_and_name_the_command_that_lists_all(
    backend: LocalBackend,
) -> None:
    for i in range(300):
        backend.create_room(f"{i:03d} " + "r" * 196)
    rooms = Answers(backend).memory_list_rooms()
    assert len(rooms) <= BUDGET and rooms.startswith("Your shared rooms (300):\n")
    more = re.search(r"\n… and (\d+) more rooms not shown: .*`mnemo rooms list` lists them all\.$", rooms)
    assert more is not None and rooms.count("\n- ") + int(more.group(1)) == 300
    assert len(rooms.data["rooms"]) == rooms.count("\n- ") and rooms.data["not_shown"] == int(more.group(1))
    for i in range(8):
        backend.vault_add(f"secret-{i}", "\x1b" * 9_990 + f" {i}", "c2VhbGVk")
    vault = Answers(backend).vault_list()
    assert len(vault) <= BUDGET
    # the first line alone is over the budget as shown (each ESC is four characters): its head, said so
    assert re.search(r"^- secret-0 — (\\x1b)+ … \([\d,]+ more characters\)$", vault, re.MULTILINE)
    assert vault.endswith("`mnemo vault list` lists them all.") and "7 more secrets not shown" in vault
    # the data is exact where the text is escaped and cut
    assert vault.data == {"secrets": [{"alias": "secret-0", "context": "\x1b" * 9_990 + " 0"}], "not_shown": 7}


def test_any_answer_is_cut_to_the_budget_saying_how_much_was_left_out() -> None:
    assert finish("short") == "short"
    cut = finish("\x1b" * 20_000)
    assert len(cut) <= BUDGET and cut.startswith("\\x1b" * 100)
    assert re.search(r"\n\n\(… [\d,]+ more characters not shown: an answer holds at most 40,000 characters\.\)$", cut)
    assert "\\x1\n" not in cut  # never an escape cut in half


class LongDomains(Wrapper):
    """An endpoint's answer no engine of ours gives: every entry in a domain of 100,000 characters."""

    def recent(self, query: RecentQuery) -> Page:
        page = self.inner.recent(query)
        items = []
        for e in page.items:
            data = json.loads(e.wire) | {"domain": "\u202e" * 100_000}
            items.append(Entry.of(e.atom_id, e.created_at, json.dumps(data)))
        return Page(items=items, next_cursor=page.next_cursor)


def test_an_entry_from_an_endpoint_with_a_huge_domain_keeps_the_page_within_the_budget(backend: LocalBackend) -> None:
    written = fill(backend, [50] * 15)
    text = Answers(LongDomains(backend)).memory_list_recent(domain="d", limit=15)
    assert len(text) <= BUDGET and ID.findall(text) == written[::-1]
    assert text.endswith("(end of feed — nothing older)")  # the page's own end, not a cut


def test_a_megabyte_of_controls_is_cut_without_being_shown_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemo_tui import sanitize

    shown: list[int] = []
    block = sanitize.block

    def measured(text: str) -> str:
        shown.append(len(text))
        return block(text)

    monkeypatch.setattr(sanitize, "block", measured)
    cut = finish("\x1b" * 5_000_000)
    assert len(cut) <= BUDGET and "more characters not shown" in cut
    # only the budget's worth is ever put through the sanitizer (5,000,000 escapes take a minute to show whole)
    assert shown and max(shown) <= BUDGET + 200


def test_a_pages_structured_content_is_the_page_shown_with_its_cursor_exact_where_the_text_is_cut(
    backend: LocalBackend,
) -> None:
    fill(backend, [3_000] * 30)
    answers = Answers(backend)
    page = answers.memory_list_recent(domain="d", limit=100)
    assert [i["atom_id"] for i in page.data["items"]] == ID.findall(page)
    assert page.data["next_cursor"] == CURSOR.search(page).group(1)  # type: ignore[union-attr]
    assert page.data["stopped_early"] is False and page.data["unsearched_rooms"] is None
    hostile = "\x1b" * 9_990 + "tail"
    atom = backend.write(WriteRequest(hostile, domain="big")).atom_id
    alone = answers.memory_list_recent(domain="big")
    assert "tail" not in alone and alone.data["items"][0] == backend.get(atom).data  # whole, as stored
    early = Answers(FailsAfter(backend, good=1)).memory_list_recent(domain="d", limit=25)
    assert early.data["stopped_early"] is True and len(early.data["items"]) == 10
    past = answers.memory_list_recent(domain="d", cursor=early.data["next_cursor"], limit=100)
    while past.data["next_cursor"] is not None:
        past = answers.memory_list_recent(domain="d", cursor=past.data["next_cursor"], limit=100)
    assert past.endswith("(end of feed — nothing older)")
    backend.create_room("ops room")
    empty = answers.memory_list_recent(domain=None, since="2999-01-01T00:00:00Z")
    assert empty.data["items"] == [] and empty.data["next_cursor"] is None
    assert [r["name"] for r in empty.data["unsearched_rooms"]] == ["ops room"]
