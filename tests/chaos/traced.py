"""Traced DAGs: every execution of a try writes down, in one trace file shared by every process of the fleet,

    start <dag> <task> <date> <try> <pid> <unix time> <process start ticks>
    end <dag> <task> <date> <try> <pid> <unix time> <success|failed>
    alive <dag> <task> <date> <try> <pid of an earlier execution> <its try>

each line written with one write(2) on a descriptor opened with O_APPEND (a whole line, at once, whatever other
process appends). `alive` is what an execution saw as it started: an earlier execution of its task instance whose
process was still there (the same pid and process start time, not a zombie); the checker counts it as an overlap.

A try waits, before its end, until the file `go` exists (a test ends its tries when it has made its fault), or sleeps
a time drawn from its own seed (the soak). A task listed in `fail_first` fails its first try by its own code (the
end line says `failed`), so that the checker sees a retry spent where the code spent it.
"""

from __future__ import annotations

from pathlib import Path

SOURCE = '''
import os
import random
import time
from datetime import timedelta

import pendulum
from ledger import DAG, PythonTask

TRACE = @TRACE@
GO = @GO@
SLEEP = @SLEEP@
FAIL_FIRST = @FAIL_FIRST@


def _line(*words):
    fd = os.open(TRACE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, (" ".join(str(w) for w in words) + "\\n").encode())
    finally:
        os.close(fd)


def _started(pid):
    """The process's start time (clock ticks after boot), or None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def traced(context):
    key = (context.dag_id, context.task_id, context.logical_date.isoformat().replace("+00:00", "Z"))
    number, pid = context.try_number, os.getpid()
    with open(TRACE) as trace:
        for line in trace:
            words = line.split()
            if words[:1] == ["start"] and tuple(words[1:4]) == key and _started(words[5]) == words[7]:
                _line("alive", *key, number, words[5], words[4])
    _line("start", *key, number, pid, repr(time.time()), _started(pid))
    if GO is not None:
        while not os.path.exists(GO):
            time.sleep(0.02)
    elif SLEEP:
        time.sleep(random.Random(" ".join((*key, str(number)))).uniform(0, SLEEP))
    fails = context.task_id in FAIL_FIRST and number == 1
    _line("end", *key, number, pid, repr(time.time()), "failed" if fails else "success")
    if fails:
        raise RuntimeError("the first try of this task fails by its own code")


with DAG(@DAG_ID@, schedule=@SCHEDULE@, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         end_date=@END@, catchup=True, max_active_runs=@MAX_RUNS@,
         default_args={"retries": @RETRIES@, "retry_delay": timedelta(0)}) as dag:
    tasks = [PythonTask(f"t{i}", traced) for i in range(@TASKS@)]
    for upstream, downstream in zip(tasks, tasks[@WIDTH@:]):
        upstream >> downstream
'''


def traced_dag(dag_id: str, trace: Path, *, tasks: int, go: Path | None = None, sleep: float = 0.0,
               fail_first: tuple[str, ...] = (), retries: int = 1, days: int = 0, width: int | None = None,
               max_runs: int = 16) -> str:
    """A DAG file's source: `tasks` traced tasks, in `width` parallel chains (default: all parallel); one run a day
    for `days` days from 2024-01-01 (0: triggered runs only)."""
    schedule = '"@daily"' if days else "None"
    end = f"pendulum.datetime(2024, 1, 1, tz='UTC').add(days={days - 1})" if days else "None"
    return (SOURCE.replace("@TRACE@", repr(str(trace))).replace("@GO@", repr(str(go) if go else None))
            .replace("@SLEEP@", repr(sleep)).replace("@FAIL_FIRST@", repr(set(fail_first)))
            .replace("@DAG_ID@", repr(dag_id)).replace("@SCHEDULE@", schedule).replace("@END@", end)
            .replace("@MAX_RUNS@", str(max_runs)).replace("@RETRIES@", str(retries))
            .replace("@TASKS@", str(tasks)).replace("@WIDTH@", str(width or tasks)))
