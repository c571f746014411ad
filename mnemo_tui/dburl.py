"""Provides `database_identity`: a PostgreSQL connection string as it may be shown, read by libpq's own parser;
and `repeatable`, one to repeat in a command shown to a person.

The one module besides the PostgreSQL engine that imports psycopg (late, only when a database is
named): settings are checked, and watermarks keyed, before any engine opens.
"""

from __future__ import annotations

from mnemo_tui.errors import MissingExtra, ValidationError


def database_identity(url: str) -> str:
    """A PostgreSQL connection string as it may be shown, logged and key watermarks: user, every host and port,
    and database, never a password (nor any other parameter, which may carry one).

    Read by libpq itself (psycopg's `conninfo_to_dict`): anything libpq reads is accepted, a URL
    (multi-host, `?target_session_attrs=read-write`, `sslmode`, a socket directory as host) or
    `key=value` pairs. A one-host URL shows as it always did, `postgresql://USER@HOST:PORT/DBNAME`.

    Raises:
        ValidationError: a string libpq does not read (or the postgres extra is missing).
    """
    from urllib.parse import quote

    try:
        from psycopg import ProgrammingError
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise MissingExtra("postgres", "--database") from None
    bad = ValidationError(
        "the database URL is not one libpq reads: postgresql://USER:PASSWORD@HOST:PORT/DBNAME, "
        "postgresql://USER@HOST1:PORT1,HOST2:PORT2/DBNAME?target_session_attrs=read-write, or 'host=... dbname=...'"
    )
    if not isinstance(url, str) or not url.strip():
        raise bad
    try:
        # The reason psycopg gives is not shown: it may quote a piece of the password of a malformed URL.
        parts = conninfo_to_dict(url)
    except ProgrammingError:
        raise bad from None
    hosts = str(parts.get("host") or parts.get("hostaddr") or "localhost").split(",")
    ports = str(parts.get("port") or "").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    # libpq checks a port only when it connects: here, so a malformed URL's password never shows as one.
    if len(ports) != len(hosts) or not all(p.isdigit() and 0 < int(p) < 65536 for p in ports if p):
        raise bad
    shown = []
    for host, port in zip(hosts, ports, strict=True):
        if host.startswith("/") or host.startswith("@"):  # a socket directory (or Linux's abstract namespace)
            host = quote(host, safe="")
        elif ":" in host:
            host = f"[{host}]"
        shown.append(f"{host or 'localhost'}:{port or 5432}")
    user = str(parts.get("user") or "")
    dbname = str(parts.get("dbname") or user)
    # User and database as they are (not quoted): the identity keys watermarks kept by earlier versions.
    return f"postgresql://{user + '@' if user else ''}{','.join(shown)}/{dbname}"


def repeatable(url: str) -> str:
    """A connection string to repeat in a command a person is shown: as given, or without its password
    (`database_identity`'s form; libpq then reads `PGPASSWORD` or `~/.pgpass`) when it holds one
    (`password` or `sslpassword`).

    Raises:
        ValidationError: a string libpq does not read (or the postgres extra is missing).
    """
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
    except ProgrammingError:
        return database_identity(url)  # refuses it with its own message, which quotes nothing of the string
    # sslpassword unlocks the client certificate's key: a password as much as `password` is.
    return database_identity(url) if given.get("password") or given.get("sslpassword") else url
