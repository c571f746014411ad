"""Provides the watermark, login, logout, status and demo commands."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui import empty_reports, sanitize, timefmt
from mnemo_tui.cli import completion, consumers, output
from mnemo_tui.cli.commands import Scope, TableFormat, ctx_of, group
from mnemo_tui.cli.context import Context
from mnemo_tui.errors import AuthError, MnemoError, ValidationError
from mnemo_tui.limits import parse_scope, room_of
from mnemo_tui.state import credentials
from mnemo_tui.state.statedb import StateKey, watermark_wire

if TYPE_CHECKING:
    from mnemo_tui.model import Watermark
    from mnemo_tui.state.config import Settings

watermark = group("watermark", "Inspect and manage watermarks per backend, consumer and scope.")
profile = group("profile", "The profiles of config.toml: list them, switch the default.")

# The consumer whose watermark `watermark show`, `set` and `reset` handle.
Consumer = Annotated[
    str | None,
    typer.Option(
        "--consumer",
        "-c",
        metavar="NAME",
        help="Reader name (default: the configured one).",
        autocompletion=completion.consumers,
    ),
]


# Consumers untouched for this many days (`watermark list --idle`, `watermark prune`).
Idle = Annotated[int | None, typer.Option("--idle", metavar="DAYS", help="Only consumers untouched for DAYS days.")]


def _consumer(c: Context, consumer: str | None) -> str:
    return c.consumer(consumer)


def _scope(c: Context, scope: str | None) -> str | None:
    """A watermark command's scope, resolved as `catchup` resolves it (a room's name reads that room)."""
    from mnemo_tui.cli.feed import resolved_scope

    return resolved_scope(c, parse_scope(scope))


def _scope_label(scope: str | None, rooms: dict[str, str] | None = None) -> str:
    """A watermark's scope for a person: a room's address with its name beside it (the id alone says nothing)."""
    if scope is None:
        return "(own store)"
    name = (rooms or {}).get(scope)
    return f"{scope} ({name})" if name is not None else scope


def _room_names(c: Context, scope: str | None, fmt: str) -> dict[str, str]:
    """The rooms' names a table shows beside a room's address (none asked for otherwise)."""
    return empty_reports.room_names(c.backend) if fmt == "table" and room_of(scope) is not None else {}


def _scope_phrase(scope: str | None) -> str:
    return f"scope {scope}" if scope is not None else "your own store"


def _write_watermark(
    w: Watermark | None, fmt: str, *, scope: str | None, consumer: str, utc: bool, rooms: dict[str, str] | None = None
) -> None:

    if fmt == "json":
        sys.stdout.write(output.dumps(watermark_wire(w)) + "\n")
        return
    if w is None:
        sys.stdout.write(
            f"No watermark for consumer {consumer!r} on {_scope_phrase(scope)}: "
            "the next catchup reads the whole scope.\n"
        )
        return
    mark = (
        "none (reads the whole scope)"
        if w.created_at is None
        else f"{timefmt.shown(w.created_at, utc)} ({timefmt.to_iso(w.created_at)})"
    )
    output.key_value_table(
        sys.stdout,
        [
            ("scope", _scope_label(w.scope, rooms)),
            ("consumer", w.consumer),
            ("watermark", mark),
            ("entries at that instant", ", ".join(w.boundary_ids) or "none"),
            ("updated", f"{timefmt.shown(w.updated_at, utc)} ({timefmt.relative(w.updated_at)})"),
        ],
    )


@watermark.command("list", short_help="Every watermark of this backend and principal.")
def watermark_list(
    ctx: typer.Context,
    consumer: Annotated[
        str | None,
        typer.Option(
            "--consumer",
            "-c",
            metavar="NAME",
            help="Only this reader's watermarks (default: every consumer's).",
            autocompletion=completion.consumers,
        ),
    ] = None,
    idle: Idle = None,
    fmt: TableFormat = "table",
) -> None:
    """Every watermark of this backend and principal (--consumer: one reader's); against a server that keeps
    consumers, with how far each is behind (--idle: only those untouched that many days)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    backend = c.backend
    name = None if consumer is None else c.consumer(consumer)
    if consumers.list_positions(c, name, fmt, consumers.check_idle(idle)):
        return
    marks = [w for w in c.state.list(backend.identity, backend.principal) if name is None or w.consumer == name]
    if idle is not None:
        marks = [w for w in marks if w.updated_at <= timefmt.now_us() - idle * 86_400_000_000]
    rooms = empty_reports.room_names(backend) if fmt == "table" and any(room_of(w.scope) for w in marks) else {}
    whose = "" if name is None else f" of consumer {name!r}"
    output.listing(
        fmt,
        [watermark_wire(w) for w in marks],
        empty=f"No watermarks{whose} yet for {backend.principal!r} on {backend.identity}. `mnemo catchup` sets one.",
        headers=["CONSUMER", "SCOPE", "WATERMARK", "ENTRIES AT IT", "UPDATED"],
        rows=[
            [
                w.consumer,
                _scope_label(w.scope, rooms),
                "none" if w.created_at is None else output.listed_time(w.created_at, c.utc),
                str(len(w.boundary_ids)),
                output.listed_time(w.updated_at, c.utc, age=True),
            ]
            for w in marks
        ],
    )


@watermark.command("show", short_help="One consumer's watermark for one scope.")
def watermark_show(
    ctx: typer.Context,
    scope: Scope = None,
    consumer: Consumer = None,
    fmt: TableFormat = "table",
) -> None:
    """One consumer's watermark for one scope (JSON null when it has none)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    mark = consumers.watermarks(c).load(StateKey.of(c.backend, name, scope_value))
    _write_watermark(mark, fmt, scope=scope_value, consumer=name, utc=c.utc, rooms=_room_names(c, scope_value, fmt))


@watermark.command("set", short_help="Set a watermark by hand (boundary ids emptied).")
def watermark_set(
    ctx: typer.Context,
    time: Annotated[str, typer.Argument(metavar="TIME", help="The new watermark (ISO-8601, a date, 2h, today...).")],
    scope: Scope = None,
    consumer: Consumer = None,
    fmt: TableFormat = "table",
) -> None:
    """Set a watermark by hand (boundary ids emptied): the next pass reads from that instant, inclusive."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    instant = timefmt.parse_time(time, field="watermark set", utc=c.utc)
    mark = consumers.watermarks(c).commit(StateKey.of(c.backend, name, scope_value), instant, (), force=True)
    _write_watermark(mark, fmt, scope=scope_value, consumer=name, utc=c.utc, rooms=_room_names(c, scope_value, fmt))
    if instant > timefmt.now_us():
        output.hint(
            f"note: {timefmt.to_iso(instant)} is in the future: catchup will show nothing written before it "
            "(`mnemo watermark reset` undoes this)"
        )


@watermark.command("reset")
def watermark_reset(
    ctx: typer.Context,
    scope: Scope = None,
    consumer: Consumer = None,
) -> None:
    """Forget a watermark: the next pass reads the whole scope."""
    c = ctx_of(ctx)
    scope_value, name = _scope(c, scope), _consumer(c, consumer)
    existed = consumers.watermarks(c).reset(StateKey.of(c.backend, name, scope_value))
    where = _scope_phrase(scope_value)
    if existed:
        output.hint(f"Watermark of consumer {name!r} on {where} removed; the next catchup reads the whole scope.")
    else:
        output.hint(f"Consumer {name!r} had no watermark on {where}; nothing changed.")


@watermark.command("prune", short_help="Forget consumers untouched for a while (default 30 days).")
def watermark_prune(
    ctx: typer.Context,
    idle: Idle = None,
    consumer: Consumer = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only name them.")] = False,
) -> None:
    """Forget every consumer whose every watermark is untouched for --idle days (30 unless given)."""
    c = ctx_of(ctx)
    days = consumers.check_idle(idle) or consumers.IDLE_DAYS
    gone = consumers.prune(c, days, None if consumer is None else c.consumer(consumer), dry_run)
    verb = "would forget" if dry_run else "forgot"
    output.hint(f"{verb} {len(gone)} consumer{'' if len(gone) == 1 else 's'} untouched for {days} days")
    for name in gone:
        sys.stdout.write(sanitize.line(name) + "\n")  # a consumer's name is stored text


# -- credentials --------------------------------------------------------------------------


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


@profile.command("list")
def profile_list(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """The profiles of config.toml, what each selects, and which one is in use."""
    c = ctx_of(ctx)
    from mnemo_tui.state.config import read_config

    output.check_format(fmt, allow_ndjson=False)
    config = read_config(c.settings.config_path)
    default = config.get("default_profile")
    found = []
    for name, section in config.get("profiles", {}).items():
        selects = section.get("endpoint") or section.get("store") or config.get("endpoint") or config.get("store")
        found.append(
            {
                "name": name,
                "default": name == default,
                "in_use": name == c.settings.profile,
                "endpoint": section.get("endpoint"),
                "store": section.get("store"),
                "selects": str(selects) if selects else "the default store",
            }
        )
    output.listing(
        fmt,
        found,
        empty=f"No profiles in {c.settings.config_path}. `mnemo login --endpoint URL` records one.",
        headers=["", "PROFILE", "SELECTS"],
        rows=[["*" if p["in_use"] else "", str(p["name"]), str(p["selects"])] for p in found],
    )


@profile.command("use", short_help="Switch the default profile (--none: no profile).")
def profile_use(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="A profile of config.toml.")] = None,
    none: Annotated[
        bool, typer.Option("--none", help="Use no profile: the top-level keys of config.toml, else the embedded store.")
    ] = False,
) -> None:
    """Make a profile the default (`default_profile` of config.toml); --none goes back to no profile."""
    c = ctx_of(ctx)
    from mnemo_tui.state.config import edit_config, read_config

    if (name is None) == (not none):
        raise ValidationError("give a profile NAME, or --none (not both)")
    profiles = read_config(c.settings.config_path).get("profiles", {})
    if name is not None and name not in profiles:
        import difflib

        near = difflib.get_close_matches(name, list(profiles), n=1)
        known = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(profiles)) or 'none'}"
        raise ValidationError(f"no profile {name!r} in {c.settings.config_path} ({known})")
    edit_config(c.settings.config_path, default_profile=name)
    if name is None:
        output.hint(f"No default profile now: commands read what the top of {c.settings.config_path} selects.")
    else:
        output.hint(f"Profile {name!r} is the default now.")
    if os.environ.get("MNEMO_PROFILE"):
        output.hint("note: MNEMO_PROFILE is set and wins over the default while it stays set")


def status(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """Which backend is selected, as whom, where the key and the state live (never the key)."""
    c = ctx_of(ctx)
    fmt = output.check_format(fmt, allow_ndjson=False)
    s = c.settings
    data: dict[str, object] = {"backend": s.backend_kind}
    named: tuple[str, str | None] | None = None
    if s.endpoint:
        data["endpoint"] = s.endpoint
        source = credentials.key_source(s)
        named = _remote_principal(c) if source != "none" else None
        data["principal"] = named[0] if named is not None else None
    elif s.database:
        from mnemo_tui.dburl import database_identity

        data["database"] = database_identity(s.database)
        data["principal"] = s.principal
        source = "none"
    else:
        data["store"] = str(s.store_path)
        data["principal"] = s.principal
        source = "none"
    data["consumer"] = s.consumer
    data["key_source"] = source
    why: list[str] = []  # what kept the counts from being read (said in the table)
    data["stats"] = _stats(c, why) if (source != "none" or not s.endpoint) else None
    data["state"] = str(s.state_path)
    if fmt == "json":
        sys.stdout.write(output.dumps(data) + "\n")
        return
    stats = data.pop("stats")
    rows = [
        (k.replace("_", " "), "(unknown until the endpoint answers)" if v is None else str(v)) for k, v in data.items()
    ]
    if isinstance(stats, dict):
        rows.append(
            (
                "entries",
                f"{stats['total_atoms']} in {len(stats['domains'])} domain(s); {stats['feedback_atoms']} with feedback",
            )
        )
    elif s.endpoint and source != "none":
        rows.append(("entries", "(unknown: the endpoint did not answer /memory/stats)"))
    elif why and (s.store_path is None or os.path.exists(s.store_path)):  # a missing one is said on its own row
        rows.append(("entries", f"(unknown: {why[0]})"))
    if s.endpoint and named is not None and named[1] is not None:
        rows[2] = ("principal", f"{named[0]} (key {named[1]}; watermarks kept as {c.backend.principal})")
    elif s.endpoint and named is not None and named[0].startswith("key:"):
        # No `/mnemo/whoami` there: the client knows its key's fingerprint, which keys the watermarks.
        rows[2] = ("principal", f"{named[0]} (this key's fingerprint; the endpoint does not name it)")
    if s.store_path is not None and not os.path.exists(s.store_path):
        missing = (
            f"named by {s.store_given}, does not exist" if s.store_given else "not created yet: a write creates it"
        )
        rows = [(k, f"{v} ({missing})" if k == "store" else v) for k, v in rows]
    rows.append(("profile", s.profile or "(none)"))
    rows.append(("config", s.config_path + ("" if os.path.exists(s.config_path) else " (not created yet)")))
    output.key_value_table(sys.stdout, rows)
    if s.endpoint and source == "none":
        output.hint(f"No key for {s.endpoint}: run `mnemo login` or set MNEMO_API_KEY.")


def _stats(c: Context, why: list[str] | None = None) -> dict[str, object] | None:
    """The selected store's counts (`GET /memory/stats` of an endpoint); None when they cannot be had (the
    error's message appended to `why`)."""
    try:
        st = c.backend.stats()
    except MnemoError as exc:
        if why is not None:
            why.append(exc.message)
        return None
    return {
        "total_atoms": st.total_atoms,
        "domains": st.domains,
        "concept_edges": st.concept_edges,
        "avg_valence": st.avg_valence,
        "feedback_atoms": st.feedback,
        "episodic_fingerprints": st.fingerprints,
    }


def _remote_principal(c: Context) -> tuple[str, str | None] | None:
    """(the principal's name, its key id) from the endpoint's `/mnemo/whoami`; where it has no such route or
    does not answer it (down, a refused key), (the key's `key:` fingerprint, None); None without a backend."""
    from mnemo_tui.backends.remote import RemoteBackend

    try:
        backend = c.backend
    except MnemoError:
        return None
    try:
        found = backend.whoami() if isinstance(backend, RemoteBackend) else None
    except MnemoError:
        found = None
    return found if found is not None else (str(backend.principal), None)


# -- demo ---------------------------------------------------------------------------------


def demo(
    ctx: typer.Context,
    entries: Annotated[
        int, typer.Option("--entries", "-n", metavar="N", help="How many entries in all (10 to 1,000,000).")
    ] = 2000,
    seed: Annotated[int | None, typer.Option("--seed", metavar="N", help="Repeatable content.")] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Add to a store that already holds entries (the new ones come after them).")
    ] = False,
) -> None:
    """Fill the embedded store with realistic sample entries, two rooms and a secret."""
    c = ctx_of(ctx, creates_store=True)
    from mnemo_tui import demo as demo_data
    from mnemo_tui.cli.context import open_engine

    c.embedded_only("demo")
    if not demo_data.MIN_ENTRIES <= entries <= demo_data.MAX_ENTRIES:
        raise ValidationError(
            f"--entries must be between {demo_data.MIN_ENTRIES} and {demo_data.MAX_ENTRIES:,}, got {entries}"
        )
    store = open_engine(c.settings, creates=True)
    path = store.identity
    try:
        newest = demo_data.newest(store, c.settings.principal)
        if newest is not None and not force:
            raise ValidationError(
                f"the store {path} already holds entries: `mnemo demo` fills an empty store; add --force to "
                "add more (after the newest), or name another with --store"
            )
        from mnemo_tui.cli.cmd_vault import own_public

        # The sample secret is sealed to the user's own pair, so `mnemo vault get` can show it.
        seal_to = own_public(c)
        progress = output.Progress("entries written")
        try:
            summary = demo_data.fill(
                store, c.settings.principal, entries, seed=seed, progress=progress.update, after=newest, seal_to=seal_to
            )
        finally:
            progress.done()
    finally:
        store.close()
    lines = [
        f"Wrote {entries:,} demo entries and {summary.superseded} "
        f"{'revision' if summary.superseded == 1 else 'revisions'} to {summary.store} in {summary.seconds:.1f}s:",
        f"  your own store ({summary.principal!r}): {summary.own_entries:,} entries in "
        f"{len(summary.domains)} domains ({', '.join(summary.domains)}), {summary.superseded} superseded",
    ]
    for room, count, authors in summary.rooms:
        lines.append(
            f"  room {room.name!r} {room.address}: {count:,} {'entry' if count == 1 else 'entries'} "
            f"by {authors} {'author' if authors == 1 else 'authors'}"
        )
    if summary.secret is None:
        lines.append("  vault: unchanged")
    else:
        lines.append(f"  vault: secret {summary.secret!r}, sealed to your key pair: mnemo vault get {summary.secret}")
    first_room = summary.rooms[0][0].address if summary.rooms else "xroom:…"
    lines += [
        "Try:",
        "  mnemo recent                      # the newest page of your own store",
        f"  mnemo recent --scope {first_room}",
        "  mnemo catchup                     # everything new to you, then a watermark",
        "  mnemo tui",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
