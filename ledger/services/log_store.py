"""Where a try's log is read from, on any host, and the S3-compatible store remote tries' logs can be kept in.

A reader (`ledger tasks logs`, the web view's log page, its download and the API) looks, in this order:

1. the file under its own `$LEDGER_HOME/logs` (a local try; a remote try, on the host of the job that holds its
   run, where that job appends the log as it arrives);
2. the database's `try_log` row: a remote try that has ended, kept by the job that held its run;
3. the remote log store (LEDGER_REMOTE_LOGS, an S3-compatible bucket): a remote try that has ended, kept there
   instead of the database row when the holding job has the setting;
4. the result backend's Redis (`ledger:log:<task id>`, where the worker writes each part at its byte offset while
   the try runs; kept a week): a running remote try, wherever the reader has LEDGER_CELERY_BROKER_URL (or
   LEDGER_CELERY_RESULT_BACKEND).

Each place is a LogSource: its size and the bytes of a range, so that pages and follows by offset work the same
on all of them. Nothing here runs SQL: the caller reads the `try_log` row in its own session and passes it in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ledger.core.errors import ConfigError
from ledger.core.mapping import NOT_MAPPED
from ledger.infra.logs import holds_logs_of, log_file
from ledger.infra.workers import backend_url, log_key, redacted, task_id

REMOTE_LOGS_VARIABLE = "LEDGER_REMOTE_LOGS"  # s3://bucket/prefix
ENDPOINT_VARIABLE = "LEDGER_REMOTE_LOGS_ENDPOINT"  # an S3-compatible server's URL (MinIO, Ceph...); default: AWS
REGION_VARIABLE = "LEDGER_REMOTE_LOGS_REGION"


class LogSource(Protocol):
    @property
    def where(self) -> str:  # said to the user: a path, "the database", an s3:// URL, the Redis key
        ...

    def size(self) -> int: ...

    def read(self, start: int, length: int) -> bytes: ...


@dataclass
class FileSource:
    path: Path

    @property
    def where(self) -> str:
        return str(self.path)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def read(self, start: int, length: int) -> bytes:
        try:
            with self.path.open("rb") as f:
                f.seek(start)
                return f.read(length)
        except OSError:
            return b""


@dataclass
class TextSource:
    """A whole log read at once: from the database, or from the remote log store."""

    data: bytes
    where: str

    def size(self) -> int:
        return len(self.data)

    def read(self, start: int, length: int) -> bytes:
        return self.data[start:start + length]


@dataclass
class RedisSource:
    """A running remote try's log in the result backend: read by range, so a follower fetches only what is new."""

    client: Any
    key: str
    where: str

    def size(self) -> int:
        return int(self.client.strlen(self.key))

    def read(self, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        return bytes(self.client.getrange(self.key, start, start + length - 1))


@dataclass(frozen=True)
class TryRef:
    """One try of a task instance, as readers name it."""

    dag_id: str
    run_id: int
    task_id: str
    try_number: int
    ti_id: int
    map_index: int = NOT_MAPPED
    database: str = ""  # what its task id carries of the database's identity (DatabaseIdentity.of)
    identity: str = ""  # the database's identity, which a logs folder holding its logs is marked with

    def own_file(self, logs: Path) -> Path | None:
        """Its log file in this host's logs folder, when there is one and the folder holds this database's logs
        (ledger/infra/logs.py, decision 0350)."""
        path = logs / self.relative
        return path if path.is_file() and holds_logs_of(logs, self.identity) else None

    @property
    def relative(self) -> str:
        """Its log's path under a logs folder, and its key under the remote store's prefix."""
        return log_file("", self.dag_id, self.run_id, self.task_id, self.try_number, self.map_index)


def locate(logs: Path, ref: TryRef, kept: str | None, *, ended: bool) -> LogSource | None:
    """Where the try's log is for this host (see the module's text for the order); None: nowhere yet. `kept`: the
    try's `try_log` row, read by the caller. ConfigError when a configured store cannot be read."""
    path = ref.own_file(logs)
    if path is not None:
        return FileSource(path)
    if kept is not None:
        return TextSource(kept.encode(), "the database")
    store = RemoteLogStore.from_env()
    if ended and store is not None:
        found = store.get(ref.relative)
        if found is not None:
            return TextSource(found, store.url(ref.relative))
    return live_source(ref)


def live_source(ref: TryRef) -> RedisSource | None:
    """The try's log in the result backend, where the worker writes it as it runs (None: no Celery settings here,
    or no such key: not a remote try, or nothing written yet)."""
    url = backend_url()
    if url is None:
        return None
    import redis

    client = _redis_clients.get(url)
    if client is None:  # (one per process and URL: its connection pool serves every request of a webserver)
        client = _redis_clients[url] = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=5.0)
    key = log_key(task_id(ref.ti_id, ref.try_number, ref.database))
    try:
        if not client.exists(key):
            return None
    except redis.RedisError as exc:
        raise ConfigError(f"cannot read the running try's log from {redacted(url)}: {exc}") from None
    return RedisSource(client, key, f"{redacted(url)} {key}")


@dataclass(frozen=True)
class RemoteLogStore:
    """An S3-compatible bucket for remote tries' logs (Airflow's remote logging): LEDGER_REMOTE_LOGS=s3://bucket/prefix,
    LEDGER_REMOTE_LOGS_ENDPOINT for a server other than AWS, LEDGER_REMOTE_LOGS_REGION; the credentials are boto3's
    own (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, an instance role...)."""

    bucket: str
    prefix: str
    endpoint: str | None = None
    region: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RemoteLogStore | None:
        env = dict(os.environ) if env is None else env
        raw = (env.get(REMOTE_LOGS_VARIABLE) or "").strip()
        if not raw:
            return None
        scheme, _, rest = raw.partition("://")
        bucket, _, prefix = rest.partition("/")
        if scheme != "s3" or not bucket:
            raise ConfigError(f"{REMOTE_LOGS_VARIABLE}={raw!r} is not an s3://BUCKET[/PREFIX] URL")
        endpoint = (env.get(ENDPOINT_VARIABLE) or "").strip() or None
        if endpoint is not None and not endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"{ENDPOINT_VARIABLE}={endpoint!r} is not an http:// or https:// URL")
        return cls(bucket, prefix.strip("/"), endpoint, (env.get(REGION_VARIABLE) or "").strip() or None)

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def url(self, relative: str) -> str:
        return f"s3://{self.bucket}/{self.key(relative)}"

    def _client(self) -> Any:
        found = _clients.get(self)
        if found is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise ConfigError(f"{REMOTE_LOGS_VARIABLE} needs boto3, which is not installed: pip install "
                                  "'ledger[s3]'") from None

            found = boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                                 config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3}))
            _clients[self] = found
        return found

    def put(self, relative: str, text: str) -> None:
        """Keep a log (a log kept again replaces the first). ConfigError when the store refuses it."""
        client = self._client()
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client.put_object(Bucket=self.bucket, Key=self.key(relative), Body=text.encode(),
                                      ContentType="text/plain; charset=utf-8")
        except (BotoCoreError, ClientError) as exc:
            raise ConfigError(f"cannot write {self.url(relative)}: {exc}") from None

    def get(self, relative: str) -> bytes | None:
        """A kept log (None: there is none at that key). ConfigError when the store cannot be read."""
        client = self._client()
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = client.get_object(Bucket=self.bucket, Key=self.key(relative))
            return bytes(answer["Body"].read())
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise ConfigError(f"cannot read {self.url(relative)}: {exc}") from None
        except BotoCoreError as exc:
            raise ConfigError(f"cannot read {self.url(relative)}: {exc}") from None


_clients: dict[RemoteLogStore, Any] = {}  # one boto3 client per store and process (they are thread-safe)
_redis_clients: dict[str, Any] = {}


def resume_offset(data: bytes, lines: int, partial: int) -> int:
    """Where a follower that has printed `lines` whole lines and `partial` bytes of the next goes on in `data`, the
    log as it is now: rewritten since it was printed (a try masks the secrets it read as it ends, which changes the
    lengths but not the lines)."""
    pos = 0
    for _ in range(lines):
        found = data.find(b"\n", pos)
        if found < 0:
            return len(data)
        pos = found + 1
    return min(pos + partial, len(data))
