"""Where readers find a try's log (pure parts and files): pages over any source, a follower going on after the
try rewrote its log, the remote log store's settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.core.errors import ConfigError
from ledger.services.log_store import RemoteLogStore, TextSource, TryRef, locate, resume_offset
from ledger.web.logview import read_page


def test_a_follower_goes_on_at_the_same_line_in_a_log_whose_secrets_were_masked_since() -> None:
    printed = b"start\npassword pw-123456 and s3cr3t\nwait"
    now = b"start\npassword *** and ***\nwaiting\nreleased\n"
    at = resume_offset(now, printed.count(b"\n"), len(b"wait"))
    assert now[at:] == b"ing\nreleased\n"
    assert resume_offset(b"short\n", 5, 0) == len(b"short\n")  # (fewer lines than printed: nothing more)


def test_a_page_over_a_log_held_in_memory_is_cut_at_lines_like_a_files() -> None:
    text = b"one\ntwo\nthree being writ"
    page = read_page(TextSource(text, "the database"), after=4)
    assert (page.text, page.start, page.end, page.size) == ("two\n", 4, 8, len(text))
    assert read_page(TextSource(text, "the database"), after=4, whole_lines=False).text == "two\nthree being writ"
    assert read_page(TextSource(text, "x"), chunk=12).text == "three being writ"[-12:]  # (no line start: cut)


def test_a_log_is_read_from_this_hosts_file_first_then_from_the_database(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LEDGER_REMOTE_LOGS", "LEDGER_CELERY_BROKER_URL", "LEDGER_CELERY_RESULT_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    ref = TryRef("d", 3, "t", 2, ti_id=7, map_index=1)
    assert ref.relative == "d/run_3/t/map_1/try_2.log"
    kept = locate(tmp_path, ref, "kept\n", ended=True)
    assert kept is not None and kept.where == "the database" and kept.read(0, 10) == b"kept\n"
    assert locate(tmp_path, ref, None, ended=True) is None
    (tmp_path / ref.relative).parent.mkdir(parents=True)
    (tmp_path / ref.relative).write_text("here\n")
    here = locate(tmp_path, ref, "kept\n", ended=True)
    assert here is not None and here.where == str(tmp_path / ref.relative) and here.read(0, 10) == b"here\n"


@pytest.mark.parametrize(("url", "endpoint", "said"), [
    pytest.param("gs://b/p", "", "is not an s3://BUCKET[/PREFIX] URL", id="not-s3"),
    pytest.param("s3://", "", "is not an s3://BUCKET[/PREFIX] URL", id="no-bucket"),
    pytest.param("s3://b", "127.0.0.1:9000", "LEDGER_REMOTE_LOGS_ENDPOINT='127.0.0.1:9000' is not an http", id="bare"),
])
def test_bad_remote_log_settings_are_one_line(url: str, endpoint: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
        RemoteLogStore.from_env({"LEDGER_REMOTE_LOGS": url, "LEDGER_REMOTE_LOGS_ENDPOINT": endpoint})


def test_remote_log_keys_sit_under_the_prefix_with_the_logs_folders_layout() -> None:
    store = RemoteLogStore.from_env({"LEDGER_REMOTE_LOGS": "s3://logs/ledger/prod/"})
    assert store is not None and (store.bucket, store.prefix) == ("logs", "ledger/prod")
    assert store.url("d/run_3/t/try_1.log") == "s3://logs/ledger/prod/d/run_3/t/try_1.log"
    assert RemoteLogStore.from_env({"LEDGER_REMOTE_LOGS": ""}) is None
    bare = RemoteLogStore.from_env({"LEDGER_REMOTE_LOGS": "s3://logs"})
    assert bare is not None and bare.key("d/x.log") == "d/x.log"
