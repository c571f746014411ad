"""Provides the Typer side of the CLI: a command generated from each `Args` declaration, and the invocation's context."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from mnemo_tui.cli.context import Context
from mnemo_tui.cli.options import Args, Opt, RootArgs

A = TypeVar("A", bound=Args)
Body = Callable[[Context, A], "int | None"]


def ctx_of(ctx: typer.Context) -> Context:
    """The invocation's `Context`, resolved from the root options on first use.

    Resolving lazily keeps `mnemo COMMAND --help` working when config.toml is broken.
    """
    root_ctx = ctx.find_root()
    obj = root_ctx.obj
    if isinstance(obj, RootArgs):
        obj = Context.of(obj)
        root_ctx.obj = obj
        root_ctx.call_on_close(obj.close)
    assert isinstance(obj, Context)
    return obj


def _annotation(opt: Opt[Any]) -> Any:
    """The `Annotated[type, typer.Option(...)]` Typer reads an option from."""
    base: Any
    if opt.kind == "flag":
        base = bool
    elif opt.kind == "int":
        base = int if opt.default is not None else int | None
    elif opt.kind == "arguments":
        base = list[str]
    elif opt.kind == "texts":
        base = list[str] | None
    else:
        base = str if opt.required or opt.default is not None else str | None
    if opt.kind in ("argument", "arguments"):
        info: Any = typer.Argument(metavar=opt.metavar, help=opt.help)
    else:
        info = typer.Option(*opt.flags, metavar=opt.metavar, help=opt.help)
    return Annotated[base, info]


def _signature(args: type[Args], first: inspect.Parameter) -> inspect.Signature:
    params = [first]
    for opt in args.options():
        default = inspect.Parameter.empty if opt.required else opt.default
        # Keyword-only: a required option may follow ones with defaults (Typer passes every value by name).
        kind = inspect.Parameter.KEYWORD_ONLY
        params.append(inspect.Parameter(opt.name, kind, default=default, annotation=_annotation(opt)))
    return inspect.Signature(params)


def _typed(fn: Callable[..., Any], signature: inspect.Signature, doc: str | None) -> Callable[..., Any]:
    """`fn` with the signature and help Typer builds its command from."""
    fn.__signature__ = signature  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    fn.__doc__ = doc
    return fn


HELP_FLAGS = {"help_option_names": ["-h", "--help"]}
_CTX = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)


def add(app: typer.Typer, name: str, args: type[A], body: Body[A]) -> None:
    """Register a command: its options, help and summary come from `args`; `body` runs it."""

    def command(ctx: typer.Context, **values: Any) -> int | None:
        c = ctx_of(ctx)
        c.creates_store = args.creates_store
        return body(c, args(**values))

    app.command(name, short_help=args.summary)(_typed(command, _signature(args, _CTX), args.__doc__))


def group(app: typer.Typer, name: str, help: str, *, summary: str | None = None) -> typer.Typer:
    """A command group (`mnemo rooms ...`)."""
    sub = typer.Typer(
        help=help, short_help=summary, no_args_is_help=True, rich_markup_mode=None, context_settings=HELP_FLAGS
    )
    app.add_typer(sub, name=name)
    return sub


def root_app(help: str) -> typer.Typer:
    """The `mnemo` app, whose root options (`RootArgs`) are kept until a command needs the settings."""
    app = typer.Typer(
        name="mnemo",
        help=help,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        no_args_is_help=True,
        context_settings=HELP_FLAGS,
    )

    def root(ctx: typer.Context, **values: Any) -> None:
        ctx.obj = RootArgs(**values)

    app.callback()(_typed(root, _signature(RootArgs, _CTX), RootArgs.__doc__))
    return app
