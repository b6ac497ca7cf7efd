"""A listener process for the delivery tests: `python -m tests.signals.listener NAME KEY...`.

Uses LEDGER_HOME and LEDGER_DATABASE_URL. Prints one JSON line per signal delivered (the signal's JSON
plus `received`, the wall-clock time it was delivered, and `pid`), then `{"done": N}` when it stops:
after --exit-after signals, after --timeout seconds, or on SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from ledger.core.signals import Signal
from ledger.infra.config import load_settings
from ledger.services.signal_service import SignalService
from ledger.store.db import make_engine, make_sessions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("listener")
    parser.add_argument("keys", nargs="+")
    parser.add_argument("--exit-after", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--poll", type=float, default=60.0)
    parser.add_argument("--pause", type=float, default=0.0, help="seconds the watcher takes per batch")
    args = parser.parse_args(argv)
    settings = load_settings()
    engine = make_engine(settings.database_url)
    service = SignalService(engine, make_sessions(engine), settings.home)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    got = 0

    def watcher(batch: list[Signal]) -> None:
        nonlocal got
        now = time.time()
        lines: list[dict[str, Any]] = [{**s.as_json(), "received": now, "pid": os.getpid()}
                                       for s in batch]
        sys.stdout.write("".join(json.dumps(line) + "\n" for line in lines))
        sys.stdout.flush()
        if args.pause:
            time.sleep(args.pause)
        got += len(batch)
        if args.exit_after and got >= args.exit_after:
            stop.set()

    print(json.dumps({"listening": args.listener}), flush=True)
    service.listen(args.listener, args.keys, watcher, stop=stop, timeout=args.timeout, poll_interval=args.poll)
    print(json.dumps({"done": got}), flush=True)
    engine.dispose()


if __name__ == "__main__":
    main()
