"""`mnemo --endpoint URL mcp` against a real `mnemo serve`: the same tools over the remote backend, and the
API key in no answer."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.mcp_client import MNEMO, WAIT, HoldingProxy, Servers, Session
from tests.support.serve import start_serve

ID = re.compile(r"^   id: ([0-9a-f-]{36})$", re.MULTILINE)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    home = tmp_path_factory.mktemp("serve-home")
    key = subprocess.run(
        [MNEMO, "keys", "create", "alice"], env={"MNEMO_HOME": str(home)}, capture_output=True, text=True, check=True
    ).stdout.strip()
    served = start_serve(home)
    yield served.url, key
    served.stop(signal.SIGTERM)


@pytest.fixture(scope="module")
def remote(servers: Servers, endpoint: tuple[str, str]) -> Session:
    url, key = endpoint
    return servers.start("--endpoint", url, env={"MNEMO_API_KEY": key})


def test_the_tools_over_an_endpoint_and_no_key_in_any_answer(remote: Session, endpoint: tuple[str, str]) -> None:
    _, key = endpoint
    answers = [remote.ok("memory_list_recent")]
    assert answers[0].startswith("No memories in your own domains yet.")
    stored = [remote.ok("memory_write", content=f"remote entry {i}", domain="far") for i in range(12)]
    ids = [re.fullmatch(r"Stored \(importance: unknown\)\. ID: (\S+)", s).group(1) for s in stored]  # type: ignore[union-attr]
    walked: list[str] = []
    cursor = None
    for _ in range(10):
        page = remote.ok("memory_list_recent", domain="far", limit=5, **({"cursor": cursor} if cursor else {}))
        answers.append(page)
        walked += ID.findall(page)
        match = re.search(r"More older entries exist — pass cursor: (\S+)$", page)
        if match is None:
            break
        cursor = match.group(1)
    assert walked == ids[::-1]
    answers.append(remote.ok("memory_read", query="remote entry", domain="far"))
    assert ID.findall(answers[-1])
    answers.append(remote.ok("memory_feedback", atom_ids=ids[:2], outcome=0.5))
    assert answers[-1] == "Rating sent: +0.5 (helpful). The service reports 2 memories updated."
    answers += [remote.ok("memory_stats"), remote.ok("memory_list_rooms"), remote.ok("vault_list")]
    for text in answers:
        assert key not in text and key.removeprefix("mk_live_") not in text


def test_a_refused_key_is_an_error_answer_not_a_crash(servers: Servers, endpoint: tuple[str, str]) -> None:
    url, key = endpoint
    wrong = servers.start("--endpoint", url, env={"MNEMO_API_KEY": "mk_live_" + "0" * 32})
    text = wrong.refused("memory_list_recent")
    assert text.startswith("UNAUTHORIZED") and key not in text


def test_without_a_key_the_handshake_answers_and_each_call_says_how_to_give_one(
    servers: Servers, endpoint: tuple[str, str]
) -> None:
    url, _ = endpoint
    keyless = servers.start("--endpoint", url)  # no MNEMO_API_KEY, nothing in the keyring or the key file
    assert [t.name for t in keyless.list_tools().tools][:3] == ["memory_write", "memory_read", "memory_list_recent"]
    for tool, arguments in (
        ("memory_list_recent", {}),
        ("memory_write", {"content": "not stored"}),
        ("memory_stats", {}),
    ):
        text = keyless.refused(tool, **arguments)
        assert text.startswith("UNAUTHORIZED: no API key for ") and url in text
        assert "MNEMO_API_KEY" in text and "mnemo login" in text
    # a schema violation is still said first: the call is wrong whatever the key
    assert keyless.refused("memory_write", content="").startswith("Invalid arguments for memory_write")
    from mcp.shared.exceptions import MCPError

    with pytest.raises(MCPError) as refused:
        keyless.read_resource("memory://item/00000000-0000-4000-8000-000000000000")
    assert "MNEMO_API_KEY" in refused.value.error.message


def test_under_the_official_client_other_requests_answer_while_a_call_waits_and_a_cancelled_call_is_dropped(
    servers: Servers, endpoint: tuple[str, str]
) -> None:
    from urllib.parse import urlsplit

    url, key = endpoint
    port = urlsplit(url).port
    proxy = HoldingProxy(("127.0.0.1", port or 80))
    try:
        session = servers.start(
            "--endpoint",
            url.replace(f":{port}", f":{proxy.port}", 1),
            env={"MNEMO_API_KEY": key, "MNEMO_DEADLINE": "600"},
        )
        proxy.passing.clear()
        waiting = session.portal.start_task_soon(session.client.call_tool, "memory_list_recent", {"domain": "held"})
        proxy.wait_for_request(b"/memory/recent")
        # answered while the call waits on the backend (the client's protocol has no ping: tools/list instead)
        listed = session.portal.start_task_soon(session.client.list_tools).result(timeout=WAIT)  # bounded
        assert len(listed.tools) == 10
        assert not waiting.done()
        waiting.cancel()  # the client sends notifications/cancelled
        proxy.passing.set()
        # the next call is answered: the cancelled one's late result, had one been sent, would not be taken for it
        assert session.ok("memory_list_recent", domain="held") == "No memories in the domain held yet."
        with pytest.raises(BaseException):  # noqa: B017 - concurrent.futures.CancelledError
            waiting.result(timeout=WAIT)
    finally:
        proxy.close()
