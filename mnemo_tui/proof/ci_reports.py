"""Provides the reports `check` and `verify` write where CI systems read them (`--report FORMAT[:PATH]`).

- `junit:PATH`: JUnit XML (Jenkins' junit-10.xsd), one test case per check or per group of ids;
- `json:PATH`: the stable document of `--format json` (docs/cli.md);
- `github`: workflow commands on stderr (`::error` annotations, capped) and a Markdown job summary
  appended to `$GITHUB_STEP_SUMMARY` when it is set.

A proof that could not run (the backend unreachable, a bad input) still writes every report, as an
error: a stale or empty file must never be read as a pass. docs/ci.md says what each holds.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from mnemo_tui import sanitize
from mnemo_tui.errors import ExitCode, MnemoError, ValidationError
from mnemo_tui.limits import dumps
from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from mnemo_tui.proof.checks import CheckReport
    from mnemo_tui.proof.verify import VerifyResult

FORMATS = ("junit", "json", "github")
# GitHub shows 10 error annotations a step and silently drops the rest; past that, one notice counts them.
ANNOTATIONS_SHOWN = 10
# GitHub refuses a step summary file over 1 MiB; what we append stays under it with room to spare.
SUMMARY_BYTES = 1024 * 1024
SUMMARY_MARGIN = 16 * 1024
VERIFY_CASES = ("every-expected-id-walked", "no-id-walked-twice")


class Case(Value):
    """One verdict as the reports show it: a check, or a group of expected ids."""

    name: str
    passed: bool
    message: str
    items: tuple[str, ...] = ()  # the ids concerned, each with what is known of it
    label: str = ""  # what one item is, for its annotation: "missing id"


class Proof(Value):
    """What a report needs of one run: the verdicts, the stable document, or why it could not run."""

    command: str  # "check" or "verify"
    target: str
    cases: tuple[Case, ...]
    document: dict[str, Any]
    error: str | None = None  # could not run: the message of the error that ended it
    exit_code: int = 0

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.cases)

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return f"COULD NOT RUN (exit {self.exit_code})"
        return "PASS" if self.passed else "FAIL"


def from_check(report: CheckReport) -> Proof:
    cases = tuple(Case(c.name, c.passed, c.detail) for c in report.checks)
    return Proof("check", report.target, cases, report.wire())


def from_verify(result: VerifyResult, where: str) -> Proof:
    def noted(atom_id: str) -> str:
        seen = result.sighting(atom_id)
        return f"{atom_id} ({seen.note})" if seen is not None else atom_id

    missing = tuple(noted(i) for i in result.missing)
    found = f"{result.expected} expected, {result.seen} distinct entries walked in {result.pages} page(s)"
    cases = (
        Case(
            VERIFY_CASES[0],
            not missing,
            f"{len(missing)} of {result.expected} expected id(s) missing",
            missing,
            "missing id",
        ),
        Case(
            VERIFY_CASES[1],
            not result.repeated,
            f"{len(result.repeated)} id(s) returned twice",
            result.repeated,
            "id returned twice",
        ),
    )
    return Proof("verify", f"walked {where}: {found}", cases, result.wire())


def could_not_run(command: str, message: str, exit_code: int) -> Proof:
    """Every case an error, and a document whose `passed` is false and whose counts are unknown (null)."""
    from mnemo_tui.proof.checks import CHECK_NAMES

    names = CHECK_NAMES if command == "check" else VERIFY_CASES
    why = f"could not run (exit {exit_code}): {message}"
    document: dict[str, Any] = (
        {"passed": False, "checks": []}
        if command == "check"
        else {"passed": False, "expected": None, "seen": None, "missing": None, "repeated": None}
    )
    document["error"] = {"exit_code": exit_code, "message": message}
    cases = tuple(Case(name, False, why) for name in names)
    return Proof(command, f"mnemo {command} could not run", cases, document, error=message, exit_code=exit_code)


# -- which reports: parsed and opened before the proof runs ------------------------------------


class Spec(Value):
    format: str
    path: str | None


def parse(values: list[str], inputs: tuple[str, ...] = ()) -> list[Spec]:
    """`FORMAT[:PATH]` values: `junit:PATH`, `json:PATH`, `github`.

    Args:
        values: the `--report` values, in order.
        inputs: files the run reads (`--expect`): a report there would empty it before it is read.

    Raises:
        ValidationError: an unknown format, a missing or unexpected path, `-` (stdout is the result),
            a path or `github` twice, a path that is one of `inputs` (exit 2).
    """
    specs: list[Spec] = []
    for value in values:
        name, colon, path = value.partition(":")
        if name not in FORMATS:
            raise ValidationError(f"--report {value!r}: the format must be one of {', '.join(FORMATS)}")
        if name == "github" and colon:
            raise ValidationError(
                "--report github takes no path: annotations go to stderr, the summary to $GITHUB_STEP_SUMMARY"
            )
        if name != "github" and not path:
            raise ValidationError(f"--report {name} needs a file: --report {name}:PATH (stdout carries the result)")
        if path == "-" or (path and _is_stdout(path)):
            raise ValidationError(f"--report {value}: stdout carries the result; name a file")
        if path and any(_same_file(path, source) for source in inputs if source != "-"):
            raise ValidationError(f"--report {value!r} would overwrite the file it reads (--expect)")
        spec = Spec(name, path or None)
        if spec in specs or (spec.path is not None and spec.path in {s.path for s in specs}):
            raise ValidationError(f"--report {value!r} is given twice")
        specs.append(spec)
    return specs


def _is_stdout(path: str) -> bool:
    """`/dev/stdout`, `/proc/self/fd/1`, or the very file stdout is redirected to: the result and the report
    would interleave there. /dev/null, where both may go, is not refused."""
    try:
        there, out = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):  # no such file yet, or no stdout to compare with
        return False
    return (there.st_dev, there.st_ino) == (out.st_dev, out.st_ino) and os.path.realpath(path) != os.devnull


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


class Reports:
    """The report files of one run, opened (and emptied) before it, so a failure to write is exit 2
    up front and an earlier run's report at the same path cannot outlive this one."""

    def __init__(self, specs: list[Spec]) -> None:
        self.specs = specs
        self.files: dict[str, IO[str]] = {}
        self.written = False
        try:
            for spec in specs:
                if spec.path is not None:
                    Path(spec.path).parent.mkdir(parents=True, exist_ok=True)  # as pytest's --junitxml does
                    self.files[spec.path] = open(spec.path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
        except OSError as exc:
            self.close()
            raise ValidationError(f"cannot write --report file {exc.filename}: {exc.strerror or exc}") from None

    @property
    def github(self) -> bool:
        return any(s.format == "github" for s in self.specs)

    def write(self, proof: Proof) -> None:
        """Write every report of the run (stdout is flushed first: the result comes before its annotations)."""
        sys.stdout.flush()
        for spec in self.specs:
            if spec.format == "github":
                write_github(proof, sys.stderr, os.environ.get("GITHUB_STEP_SUMMARY") or None)
                continue
            assert spec.path is not None
            out = self.files[spec.path]
            out.write(junit(proof) if spec.format == "junit" else dumps(proof.document) + "\n")
        self.close()
        self.written = True

    @contextmanager
    def guard(self, command: str) -> Iterator[None]:
        """Around a run: whatever ends it before its reports were written writes them as "could not run"."""
        try:
            yield
        except MnemoError as exc:
            if not self.written:
                self.write(could_not_run(command, exc.message, exc.exit_code))
            raise
        except KeyboardInterrupt:
            if not self.written:
                self.write(could_not_run(command, "interrupted", ExitCode.INTERRUPTED))
            raise
        except Exception as exc:
            if not self.written:
                self.write(could_not_run(command, f"internal error: {type(exc).__name__}: {exc}", 5))
            raise
        finally:
            self.close()

    def close(self) -> None:
        for out in self.files.values():
            out.close()
        self.files = {}


# -- JUnit XML ------------------------------------------------------------------------------------

# XML 1.0 cannot carry these at all, even escaped; the sanitizer shows the controls, this drops the rest.
_NOT_XML = re.compile("[\ufffe\uffff]")


def _xml_line(value: str) -> str:
    return _NOT_XML.sub("", sanitize.line(value))


def _xml_block(value: str) -> str:
    return _NOT_XML.sub("", sanitize.block(value))


def junit(proof: Proof) -> str:
    """One test suite, one test case per `Case`; a failed case carries its reason and its ids."""
    from xml.etree import ElementTree as ET

    failures = sum(1 for c in proof.cases if not c.passed) if proof.error is None else 0
    errors = len(proof.cases) if proof.error is not None else 0
    counts = {"tests": str(len(proof.cases)), "failures": str(failures), "errors": str(errors)}
    name = f"mnemo {proof.command}"
    root = ET.Element("testsuites", {"name": name, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": name, **counts, "skipped": "0"})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", {"name": "target", "value": _xml_line(proof.target)})
    for case in proof.cases:
        element = ET.SubElement(suite, "testcase", {"classname": f"mnemo.{proof.command}", "name": case.name})
        if case.passed:
            ET.SubElement(element, "system-out").text = _xml_block(case.message)
            continue
        kind = "error" if proof.error is not None else "failure"
        reason = ET.SubElement(element, kind, {"message": _xml_line(case.message), "type": kind})
        reason.text = _xml_block("\n".join([case.message, *case.items]))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# -- GitHub workflow commands and job summary ------------------------------------------------------


def escape_data(value: str) -> str:
    """A workflow command's message: `%`, CR and LF escaped, so no text ends the command or starts another."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """A workflow command's property value: as data, and `:` and `,` too (they end a value)."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation_lines(proof: Proof) -> list[str]:
    """The `::error` lines of a run, capped at what GitHub shows, then one `::notice` counting the rest."""
    found: list[tuple[str, str]] = []
    if proof.error is not None:
        found.append((f"mnemo {proof.command} could not run", f"exit {proof.exit_code}: {proof.error}"))
    for case in proof.cases if proof.error is None else ():
        if case.passed:
            continue
        title = f"mnemo {proof.command}: {case.name}"
        if case.items:
            found.extend((title, f"{case.label} {item}") for item in case.items)
        else:
            found.append((title, case.message))
    lines = [
        f"::error title={escape_property(t)}::{escape_data(sanitize.line(m))}" for t, m in found[:ANNOTATIONS_SHOWN]
    ]
    if len(found) > ANNOTATIONS_SHOWN:
        more = len(found) - ANNOTATIONS_SHOWN
        title = escape_property(f"mnemo {proof.command}")
        lines.append(
            f"::notice title={title}::{more} more failure(s) not annotated (GitHub shows {ANNOTATIONS_SHOWN} a step): "
            "the job summary lists them, and --report junit:PATH or json:PATH all of them"
        )
    return lines


_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&\"'=:])")


def markdown_text(value: str) -> str:
    """Stored text shown literally in Markdown: one sanitized line, every punctuation mark backslash-escaped."""
    return _MARKDOWN.sub(r"\\\1", sanitize.line(value))


def summary(proof: Proof, budget: int) -> str:
    """The job summary: the verdict, a table of the cases, the ids concerned (listed while `budget` bytes last)."""
    mark = {True: "✅", False: "❌"}
    lines = [
        f"### mnemo {proof.command}: {proof.verdict}",
        "",
        markdown_text(proof.target),
        "",
        "| | case | detail |",
        "| --- | --- | --- |",
        *(f"| {mark[c.passed]} | {c.name} | {markdown_text(c.message)} |" for c in proof.cases),
        "",
    ]
    used = sum(len(line.encode()) + 1 for line in lines)
    for case in proof.cases:
        if not case.items:
            continue
        head = f"**{case.name}**: {markdown_text(case.message)}"
        used += len(head.encode()) + 2
        lines += [head, ""]
        for n, item in enumerate(case.items):
            line = f"- {markdown_text(item)}"
            if used + len(line.encode()) + 200 > budget:
                lines.append(f"- … and {len(case.items) - n} more: --report junit:PATH or json:PATH lists them all")
                break
            used += len(line.encode()) + 1
            lines.append(line)
        lines.append("")
    return "\n".join(lines) + "\n"


def write_github(proof: Proof, err: IO[str], summary_path: str | None) -> None:
    for line in annotation_lines(proof):
        err.write(line + "\n")
    err.flush()
    if summary_path is None:
        return
    try:
        size = Path(summary_path).stat().st_size if Path(summary_path).exists() else 0
        budget = SUMMARY_BYTES - SUMMARY_MARGIN - size
        if budget > 4096:
            with open(summary_path, "a", encoding="utf-8") as out:
                out.write(summary(proof, budget))
        else:
            err.write("mnemo: the job summary is full (GitHub keeps 1 MiB a step): nothing appended\n")
    except OSError as exc:
        err.write(f"mnemo: cannot append to $GITHUB_STEP_SUMMARY: {exc.strerror or exc}\n")
