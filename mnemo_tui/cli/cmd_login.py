"""Provides `mnemo login` and `mnemo logout`: an endpoint's API key kept, checked and forgotten."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui.cli import output
from mnemo_tui.cli.commands import ctx_of
from mnemo_tui.cli.context import Context
from mnemo_tui.errors import AuthError, ValidationError
from mnemo_tui.state import credentials

if TYPE_CHECKING:
    from mnemo_tui.state.config import Settings


def _endpoint_settings(c: Context, endpoint: str | None) -> Settings:
    from mnemo_tui.state.config import check_endpoint

    if endpoint:
        return c.settings.replace(endpoint=check_endpoint(endpoint), store_path=None)
    if not c.settings.endpoint:
        raise ValidationError(
            "no endpoint is selected: give --endpoint URL (e.g. http://127.0.0.1:8765/api/v1) "
            "or set MNEMO_ENDPOINT; the embedded store needs no login"
        )
    return c.settings


def _read_key() -> str:
    if sys.stdin.isatty():
        import getpass

        key = getpass.getpass("API key (hidden): ")
    else:
        key = sys.stdin.readline()
    return key.strip()


def _check_key(settings: Settings, key: str) -> None:
    """Ask the endpoint whether it takes the key (GET /memory/rooms): a refused key raises AuthError."""
    from mnemo_tui.backends.remote_http import KEY_ADVICE
    from mnemo_tui.cli.context import open_backend

    backend = open_backend(settings.replace(api_key=key))
    try:
        backend.rooms()
    except AuthError as exc:
        # Not the advice every other command gives: it would send a person back to the command they run.
        said = exc.message.removesuffix(KEY_ADVICE)
        raise AuthError(
            f"{settings.endpoint} refused the key ({said}): nothing was kept; check the key you gave"
        ) from None
    finally:
        backend.close()


def login(
    ctx: typer.Context,
    endpoint: Annotated[
        str | None,
        typer.Option("--endpoint", metavar="URL", help="REST base URL; recorded in the profile of config.toml."),
    ] = None,
    insecure_storage: Annotated[
        bool, typer.Option("--insecure-storage", help="Keep the key in a 0600 file instead of the OS keyring.")
    ] = False,
) -> None:
    """Keep an API key for an endpoint in the OS keyring (key by hidden prompt or stdin)."""
    c = ctx_of(ctx)
    settings = _endpoint_settings(c, endpoint)
    if not insecure_storage and not credentials.keyring_available():
        # Say so before asking for the key: there is nowhere to keep it.
        raise credentials.no_keyring_error()
    key = _read_key()
    if not key:
        raise AuthError("no key given (type it at the prompt, or pipe it on stdin)")
    _check_key(settings, key)
    where, path = credentials.store_key(settings, key, insecure_storage=insecure_storage)
    assert settings.endpoint is not None
    if where == "file":
        output.hint(
            f"Key for {settings.endpoint} written to {path} (mode 0600, NOT encrypted): "
            "anyone who can read that file can use it. `mnemo logout` removes it."
        )
    else:
        output.hint(f"Key for {settings.endpoint} stored in the OS keyring (service 'mnemo').")
    if endpoint:
        _record_endpoint(c.settings, settings.endpoint)
    if c.settings.api_key:
        output.hint("note: MNEMO_API_KEY is set and wins over the stored key while it stays set")


def _record_endpoint(settings: Settings, endpoint: str) -> None:
    from mnemo_tui.state.config import read_config, save_profile

    profile = settings.profile or "default"
    section = read_config(settings.config_path).get("profiles", {}).get(profile, {})
    if section.get("endpoint") == endpoint:
        return
    if section.get("store"):
        output.hint(
            f"note: profile {profile!r} selects a store, so the endpoint was not recorded; "
            f"use --profile NAME with a new name to keep one for it"
        )
        return
    save_profile(settings.config_path, profile, {"endpoint": endpoint}, make_default=settings.profile is None)
    output.hint(f"Endpoint recorded in profile {profile!r} of {settings.config_path}.")


def logout(
    ctx: typer.Context,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", metavar="URL", help="REST base URL whose key to forget.")
    ] = None,
) -> None:
    """Forget the endpoint's key (keyring and file), and undo what `login` recorded in config.toml.

    A profile that holds nothing but the endpoint `login` recorded goes, and `default_profile` with
    it when it named that profile, so commands read the embedded store again. A profile with more
    in it stays, and logout says what it still selects and how to switch.
    """
    c = ctx_of(ctx)
    settings = _endpoint_settings(c, endpoint)
    removed = credentials.forget_key(settings)
    if removed:
        output.hint(f"Key for {settings.endpoint} removed from the {' and the '.join(removed)}.")
    else:
        output.hint(f"No key was stored for {settings.endpoint}; nothing changed.")
    assert settings.endpoint is not None
    _unrecord_endpoint(c.settings, settings.endpoint)
    if c.settings.api_key:
        output.hint("note: MNEMO_API_KEY is still set in this environment")


def _unrecord_endpoint(settings: Settings, endpoint: str) -> None:
    """Undo `_record_endpoint`: drop the profiles that hold only this endpoint; say what else still selects it."""
    from mnemo_tui.state.config import check_endpoint, edit_config, read_config

    config = read_config(settings.config_path)
    default = config.get("default_profile")
    for name, section in config.get("profiles", {}).items():
        try:
            selects = check_endpoint(str(section.get("endpoint", ""))) == endpoint
        except ValidationError:
            selects = False
        if not selects:
            continue
        if set(section) == {"endpoint"}:
            edit_config(settings.config_path, drop_profile=name, default_profile=None if default == name else False)
            output.hint(f"Profile {name!r} (only this endpoint) removed from {settings.config_path}.")
        else:
            output.hint(
                f"Profile {name!r} of {settings.config_path} still selects {endpoint} and now has no key there: "
                "`mnemo profile use NAME` (or --profile NAME) reads elsewhere, `mnemo profile list` lists them."
            )
    if settings.endpoint == endpoint and not settings.profile:
        output.hint(f"note: MNEMO_ENDPOINT (or the top of config.toml) still selects {endpoint}")
