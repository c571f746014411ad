"""docs/mcp.md's search example, as an agent runs it through `mnemo mcp`: `memory_read` with `deploy` finds the
entry that says "deploys" and carries the concept `deploy`, and a word of its concepts alone finds it too."""

from __future__ import annotations

import pytest

from tests.support.mcp_client import Servers, Session


@pytest.fixture(scope="module")
def agent(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> Session:
    store = tmp_path_factory.mktemp("mcp-search") / "store.db"
    return servers.start("--store", str(store), principal="alice")


def test_the_deploy_example_of_docs_mcp_finds_its_entry(agent: Session) -> None:
    stored = agent.ok(
        "memory_write", content="The API deploys on Cloudflare Workers", concepts=["deploy"], domain="ops"
    )
    atom = stored.rsplit("ID: ", 1)[1].strip()
    answer = agent.ok("memory_read", query="deploy", domain="ops")
    assert answer.startswith("1. The API deploys on Cloudflare Workers (deploy) @ops [by mcp]"), answer
    assert f"id: {atom}" in answer
    assert agent.ok("memory_read", query="zebra", domain="ops") == 'Nothing in the domain ops matches "zebra".'


def test_a_concept_alone_finds_its_entry(agent: Session) -> None:
    agent.ok("memory_write", content="Staging is frozen on Fridays", concepts=["release-freeze"], domain="ops")
    answer = agent.ok("memory_read", query="freezes", domain="ops")
    assert "Staging is frozen on Fridays" in answer, answer
