"""The feed resources (`memory://feed`, `memory://feed/{scope}`) over stdio, under the official `mcp` client:
listed, each read as the newest page of `memory_list_recent` as JSON with its cursor; a room only for its member."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.mcp_client import Servers, Session

NOT_FOUND = -32002


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("feed-store") / "store.db"


@pytest.fixture(scope="module")
def alice(servers: Servers, store: Path) -> Session:
    return servers.start("--store", str(store), principal="alice")


@pytest.fixture(scope="module")
def bob(servers: Servers, store: Path) -> Session:
    return servers.start("--store", str(store), principal="bob")


def page(session: Session, uri: str) -> dict[str, object]:
    result = session.read_resource(uri)
    assert [c.uri for c in result.contents] == [uri]
    assert result.contents[0].mime_type == "application/json"
    data: dict[str, object] = json.loads(result.contents[0].text)
    return data


def test_the_feeds_are_listed_a_resource_and_a_template(alice: Session) -> None:
    resources = alice.portal.call(alice.client.list_resources).resources
    assert [r.uri for r in resources] == ["memory://feed"]
    templates = [t.uri_template for t in alice.list_templates().resource_templates]
    assert templates == ["memory://item/{memory_id}", "memory://feed/{scope}"]


def test_a_feed_reads_as_the_newest_page_with_its_cursor_a_domain_one_encoded_segment(alice: Session) -> None:
    ids = [json.loads(alice.read_resource("memory://feed").contents[0].text)]  # before: whatever is there
    written = []
    for n in range(22):
        text = alice.ok("memory_write", content=f"feed entry {n}", domain="team/alpha")
        written.append(text.rsplit(" ", 1)[1])
    alice.ok("memory_write", content="elsewhere", domain="team")
    scoped = page(alice, "memory://feed/team%2Falpha")
    assert scoped["scope"] == "team/alpha"
    assert [i["atom_id"] for i in scoped["items"]] == written[::-1][:20]  # type: ignore[index,union-attr]
    assert scoped["next_cursor"]  # two more behind it: the tool's cursor continues there
    rest = alice.portal.call(
        alice.client.call_tool, "memory_list_recent", {"domain": "team/alpha", "cursor": scoped["next_cursor"]}
    )
    assert [i["atom_id"] for i in rest.structured_content["items"]] == written[1::-1]
    own = page(alice, "memory://feed")
    assert own["scope"] is None and own["items"][0]["content"] == "elsewhere"  # type: ignore[index]
    assert ids  # the own feed read before any write answered too


@pytest.mark.parametrize(
    "uri", ["memory://feed/", "memory://feed/team/alpha", "memory://feed/%ff", "memory://feeds", "memory://feed/ "]
)
def test_a_uri_naming_no_feed_is_a_missing_resource(alice: Session, uri: str) -> None:
    with pytest.raises(MCPError) as refused:
        alice.read_resource(uri)
    assert refused.value.code == NOT_FOUND


def test_a_rooms_feed_reads_for_its_member_only(alice: Session, bob: Session) -> None:
    room = alice.portal.call(alice.client.call_tool, "memory_create_room", {"name": "feeds"}).structured_content
    room_id = room["room_id"]
    alice.ok("memory_write", content="for the room", domain=f"xroom:{room_id}")
    read = page(alice, f"memory://feed/xroom%3A{room_id}")
    assert [i["content"] for i in read["items"]] == ["for the room"]  # type: ignore[union-attr,index]
    assert page(alice, f"memory://feed/xroom:{room_id}")["items"] == read["items"]  # ':' needs no encoding
    with pytest.raises(MCPError) as stranger:
        bob.read_resource(f"memory://feed/xroom%3A{room_id}")
    assert stranger.value.code == NOT_FOUND
