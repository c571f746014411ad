"""Provides the `mnemo` console script's entry point: run the Typer app, map errors to exit codes."""

from __future__ import annotations

import os
import sys


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("MNEMO_DEBUG", "") not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    """Run mnemo; returns the process exit code (CLI.md)."""
    args = sys.argv[1:] if argv is None else argv
    debug = _debug_requested(args)
    from mnemo_tui.errors import MnemoError

    try:
        from typer import Abort, Exit
        from typer._click.exceptions import ClickException

        from mnemo_tui.cli.app import app

        try:
            result = app(args=args, prog_name="mnemo", standalone_mode=False)
        except Exit as exc:
            return int(exc.exit_code)
        except ClickException as exc:
            exc.show()
            return int(exc.exit_code)
        except Abort:
            sys.stderr.write("\nmnemo: interrupted; nothing half-committed\n")
            return 130
        return int(result) if isinstance(result, int) else 0
    except MnemoError as exc:
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"mnemo: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("\nmnemo: interrupted; nothing half-committed\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback unless asked
        if debug:
            import traceback

            traceback.print_exc()
        sys.stderr.write(f"mnemo: internal error: {type(exc).__name__}: {exc} (re-run with --debug for details)\n")
        return 5


def run() -> None:
    """The console script."""
    sys.exit(main())
