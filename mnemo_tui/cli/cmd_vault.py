"""Provides the vault commands: values sealed and unsealed on this machine, to a key pair in the OS keyring.

The backend (the embedded store or an endpoint) only ever holds sealed values. The sealing
module (and with it PyNaCl) and the key storage are imported inside the commands that use them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui.cli import output, terminal
from mnemo_tui.cli.commands import InsecureStorage, TableFormat, ctx_of, group
from mnemo_tui.cli.context import Context
from mnemo_tui.errors import AuthError, LocalStateError, MnemoError, ValidationError
from mnemo_tui.limits import ALIAS_SHAPE, MAX_SECRET_CONTEXT

if TYPE_CHECKING:
    from mnemo_tui.state.sealing import KeyPair

vault = group(
    "vault",
    "Secrets, sealed and unsealed on this machine to a key pair in the OS keyring; the backend holds sealed values.",
)


def _check_alias(alias: str) -> None:
    if not ALIAS_SHAPE.match(alias):
        raise ValidationError(f"alias {alias!r} must match ^[A-Za-z0-9._-]+$")


def _stored_pair(c: Context, insecure_storage: bool) -> KeyPair | None:
    """The selected backend's key pair, or None when there is none yet (exit 3 without a keyring)."""
    from mnemo_tui.state import sealing, vaultkeys

    text = vaultkeys.load(c.settings, insecure_storage=insecure_storage)
    if text is None:
        return None
    try:
        return sealing.pair_of(text)
    except ValidationError:
        raise LocalStateError(
            "the vault key pair kept for this backend is damaged; "
            "import a copy with `mnemo vault import-key FILE --force`"
        ) from None


def _keep(c: Context, pair: KeyPair, insecure_storage: bool, what: str) -> None:
    """Store the pair for the selected backend and say where (stderr)."""
    from mnemo_tui.state import vaultkeys

    where, path = vaultkeys.save(c.settings, pair.private_text(), insecure_storage=insecure_storage)
    backend = vaultkeys.backend_identity(c.settings)
    if where == "file":
        place = f"{path} (mode 0600, NOT encrypted: anyone who can read it can unseal these secrets)"
    else:
        place = "the OS keyring (service 'mnemo')"
    output.hint(f"{what} vault key pair {pair.key_id} for {backend} in {place}.")


def own_public(c: Context) -> bytes:
    """The public key of this backend's pair (`mnemo demo`'s), made and kept (and announced) if there is none yet.

    Without a usable keyring the pair is kept in the `--insecure-storage` file, said on stderr with its
    path: a demo's sample secret sealed to a pair nobody kept could never be unsealed (issue 59).
    """
    from mnemo_tui.state import sealing

    try:
        pair = _stored_pair(c, False)
        insecure = False
    except AuthError:  # no keyring (or one that does not answer): the file, which `vault get` reads too
        pair, insecure = _stored_pair(c, True), True
    if pair is None:
        pair = sealing.generate()
        _keep(c, pair, insecure, "Created")
    return pair.public


def _no_pair(c: Context) -> AuthError:
    from mnemo_tui.state import vaultkeys

    return AuthError(
        f"no vault key pair for {vaultkeys.backend_identity(c.settings)} on this machine: "
        "`mnemo vault keygen` makes one, `mnemo vault import-key FILE` imports a shared one"
    )


# -- listing, adding, getting ---------------------------------------------------------------


@vault.command("list")
def vault_list(
    ctx: typer.Context,
    fmt: TableFormat = "table",
) -> None:
    """Your secrets' aliases and context (never a value)."""
    c = ctx_of(ctx)
    output.check_format(fmt, allow_ndjson=False)
    secrets = c.backend.vault_list()
    output.listing(
        fmt,
        {"secrets": [s.wire() for s in secrets]},
        empty="Your vault is empty. Add a secret with `mnemo vault add ALIAS --context TEXT`.",
        headers=["ALIAS", "CREATED", "CONTEXT"],
        rows=[[s.alias, output.listed_time(s.created_at, c.utc), s.context] for s in secrets],
        flex=2,
    )


def _ask_context(ctx: typer.Context, alias: str) -> str:
    """`--context` when it was not given: asked for on a terminal (the hosted schema requires one), else
    the usage error a missing required option is."""
    if not (terminal.is_tty(sys.stdin) and terminal.is_tty(sys.stderr)):
        ctx.fail("Missing option '--context'.")
    sys.stderr.write(f"What is {alias} for (its --context, shown in listings)? ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip()
    if not answer:
        raise ValidationError("--context must not be empty: say what the secret is for")
    return answer


def _read_value(alias: str) -> bytes:
    if sys.stdin.isatty():
        import getpass

        value = getpass.getpass(f"Value of {alias} (hidden): ")
    else:
        value = sys.stdin.read()
        if value.endswith("\n"):
            value = value[:-1]
    if not value:
        raise ValidationError("the secret's value is empty")
    return value.encode("utf-8")


@vault.command("add", short_help="Seal and store a secret (value from stdin or a prompt).")
def vault_add(
    ctx: typer.Context,
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="Name of the secret: letters, digits, . _ -")],
    context: Annotated[
        str | None,
        typer.Option(
            "--context", metavar="TEXT", help="What the secret is for (shown in listings; asked for on a terminal)."
        ),
    ] = None,
    to: Annotated[
        str | None,
        typer.Option("--to", metavar="PUBLIC_KEY", help="Seal to this public key (`vault export-public`) instead."),
    ] = None,
    insecure_storage: InsecureStorage = False,
) -> None:
    """Seal a secret on this machine and store it: the value comes from stdin or a hidden prompt, never an
    argument. It is sealed to the backend's key pair (made on first use), or to --to PUBLIC_KEY.
    """
    c = ctx_of(ctx, creates_store=True)
    from mnemo_tui.state import sealing

    _check_alias(alias)
    if context is None:
        context = _ask_context(ctx, alias)
    if len(context) > MAX_SECRET_CONTEXT:
        raise ValidationError(f"--context is at most {MAX_SECRET_CONTEXT} characters, got {len(context)}")
    # Where the key is kept is settled before the value is asked for: without a keyring, say so first.
    public = sealing.public_of(to) if to is not None else None
    pair = _stored_pair(c, insecure_storage) if public is None else None
    value = _read_value(alias)
    if public is None:
        if pair is None:  # the first secret of this backend: its pair is made now
            pair = sealing.generate()
            _keep(c, pair, insecure_storage, "Created")
        public = pair.public
    sealed = sealing.seal(public, value, alias)
    c.backend.vault_add(alias, context, sealed)
    sys.stdout.write(alias + "\n")


@vault.command("get", short_help="Unseal a secret: to a pipe, or to the terminal with --reveal.")
def vault_get(
    ctx: typer.Context,
    alias: Annotated[str, typer.Argument(metavar="ALIAS", help="Name of the secret.")],
    reveal: Annotated[bool, typer.Option("--reveal", help="Print the value on a terminal too.")] = False,
    insecure_storage: InsecureStorage = False,
) -> None:
    """Fetch a secret's sealed value and unseal it on this machine. A pipe, or --reveal, gets the value (and a
    newline); a terminal without --reveal gets nothing.
    """
    c = ctx_of(ctx)
    from mnemo_tui.state import sealing

    _check_alias(alias)
    pair = _stored_pair(c, insecure_storage)
    sealed = c.backend.vault_sealed(alias)
    if pair is None:
        sealing.sealed_key_id(alias, sealed)  # a 0.1 value says so (exit 2) before "no pair"
        raise _no_pair(c)
    value = sealing.unseal(pair, alias, sealed)
    if not reveal and terminal.is_tty(sys.stdout):
        output.hint(
            f"{alias} unsealed; not printed on a terminal. Re-run with --reveal to print it, "
            f"or pipe it: `mnemo vault get {alias} | ...`"
        )
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(value + b"\n")
    sys.stdout.buffer.flush()


# -- the key pair -----------------------------------------------------------------------------


def _refuse_replacing(c: Context, insecure_storage: bool, force: bool) -> None:
    existing = None
    try:
        existing = _stored_pair(c, insecure_storage)
    except LocalStateError:
        if not force:
            raise
    if existing is not None and not force:
        raise ValidationError(
            f"this backend has vault key pair {existing.key_id} already; --force replaces it "
            "(secrets sealed to it can then no longer be read here)"
        )


@vault.command("keygen", short_help="Make the backend's vault key pair; prints the public key.")
def vault_keygen(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing pair.")] = False,
    insecure_storage: InsecureStorage = False,
) -> None:
    """Make this backend's vault key pair; prints its public key. --force replaces a pair: secrets sealed to the
    old one can no longer be read here.
    """
    c = ctx_of(ctx)
    from mnemo_tui.state import sealing

    _refuse_replacing(c, insecure_storage, force)
    pair = sealing.generate()
    _keep(c, pair, insecure_storage, "Created")
    sys.stdout.write(pair.public_text() + "\n")


@vault.command("export-public", short_help="Print the public key others can seal to (`vault add --to`).")
def vault_export_public(
    ctx: typer.Context,
    insecure_storage: InsecureStorage = False,
) -> None:
    """Print this backend's public key: whoever has it can seal to it (`vault add --to`), not unseal."""
    c = ctx_of(ctx)
    pair = _stored_pair(c, insecure_storage)
    if pair is None:
        raise _no_pair(c)
    output.hint(f"key pair {pair.key_id}")
    sys.stdout.write(pair.public_text() + "\n")


@vault.command("export-key", short_help="Write the key pair to a new 0600 file (to share or back up).")
def vault_export_key(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(metavar="FILE", help="A new file (an existing one is refused).")],
    insecure_storage: InsecureStorage = False,
) -> None:
    """Write this backend's whole key pair to a new 0600 file, to share with a team or back up. Anyone who can read
    that file can unseal every secret sealed to the pair; it is never printed.
    """
    c = ctx_of(ctx)
    from pathlib import Path

    from mnemo_tui.state import vaultkeys

    pair = _stored_pair(c, insecure_storage)
    if pair is None:
        raise _no_pair(c)
    vaultkeys.write_new_private(Path(file), pair.private_text() + "\n")
    output.hint(
        f"Key pair {pair.key_id} written to {file} (mode 0600, NOT encrypted). "
        f"Import it with `mnemo vault import-key {file}`, then delete the file."
    )


@vault.command("import-key", short_help="Keep a shared key pair from a file (`vault export-key`).")
def vault_import_key(
    ctx: typer.Context,
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="The file `mnemo vault export-key` wrote, or - for stdin.")
    ],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing, different pair.")] = False,
    insecure_storage: InsecureStorage = False,
) -> None:
    """Keep a key pair from a file (`vault export-key`; - reads stdin) as this backend's, so a team shares one pair.
    Prints its public key.
    """
    c = ctx_of(ctx)
    from mnemo_tui.state import sealing

    if file == "-":
        raw = sys.stdin.read()
    else:
        try:
            with open(file, encoding="utf-8") as handle:
                raw = handle.read(4096)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not text"
            raise ValidationError(f"{file} cannot be read ({reason})") from None
    try:
        pair = sealing.pair_of(raw)
    except MnemoError:
        raise ValidationError(f"{file} holds no vault key pair (one line `mnemo-key-v1:...`)") from None
    existing = None
    try:
        existing = _stored_pair(c, insecure_storage)
    except LocalStateError:
        if not force:
            raise
    if existing is not None and existing.key_id == pair.key_id:
        output.hint(f"Vault key pair {pair.key_id} is this backend's already; nothing changed.")
    else:
        if existing is not None and not force:
            raise ValidationError(
                f"this backend has another vault key pair ({existing.key_id}); --force replaces it "
                "(secrets sealed to it can then no longer be read here)"
            )
        _keep(c, pair, insecure_storage, "Imported")
    sys.stdout.write(pair.public_text() + "\n")
