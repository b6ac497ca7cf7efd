"""A logs folder belongs to one database (decision 0350): the folder an earlier database in the same LEDGER_HOME
wrote is moved aside whole, never written after, never lost."""

from __future__ import annotations

from pathlib import Path

from ledger.infra.logs import MARK, claim_folder


def _old_try(logs: Path, text: str = "old try\n") -> Path:
    log = logs / "daily" / "run_1" / "a" / "try_1.log"
    log.parent.mkdir(parents=True)
    log.write_text(text)
    return log


def test_a_new_folder_is_marked_with_its_database_and_nothing_moves(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    assert claim_folder(logs, "aaaa0001") is None
    assert (logs / MARK).read_text() == "aaaa0001\n"
    assert claim_folder(logs, "aaaa0001") is None
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["logs"]


def test_an_earlier_databases_folder_is_moved_aside_whole_under_its_identity(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    claim_folder(logs, "aaaa0001")
    old = _old_try(logs)
    moved = claim_folder(logs, "bbbb0002")
    assert moved == tmp_path / "logs.aaaa0001"
    assert (moved / old.relative_to(logs)).read_text() == "old try\n"
    assert not old.exists()
    assert (logs / MARK).read_text() == "bbbb0002\n"
    assert claim_folder(logs, "bbbb0002") is None


def test_an_unmarked_folder_is_the_databases_own_unless_the_database_was_just_made(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    kept = _old_try(logs, "before the marks\n")
    assert claim_folder(logs, "cccc0003") is None  # a database upgraded to 0015 keeps its logs
    assert kept.read_text() == "before the marks\n"

    other = tmp_path / "other" / "logs"
    _old_try(other)
    moved = claim_folder(other, "dddd0004", new_database=True)
    assert moved == other.with_name("logs.before-dddd0004")
    assert (moved / "daily" / "run_1" / "a" / "try_1.log").read_text() == "old try\n"
    assert (other / MARK).read_text() == "dddd0004\n" and len(list(other.iterdir())) == 1


def test_an_empty_folder_of_a_new_database_is_marked_in_place(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    assert claim_folder(logs, "eeee0005", new_database=True) is None
    assert (logs / MARK).read_text() == "eeee0005\n"


def test_a_folder_moved_aside_never_replaces_one_moved_before(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for n, (held, new) in enumerate((("aaaa0001", "bbbb0002"), ("bbbb0002", "aaaa0001"), ("aaaa0001", "ffff0006"))):
        claim_folder(logs, held)
        _old_try(logs, f"written under {held}, round {n}\n")
        claim_folder(logs, new)
    assert (tmp_path / "logs.aaaa0001" / "daily/run_1/a/try_1.log").read_text() == "written under aaaa0001, round 0\n"
    assert (tmp_path / "logs.aaaa0001.2" / "daily/run_1/a/try_1.log").read_text() == \
        "written under aaaa0001, round 2\n"
    assert (tmp_path / "logs.bbbb0002" / "daily/run_1/a/try_1.log").read_text() == "written under bbbb0002, round 1\n"
