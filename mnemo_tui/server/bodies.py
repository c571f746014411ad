"""Provides the request bodies of the REST dialect as pydantic models, and their parsing: a body that does not
fit its model is a 422 with the flat envelope, `details.errors` listing every problem as `{loc, msg, type}`.

Each model follows its component schema in `openapi.json` (the hosted service's), field by field and bound
by bound; where mnemo is stricter on purpose the field says so, and `docs/server.md` ("Request bodies")
lists each difference. The models are strict: a JSON value of the wrong type is refused, as the schema
refuses it (the hosted service's models are lax: they take `"5"` for 5). Two readings follow what clients
send, the SDK and generated clients alike (`Integer`, `Absent`).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticError
from pydantic_core import PydanticCustomError

from mnemo_tui import timefmt
from mnemo_tui.errors import MnemoError, ValidationError

Detail = dict[str, Any]


class BodyInvalid(MnemoError):
    """A body that does not match its schema: 422, the flat envelope with `details.errors` (no top-level `detail`)."""

    code = "VALIDATION_ERROR"
    status = 422
    exit_code = 2

    def __init__(self, detail: list[Detail]) -> None:
        first = detail[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "body"
        more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
        super().__init__(f"{where}: {first['msg']}{more}", details={"errors": detail})
        self.detail = detail


def _instant(text: str) -> str:
    """`format: date-time`, asserted: an instant `timefmt.parse_iso` reads (a naive one is UTC)."""
    try:
        timefmt.parse_iso(text)
    except ValidationError:
        raise PydanticCustomError("datetime_parsing", "Input should be a valid datetime") from None
    return text


Instant = Annotated[str, AfterValidator(_instant)]


def _whole(value: Any) -> Any:
    """A JSON number without a fraction (`10.0`, `1e1`) as the integer it is: JSON Schema counts it as an
    integer, and clients send it (the SDK passes `limit=10.0` through). A fraction, a string or a boolean
    is left as it is, and refused as no integer."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# Every integer field of a body: an integer-valued number is read as an integer (docs/server.md, item 1).
Integer = Annotated[int, BeforeValidator(_whole)]


def _absent(value: Any) -> Any:
    """An empty string as no value: the SDK sends `fingerprint=""` as it is, and the hosted models take it."""
    return None if value == "" else value


# An optional text where `""` has no meaning of its own (a fingerprint, an external ref): read as absent.
Absent = BeforeValidator(_absent)


class _Body(BaseModel):
    """A schema without `additionalProperties: false`: fields it does not name are taken and ignored."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore", frozen=True, defer_build=True)


class _Closed(_Body):
    """A schema with `additionalProperties: false`: a field it does not name is refused."""

    model_config = ConfigDict(extra="forbid")


class Recent(_Body):
    """`RecentRequestSchema` (`POST /memory/recent`)."""

    domain: str | None = None
    since: Instant | None = None
    until: Instant | None = None
    exclude_author: str | None = None
    limit: Integer = Field(20, ge=1, le=100)
    cursor: Annotated[str, Field(max_length=512)] | None = None
    include_history: bool = False


class Read(_Body):
    """`ReadRequestSchema` (`POST /memory/read`, each query of `read-batch`)."""

    query: str = Field(min_length=1, max_length=5000)
    top_k: Integer = Field(10, ge=1, le=500)
    domain: str | None = None
    min_relevance: float = Field(0.3, ge=0.0, le=1.0)
    fingerprint: Annotated[str | None, Absent] = None
    include_associations: bool = True
    concepts: list[str] = Field(default_factory=list, max_length=50)
    two_pass: bool | None = None
    strategy: Literal["auto", "precise", "multi_hop", "temporal", "exhaustive"] | None = None
    include_timings: bool = False
    order_by: Literal["relevance", "recency"] = "relevance"
    since: Instant | None = None
    until: Instant | None = None
    exclude_author: str | None = None
    include_history: bool = False
    author_principal: str | None = None
    author_agent: str | None = None
    author_client_env: str | None = None
    author_is_external: bool | None = None
    # mnemo's own: how far near-copies are dropped (0 keeps them; routes.py).
    diversity: float = Field(0.0, ge=0.0, le=1.0)


class ReadBatch(_Body):
    """`ReadBatchRequestSchema` (`POST /memory/read-batch`)."""

    queries: list[Read] = Field(min_length=1, max_length=50)


class MetadataCondition(_Body):
    """`MetadataFilterSchema`: one condition of a search's `metadata_filter`."""

    # Rust's regex (pydantic's): `$` is the end of the text only, so a trailing newline is refused.
    key: str = Field(max_length=64, pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    op: str = Field("eq", pattern=r"^(eq|contains|in)$")
    value: Any


class Query(_Body):
    """`QueryRequestSchema` (`POST /memory/query`)."""

    query: str = Field(min_length=1, max_length=5000)
    domains: list[str] | None = None
    metadata_filter: list[MetadataCondition] | None = None
    top_k: Integer = Field(10, ge=1, le=500)
    min_relevance: float = Field(0.3, ge=0.0, le=1.0)
    include_associations: bool = True
    concepts: list[str] = Field(default_factory=list)
    include_history: bool = False


class Author(_Closed):
    """`ProvenanceWriteSchema`: a write's optional `author` (only `agent`, `agent_name`, `client_env` are used)."""

    principal: str | None = None
    agent: str | None = None
    agent_name: str | None = None
    client_env: str | None = None
    is_external: bool = False


class Write(_Closed):
    """`WriteRequestSchema` (`POST /memory/write`)."""

    content: str = Field(min_length=1, max_length=10000)
    # Each concept at most 200 characters: mnemo's own bound (docs/server.md), as the engine's `check_concepts`.
    concepts: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list, max_length=256)
    domain: str = Field("general", max_length=100)
    fingerprint: Annotated[Annotated[str, Field(max_length=512)] | None, Absent] = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    external_ref: Annotated[Annotated[str, Field(max_length=255)] | None, Absent] = None
    supersedes: Annotated[list[uuid.UUID], Field(max_length=32)] | None = None
    author: Author | None = None


class BatchWrite(Write):
    """An item of `WriteBatchRequestSchema`: a write that supersedes nothing (the schema's description says
    so; its bounds do not)."""

    @field_validator("supersedes")
    @classmethod
    def _supersedes_nothing(cls, value: list[uuid.UUID] | None) -> list[uuid.UUID] | None:
        if value:
            raise PydanticCustomError("value_error", "supersedes is refused in a batch")
        return value


class WriteBatch(_Body):
    """`WriteBatchRequestSchema` (`POST /memory/write-batch`)."""

    items: list[BatchWrite] = Field(min_length=1, max_length=500)


class CreateRoom(_Closed):
    """`CreateRoomRequestSchema` (`POST /memory/rooms`)."""

    name: str = Field(min_length=1, max_length=200)
    description: Annotated[str, Field(max_length=2000)] | None = None


class CreateInvite(_Closed):
    """`CreateInviteRequestSchema` (`POST /memory/rooms/{room_id}/invites`)."""

    scope: str = "read_write"
    expires_in_days: Integer = Field(7, ge=1, le=90)
    max_uses: Integer = Field(1, ge=1, le=1000)


class JoinRoom(_Closed):
    """`JoinRoomRequestSchema` (`POST /memory/rooms/join`)."""

    code: str = Field(min_length=1, max_length=200)


class CreateSecret(_Body):
    """`CreateSecretRequest` (`POST /vault/secrets`)."""

    alias: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$")
    context: str = Field(max_length=10000)
    sealed_secret_b64: str = Field(max_length=262144)
    # An entry's concept bounds (mnemo's own, docs/server.md), as the engine's `check_concepts` in `vault_add`.
    concepts: list[Annotated[str, Field(max_length=200)]] = Field(default_factory=list, max_length=256)
    domain: str = "secrets"
    metadata: dict[str, Any] = Field(default_factory=dict)


class ExternalRef(_Body):
    """`ExternalRefRequestSchema` (`POST /memory/atoms/by-external-ref`)."""

    external_ref: str = Field(min_length=1, max_length=255)


class Feedback(_Body):
    """`FeedbackRequestSchema` (`POST /memory/feedback`)."""

    # mnemo's own bound: at most 500 ids a call (as many as a batch writes).
    atom_ids: list[uuid.UUID] = Field(max_length=500)
    outcome: float = Field(ge=-1.0, le=1.0)
    concepts: list[str] = Field(default_factory=list)
    query_concepts: list[str] = Field(default_factory=list)
    domain: str = "general"


class Consolidate(_Body):
    """`ConsolidateRequestSchema` (`POST /memory/consolidate`)."""

    domain: str | None = None


class Graph(_Closed):
    """`GraphRequestSchema` (`POST /memory/graph`)."""

    # Each seed at most 200 characters: the schema's description says so, its bounds do not.
    seeds: list[Annotated[str, Field(max_length=200)]] = Field(min_length=1, max_length=20)
    depth: Integer = Field(1, ge=1, le=3)
    domain: str | None = None
    min_weight: Annotated[float, Field(ge=0.0)] | None = None
    limit: Integer = Field(100, ge=1, le=500)


M = TypeVar("M", bound=BaseModel)

_MISSING = [{"type": "missing", "loc": ["body"], "msg": "Field required"}]


def parse(model: type[M], raw: bytes, *, again: bool = True) -> M:
    """The body `raw` read as `model` (an empty body is missing, as the hosted service answers).

    Raises:
        BodyInvalid: the body does not fit the model, is missing, or holds JSON no store can keep
            (NaN, Infinity, a lone surrogate): 422.
        ValidationError: the body is not JSON at all: 400.
    """
    if not raw.strip():
        raise BodyInvalid(_MISSING)
    # `find`, not `in`: `bytes in bytes` first tries its operand as an int, building a TypeError (~2k instructions).
    if raw.find(b"NaN") >= 0 or raw.find(b"Infinity") >= 0:
        _decoded(raw)  # pydantic's parser reads them as numbers, anywhere (a metadata value too): refused here
    try:
        return model.model_validate_json(raw)
    except PydanticError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        if errors[0]["type"] != "json_invalid" or not again:
            raise BodyInvalid(
                [{"type": e["type"], "loc": ["body", *e["loc"]], "msg": e["msg"]} for e in errors]
            ) from None
    # Not JSON to pydantic's parser, which reads UTF-8 only: said why as `json.loads` reads it (which reads
    # UTF-16 and -32 too, and such a body is then read again as UTF-8).
    return parse(model, json.dumps(_decoded(raw)).encode(), again=False)


class _NotJson(ValueError):
    """NaN, Infinity and -Infinity: Python reads them, JSON has no such numbers."""


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON number")


_JSON = json.JSONDecoder(parse_constant=_no_constant)


def _decoded(raw: bytes) -> Any:
    """The body as `json.loads` reads it, with NaN, Infinity and lone surrogates refused (422).

    Raises:
        BodyInvalid: JSON that cannot be stored.
        ValidationError: not JSON.
    """
    try:
        # As `json.loads` reads bytes (UTF-8, -16 or -32, surrogates passed through), with one decoder.
        text = raw.decode(json.detect_encoding(raw), "surrogatepass")
        value = _JSON.decode(text)
    except _NotJson as exc:
        raise BodyInvalid([{"type": "json_invalid", "loc": ["body"], "msg": str(exc)}]) from None
    except (ValueError, UnicodeDecodeError):
        raise ValidationError("request body is not valid JSON") from None
    except RecursionError:
        raise ValidationError("request body is nested too deeply") from None
    where = _lone_surrogate(value, ("body",))
    if where is not None:
        raise BodyInvalid([{"type": "string_unicode", "loc": list(where), "msg": "Input should be valid Unicode text"}])
    return value


def _lone_surrogate(value: Any, loc: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    """Where a string holds a lone surrogate (a `\\ud800` escape): text that cannot be stored or sent."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return loc
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, loc) or _lone_surrogate(item, (*loc, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate(item, (*loc, index))
            if found is not None:
                return found
    return None


def require_uuid(value: str, name: str) -> str:
    """A path parameter that must be a UUID (422 otherwise, as the hosted service answers)."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise BodyInvalid(
            [{"type": "uuid_parsing", "loc": ["path", name], "msg": "Input should be a valid UUID"}]
        ) from None
