"""Writers and deleters in their own processes while a consumer runs `mnemo catchup --changes` again and again:
every acknowledged entry is delivered at most once and, unless it was removed, exactly once; every removal
is reported exactly once (issue 39), on the embedded store and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.cli import CliResult
from tests.support.reliability import Passes
from tests.support.targets import Target

PER_WRITER = 60
WRITERS = 2
# Every third entry of `notes` a writer writes is one the deleter deletes.
MARKED = sum(1 for i in range(PER_WRITER) if i % 3 == 0 and i % 10 != 5)

# Scripts run after the opening `Passes.start` gives them (the target opened as `engine`, `wait_for_a_pass`).
# A writer waits, every 20 writes, for the consumer's next pass.
_WRITER = """
name, count = sys.argv[4], int(sys.argv[5])
seen = passes_now()
for i in range(count):
    domain = "scratch" if i % 10 == 5 else "notes"
    marked = " del" if i % 3 == 0 and domain == "notes" else ""
    print(engine.write("local", WriteRequest(content=f"{name} {i}{marked}", domain=domain)).atom_id, flush=True)
    if i % 20 == 19:
        wait_for_a_pass(seen)
        seen = passes_now()
engine.close()
"""

_DELETER = """
from mnemo_tui.values.model import RecentQuery
expected, done, wiped = int(sys.argv[4]), set(), False
for _ in range(20000):
    if len(done) >= expected and wiped:
        break
    page = engine.recent("local", RecentQuery(limit=100, include_history=True))
    marked = [e.atom_id for e in page.items if e.content.endswith(" del") and e.atom_id not in done]
    for atom in marked:
        if engine.delete("local", atom):
            done.add(atom)
            print(atom, flush=True)
    if not wiped and sum(1 for e in page.items if e.domain == "scratch") >= 3:
        engine.delete_domain("local", "scratch")
        wiped = True
    if not marked:
        threading.Event().wait(0.01)
engine.close()
"""


def test_writers_and_deleters_against_a_consumer_of_changes(
    target: Target, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    target.open().close()  # created (and migrated) once, before the processes race to it
    passes = Passes(tmp_path / "passes")
    writers = [passes.start(_WRITER, target, f"w{n}", str(PER_WRITER)) for n in range(WRITERS)]
    deleter = passes.start(_DELETER, target, str(WRITERS * MARKED))
    delivered: list[str] = []
    removed: list[dict[str, str]] = []

    def one_pass() -> None:
        result = cli(*target.cli, "catchup", "--changes", "-f", "ndjson")
        assert result.code == 0, result.stderr
        for line in result.stdout.splitlines():
            item = json.loads(line)
            if "removed" in item:
                removed.append(item["removed"])
            else:
                delivered.append(item["atom_id"])

    # After the last write and delete, one more pass: nothing may be left unreported.
    count = passes.run(one_pass, [*writers, deleter], most=500)
    outputs = [p.communicate(timeout=60) for p in (*writers, deleter)]
    for proc, (_out, err) in zip((*writers, deleter), outputs, strict=True):
        assert proc.returncode == 0, err
    acknowledged = [i for out, _ in outputs[:-1] for i in out.split()]
    deleted_one_by_one = outputs[-1][0].split()

    assert count > 1  # the consumer really ran while they did
    assert len(acknowledged) == WRITERS * PER_WRITER == len(set(acknowledged))
    assert len(delivered) == len(set(delivered)), "an entry was delivered twice"
    assert set(delivered) <= set(acknowledged)
    removed_ids = [r["atom_id"] for r in removed]
    assert len(removed_ids) == len(set(removed_ids)), "a removal was reported twice"
    assert set(deleted_one_by_one) <= set(removed_ids)
    assert {r["reason"] for r in removed} == {"deleted", "domain_wiped"}
    # Every acknowledged entry reached the consumer, or its removal did (it may have gone before a pass saw it).
    assert set(acknowledged) <= set(delivered) | set(removed_ids)
    # And the store agrees: what it holds is exactly what was delivered and not removed.
    engine = target.open()
    try:
        kept = {e.atom_id for e in engine.recent("local", _everything()).items}
        buried = {r.atom_id for r in engine.removals("local", None, None).items}
    finally:
        engine.close()
    assert kept == set(delivered) - set(removed_ids)
    assert buried == set(removed_ids)
    assert len(deleted_one_by_one) == WRITERS * MARKED


def _everything() -> object:
    from mnemo_tui.values.model import RecentQuery

    return RecentQuery(limit=100, include_history=True)
