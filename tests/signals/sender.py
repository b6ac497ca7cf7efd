"""A sender process for the storm test: `python -m tests.signals.sender COUNT KEY...`.

Sends COUNT signals spread over the keys (round robin), in batches of --batch with send_many, or one by
one with send when --batch is 1. Values are "<tag>:<n>". Prints {"sent": COUNT} at the end.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledger.infra.config import load_settings
from ledger.services.signal_service import SignalService
from ledger.store.db import make_engine, make_sessions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("count", type=int)
    parser.add_argument("keys", nargs="+")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--tag", default="s")
    args = parser.parse_args(argv)
    settings = load_settings()
    engine = make_engine(settings.database_url)
    service = SignalService(engine, make_sessions(engine), settings.home)
    items: list[tuple[str, str, dict[str, Any] | None]] = [
        (args.keys[n % len(args.keys)], f"{args.tag}:{n}", None) for n in range(args.count)]
    for start in range(0, len(items), args.batch):
        chunk = items[start:start + args.batch]
        if len(chunk) == 1:
            service.send(chunk[0][0], chunk[0][1], sender=f"sender:{args.tag}")
        else:
            service.send_many(chunk, sender=f"sender:{args.tag}")
    print(json.dumps({"sent": args.count}), flush=True)
    engine.dispose()


if __name__ == "__main__":
    main()
