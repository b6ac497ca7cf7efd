"""A streaming task that drives a batch task with signals (docs/signals.md walks through it).

`stream` runs until told to stop: every couple of seconds it writes a micro-batch of click events and
sends the signal `clickstream.batch` with the batch number. `load_batch` starts on each of those signals
(a new try per signal) and folds the batch it was started for into a running total. An external
`ledger signal send clickstream.control stop` ends the stream (its task instance ends `stopped`),
and the run ends once the last load has finished. The DAG has no schedule: the START signal
`ledger signal send clickstream.control start` creates its run and starts the stream.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pendulum

from ledger import DAG, PythonTask

HOME = Path(os.environ.get("LEDGER_HOME", "~/.ledger")).expanduser()
DATA = Path(os.environ.get("LEDGER_DATA", HOME / "data")) / "clickstream"
BATCH_SECONDS = float(os.environ.get("CLICKSTREAM_BATCH_SECONDS", "2"))
PAGES = ["/", "/search", "/product", "/cart", "/checkout"]


def stream(context) -> None:
    """Emit one micro-batch every BATCH_SECONDS, forever (until a STOP signal ends this try)."""
    folder = DATA / f"run_{context.run_id}"
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(context.run_id)
    batch = 0
    while True:
        batch += 1
        clicks = [{"page": rng.choice(PAGES), "ms": rng.randint(20, 900)} for _ in range(rng.randint(5, 20))]
        path = folder / f"batch_{batch:05d}.json"
        path.write_text(json.dumps(clicks))
        signal = context.send_signal("clickstream.batch", str(batch), meta={"path": str(path), "rows": len(clicks)})
        print(f"batch {batch}: {len(clicks)} clicks -> signal {signal.key} v{signal.version}", flush=True)
        time.sleep(BATCH_SECONDS)


def load_batch(context) -> None:
    """Fold every batch not loaded yet into the run's totals (batches that arrive while a load runs
    coalesce into the next try), up to the one named by the signal that started this try."""
    folder = DATA / f"run_{context.run_id}"
    state_path = folder / "totals.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {"loaded": 0, "pages": {}}
    upto = int(context.signal["value"]) if context.signal else state["loaded"]
    for batch in range(state["loaded"] + 1, upto + 1):
        for click in json.loads((folder / f"batch_{batch:05d}.json").read_text()):
            state["pages"][click["page"]] = state["pages"].get(click["page"], 0) + 1
        state["loaded"] = batch
    state_path.write_text(json.dumps(state, sort_keys=True))
    print(f"loaded batches up to {state['loaded']}; clicks per page {state['pages']}", flush=True)


with DAG("clickstream", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), max_active_runs=1):
    PythonTask("stream", stream, signals={"clickstream.control": {"stop": "STOP", "start": "START",
                                                                   "restart": "RESTART"}})
    PythonTask("load_batch", load_batch, signals={"clickstream.batch": "START"})
