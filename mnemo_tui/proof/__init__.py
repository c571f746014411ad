"""Provides the proofs a CI job runs: the four checks of the source document (`check`) and `verify`."""

from __future__ import annotations

from mnemo_tui.proof.checks import CHECK_NAMES, PROBE_DOMAIN, CheckReport, CheckResult, run_checks
from mnemo_tui.proof.verify import Sighting, VerifyResult, parse_expected, read_expected, verify

__all__ = [
    "CHECK_NAMES",
    "PROBE_DOMAIN",
    "CheckReport",
    "CheckResult",
    "Sighting",
    "VerifyResult",
    "parse_expected",
    "read_expected",
    "run_checks",
    "verify",
]
