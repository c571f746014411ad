"""The commands of the embedded store (`serve`, `keys`, `demo`) refused on an endpoint name the way back to a store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.serve import start_serve

pytestmark = pytest.mark.timeout(120)


def test_login_on_the_servers_own_home_then_serve_names_store_and_profile_use_none(
    run_cli: Any, isolated_home: Path
) -> None:
    key = run_cli("keys", "create", "alice").stdout.strip()
    assert key.startswith("mk_live_")
    server = start_serve(isolated_home)
    try:
        logged = run_cli("login", "--endpoint", server.url, "--insecure-storage", input=key + "\n")
        assert logged.code == 0, logged.stderr
        for args in (("serve", "--port", "0"), ("keys", "list"), ("demo",)):
            refused = run_cli(*args)
            assert refused.code == 2, (args, refused.stderr)
            message = refused.stderr
            assert "works on the embedded store only" in message and "Traceback" not in message
            assert "profile 'default' of" in message and server.url in message
            assert f"mnemo --store PATH {args[0]}" in message and "mnemo profile use --none" in message
            assert len(message.strip().splitlines()) == 1
        # The way out it names works: the same home's own store again.
        assert run_cli("profile", "use", "--none").code == 0
        listed = run_cli("keys", "list", "-f", "json")
        assert listed.code == 0 and '"principal":"alice"' in listed.stdout.replace(" ", "")
    finally:
        server.stop()


def test_an_endpoint_from_the_environment_names_the_variable(run_cli: Any) -> None:
    refused = run_cli("keys", "list", env={"MNEMO_ENDPOINT": "http://127.0.0.1:9/api/v1", "MNEMO_API_KEY": "k"})
    assert refused.code == 2 and "MNEMO_ENDPOINT selects the endpoint" in refused.stderr
    assert "unset MNEMO_ENDPOINT" in refused.stderr and "--store PATH" in refused.stderr
