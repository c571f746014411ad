"""Provides `mnemo status`: which backend, as whom, where the key and the state live."""

from __future__ import annotations

import os
import sys

import typer

from mnemo_tui.cli import output
from mnemo_tui.cli.commands import TableFormat, ctx_of
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.table import key_value_table
from mnemo_tui.errors import MnemoError, ValidationError
from mnemo_tui.state import credentials


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
    if s.endpoint and named is not None:
        rows.insert(4, ("watermarks", _watermarks_kept(c)))
    if s.endpoint and named is not None and named[1] is not None:
        rows[2] = ("principal", f"{named[0]} (key {named[1]})")
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
    key_value_table(sys.stdout, rows)
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


def _watermarks_kept(c: Context) -> str:
    """Where an endpoint's watermarks are kept (docs/consumers.md): by the server, as its consumers of the key's
    principal; or in this machine's state database, keyed by the key's fingerprint, and why."""
    from mnemo_tui.backends.remote_consumers import WHERE_ENV, consumers_of, where_kept

    local = f"in this machine's state database, as {c.backend.principal}"
    try:
        if where_kept() == "local":
            return f"{local} ({WHERE_ENV}=local)"
    except ValidationError:
        return f"(unknown: {WHERE_ENV} must be `server` or `local`)"
    calls = consumers_of(c.backend)
    try:
        found = calls.positions(c.settings.consumer) if calls is not None else None
    except MnemoError as exc:
        return f"(unknown: {exc.message})"
    if found is None:
        return f"{local} (the endpoint keeps no consumers)"
    return "by the server, as its consumers of this key's principal"


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
