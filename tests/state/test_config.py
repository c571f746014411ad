"""Tests of settings resolution: flags, `MNEMO_*` variables, `config.toml` profiles, defaults (docs/cli.md)."""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from mnemo_tui.errors import LocalStateError, ValidationError
from mnemo_tui.state.config import read_config, resolve, save_profile

CONFIG = """\
# my mnemo config: keep this comment
consumer = "laptop"   # who reads

[profiles.work]
# the team's server
endpoint = "http://127.0.0.1:8765/api/v1/"
consumer = "work-bot"

[profiles.scratch]
store = "scratch.db"
state = "scratch-state.db"
principal = "tester"
agent = "pytest"
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "mh"
    path.mkdir()
    return path


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"MNEMO_HOME": str(home), **extra}


def test_defaults_put_everything_under_mnemo_home(home: Path) -> None:
    s = resolve(env=env_for(home))
    assert Path(s.config_path) == home / "config.toml"
    assert Path(s.state_path) == home / "state.db"
    assert Path(s.store_path) == home / "store.db"
    assert s.endpoint is None
    assert (s.principal, s.consumer, s.agent, s.profile, s.api_key) == ("local", "default", None, None, None)
    assert s.backend_kind == "embedded"


def test_without_mnemo_home_the_user_directories_are_used(tmp_path: Path) -> None:
    s = resolve(env={"XDG_CONFIG_HOME": str(tmp_path / "c"), "HOME": str(tmp_path)})
    assert Path(s.config_path).name == "config.toml"
    assert s.store_path is not None and Path(s.store_path).name == "store.db"
    assert Path(s.state_path).name == "state.db"
    assert "mnemo" in str(Path(s.config_path).parent)


def test_mnemo_state_moves_only_the_state_database(home: Path, tmp_path: Path) -> None:
    s = resolve(env=env_for(home, MNEMO_STATE=str(tmp_path / "ci-cache" / "state.db")))
    assert Path(s.state_path) == tmp_path / "ci-cache" / "state.db"
    assert Path(s.store_path) == home / "store.db"


def test_profile_values_apply_and_relative_paths_are_relative_to_the_config_file(home: Path) -> None:
    (home / "config.toml").write_text(CONFIG)
    s = resolve(profile="scratch", env=env_for(home))
    assert Path(s.store_path) == home / "scratch.db"
    assert Path(s.state_path) == home / "scratch-state.db"
    assert (s.principal, s.agent, s.consumer, s.profile) == ("tester", "pytest", "laptop", "scratch")


def test_an_endpoint_profile_selects_the_remote_backend(home: Path) -> None:
    (home / "config.toml").write_text(CONFIG)
    s = resolve(profile="work", env=env_for(home))
    assert s.endpoint == "http://127.0.0.1:8765/api/v1"  # trailing slash dropped
    assert s.store_path is None
    assert s.backend_kind == "remote"
    assert s.consumer == "work-bot"  # the profile beats the file's top-level default


def test_precedence_flags_then_environment_then_profile_then_defaults(home: Path, tmp_path: Path) -> None:
    (home / "config.toml").write_text(CONFIG)
    env = env_for(home, MNEMO_PROFILE="work", MNEMO_CONSUMER="env-consumer")
    s = resolve(env=env)
    assert s.profile == "work" and s.endpoint is not None and s.consumer == "env-consumer"
    s = resolve(env={**env, "MNEMO_STORE": str(tmp_path / "env.db")})
    assert Path(s.store_path) == tmp_path / "env.db" and s.endpoint is None
    s = resolve(store=str(tmp_path / "flag.db"), env={**env, "MNEMO_ENDPOINT": "http://x.example/api/v1"})
    assert Path(s.store_path) == tmp_path / "flag.db" and s.endpoint is None
    s = resolve(profile="scratch", env={**env, "MNEMO_PRINCIPAL": "env-principal"})
    assert s.profile == "scratch" and s.principal == "env-principal"


def test_default_profile_is_used_when_none_is_named(home: Path) -> None:
    (home / "config.toml").write_text('default_profile = "work"\n' + CONFIG)
    assert resolve(env=env_for(home)).profile == "work"
    assert resolve(profile="scratch", env=env_for(home)).profile == "scratch"


def test_an_unknown_profile_named_by_the_user_is_a_usage_error(home: Path) -> None:
    (home / "config.toml").write_text(CONFIG)
    with pytest.raises(ValidationError, match=r"'nope'.*known: scratch, work"):
        resolve(profile="nope", env=env_for(home))
    with pytest.raises(ValidationError):
        resolve(env=env_for(home, MNEMO_PROFILE="nope"))


def test_a_default_profile_the_file_does_not_define_is_a_config_error(home: Path) -> None:
    (home / "config.toml").write_text('default_profile = "gone"\n')
    with pytest.raises(LocalStateError, match=r"config\.toml") as info:
        resolve(env=env_for(home))
    assert info.value.exit_code == 6


def test_store_and_endpoint_at_one_level_are_refused(home: Path) -> None:
    with pytest.raises(ValidationError, match="choose one"):
        resolve(env=env_for(home, MNEMO_STORE="a.db", MNEMO_ENDPOINT="http://x/api/v1"))
    (home / "config.toml").write_text('[profiles.both]\nstore = "a.db"\nendpoint = "http://x/api/v1"\n')
    with pytest.raises(ValidationError, match="both"):
        resolve(profile="both", env=env_for(home))


@pytest.mark.parametrize("url", ["ftp://x/api", "localhost:8765", "http://", "http:///api", "not a url"])
def test_an_endpoint_that_is_not_an_http_url_is_refused(home: Path, url: str) -> None:
    with pytest.raises(ValidationError, match="not an http"):
        resolve(env=env_for(home, MNEMO_ENDPOINT=url))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('endpoint = "http://127.0.0.1:9/api/v2"\n', "/api/v2"),
        ('[profiles.w]\nendpoint = "ftp://x/api"\n', "not an http"),
        ('database = "mysql://x"\n', "libpq"),
    ],
)
def test_a_backend_value_the_file_gives_that_is_refused_names_the_file(home: Path, text: str, said: str) -> None:
    """As the file's other faults (6, named); the same value from the environment stays a usage error (2)."""
    (home / "config.toml").write_text(text)
    profile = "w" if "profiles.w" in text else None
    with pytest.raises(LocalStateError, match=said) as info:
        resolve(profile=profile, env=env_for(home))
    assert info.value.exit_code == 6 and str(home / "config.toml") in info.value.message
    assert "fix it or move it aside" in info.value.message


def test_the_api_key_comes_only_from_the_environment(home: Path) -> None:
    (home / "config.toml").write_text('api_key = "mk_live_in_the_file"\n')
    assert resolve(env=env_for(home)).api_key is None
    assert resolve(env=env_for(home, MNEMO_API_KEY="mk_live_x")).api_key == "mk_live_x"


@pytest.mark.parametrize(
    "text",
    ["not = [valid", "consumer = 3\n", "[profiles]\nwork = 1\n", "default_profile = 1\n", "[profiles.a]\nstore = 1\n"],
)
def test_an_unreadable_config_file_is_named_with_the_way_out(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)
    with pytest.raises(LocalStateError) as info:
        resolve(env=env_for(home))
    assert str(home / "config.toml") in info.value.message
    assert "fix it" in info.value.message
    assert info.value.exit_code == 6


def test_a_config_file_that_is_not_utf8_is_named(home: Path) -> None:
    (home / "config.toml").write_bytes(b'consumer = "\xff"\n')
    with pytest.raises(LocalStateError, match="not valid TOML"):
        read_config(home / "config.toml")


def test_saving_a_profile_keeps_comments_and_other_keys(home: Path) -> None:
    path = home / "config.toml"
    path.write_text(CONFIG)
    save_profile(path, "work", {"endpoint": "https://core.example.com/api/v1"})
    save_profile(path, "new", {"endpoint": "http://127.0.0.1:9/api/v1"}, make_default=True)
    text = path.read_text()
    assert "# my mnemo config: keep this comment" in text
    assert "# who reads" in text and "# the team's server" in text
    data = tomllib.loads(text)
    assert data["profiles"]["work"] == {"endpoint": "https://core.example.com/api/v1", "consumer": "work-bot"}
    assert data["profiles"]["new"] == {"endpoint": "http://127.0.0.1:9/api/v1"}
    assert data["default_profile"] == "new"
    assert data["profiles"]["scratch"]["principal"] == "tester"
    save_profile(path, "work", {"consumer": None})
    assert "consumer" not in tomllib.loads(path.read_text())["profiles"]["work"]


def test_a_new_config_file_is_private(home: Path) -> None:
    path = home / "sub" / "config.toml"
    save_profile(path, "p", {"store": "x.db"}, make_default=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert tomllib.loads(path.read_text()) == {"default_profile": "p", "profiles": {"p": {"store": "x.db"}}}


def test_saving_into_a_broken_config_file_changes_nothing(home: Path) -> None:
    path = home / "config.toml"
    path.write_text("broken = [")
    with pytest.raises(LocalStateError):
        save_profile(path, "p", {"store": "x.db"})
    assert path.read_text() == "broken = ["
