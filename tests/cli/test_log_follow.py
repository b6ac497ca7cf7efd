"""`ledger tasks logs --follow` going on through a log that is rewritten under it (a try masks the secrets it read as
it ends, after a follower printed them): from the same line, never a fragment."""

from __future__ import annotations

import pytest

from ledger.cli.tasks import _Printed
from ledger.services.log_store import TextSource


def test_a_follower_of_a_log_rewritten_with_its_secrets_masked_goes_on_from_the_same_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    printed = _Printed()
    printed.add(TextSource(b"begun\npassword pw-123456\nwaiting\n", "redis"))
    printed.add(TextSource(b"begun\npassword pw-123456\nwaiting\nrele", "redis"))  # grows: only what is new
    masked = b"begun\npassword ***\nwaiting\nreleased\noutcome: success\n"
    printed.add(TextSource(masked, "redis"))  # rewritten, shorter: no fragment at the old offset
    printed.add(TextSource(masked, "redis"))  # nothing more
    assert capsys.readouterr().out == "begun\npassword pw-123456\nwaiting\nreleased\noutcome: success\n"
    assert printed.offset == len(masked)


def test_a_follower_reads_a_growing_log_once(capsys: pytest.CaptureFixture[str]) -> None:
    printed = _Printed()
    for text in (b"", b"a\n", b"a\nb", b"a\nb\nc\n"):
        printed.add(TextSource(text, "file"))
    assert capsys.readouterr().out == "a\nb\nc\n"
