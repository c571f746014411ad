"""Readers of what `check`/`verify --report` write, as the CI systems read them: JUnit XML, GitHub workflow commands."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "proof" / "schemas"

# The workflow-command grammar (actions/runner's ActionCommand.TryParseV2): `::name key=value,key=value::message`,
# values escaped so a `:` or `,` cannot end them early; nothing escaped may hold a CR or LF.
_COMMAND = re.compile(r"::([a-z-]+)(?: ([^:]*))?::(.*)")
_PROPERTY = re.compile(r"([A-Za-z]+)=([^,]*)")


def unescape(value: str) -> str:
    """The runner's unescaping, in its order (`%25` last, so `%250A` stays `%0A`)."""
    return value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


@dataclass(frozen=True)
class Command:
    name: str
    properties: dict[str, str]
    message: str


def workflow_commands(stream: str) -> list[Command]:
    """Every workflow command in a step's output, read line by line as the runner reads it.

    Asserts the grammar: no bare CR anywhere (the runner would end a line there), every line that
    starts with `::` parses whole, its properties split on `,` into `key=value` with no `:` inside.
    """
    assert "\r" not in stream
    found = []
    for line in stream.split("\n"):
        if not line.startswith("::"):
            assert "\n::" not in line
            continue
        match = _COMMAND.fullmatch(line)
        assert match is not None, f"not a workflow command: {line!r}"
        name, props, message = match.groups()
        properties: dict[str, str] = {}
        for part in (props or "").split(",") if props else []:
            pair = _PROPERTY.fullmatch(part)
            assert pair is not None, f"malformed property {part!r} in {line!r}"
            properties[pair.group(1)] = unescape(pair.group(2))
        found.append(Command(name, properties, unescape(message)))
    return found


def junit_cases(path: Path) -> dict[str, tuple[str, str]]:
    """Validate a JUnit file against Jenkins' junit-10.xsd, then read it with junitparser:
    `{case name: (outcome, text)}`, outcome `passed`, `failure` or `error`."""
    import xmlschema
    from junitparser import Error, Failure, JUnitXml

    xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd")).validate(str(path))
    cases: dict[str, tuple[str, str]] = {}
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            results: list[Any] = list(case.result)
            if not results:
                cases[case.name] = ("passed", "")
                continue
            kind = (
                "error" if isinstance(results[0], Error) else "failure" if isinstance(results[0], Failure) else "other"
            )
            cases[case.name] = (kind, f"{results[0].message}\n{results[0].text or ''}")
    return cases
