"""A try's log as the web view serves it: a page of bytes at a time (the last 1 MB first, older pages on
request, what was appended since an offset while the try runs), and ANSI colours as HTML (escaped)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup
from sqlalchemy.orm import Session

from ledger.core.errors import NotFound
from ledger.core.mapping import split_label
from ledger.infra.logs import log_path
from ledger.services import log_store
from ledger.services.log_store import FileSource, LogSource, TryRef
from ledger.store import identity as identity_store
from ledger.store import try_logs

CHUNK = 1024 * 1024  # a page of log: the last CHUNK bytes first


@dataclass
class LogPage:
    text: str
    start: int  # the byte offset of the page's first byte
    end: int  # the offset after its last byte: where the next page (or the follow) starts
    size: int  # the file's size when read


def read_page(source: LogSource | Path, *, before: int | None = None, after: int | None = None, chunk: int = CHUNK,
              whole_lines: bool = True) -> LogPage:
    """Up to `chunk` bytes of the log: those after offset `after` (what was appended since), else those before
    `before` (default: the end). A page starts and ends at a line's start (a line longer than a page is cut),
    except that with `whole_lines` False the bytes after the last newline are included (the try has ended).
    `source`: where the log is (ledger/services/log_store.py), or a file."""
    f = FileSource(source) if isinstance(source, Path) else source
    size = f.size()
    if after is not None:
        start = min(max(after, 0), size)
        end = min(start + chunk, size)
        data = f.read(start, end - start)
        end = start + len(data)
        if whole_lines or end < size:
            cut = data.rfind(b"\n") + 1
            if cut:
                data = data[:cut]
            elif len(data) < chunk:
                data = b""  # a line being written: sent once it ends
            end = start + len(data)
    else:
        end = size if before is None else min(max(before, 0), size)
        start = max(end - chunk, 0)
        data = f.read(start, end - start)
        if start > 0:
            first = data.find(b"\n") + 1
            if 0 < first < len(data):
                data = data[first:]
                start += first
    return LogPage(data.decode(errors="replace"), start, end, size)


# SGR code -> colour number (0-7, bright 8-15; None: the default colour)
_FOREGROUND: dict[int, str | None] = {**{30 + n: str(n) for n in range(8)}, **{90 + n: str(n + 8) for n in range(8)},
                                      39: None}
_BACKGROUND: dict[int, str | None] = {**{40 + n: str(n) for n in range(8)}, **{100 + n: str(n + 8) for n in range(8)},
                                      49: None}
_CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _classes(bold: bool, fg: str | None, bg: str | None) -> str:
    return " ".join(c for c in ("ansi-bold" if bold else "", f"ansi-fg-{fg}" if fg else "",
                                f"ansi-bg-{bg}" if bg else "") if c)


def ansi_html(text: str) -> Markup:
    """Log text as HTML: every character escaped; SGR sequences (bold, the 8 colours and their bright forms, as
    foreground and background) as spans with classes (ansi-bold, ansi-fg-N, ansi-bg-N with N 0-15); other escape
    sequences and control characters dropped. Colour from 256-colour and true-colour codes is not shown."""
    out: list[str] = []
    bold, fg, bg = False, None, None
    open_span = False
    pos = 0

    def emit(segment: str) -> None:
        if segment:
            out.append(html.escape(_CONTROL.sub("", segment), quote=False))

    for m in _CSI.finditer(text):
        emit(text[pos:m.start()])
        pos = m.end()
        if m.group(2) != "m":
            continue
        codes = [int(c) if c.isdigit() else 0 for c in m.group(1).split(";")] if m.group(1) else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                bold, fg, bg = False, None, None
            elif c == 1:
                bold = True
            elif c == 22:
                bold = False
            elif c in _FOREGROUND:
                fg = _FOREGROUND[c]
            elif c in _BACKGROUND:
                bg = _BACKGROUND[c]
            elif c in (38, 48):  # 38;5;N or 38;2;R;G;B: skipped
                i += 2 if i + 1 < len(codes) and codes[i + 1] == 5 else 4
            i += 1
        if open_span:
            out.append("</span>")
            open_span = False
        classes = _classes(bold, fg, bg)
        if classes:
            out.append(f'<span class="{classes}">')
            open_span = True
    emit(text[pos:])
    if open_span:
        out.append("</span>")
    return Markup("".join(out))


def locate(logs: Path, run: dict[str, Any], label: str, try_number: int) -> tuple[dict[str, Any], Path]:
    """(the try, its log file) of a run document's task instance `label` (the task id, or `task[i]` for mapped
    instance i); NotFound when the run has no such try. Only names the run's own tries: no path from the URL."""
    tries = {t["try_number"]: t for ti in run["task_instances"] if ti["label"] == label for t in ti["tries"]}
    if try_number not in tries:
        raise NotFound(f"run {run['run_id']} has no try {try_number} of task {label!r}")
    name, index = split_label(label)
    return tries[try_number], log_path(logs, run["dag_id"], int(run["run_id"]), name, try_number, index)


def try_ended(the_try: dict[str, Any]) -> bool:
    return the_try["ended_at"] is not None or the_try["state"] not in ("running", "queued")


def try_ref(session: Session, run: dict[str, Any], label: str, try_number: int) -> tuple[TryRef, str | None]:
    """(the try, its `try_log` row or None) of a run document's task instance `label`: what locate() needs, read in
    the caller's session (before any store outside the database is read)."""
    name, index = split_label(label)
    found = try_logs.instance_and_log(session, int(run["run_id"]), name, index, try_number)
    if found is None:
        raise NotFound(f"run {run['run_id']} has no task {label!r}")
    ti_id, kept = found
    identity = identity_store.read(session)
    return TryRef(run["dag_id"], int(run["run_id"]), name, try_number, ti_id, index, identity.of(ti_id),
                  identity.identity), kept


def source_of(logs: Path, found: tuple[TryRef, str | None], the_try: dict[str, Any]) -> LogSource | None:
    """Where the try's log is for this server (ledger/services/log_store.py: its own logs folder, the database, the
    remote
    log store, the result backend's Redis); None: nowhere yet."""
    ref, kept = found
    return log_store.locate(logs, ref, kept, ended=try_ended(the_try))
