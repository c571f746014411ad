"""Tests of API key storage: `MNEMO_API_KEY`, the OS keyring (a real in-memory backend), the announced 0600 file."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail, null

from mnemo_tui.errors import AuthError, LocalStateError
from mnemo_tui.state import credentials
from mnemo_tui.state.config import Settings, resolve
from tests.support.keyrings import MemoryKeyring

ENDPOINT = "http://127.0.0.1:8765/api/v1"
KEY = "mk_live_0123456789abcdef0123456789abcdef"


@pytest.fixture
def settings(isolated_home: Path) -> Settings:
    return resolve(endpoint=ENDPOINT)


@pytest.fixture(params=[fail.Keyring, null.Keyring])
def no_keyring(request: pytest.FixtureRequest) -> Iterator[None]:
    previous = keyring.get_keyring()
    keyring.set_keyring(request.param())
    yield
    keyring.set_keyring(previous)


def test_a_key_goes_to_the_keyring_under_service_mnemo_per_endpoint(
    settings: Settings, memory_keyring: MemoryKeyring
) -> None:
    assert credentials.store_key(settings, KEY) == ("keyring", None)
    assert memory_keyring.secrets == {("mnemo", ENDPOINT): KEY}
    assert credentials.lookup_key(settings) == (KEY, "keyring")
    other = settings.replace(endpoint="http://127.0.0.1:9999/api/v1")
    assert credentials.lookup_key(other) == (None, "none")
    assert not credentials.credentials_file(settings).exists()


def test_mnemo_api_key_wins_over_the_keyring(settings: Settings, memory_keyring: MemoryKeyring) -> None:
    credentials.store_key(settings, KEY)
    assert credentials.lookup_key(settings.replace(api_key="mk_live_from_env")) == ("mk_live_from_env", "env")
    assert credentials.key_source(settings.replace(api_key="mk_live_from_env")) == "env"


def test_fail_and_null_backends_count_as_no_keyring(settings: Settings, no_keyring: None) -> None:
    assert not credentials.keyring_available()
    with pytest.raises(AuthError) as info:
        credentials.store_key(settings, KEY)
    assert "MNEMO_API_KEY" in info.value.message and "--insecure-storage" in info.value.message
    assert info.value.exit_code == 3
    assert KEY not in info.value.message
    assert credentials.lookup_key(settings) == (None, "none")


def test_insecure_storage_writes_a_0600_file_and_is_read_back(settings: Settings, no_keyring: None) -> None:
    where, path = credentials.store_key(settings, KEY, insecure_storage=True)
    assert where == "file" and path == credentials.credentials_file(settings)
    assert path is not None and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert path.parent == Path(settings.config_path).parent
    assert credentials.lookup_key(settings) == (KEY, "file")
    assert credentials.forget_key(settings) == ["file"]
    assert not path.exists()
    assert credentials.lookup_key(settings) == (None, "none")


def test_the_file_keeps_one_key_per_endpoint(settings: Settings, no_keyring: None) -> None:
    other = settings.replace(endpoint="https://core.example.com/api/v1")
    credentials.store_key(settings, KEY, insecure_storage=True)
    credentials.store_key(other, "mk_live_other", insecure_storage=True)
    assert credentials.lookup_key(other) == ("mk_live_other", "file")
    credentials.forget_key(other)
    assert credentials.lookup_key(settings) == (KEY, "file")
    assert credentials.lookup_key(other) == (None, "none")


def test_forget_removes_the_keyring_entry(settings: Settings, memory_keyring: MemoryKeyring) -> None:
    credentials.store_key(settings, KEY)
    assert credentials.forget_key(settings) == ["keyring"]
    assert memory_keyring.secrets == {}
    assert credentials.forget_key(settings) == []


def test_a_damaged_credentials_file_is_named_with_the_way_out(settings: Settings, no_keyring: None) -> None:
    path = credentials.credentials_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.raises(LocalStateError) as info:
        credentials.lookup_key(settings)
    assert str(path) in info.value.message and "delete it" in info.value.message
    assert info.value.exit_code == 6


def test_no_endpoint_means_no_key(isolated_home: Path, memory_keyring: MemoryKeyring) -> None:
    assert credentials.lookup_key(resolve()) == (None, "none")


def test_a_keyring_that_fails_on_read_reads_as_no_key(settings: Settings) -> None:
    class Broken(MemoryKeyring):
        def get_password(self, service: str, username: str) -> str | None:
            raise RuntimeError("locked")

    previous = keyring.get_keyring()
    keyring.set_keyring(Broken())
    try:
        assert credentials.lookup_key(settings) == (None, "none")
    finally:
        keyring.set_keyring(previous)


# -- one identity per endpoint, whichever way it is spelled (issue 14) -----------------------------


@pytest.mark.parametrize(
    "spelled",
    [
        "http://127.0.0.1:8765",
        "http://127.0.0.1:8765/",
        "http://127.0.0.1:8765/api/v1",
        "http://127.0.0.1:8765/api/v1/",
        " http://127.0.0.1:8765/api/v1 ",
    ],
)
def test_the_origin_and_the_api_base_are_one_endpoint(isolated_home: Path, spelled: str) -> None:
    assert resolve(endpoint=spelled).endpoint == ENDPOINT
    assert resolve(env={"MNEMO_ENDPOINT": spelled}).endpoint == ENDPOINT


def test_a_key_kept_under_the_api_base_is_found_from_the_origin(
    isolated_home: Path, memory_keyring: MemoryKeyring
) -> None:
    memory_keyring.set_password(credentials.SERVICE, ENDPOINT, KEY)  # as `mnemo login` kept it before
    assert credentials.lookup_key(resolve(endpoint="http://127.0.0.1:8765")) == (KEY, "keyring")


def test_a_key_kept_under_the_origin_is_found_and_forgotten_too(
    isolated_home: Path, memory_keyring: MemoryKeyring
) -> None:
    memory_keyring.set_password(credentials.SERVICE, "http://127.0.0.1:8765", KEY)
    settings = resolve(endpoint=ENDPOINT)
    assert credentials.lookup_key(settings) == (KEY, "keyring")
    assert credentials.forget_key(settings) == ["keyring"]
    assert credentials.lookup_key(settings) == (None, "none")


# -- the file before the keyring (issue 59) ----------------------------------------------------


def test_a_key_in_the_file_is_read_without_importing_keyring(isolated_home: Path) -> None:
    import json
    import subprocess
    import sys

    (isolated_home / "credentials.json").write_text(json.dumps({ENDPOINT: KEY}))
    os.chmod(isolated_home / "credentials.json", 0o600)
    probe = (
        "import sys; from mnemo_tui.state import credentials; from mnemo_tui.state.config import resolve; "
        f"key, source = credentials.lookup_key(resolve(endpoint={ENDPOINT!r})); "
        "print(source, 'keyring' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
    env["MNEMO_HOME"] = str(isolated_home)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["file", "False"], out.stderr


def test_the_newest_login_wins_between_the_file_and_the_keyring(
    settings: Settings, memory_keyring: MemoryKeyring, isolated_home: Path
) -> None:
    old, new = KEY, "mk_live_" + "2" * 32
    assert credentials.store_key(settings, old, insecure_storage=True)[0] == "file"
    assert credentials.lookup_key(settings) == (old, "file")
    # A login into the keyring takes the older key out of the file (which is read first).
    assert credentials.store_key(settings, new)[0] == "keyring"
    assert credentials.lookup_key(settings) == (new, "keyring")
    assert not (isolated_home / "credentials.json").exists()
    # And a later file login wins over the keyring's older key.
    credentials.store_key(settings, old, insecure_storage=True)
    assert credentials.lookup_key(settings) == (old, "file")
