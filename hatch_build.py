"""Provides the sdist's build hook: the sdist carries the package, its README, LICENSE and pins, not `.gitignore`.

hatchling force-includes the VCS ignore file in every sdist, past `exclude`; this drops it again.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class SdistWithoutIgnoreFile(BuildHookInterface):
    """Removes `.gitignore` from what the sdist force-includes."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        forced = build_data.get("force_include", {})
        build_data["force_include"] = {src: dst for src, dst in forced.items() if dst != ".gitignore"}
