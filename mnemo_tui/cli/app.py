"""Provides the Typer app: every command registered from its declaration (`Args`) and its body."""

from __future__ import annotations

from mnemo_tui.cli import (
    cmd_atoms,
    cmd_entries,
    cmd_mcp,
    cmd_proof,
    cmd_rooms,
    cmd_server,
    cmd_state,
    cmd_tui,
    cmd_vault,
    feed,
)
from mnemo_tui.cli.commands import add, group, root_app
from mnemo_tui.cli.options import CatchupArgs, RecentArgs

app = root_app("Catch up on agent memory: a queryless, newest-first feed per scope, walked with cursors.")

add(app, "write", cmd_entries.WriteArgs, cmd_entries.write)
add(app, "recent", RecentArgs, feed.recent)
add(app, "catchup", CatchupArgs, feed.catchup)
add(app, "search", cmd_entries.SearchArgs, cmd_entries.search)
add(app, "show", cmd_atoms.ShowArgs, cmd_atoms.show)
add(app, "delete", cmd_atoms.DeleteArgs, cmd_atoms.delete)

rooms = group(app, "rooms", "Shared rooms: list, create, invite, join, delete.")
add(rooms, "list", cmd_rooms.RoomsListArgs, cmd_rooms.rooms_list)
add(rooms, "create", cmd_rooms.RoomsCreateArgs, cmd_rooms.rooms_create)
add(rooms, "invite", cmd_rooms.RoomsInviteArgs, cmd_rooms.rooms_invite)
add(rooms, "join", cmd_rooms.RoomsJoinArgs, cmd_rooms.rooms_join)
add(rooms, "delete", cmd_rooms.RoomsDeleteArgs, cmd_rooms.rooms_delete)

vault = group(
    app,
    "vault",
    "Secrets, sealed and unsealed on this machine to a key pair in the OS keyring; the backend holds sealed values.",
    summary="Secrets, sealed on this machine: list, add, get, key pairs.",
)
add(vault, "list", cmd_vault.VaultListArgs, cmd_vault.vault_list)
add(vault, "add", cmd_vault.VaultAddArgs, cmd_vault.vault_add)
add(vault, "get", cmd_vault.VaultGetArgs, cmd_vault.vault_get)
add(vault, "keygen", cmd_vault.VaultKeygenArgs, cmd_vault.vault_keygen)
add(vault, "export-public", cmd_vault.VaultExportPublicArgs, cmd_vault.vault_export_public)
add(vault, "export-key", cmd_vault.VaultExportKeyArgs, cmd_vault.vault_export_key)
add(vault, "import-key", cmd_vault.VaultImportKeyArgs, cmd_vault.vault_import_key)

watermark = group(app, "watermark", "Inspect and manage watermarks per backend, consumer and scope.")
add(watermark, "list", cmd_state.WatermarkListArgs, cmd_state.watermark_list)
add(watermark, "show", cmd_state.WatermarkShowArgs, cmd_state.watermark_show)
add(watermark, "set", cmd_state.WatermarkSetArgs, cmd_state.watermark_set)
add(watermark, "reset", cmd_state.WatermarkResetArgs, cmd_state.watermark_reset)

add(app, "login", cmd_state.LoginArgs, cmd_state.login)
add(app, "logout", cmd_state.LogoutArgs, cmd_state.logout)
add(app, "status", cmd_state.StatusArgs, cmd_state.status)
profile = group(app, "profile", "The profiles of config.toml: list them, switch the default.")
add(profile, "list", cmd_state.ProfileListArgs, cmd_state.profile_list)
add(profile, "use", cmd_state.ProfileUseArgs, cmd_state.profile_use)
add(app, "demo", cmd_state.DemoArgs, cmd_state.demo)

add(app, "serve", cmd_server.ServeArgs, cmd_server.serve)
keys = group(
    app,
    "keys",
    "API keys of `mnemo serve` (embedded store only): create, list, revoke.",
    summary="API keys of `mnemo serve`: create, list, revoke.",
)
add(keys, "create", cmd_server.KeysCreateArgs, cmd_server.keys_create)
add(keys, "list", cmd_server.KeysListArgs, cmd_server.keys_list)
add(keys, "revoke", cmd_server.KeysRevokeArgs, cmd_server.keys_revoke)

db = group(
    app,
    "db",
    "The database behind `mnemo serve`: copy an embedded store into PostgreSQL.",
    summary="Copy an embedded store into PostgreSQL.",
)
add(db, "copy", cmd_server.DbCopyArgs, cmd_server.db_copy)

add(app, "tui", cmd_tui.TuiArgs, cmd_tui.tui)
app.command("mcp", short_help="Serve the memory tools to an MCP client over stdio.")(cmd_mcp.mcp)
add(app, "check", cmd_proof.CheckArgs, cmd_proof.check)
add(app, "verify", cmd_proof.VerifyArgs, cmd_proof.verify)
