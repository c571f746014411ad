"""Provides the vault commands: values sealed and unsealed on this machine, to a key pair in the OS keyring.

The backend (the embedded store or an endpoint) only ever holds sealed values. The sealing
module (and with it PyNaCl) and the key storage are imported inside the commands that use them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.cli import output
from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import Args, Opt, flag, required, required_argument, table_format_opt, text
from mnemo_tui.errors import AuthError, LocalStateError, MnemoError, ValidationError
from mnemo_tui.model import ALIAS_SHAPE, MAX_SECRET_CONTEXT

if TYPE_CHECKING:
    from mnemo_tui.state.sealing import KeyPair


def insecure_storage_opt() -> Opt[bool]:
    return flag("--insecure-storage", help="Keep/read the key pair in a 0600 file, not the OS keyring.")


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


def _no_pair(c: Context) -> AuthError:
    from mnemo_tui.state import vaultkeys

    return AuthError(
        f"no vault key pair for {vaultkeys.backend_identity(c.settings)} on this machine: "
        "`mnemo vault keygen` makes one, `mnemo vault import-key FILE` imports a shared one"
    )


# -- listing, adding, getting ---------------------------------------------------------------


class VaultListArgs(Args):
    """Your secrets' aliases and context (never a value)."""

    fmt = table_format_opt()


def vault_list(c: Context, args: VaultListArgs) -> None:
    output.check_format(args.fmt, allow_ndjson=False)
    secrets = c.backend.vault_list()
    output.listing(
        args.fmt,
        {"secrets": [s.wire() for s in secrets]},
        empty="Your vault is empty. Add a secret with `mnemo vault add ALIAS --context TEXT`.",
        headers=["ALIAS", "CREATED", "CONTEXT"],
        rows=[[s.alias, timefmt.shown(s.created_at, c.utc), s.context] for s in secrets],
        flex=2,
    )


class VaultAddArgs(Args):
    """Seal a secret on this machine and store it: the value comes from stdin or a hidden prompt, never an
    argument. It is sealed to the backend's key pair (made on first use), or to --to PUBLIC_KEY."""

    creates_store = True

    summary = "Seal and store a secret (value from stdin or a prompt)."
    alias = required_argument("ALIAS", "Name of the secret: letters, digits, . _ -")
    context = required("--context", metavar="TEXT", help="What the secret is for (shown in listings).")
    to = text("--to", metavar="PUBLIC_KEY", help="Seal to this public key (`vault export-public`) instead.")
    insecure_storage = insecure_storage_opt()


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


def vault_add(c: Context, args: VaultAddArgs) -> None:
    from mnemo_tui.state import sealing

    _check_alias(args.alias)
    if len(args.context) > MAX_SECRET_CONTEXT:
        raise ValidationError(f"--context is at most {MAX_SECRET_CONTEXT} characters, got {len(args.context)}")
    # Where the key is kept is settled before the value is asked for: without a keyring, say so first.
    public = sealing.public_of(args.to) if args.to is not None else None
    pair = _stored_pair(c, args.insecure_storage) if public is None else None
    value = _read_value(args.alias)
    if public is None:
        if pair is None:  # the first secret of this backend: its pair is made now
            pair = sealing.generate()
            _keep(c, pair, args.insecure_storage, "Created")
        public = pair.public
    sealed = sealing.seal(public, value, args.alias)
    c.backend.vault_add(args.alias, args.context, sealed)
    sys.stdout.write(args.alias + "\n")


class VaultGetArgs(Args):
    """Fetch a secret's sealed value and unseal it on this machine. A pipe, or --reveal, gets the value (and a
    newline); a terminal without --reveal gets nothing."""

    summary = "Unseal a secret: to a pipe, or to the terminal with --reveal."
    alias = required_argument("ALIAS", "Name of the secret.")
    reveal = flag("--reveal", help="Print the value on a terminal too.")
    insecure_storage = insecure_storage_opt()


def vault_get(c: Context, args: VaultGetArgs) -> None:
    from mnemo_tui.state import sealing

    _check_alias(args.alias)
    pair = _stored_pair(c, args.insecure_storage)
    sealed = c.backend.vault_sealed(args.alias)
    if pair is None:
        sealing.sealed_key_id(args.alias, sealed)  # a 0.1 value says so (exit 2) before "no pair"
        raise _no_pair(c)
    value = sealing.unseal(pair, args.alias, sealed)
    if not args.reveal and output.is_tty(sys.stdout):
        output.hint(
            f"{args.alias} unsealed; not printed on a terminal. Re-run with --reveal to print it, "
            f"or pipe it: `mnemo vault get {args.alias} | ...`"
        )
        return
    sys.stdout.flush()
    sys.stdout.buffer.write(value + b"\n")
    sys.stdout.buffer.flush()


# -- the key pair -----------------------------------------------------------------------------


class VaultKeygenArgs(Args):
    """Make this backend's vault key pair; prints its public key. --force replaces a pair: secrets sealed to the
    old one can no longer be read here."""

    summary = "Make the backend's vault key pair; prints the public key."
    force = flag("--force", help="Replace an existing pair.")
    insecure_storage = insecure_storage_opt()


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


def vault_keygen(c: Context, args: VaultKeygenArgs) -> None:
    from mnemo_tui.state import sealing

    _refuse_replacing(c, args.insecure_storage, args.force)
    pair = sealing.generate()
    _keep(c, pair, args.insecure_storage, "Created")
    sys.stdout.write(pair.public_text() + "\n")


class VaultExportPublicArgs(Args):
    """Print this backend's public key: whoever has it can seal to it (`vault add --to`), not unseal."""

    summary = "Print the public key others can seal to (`vault add --to`)."
    insecure_storage = insecure_storage_opt()


def vault_export_public(c: Context, args: VaultExportPublicArgs) -> None:
    pair = _stored_pair(c, args.insecure_storage)
    if pair is None:
        raise _no_pair(c)
    output.hint(f"key pair {pair.key_id}")
    sys.stdout.write(pair.public_text() + "\n")


class VaultExportKeyArgs(Args):
    """Write this backend's whole key pair to a new 0600 file, to share with a team or back up. Anyone who can read
    that file can unseal every secret sealed to the pair; it is never printed."""

    summary = "Write the key pair to a new 0600 file (to share or back up)."
    file = required_argument("FILE", "A new file (an existing one is refused).")
    insecure_storage = insecure_storage_opt()


def vault_export_key(c: Context, args: VaultExportKeyArgs) -> None:
    from pathlib import Path

    from mnemo_tui.state import vaultkeys

    pair = _stored_pair(c, args.insecure_storage)
    if pair is None:
        raise _no_pair(c)
    vaultkeys.write_new_private(Path(args.file), pair.private_text() + "\n")
    output.hint(
        f"Key pair {pair.key_id} written to {args.file} (mode 0600, NOT encrypted). "
        f"Import it with `mnemo vault import-key {args.file}`, then delete the file."
    )


class VaultImportKeyArgs(Args):
    """Keep a key pair from a file (`vault export-key`; - reads stdin) as this backend's, so a team shares one pair.
    Prints its public key."""

    summary = "Keep a shared key pair from a file (`vault export-key`)."
    file = required_argument("FILE", "The file `mnemo vault export-key` wrote, or - for stdin.")
    force = flag("--force", help="Replace an existing, different pair.")
    insecure_storage = insecure_storage_opt()


def vault_import_key(c: Context, args: VaultImportKeyArgs) -> None:
    from mnemo_tui.state import sealing

    if args.file == "-":
        raw = sys.stdin.read()
    else:
        try:
            with open(args.file, encoding="utf-8") as handle:
                raw = handle.read(4096)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not text"
            raise ValidationError(f"{args.file} cannot be read ({reason})") from None
    try:
        pair = sealing.pair_of(raw)
    except MnemoError:
        raise ValidationError(f"{args.file} holds no vault key pair (one line `mnemo-key-v1:...`)") from None
    existing = None
    try:
        existing = _stored_pair(c, args.insecure_storage)
    except LocalStateError:
        if not args.force:
            raise
    if existing is not None and existing.key_id == pair.key_id:
        output.hint(f"Vault key pair {pair.key_id} is this backend's already; nothing changed.")
    else:
        if existing is not None and not args.force:
            raise ValidationError(
                f"this backend has another vault key pair ({existing.key_id}); --force replaces it "
                "(secrets sealed to it can then no longer be read here)"
            )
        _keep(c, pair, args.insecure_storage, "Imported")
    sys.stdout.write(pair.public_text() + "\n")
