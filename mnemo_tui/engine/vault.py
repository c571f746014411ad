"""Provides the embedded store's vault: secrets under aliases, in a table no feed, search or report names."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine import ids
from mnemo_tui.engine.base import Database
from mnemo_tui.engine.rules import check_concepts, refuse_nul
from mnemo_tui.errors import Conflict, NotFound, ValidationError
from mnemo_tui.limits import ALIAS_SHAPE, MAX_SECRET_CONTEXT

if TYPE_CHECKING:
    from mnemo_tui.values.secrets import SecretInfo

MAX_ALIAS = 200


class VaultOps(Database):
    """The vault keeps each value as the sealed blob the wire carries; listings never show it."""

    def vault_list(self, principal: str) -> list[SecretInfo]:
        """The principal's secrets: alias, context, time and concepts, never the value."""
        from mnemo_tui.values.secrets import SecretInfo

        with self.reading() as db:
            rows = db.execute(
                "SELECT alias, context, created_at, concepts FROM vault WHERE principal = ? ORDER BY alias",
                (principal,),
            ).fetchall()
        return [SecretInfo(alias=r[0], context=r[1], created_at=r[2], concepts=tuple(json.loads(r[3]))) for r in rows]

    def vault_add(
        self, principal: str, alias: str, context: str, sealed_b64: str, concepts: tuple[str, ...] = ()
    ) -> str:
        """Store a sealed secret under an alias; returns its atom id.

        Raises:
            ValidationError: a bad alias, an empty value, a context too long, concepts past an entry's bounds.
            Conflict: the alias exists already.
        """
        if not isinstance(alias, str) or not 1 <= len(alias) <= MAX_ALIAS or not ALIAS_SHAPE.match(alias):
            raise ValidationError(f"alias must match ^[A-Za-z0-9._-]+$ (at most {MAX_ALIAS} characters)")
        if not sealed_b64:
            raise ValidationError("the secret's value is empty")
        if len(context) > MAX_SECRET_CONTEXT:
            raise ValidationError(f"context is at most {MAX_SECRET_CONTEXT} characters")
        refuse_nul("context", context)
        check_concepts(tuple(concepts))  # an entry's bounds: a secret's concepts are stored and listed alike
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM vault WHERE principal = ? AND alias = ?", (principal, alias)).fetchone():
                raise Conflict(f"a secret named {alias!r} exists already")
            atom = ids.atom_id()
            db.execute(
                "INSERT INTO vault(atom_id, principal, alias, context, sealed, concepts, created_at)"
                " VALUES (?,?,?,?,?,?,?)",
                (atom, principal, alias, context, sealed_b64, json.dumps(list(concepts)), timefmt.now_us()),
            )
        return atom

    def vault_sealed(self, principal: str, alias: str) -> str:
        """The sealed value of the principal's secret under `alias` (the use path; never with its context).

        Raises:
            NotFound: the principal has no secret of that name.
        """
        with self.reading() as db:
            row = db.execute(
                "SELECT sealed FROM vault WHERE principal = ? AND alias = ?", (principal, alias)
            ).fetchone()
        if row is None:
            raise NotFound(f"no secret named {alias!r} in your vault (`mnemo vault list` shows them)")
        return str(row[0])
