"""`mnemo db language`: the search's stemming language, shown and changed (a reindex), on the embedded store."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.support.cli import CliResult


def test_db_language_shows_english_then_changes_it_and_search_stems_in_the_new_one(
    run_cli: Callable[..., CliResult],
) -> None:
    assert run_cli("write", "Die Züge fahren pünktlich ab", "--scope", "bahn").code == 0
    shown = run_cli("db", "language")
    assert (shown.code, shown.stdout) == (0, "english\n")
    # English stems do not make "Zug" of "Züge"; German ones do.
    assert json.loads(run_cli("search", "Zug", "--format", "json").stdout)["items"] == []
    changed = run_cli("db", "language", "German")
    assert changed.code == 0, changed.stderr
    assert "german" in changed.stderr and "1 entries indexed again" in changed.stderr
    assert run_cli("db", "language").stdout == "german\n"
    hits = json.loads(run_cli("search", "Zug", "--format", "json").stdout)["items"]
    assert [h["content"] for h in hits] == ["Die Züge fahren pünktlich ab"]


def test_db_language_refuses_a_language_with_no_stemmer_and_changes_nothing(run_cli: Callable[..., CliResult]) -> None:
    assert run_cli("write", "deploys on Fridays").code == 0
    refused = run_cli("db", "language", "klingon")
    assert refused.code == 2 and "klingon" in refused.stderr and "Traceback" not in refused.stderr
    assert run_cli("db", "language").stdout == "english\n"
    assert len(json.loads(run_cli("search", "deploy", "--format", "json").stdout)["items"]) == 1


def test_db_language_refuses_an_endpoint(run_cli: Callable[..., CliResult]) -> None:
    refused = run_cli("--endpoint", "http://127.0.0.1:9/api/v1", "db", "language")
    assert refused.code == 2 and "--store" in refused.stderr
