"""Provides the resolved settings: flags, then `MNEMO_*` variables, then the `config.toml` profile, then defaults."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui.errors import LocalStateError, ValidationError
from mnemo_tui.files import write_atomic
from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from typing import Any

APP = "mnemo"


class Settings(Value):
    """Everything a command needs to know about where it reads, writes and keeps state.

    Attributes:
        config_path: the `config.toml` file (it need not exist).
        state_path: the state database (watermarks, checkpoints).
        store_path: the embedded store, when the embedded engine is selected.
        endpoint: the REST base URL, when the remote backend is selected.
        database: the PostgreSQL URL, when the PostgreSQL engine is selected (it may hold a password:
            never shown; `dburl.database_identity` is what may be).
        principal: who writes on the embedded store (`provenance.principal`).
        agent: the agent name in provenance, if any.
        consumer: the default consumer name.
        profile: the profile in use, if any.
        api_key: a key given through `MNEMO_API_KEY` (never printed).
        store_given: who named the store (`--store`, `MNEMO_STORE`, a profile, the file), None for
            the default path: a missing store someone named is an error, a missing default one is empty.
        utc: tables show UTC rather than local time (`utc = true`, or `--utc`).
        pager: the pager of `config.toml` (`pager = "less -FRX"`), under `MNEMO_PAGER`.
        warnings: what a person should hear about the settings (an unknown key of `config.toml`).

    Paths are texts (`os.path`): `mnemo recent` resolves settings at every start, and pathlib is dear to import.
    """

    config_path: str
    state_path: str
    store_path: str | None
    endpoint: str | None
    principal: str
    agent: str | None
    consumer: str
    profile: str | None
    api_key: str | None = None
    home: str | None = None
    debug: bool = False
    store_given: str | None = None
    utc: bool = False
    pager: str | None = None
    warnings: tuple[str, ...] = ()
    database: str | None = None

    def __repr__(self) -> str:
        # A database URL's password must never reach a traceback or a log through a repr.
        shown = "(set)" if self.database else None
        return f"Settings(store_path={self.store_path!r}, endpoint={self.endpoint!r}, database={shown})"

    @property
    def backend_kind(self) -> str:
        return "remote" if self.endpoint else "postgres" if self.database else "embedded"


def _dirs(home: str | None) -> tuple[str, str, str]:
    """(config dir, state dir, data dir)."""
    if home is not None:
        return home, home, home
    import platformdirs

    return platformdirs.user_config_dir(APP), platformdirs.user_state_dir(APP), platformdirs.user_data_dir(APP)


_TEXT_KEYS = ("store", "endpoint", "database", "state", "principal", "agent", "consumer", "pager")
_BOOL_KEYS = ("utc",)
_KEYS = (*_TEXT_KEYS, *_BOOL_KEYS)


def unknown_keys(path: str, data: dict[str, Any]) -> list[str]:
    """A warning for each key of `config.toml` mnemo does not know, naming the nearest known one."""
    found: list[str] = []
    tables: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [("", data, (*_KEYS, "default_profile", "profiles"))]
    tables += [(f"[profiles.{n}] ", t, _KEYS) for n, t in data.get("profiles", {}).items()]
    for where, table, known in tables:
        for key in table:
            if key not in known:
                import difflib  # only on the way to a warning: every start would pay its import

                near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                also = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(known)})"
                found.append(f"mnemo: warning: {path}: {where}unknown key {key!r} is ignored{also}")
    return found


def read_config(path: str) -> dict[str, Any]:
    """The parsed `config.toml`, or {} when there is none.

    Raises:
        LocalStateError: a file that exists but cannot be read or parsed (named, with the way out).
    """
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LocalStateError(f"config file {path} cannot be read ({exc.strerror}); fix its permissions") from None
    if not stat.S_ISREG(found.st_mode):
        # A FIFO would block the read forever, a directory cannot be read: refused at once.
        raise LocalStateError(f"config file {path} is not a regular file; move it aside to use the defaults")
    try:
        with open(path, "rb") as file:
            raw = file.read()
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
    for where, table in [("", data), *((f"[profiles.{n}] ", t) for n, t in profiles.items())]:
        for key in _TEXT_KEYS:
            if key in table and not isinstance(table[key], str):
                raise LocalStateError(f"config file {path}: {where}{key} must be a string; fix it or move it aside")
        for key in _BOOL_KEYS:
            if key in table and not isinstance(table[key], bool):
                raise LocalStateError(
                    f"config file {path}: {where}{key} must be true or false; fix it or move it aside"
                )
    if "default_profile" in data and not isinstance(data["default_profile"], str):
        raise LocalStateError(f"config file {path}: default_profile must be a string; fix it or move it aside")
    return data


def _path_value(value: str, base: str) -> str:
    # A relative path in config.toml is relative to the file's folder, not to wherever mnemo runs
    # (`join` keeps an absolute one as it is).
    return os.path.join(base, os.path.expanduser(value))


API_BASE = "/api/v1"


@contextmanager
def _in_file(where: str | None) -> Iterator[None]:
    """A value the config file gave that is refused names the file and is exit 6, as its other faults are
    (the same value given by a flag or the environment stays exit 2)."""
    try:
        yield
    except ValidationError as exc:
        if where is None:
            raise
        raise LocalStateError(f"{where}: {exc.message}; fix it or move it aside") from None


def check_endpoint(url: str) -> str:
    """The endpoint's one canonical identity: its `/api/v1` base URL, without a trailing slash.

    The origin (`http://host:8765`, what the official SDK takes) and the base
    (`http://host:8765/api/v1`) name the same endpoint: both normalize to the base, which keys the
    state database's watermarks and the keyring (so what was kept under the base keeps working).
    A base may sit behind a proxy's prefix (`http://host/mnemo/api/v1`); any other path is refused.

    Raises:
        ValidationError: anything but an http(s) URL with a host and no user:password@, whose path is empty or
            ends in /api/v1.
    """
    value = url.strip().rstrip("/")
    scheme, sep, rest = value.partition("://")
    # A user:password@ is never sent (the key is a header) and never shown, in this refusal or any later line.
    shown = f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if "@" in rest else url
    bad = ValidationError(f"endpoint {shown!r} is not an http(s) URL (e.g. http://127.0.0.1:8765/api/v1)")
    if not sep or scheme.lower() not in ("http", "https") or not rest or rest.startswith("/"):
        raise bad
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        if not parts.hostname:
            raise bad
        parts.port  # noqa: B018 - reading it checks it (a port out of range, a bracket left open)
    except ValueError:
        raise bad from None
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise bad
    if parts.query or parts.fragment:
        raise bad
    if parts.username is not None or parts.password is not None:
        raise ValidationError(
            f"endpoint {shown!r} holds credentials: take the user:password@ out; the API key is sent as a header "
            "(MNEMO_API_KEY, or mnemo login)"
        )
    path = parts.path.rstrip("/")
    if path and not path.endswith(API_BASE):
        # Another path is another API (`/api/v2`) or a typo: appending /api/v1 to it would ask a URL
        # nobody typed and report that one as unreachable. Only the two documented forms are read.
        origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        raise ValidationError(
            f"endpoint {origin + parts.path!r} has the path {path}: mnemo takes the origin ({origin}) or a "
            f"base ending in {API_BASE} ({origin}{API_BASE}, or {origin}/PREFIX{API_BASE} behind a proxy)"
        )
    return value if path else value + API_BASE


def endpoint_aliases(endpoint: str) -> list[str]:
    """Other spellings a key may have been kept under for a canonical endpoint (its origin form)."""
    if endpoint.endswith(API_BASE):
        return [endpoint[: -len(API_BASE)]]
    return []


def resolve(
    *,
    profile: str | None = None,
    store: str | None = None,
    endpoint: str | None = None,
    database: str | None = None,
    env: dict[str, str] | None = None,
) -> Settings:
    """Resolve the settings by the precedence of docs/cli.md: flags, environment, profile, defaults.

    Within `config.toml`, a profile's keys win over the file's top-level keys, which act as
    defaults for every profile. `MNEMO_HOME` moves config, state and the default store together.

    Raises:
        ValidationError: an unknown profile named by a flag or `MNEMO_PROFILE`, a bad endpoint URL,
            or more than one of a store, an endpoint and a database at the same level.
        LocalStateError: an unreadable `config.toml`, or a `default_profile` it does not define.
    """
    environ = os.environ if env is None else env
    home_value = environ.get("MNEMO_HOME")
    home = os.path.expanduser(home_value) if home_value else None
    config_dir, state_dir, data_dir = _dirs(home)
    config_path = os.path.join(config_dir, "config.toml")
    config = read_config(config_path)
    profiles: dict[str, Any] = config.get("profiles", {})
    profile_name = profile or environ.get("MNEMO_PROFILE") or None
    section: dict[str, Any] = {}
    if profile_name:
        if profile_name not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise ValidationError(f"unknown profile {profile_name!r} in {config_path} (known: {known})")
        section = profiles[profile_name]
    elif config.get("default_profile"):
        profile_name = str(config["default_profile"])
        if profile_name not in profiles:
            raise LocalStateError(
                f"config file {config_path}: default_profile {profile_name!r} is not a [profiles.{profile_name}] "
                "table; add it or remove default_profile"
            )
        section = profiles[profile_name]

    def pick(var: str, key: str) -> str | None:
        # A blank value (empty or only spaces) counts as unset, in the environment as in the file.
        if environ.get(var, "").strip():
            return environ[var]
        value = section.get(key, config.get(key))
        return str(value) if value is not None and str(value).strip() else None

    # The backend: a store, an endpoint or a database, whichever the highest level names.
    store_value: str | None = None
    endpoint_value: str | None = None
    database_value: str | None = None
    from_file = False
    given: str | None = None
    for level, (level_store, level_endpoint, level_database) in enumerate(
        (
            (store, endpoint, database),
            (environ.get("MNEMO_STORE"), environ.get("MNEMO_ENDPOINT"), environ.get("MNEMO_DATABASE_URL")),
            (section.get("store"), section.get("endpoint"), section.get("database")),
            (config.get("store"), config.get("endpoint"), config.get("database")),
        )
    ):
        named = [
            n
            for n, v in (("a store", level_store), ("an endpoint", level_endpoint), ("a database", level_database))
            if v
        ]
        if len(named) > 1:
            where = ("flags", "environment", f"profile {profile_name!r}", "config file")[level]
            raise ValidationError(f"{' and '.join(named)} are selected together by the {where}; choose one")
        if named:
            store_value, endpoint_value, database_value = level_store, level_endpoint, level_database
            from_file = level >= 2
            given = ("--store", "MNEMO_STORE", f"profile {profile_name!r} of {config_path}", str(config_path))[level]
            break
    store_path: str | None = None
    if store_value:
        store_path = _path_value(str(store_value), config_dir) if from_file else os.path.expanduser(str(store_value))
    if endpoint_value is None and store_path is None and database_value is None:
        store_path = os.path.join(data_dir, "store.db")
    if database_value is not None:
        from mnemo_tui.dburl import database_identity

        with _in_file(f"config file {config_path}" if from_file else None):
            database_identity(str(database_value))  # a malformed URL is exit 2 here, before anything opens
    if endpoint_value:
        with _in_file(f"config file {config_path}" if from_file else None):
            endpoint_value = check_endpoint(str(endpoint_value))
    if environ.get("MNEMO_STATE"):
        state_path = os.path.expanduser(environ["MNEMO_STATE"])
    elif section.get("state") or config.get("state"):
        state_path = _path_value(str(section.get("state") or config.get("state")), config_dir)
    else:
        state_path = os.path.join(state_dir, "state.db")
    return Settings(
        config_path=config_path,
        state_path=state_path,
        store_path=store_path,
        endpoint=str(endpoint_value) if endpoint_value else None,
        principal=pick("MNEMO_PRINCIPAL", "principal") or "local",
        agent=pick("MNEMO_AGENT", "agent"),
        consumer=pick("MNEMO_CONSUMER", "consumer") or "default",
        profile=profile_name,
        api_key=environ.get("MNEMO_API_KEY", "").strip() or None,
        home=home,
        debug=environ.get("MNEMO_DEBUG", "") not in ("", "0"),
        store_given=given if store_value else None,
        utc=bool(section.get("utc", config.get("utc", False))),
        pager=str(section.get("pager", config.get("pager", ""))).strip() or None,
        warnings=tuple(unknown_keys(config_path, config)),
        database=str(database_value) if database_value else None,
    )


def save_profile(config_path: str, profile: str, values: dict[str, str | None], *, make_default: bool = False) -> None:
    """Set (or, with None, remove) keys of one profile in `config.toml`, keeping the file's comments.

    The file is rewritten atomically (a temporary file renamed over it) and created 0600 when new.

    Args:
        config_path: the `config.toml` file (it need not exist).
        profile: the `[profiles.NAME]` table to change (created when missing).
        values: the keys to set, or to remove when None.
        make_default: also set `default_profile` when the file names none.

    Raises:
        LocalStateError: the file cannot be read, parsed or written.
    """
    import tomlkit

    read_config(config_path)  # the same errors as any other read, before anything is changed
    try:
        doc = tomlkit.parse(_text(config_path))
    except (OSError, ValueError) as exc:
        raise LocalStateError(f"config file {config_path} cannot be read ({exc}); fix it or move it aside") from None
    if make_default and "default_profile" not in doc:
        doc.add("default_profile", profile)  # tomlkit places a top-level key before the tables
    if "profiles" not in doc:
        doc.add("profiles", tomlkit.table(is_super_table=True))
    profiles_item: Any = doc["profiles"]
    if profile not in profiles_item:
        profiles_item.add(profile, tomlkit.table())
    section: Any = profiles_item[profile]
    for key, value in values.items():
        if value is None:
            if key in section:
                del section[key]
        else:
            section[key] = value
    _write_atomic(config_path, tomlkit.dumps(doc))


def edit_config(
    config_path: str, *, default_profile: str | bool | None = False, drop_profile: str | None = None
) -> None:
    """Set or remove `default_profile` (a name, None to remove, False to leave it) and drop one
    `[profiles.NAME]` table, keeping the file's comments; rewritten atomically.

    Raises:
        LocalStateError: the file cannot be read, parsed or written.
    """
    import tomlkit

    read_config(config_path)
    try:
        doc = tomlkit.parse(_text(config_path))
    except (OSError, ValueError) as exc:
        raise LocalStateError(f"config file {config_path} cannot be read ({exc}); fix it or move it aside") from None
    profiles: Any = doc.get("profiles")
    if drop_profile is not None and profiles is not None and drop_profile in profiles:
        del profiles[drop_profile]
        if not profiles:
            del doc["profiles"]
    if default_profile is None:
        if "default_profile" in doc:
            del doc["default_profile"]
    elif isinstance(default_profile, str):
        if "default_profile" in doc:
            doc["default_profile"] = default_profile
        else:
            doc.add("default_profile", default_profile)
    _write_atomic(config_path, tomlkit.dumps(doc))


def _text(path: str) -> str:
    """The file's text, or "" when there is none."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as file:
        return file.read()


def _write_atomic(path: str, text: str) -> None:
    try:
        mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o600
        write_atomic(path, text, mode)
    except OSError as exc:
        raise LocalStateError(f"config file {path} cannot be written ({exc.strerror}); check its folder") from None


def with_debug(settings: Settings, debug: bool) -> Settings:
    """The settings with `--debug` folded in."""
    return settings.replace(debug=settings.debug or debug)
