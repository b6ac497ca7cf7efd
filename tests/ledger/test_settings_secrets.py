"""The secrets of ledger's own settings (the Fernet keys, the SMTP password, a worker's token) are worked out once
per process and again only when what they come from changes: a worker works them out before it forks a try,
and the try masks them without resolving the settings again."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.infra.fernet import create_key_file, key_file
from ledger.sdk import secrets


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("LEDGER_HOME", str(folder))
    for name in ("LEDGER_FERNET_KEY", "LEDGER_SMTP_PASSWORD", "LEDGER_WORKER_TOKEN", "LEDGER_DATABASE_URL",
                 "LEDGER_DAGS_FOLDER"):
        monkeypatch.delenv(name, raising=False)
    return folder


def test_the_settings_are_resolved_once_while_they_stay_the_same(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[object] = []
    real = secrets.load_settings

    def counting() -> object:
        resolved.append(1)
        return real()

    monkeypatch.setattr(secrets, "load_settings", counting)
    first = secrets.settings_secrets()
    for _ in range(5):
        assert secrets.settings_secrets() == first
    assert len(resolved) <= 1


def test_a_key_file_made_or_rotated_after_the_first_look_is_masked(home: Path) -> None:
    assert secrets.settings_secrets() == []
    first = create_key_file(key_file(home)).strip()
    assert secrets.settings_secrets() == [first]
    key_file(home).write_text(f"newer-key-text,{first}\n", encoding="ascii")
    assert secrets.settings_secrets() == ["newer-key-text", first]


def test_a_changed_variable_is_seen_at_once(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets.settings_secrets()
    monkeypatch.setenv("LEDGER_SMTP_PASSWORD", "smtp-secret")
    monkeypatch.setenv("LEDGER_FERNET_KEY", "env-key")
    assert secrets.settings_secrets() == ["env-key", "smtp-secret"]
    other = home.parent / "other"
    other.mkdir()
    made = create_key_file(key_file(other)).strip()
    monkeypatch.setenv("LEDGER_HOME", str(other))
    assert secrets.settings_secrets() == ["env-key", made, "smtp-secret"]


def test_with_the_same_inputs_only_the_key_file_is_looked_at_again_and_a_new_key_is_still_masked(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = create_key_file(key_file(home)).strip()
    assert secrets.settings_secrets() == [first]

    def refuse(*args: object) -> None:
        raise AssertionError("the variables or the current folder were read again")

    with monkeypatch.context() as patched:
        patched.setattr(secrets, "_key_file", refuse)  # (where the variables and the current folder are read)
        assert secrets.settings_secrets(same_inputs=True) == [first]
    key_file(home).write_text(f"rotated-key-text,{first}\n", encoding="ascii")  # rotated between two forks
    assert secrets.settings_secrets(same_inputs=True) == ["rotated-key-text", first]


def test_with_the_same_inputs_a_key_file_made_after_the_first_look_is_masked(home: Path) -> None:
    assert secrets.settings_secrets() == []
    assert secrets.settings_secrets(same_inputs=True) == []  # (still none)
    made = create_key_file(key_file(home)).strip()
    assert secrets.settings_secrets(same_inputs=True) == [made]


@pytest.mark.parametrize(("content", "seen", "expected"), [
    (b"nothing to hide\n", ["s3cr3t"], b"nothing to hide\n"),
    (b"the key s3cr3t, again s3cr3t\n", ["s3cr3t"], b"the key ***, again ***\n"),
    ("mot de passe: \u00e9t\u00e9-42\n".encode(), ["\u00e9t\u00e9-42"], b"mot de passe: ***\n"),
    (b"\xff broken s3cr3t\n", ["s3cr3t"], "\ufffd broken ***\n".encode()),
    (b"\xff broken but nothing else\n", ["s3cr3t"], b"\xff broken but nothing else\n"),  # (not rewritten)
    (b"a\xffb\n", ["a\ufffdb"], b"***\n"),  # a secret that holds the replacement character matches the text decoded
    (b"key: line1\r\nline2\r\n", ["line1\nline2"], b"key: ***\n"),  # a PEM key through a terminal (CRLF ends)
    (b"key: line1\rline2\r", ["line1\nline2"], b"key: ***\n"),  # ... or CR ends
    (b"s3cr3t\r\n10%\r20%\r", ["s3cr3t"], b"***\n10%\n20%\n"),  # rewritten as a text read sees it: LF ends
    (b"progress\r\n10%\r20%\r", ["line1\nline2"], b"progress\r\n10%\r20%\r"),  # (not rewritten)
])
def test_a_log_is_masked_as_its_text_decoded_reads_and_one_without_a_secret_is_left_as_it_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, seen: list[str], expected: bytes) -> None:
    monkeypatch.setattr(secrets, "_seen", set())
    for secret in seen:
        secrets.seen(secret)
    log = tmp_path / "try_1.log"
    log.write_bytes(content)
    secrets.mask_file(str(log))
    assert log.read_bytes() == expected
