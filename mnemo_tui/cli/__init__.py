"""Provides the `mnemo` console script's entry point: a start-up fast path, the Typer app, errors to exit codes."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from mnemo_tui.cli.flags import CATCHUP, HOISTED, HOISTED_VALUED, OWN_OPTIONS, RECENT, ROOT
from mnemo_tui.errors import ExitCode

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from mnemo_tui.cli.flags import Flag
    from mnemo_tui.cli.options import CatchupOptions, RecentOptions, RootOptions

    Parsed = TypeVar("Parsed", RootOptions, RecentOptions, CatchupOptions)

# The fast path: `recent` and `catchup` with options it fully understands skip importing Typer
# (most of a cold start; docs/performance.md) and call the very same functions as the Typer commands, with the
# options both read from the tables of mnemo_tui/cli/flags.py. Anything else, --help or a
# malformed option included, goes to Typer, so usage errors stay Typer's.
INTERRUPTED = "\nmnemo: interrupted; nothing half-committed\n"


def _options(args: list[str], table: dict[str, Flag], *, stop_at_word: bool) -> tuple[dict[str, Any], int] | None:
    """Parse `--opt value`, `--opt=value` and flags of `table`; None at anything else (Typer then decides)."""
    by_flag = {spelling: (name, opt) for name, opt in table.items() for spelling in opt.flags}
    found: dict[str, Any] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            if stop_at_word:
                return found, i
            return None
        name, eq, inline = arg.partition("=")
        known = by_flag.get(name)
        if known is None:
            return None
        key, opt = known
        if opt.kind == "flag":
            if eq:
                return None
            found[key] = True
            i += 1
            continue
        if eq and not name.startswith("--"):
            return None
        if eq:
            value = inline
            i += 1
        else:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            value = args[i + 1]
            i += 2
        if opt.kind == "int":
            if not (value.isascii() and value.isdigit()):  # `²` is a digit to Python, not to int()
                return None
            found[key] = int(value)
        else:
            found[key] = value
    return found, i


def _values(options: type[Parsed], table: dict[str, Flag], given: dict[str, Any]) -> Parsed:
    """Every option of `table`: the value given, else its default (in the table's order, the fields' own: the
    quick way to build a `Value`)."""
    return options(*[given.get(name, opt.default) for name, opt in table.items()])


def _fast(args: list[str]) -> int | None:
    """Run `recent` or `catchup` without Typer when every argument is understood; None otherwise."""
    debug = False
    rest = list(args)
    while rest and rest[0] == "--debug":
        debug = True
        rest.pop(0)
    parsed = _options(rest, ROOT, stop_at_word=True)
    if parsed is None:
        return None
    root, used = parsed
    rest = rest[used:]
    if root.get("version"):
        from mnemo_tui import __version__

        sys.stdout.write(f"mnemo {__version__}\n")
        return ExitCode.OK
    if not rest or rest[0] not in ("recent", "catchup"):
        return None
    table = RECENT if rest[0] == "recent" else CATCHUP
    opts = _options(rest[1:], table, stop_at_word=False)
    if opts is None:
        return None
    from mnemo_tui.cli import feed
    from mnemo_tui.cli.context import Context
    from mnemo_tui.cli.options import CatchupOptions, RecentOptions, RootOptions

    root["debug"] = debug or bool(root.get("debug"))
    context = Context.of(_values(RootOptions, ROOT, root))
    try:
        if table is RECENT:
            return feed.recent(context, _values(RecentOptions, RECENT, opts[0]))
        return feed.catchup(context, _values(CatchupOptions, CATCHUP, opts[0]))
    finally:
        context.close()


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("MNEMO_DEBUG", "") not in ("", "0")


def _typer(args: list[str]) -> int:
    import signal

    from typer import Abort, Exit

    from mnemo_tui.cli.app import app
    from mnemo_tui.cli.click_names import ClickException, NoArgsIsHelpError, PacifyFlushWrapper

    # Typer turns Ctrl-C into a bare exit code 130; remember it was one, to say what it means.
    interrupted: list[bool] = []

    def on_sigint(signum: int, frame: object) -> None:
        interrupted.append(True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        result = app(args=args, prog_name="mnemo", standalone_mode=False)
    except Exit as exc:
        result = int(exc.exit_code)
    except NoArgsIsHelpError as exc:
        # Bare `mnemo` (or `mnemo rooms`) asks what there is: the help on stdout, exit 0, as gh does.
        sys.stdout.write((exc.ctx.get_help() if exc.ctx is not None else "") + "\n")
        return ExitCode.OK
    except ClickException as exc:
        _show_click_error(exc)
        return int(exc.exit_code)
    except Abort:
        interrupted.append(True)
        result = ExitCode.INTERRUPTED
    except SystemExit as exc:
        if isinstance(sys.stdout, PacifyFlushWrapper):  # Typer's answer to a closed pipe: stop quietly
            raise BrokenPipeError from exc
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        sys.stderr.write(INTERRUPTED)
        return ExitCode.INTERRUPTED
    return int(result) if isinstance(result, int) else ExitCode.OK


def _show_click_error(exc: Exception) -> None:
    """A usage error in two lines (docs/cli.md: errors are one or two lines): the problem, then where help is."""
    from mnemo_tui.cli.click_names import ClickException, UsageError

    if isinstance(exc, UsageError):
        command = exc.ctx.command_path if exc.ctx is not None else "mnemo"
        sys.stderr.write(f"mnemo: {exc.format_message()}\nTry '{command} --help' for help.\n")
    elif isinstance(exc, ClickException):
        exc.show()


def _hoist(args: list[str]) -> list[str]:
    """Accept the root flags of `HOISTED` anywhere before a `--` (`mnemo recent --scope x --debug --utc`)."""
    end = args.index("--") if "--" in args else len(args)
    head = [a for a in args[:end] if a not in HOISTED]
    if len(head) == end:
        return args
    found = [f for f in HOISTED if f in args[:end]]
    return [*found, *head, *args[end:]]


def _hoist_valued(args: list[str]) -> list[str]:
    """Accept the root options of `HOISTED_VALUED` after the command too (`mnemo recent --store PATH`), before a `--`.

    Each is moved in front of the command with its value, as given (`--store PATH` or `--store=PATH`), unless the
    command has an option of that spelling itself (`OWN_OPTIONS`: `login --endpoint URL` is login's own).
    """
    end = args.index("--") if "--" in args else len(args)
    own = OWN_OPTIONS.get(_command_of(args) or "", ())
    wanted = [flag for flag in HOISTED_VALUED if flag not in own]
    head, found = list(args[:end]), list[str]()
    i = 0
    while i < len(head):
        if head[i] in wanted and i + 1 < len(head):
            found += head[i : i + 2]
            del head[i : i + 2]
        elif head[i].partition("=")[0] in wanted and "=" in head[i]:
            found.append(head.pop(i))
        else:
            i += 1
    return [*found, *head, *args[end:]] if found else args


def _check_hoisted_value(args: list[str]) -> None:
    """Refuse a root option of `HOISTED_VALUED` left last after the command without its value (exit 2), as Click
    does before it: Click would call it no such option (`mnemo recent --endpoint`), which it is."""
    from mnemo_tui.errors import ValidationError

    end = args.index("--") if "--" in args else len(args)
    flag = args[end - 1] if end else ""
    if flag in HOISTED_VALUED and flag not in OWN_OPTIONS.get(_command_of(args) or "", ()) and end > 1:
        raise ValidationError(f"Option '{flag}' requires an argument.")


def _check_utf8(args: list[str]) -> None:
    """Refuse an argument that is not valid UTF-8 (exit 2) before it reaches a store or a terminal."""
    from mnemo_tui.errors import ValidationError

    for number, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "replace").decode("utf-8")
            raise ValidationError(f"argument {number} ({shown!r}) is not valid UTF-8 text") from None


def _check_short_format(args: list[str]) -> None:
    """Refuse `recent -f` with no value, or followed by an option, pointing to `-F` (exit 2).

    `-f` is `--format` here (scripts use it), while journalctl, tail and `kubectl logs` follow with
    it: `mnemo recent -f` is someone who wants `-F`, and Click would take the next option as its value.

    Raises:
        ValidationError: `-f` last, or before another option, ahead of any `--`.
    """
    from mnemo_tui.errors import ValidationError

    end = args.index("--") if "--" in args else len(args)
    for i, arg in enumerate(args[:end]):
        if arg == "-f" and (i + 1 == end or args[i + 1].startswith("-")) and _command_of(args) == "recent":
            raise ValidationError(
                "-f is --format here and needs a value (table, json or ndjson); did you mean -F (follow)?"
            )


def _command_of(args: list[str]) -> str | None:
    """The command word of `args`: the first word that is not a root option or its value."""
    takes_value = {flag for opt in ROOT.values() if opt.kind != "flag" for flag in opt.flags}
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-"):
            return arg
        i += 2 if arg in takes_value else 1
    return None


def _prepare_streams() -> None:
    """Streams the caller closed (`>&-`, `2>&-`) read and write /dev/null, so success stays success and no
    file opened later can take their descriptor; text the terminal's encoding cannot show degrades to
    visible escapes (`\\u2705`) instead of failing (machine formats switch to UTF-8: `output.check_format`)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", closefd=False))  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    """Run mnemo; returns the process exit code (docs/cli.md)."""
    _prepare_streams()
    args = _hoist_valued(_hoist(sys.argv[1:] if argv is None else argv))
    debug = _debug_requested(args)
    from mnemo_tui.errors import MnemoError
    from mnemo_tui.sanitize import line  # an error's message may quote an endpoint or a stored name

    try:
        _check_utf8(args)
        _check_hoisted_value(args)
        if "_MNEMO_COMPLETE" not in os.environ:
            _check_short_format(args)
        # Shell completion (`_MNEMO_COMPLETE`) is Typer's: the fast path would run the command instead.
        fast = None if "_MNEMO_COMPLETE" in os.environ else _fast(args)
        code = fast if fast is not None else _typer(args)
        from mnemo_tui.cli.output import finish_stdout

        finish_stdout()
        sys.stdout.flush()  # inside the handlers below: a full disk is said here, not by Python at exit
        return code
    except UnicodeEncodeError as exc:
        if "surrogates" not in str(exc):
            sys.stderr.write(f"mnemo: text could not be written in this terminal's encoding ({exc.reason})\n")
            return ExitCode.BACKEND
        # Bytes that are not UTF-8 arrived on stdin (Python keeps them as lone surrogates): bad input, not a bug.
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write("mnemo: the input is not valid UTF-8 text (stdin or a file read as text)\n")
        return ExitCode.USAGE
    except MnemoError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"mnemo: {line(exc.message)}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(INTERRUPTED)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.OK
    except OSError as exc:
        if not _cannot_write(exc):
            return _internal_error(exc, debug)
        # A full disk or a broken device under stdout (`> /dev/full`): local trouble, not the backend's (5).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # what is still buffered would fail again at exit
        sys.stderr.write(f"mnemo: cannot write the output: {exc.strerror or exc}\n")
        return ExitCode.LOCAL_STATE
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback unless asked
        return _internal_error(exc, debug)


def _cannot_write(exc: OSError) -> bool:
    """A write that cannot land (no space, quota, file too large, a failing device): local trouble, not a bug."""
    import errno

    return exc.errno in {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def _internal_error(exc: Exception, debug: bool) -> int:
    from mnemo_tui.sanitize import line

    if debug:
        import traceback

        traceback.print_exc()
    sys.stderr.write(
        f"mnemo: internal error: {type(exc).__name__}: {line(str(exc))} (re-run with --debug for details)\n"
    )
    return ExitCode.BACKEND


def run() -> None:
    """The console script."""
    sys.exit(main())
