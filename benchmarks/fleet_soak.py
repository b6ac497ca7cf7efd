"""Soak of a Celery fleet under random faults (issue 40): a scheduler, Redis, the webserver and N `ledger worker`s on
this machine run traced catch-up DAGs (tests/chaos/traced.py) of at least --tis task instances while faults are
injected one at a time (every kind once per round, in an order and at gaps drawn from --seed, --gap seconds apart on
average); then the fleet's invariants (tests/chaos/fleet_invariants.py) are checked.

    sudo .venv/bin/python -m benchmarks.fleet_soak --tis 2000 --seed 1

Root, `ip netns` and `mount -t tmpfs` are needed for the partition and full-disk faults (left out without them, said
so). The first worker runs in a network namespace (its link to Redis and the webserver can be cut); the scheduler's
LEDGER_HOME is on a tmpfs (it can be filled). Exit status 1 when an invariant broke.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks._common import db_upgrade
from tests.celery_cluster import Cluster, Processes, RedisServer
from tests.chaos import faults
from tests.chaos.fleet_invariants import check
from tests.chaos.traced import traced_dag
from tests.conftest import LEDGER

DAYS, TASKS, WIDTH = 50, 10, 5  # per DAG: 500 task instances in 50 runs of 5 chains of 2 tasks


class Soak:
    def __init__(self, root: Path, args: argparse.Namespace, ns: faults.Namespace | None,
                 disk: faults.SmallDisk | None) -> None:
        self.args, self.ns, self.disk = args, ns, disk
        self.rng = random.Random(args.seed)
        binds = ("127.0.0.1", ns.host) if ns else ("127.0.0.1",)
        # each worker reaches its broker as a Redis user of its own, whose rights a fault can take (consumer_error)
        users = tuple((f"w{i}", f"soak-{i}") for i in range(args.workers))
        self.cluster = Cluster(root / "home", RedisServer(root / "redis", binds=binds, users=users), Processes(root))
        self.env = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": str(args.lease), "LEDGER_CELERY_QUEUED_TIMEOUT": "30",
                    "LEDGER_PARALLELISM": str(args.workers * args.concurrency), "LEDGER_MAX_LOST_TRIES": "20"}
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.injected: Counter[str] = Counter()
        self.exited: Counter[str] = Counter()  # workers that exited on their own (restarted), by their last line
        self.refusals_missed = 0
        self.consumer_not_restarted = 0
        self.starts = 0

    def start_worker(self, name: str) -> None:
        c = self.cluster
        user = f"{name}:soak-{name[1:]}@"
        if name == "w0" and self.ns is not None:
            self.workers[name] = c.start_worker(name, prefix=self.ns.prefix(), concurrency=self.args.concurrency,
                                                broker=f"redis://{user}{self.ns.host}:{c.redis.port}/0",
                                                api_url=f"http://{self.ns.host}:{c.web_port}", **self.env)
        else:
            self.workers[name] = c.start_worker(name, concurrency=self.args.concurrency,
                                                broker=f"redis://{user}127.0.0.1:{c.redis.port}/0",
                                                api_url=f"http://127.0.0.1:{c.web_port}", **self.env)

    def start_scheduler(self) -> None:
        self.starts += 1
        self.scheduler = self.cluster.procs.start(f"scheduler-{self.starts}", [LEDGER, "scheduler", "--executor",
                                                  "celery"], self.cluster.scheduler_env(**self.env), self.cluster.home)

    def start_webserver(self, port: int = 0) -> None:
        extra = {"LEDGER_WEB_TOKEN": "soak-web-token", "LEDGER_WEB_ALLOWED_HOSTS": f"127.0.0.1,{self.ns.host}"} \
            if self.ns else {}
        self.web = self.cluster.start_webserver(host="0.0.0.0" if self.ns else "127.0.0.1", port=port,
                                                within=120.0, **extra)  # (a loaded machine starts it slowly)

    # -- the faults ---------------------------------------------------------------------------------
    def kill_worker(self) -> None:
        name = self.rng.choice(sorted(self.workers))
        faults.kill9(self.workers[name])
        self.start_worker(name)  # (its restart takes its name back at once)

    def kill_pool_process(self) -> None:
        name = self.rng.choice(sorted(self.workers))
        pools = faults.children(self.workers[name].pid)
        if pools:
            os.kill(self.rng.choice(pools), signal.SIGKILL)

    def kill_scheduler(self) -> None:
        assert self.scheduler is not None
        faults.kill9(self.scheduler)
        self.start_scheduler()

    def restart_redis(self) -> None:
        self.cluster.redis.stop()
        self.cluster.redis.start()

    def wipe_redis(self) -> None:
        faults.restart_redis_without_its_data(self.cluster.redis)

    def restart_webserver(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.web.pid, signal.SIGTERM)
        self.web.wait(30)
        time.sleep(self.rng.uniform(0.5, 5))
        self.start_webserver(self.cluster.web_port)

    def duplicate_name(self) -> None:
        name = self.rng.choice(sorted(self.workers))
        twin = self.cluster.start_worker(name, wait=False, label=f"twin-{name}-{sum(self.injected.values())}",
                                         api_url=f"http://127.0.0.1:{self.cluster.web_port}", **self.env)
        try:
            twin.wait(60)
        except subprocess.TimeoutExpired:  # it runs as `name`: counted, stopped
            self.refusals_missed += 1
            faults.kill9(twin)

    def restart_exited(self) -> None:
        """Workers that exited on their own (not by an injected fault) are counted by why and started again."""
        for name, proc in sorted(self.workers.items()):
            if proc.poll() is not None:
                said = [line for line in self.cluster.procs.output(proc).splitlines()
                        if "Unrecoverable error" in line or "Error:" in line]
                self.exited[said[-1].split("] ", 1)[-1][:120] if said else f"exit status {proc.returncode}"] += 1
                self.start_worker(name)

    def consumer_error(self) -> None:
        """An error Celery's consumer does not recover from (as kombu's after a Redis restart, decision 0258): BRPOP
        taken from one worker's Redis user until the worker says it starts its consumer again, then given back."""
        name = self.rng.choice(sorted(self.workers))
        proc = self.workers[name]
        said = self.cluster.procs.output(proc).count("starting again as a new incarnation")
        self._grant(name, "-brpop")
        try:
            deadline = time.monotonic() + 120
            while self.cluster.procs.output(proc).count("starting again as a new incarnation") == said:
                if proc.poll() is not None or time.monotonic() > deadline:
                    print(f"worker {name} did not start its consumer again", flush=True)
                    self.consumer_not_restarted += 1
                    return
                time.sleep(0.1)
        finally:
            self._grant(name)

    def _grant(self, name: str, *rules: str) -> None:
        import redis

        client = redis.Redis.from_url(self.cluster.redis.url)
        try:
            client.execute_command("ACL", "SETUSER", name, "reset", "on", f">soak-{name[1:]}", "~*", "&*", "+@all",
                                   *rules)
        finally:
            client.close()

    def partition(self) -> None:
        assert self.ns is not None
        self.ns.partition()
        time.sleep(self.rng.uniform(1.5, 2.5) * self.args.lease)  # longer than the lease
        self.ns.heal()

    def full_disk(self) -> None:
        assert self.disk is not None
        self.disk.fill()
        time.sleep(self.rng.uniform(2, 10))
        self.disk.free()

    def kinds(self) -> dict[str, Callable[[], None]]:
        found = {"kill -9 worker": self.kill_worker, "kill -9 pool process": self.kill_pool_process,
                 "kill -9 scheduler": self.kill_scheduler, "redis restart (aof)": self.restart_redis,
                 "redis restart without data": self.wipe_redis, "webserver restart": self.restart_webserver,
                 "two workers one name": self.duplicate_name, "consumer error (kombu)": self.consumer_error}
        if self.ns is not None:
            found["network partition"] = self.partition
        if self.disk is not None:
            found["full disk"] = self.full_disk
        return found

    # -- the soak -------------------------------------------------------------------------------------
    def ended(self, dag_ids: list[str], runs: int) -> bool:
        import sqlite3

        with contextlib.closing(sqlite3.connect(self.cluster.home / "ledger.db", timeout=30)) as db:
            done = db.execute(f"SELECT count(*) FROM dag_run WHERE state IN ('success', 'failed') AND dag_id IN "
                              f"({','.join('?' * len(dag_ids))})", dag_ids).fetchone()[0]
        return bool(done == runs)

    def run(self) -> int:
        c, args = self.cluster, self.args
        c.redis.start()
        (c.home / "dags").mkdir(parents=True, exist_ok=True)
        db_upgrade(c.home)
        trace = c.home.parent / "trace"
        trace.touch()
        dags = max(1, -(-args.tis // (DAYS * TASKS)))
        dag_ids = [f"soak{i}" for i in range(dags)]
        for dag_id in dag_ids:
            (c.home / "dags" / f"{dag_id}.py").write_text(traced_dag(
                dag_id, trace, tasks=TASKS, sleep=args.sleep, fail_first=("t3",), days=DAYS, width=WIDTH))
        self.start_webserver()
        for i in range(args.workers):
            self.start_worker(f"w{i}")
        began = time.monotonic()
        self.start_scheduler()
        kinds = self.kinds()
        next_fault = began + self.rng.expovariate(1 / args.gap)
        order: list[str] = []
        while not self.ended(dag_ids, dags * DAYS):
            if time.monotonic() > began + args.within:
                raise SystemExit(f"the runs did not end within {args.within:g} s")
            self.restart_exited()
            if time.monotonic() >= next_fault and sum(self.injected.values()) < args.max_faults:
                if not order:  # every kind once per round, in a seeded order
                    order = self.rng.sample(sorted(kinds), len(kinds))
                kind = order.pop()
                print(f"{time.monotonic() - began:7.1f} s  {kind}", flush=True)
                kinds[kind]()
                self.injected[kind] += 1
                next_fault = time.monotonic() + self.rng.expovariate(1 / args.gap)
            time.sleep(0.5)
        took = time.monotonic() - began
        c.procs.stop_all()
        report = check(trace, c.home / "ledger.db", dag_ids)
        print(json.dumps({"task_instances": report.counts["task_instances"], "seconds": round(took, 1),
                          "faults": dict(sorted(self.injected.items())), "workers_exited": dict(self.exited),
                          "twins_not_refused": self.refusals_missed,
                          "consumers_not_restarted": self.consumer_not_restarted,
                          "counts": dict(sorted(report.counts.items())), "broken": report.broken}, indent=1))
        print(report.summary())
        return 1 if report.broken or self.refusals_missed or self.consumer_not_restarted else 0


@contextlib.contextmanager
def _maybe(make: Callable[[], contextlib.AbstractContextManager[object]], what: str) -> Iterator[object]:
    missing = faults.missing_capability(what)
    if missing is not None:
        print(f"no {what} faults: {missing}", file=sys.stderr)
        yield None
        return
    with make() as made:
        yield made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tis", type=int, default=2000, help="task instances at least (500 per DAG)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--lease", type=float, default=6.0, help="seconds (LEDGER_WORKER_HEARTBEAT_TIMEOUT)")
    parser.add_argument("--gap", type=float, default=20.0, help="mean seconds between two faults")
    parser.add_argument("--max-faults", type=int, default=1000)
    parser.add_argument("--sleep", type=float, default=0.3, help="a try sleeps up to this many seconds")
    parser.add_argument("--within", type=float, default=7200.0, help="seconds before the soak gives up")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ledger-soak-"))
    print(f"scratch folder {root}", flush=True)
    with _maybe(lambda: faults.network_namespace(7), "netns") as ns, \
            _maybe(lambda: faults.small_disk(root / "home", "512m"), "tmpfs") as disk:
        soak = Soak(root, args, ns if isinstance(ns, faults.Namespace) else None,
                    disk if isinstance(disk, faults.SmallDisk) else None)
        try:
            return soak.run()
        finally:
            soak.cluster.procs.stop_all()
            soak.cluster.redis.stop()


if __name__ == "__main__":
    raise SystemExit(main())
