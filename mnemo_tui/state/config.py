"""Provides the resolved settings: flags, then `MNEMO_*` variables, then the `config.toml` profile, then defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mnemo_tui.errors import LocalStateError, ValidationError

APP = "mnemo"


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to know about where it reads, writes and keeps state.

    Attributes:
        config_path: the `config.toml` file (it need not exist).
        state_path: the state database (watermarks, checkpoints).
        store_path: the embedded store, when the embedded engine is selected.
        endpoint: the REST base URL, when the remote backend is selected.
        principal: who writes on the embedded store (`provenance.principal`).
        agent: the agent name in provenance, if any.
        consumer: the default consumer name.
        profile: the profile in use, if any.
        api_key: a key given through `MNEMO_API_KEY` (never printed).
    """

    config_path: Path
    state_path: Path
    store_path: Path | None
    endpoint: str | None
    principal: str
    agent: str | None
    consumer: str
    profile: str | None
    api_key: str | None = None
    home: Path | None = None
    debug: bool = False

    @property
    def backend_kind(self) -> str:
        return "remote" if self.endpoint else "embedded"


def _dirs(home: Path | None) -> tuple[Path, Path, Path]:
    """(config dir, state dir, data dir)."""
    if home is not None:
        return home, home, home
    import platformdirs

    return (
        Path(platformdirs.user_config_dir(APP)),
        Path(platformdirs.user_state_dir(APP)),
        Path(platformdirs.user_data_dir(APP)),
    )


def read_config(path: Path) -> dict[str, Any]:
    """The parsed `config.toml`, or {} when there is none.

    Raises:
        LocalStateError: a file that exists but cannot be read or parsed (named, with the way out).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LocalStateError(f"config file {path} cannot be read ({exc.strerror}); fix its permissions") from None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LocalStateError(
            f"config file {path} is not valid TOML ({exc}); fix it, or move it aside to use the defaults"
        ) from None
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        raise LocalStateError(f"config file {path}: [profiles.NAME] must be tables; fix it or move it aside")
    return data


def resolve(
    *,
    profile: str | None = None,
    store: str | None = None,
    endpoint: str | None = None,
    env: dict[str, str] | None = None,
) -> Settings:
    """Resolve the settings by the precedence of PRODUCT.md: flags, environment, profile, defaults.

    Raises:
        ValidationError: an unknown profile, or both a store and an endpoint at the same level.
        LocalStateError: an unreadable `config.toml`.
    """
    environ = os.environ if env is None else env
    home_value = environ.get("MNEMO_HOME")
    home = Path(home_value).expanduser() if home_value else None
    config_dir, state_dir, data_dir = _dirs(home)
    config_path = config_dir / "config.toml"
    config = read_config(config_path)
    profile_name = profile or environ.get("MNEMO_PROFILE") or config.get("default_profile")
    section: dict[str, Any] = {}
    if profile_name:
        profiles = config.get("profiles", {})
        if profile_name not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise ValidationError(f"unknown profile {profile_name!r} in {config_path} (known: {known})")
        section = profiles[profile_name]

    def pick(flag: str | None, var: str, key: str) -> str | None:
        if flag:
            return flag
        if environ.get(var):
            return environ[var]
        value = section.get(key, config.get(key))
        return str(value) if value is not None else None

    # The backend: a store or an endpoint, whichever the highest level names.
    store_value: str | None = None
    endpoint_value: str | None = None
    for level_store, level_endpoint in (
        (store, endpoint),
        (environ.get("MNEMO_STORE"), environ.get("MNEMO_ENDPOINT")),
        (section.get("store"), section.get("endpoint")),
    ):
        if level_store and level_endpoint:
            raise ValidationError("both a store and an endpoint are selected at the same level; choose one")
        if level_store or level_endpoint:
            store_value, endpoint_value = level_store, level_endpoint
            break
    store_path = Path(str(store_value)).expanduser() if store_value else None
    if endpoint_value is None and store_path is None:
        store_path = data_dir / "store.db"
    state_value = environ.get("MNEMO_STATE") or section.get("state")
    state_path = Path(str(state_value)).expanduser() if state_value else state_dir / "state.db"
    return Settings(
        config_path=config_path,
        state_path=state_path,
        store_path=store_path,
        endpoint=str(endpoint_value).rstrip("/") if endpoint_value else None,
        principal=pick(None, "MNEMO_PRINCIPAL", "principal") or "local",
        agent=pick(None, "MNEMO_AGENT", "agent"),
        consumer=pick(None, "MNEMO_CONSUMER", "consumer") or "default",
        profile=profile_name,
        api_key=environ.get("MNEMO_API_KEY") or None,
        home=home,
        debug=environ.get("MNEMO_DEBUG", "") not in ("", "0"),
    )


def with_debug(settings: Settings, debug: bool) -> Settings:
    return replace(settings, debug=settings.debug or debug)
