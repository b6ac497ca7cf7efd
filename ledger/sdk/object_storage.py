"""ObjectStoragePath (Airflow's `airflow.io.path` / `airflow.sdk`): a path in an object store, read and written
through fsspec as Airflow does: `file://` (the local disk) and `s3://` (s3fs, from the extra `ledger[s3]`).

    base = ObjectStoragePath("s3://aws_default@lake/raw/")     # the connection before the @, or conn_id=
    path = base / f"orders_{ds}.csv"
    with path.open("w") as f: ...
    path.read_text(); path.exists(); list(base.iterdir()); path.copy(other); path.unlink()

An `s3://` path's connection is read by id as Airflow's providers read it (ledger's, then `AIRFLOW_CONN_<ID>`):
its login and password are the access key, its extra gives `region_name` and `endpoint_url`; without a
connection (or `aws_default` not defined), s3fs uses boto's own chain (AWS_* variables). A path passes between
tasks as its URL (ledger/sdk/xcom.py).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from ledger.core.errors import InvalidInput

PROTOCOLS = ("file", "s3")
DEFAULT_AWS_CONN = "aws_default"


def _s3_options(conn_id: str | None) -> dict[str, Any]:
    """s3fs's options from connection `conn_id` (None, or an `aws_default` that is not defined: boto's chain)."""
    from ledger.sdk.secrets import find_connection

    if conn_id is None:
        return {}
    try:
        info = find_connection(conn_id)
    except LookupError as exc:
        if conn_id == DEFAULT_AWS_CONN:
            return {}
        raise InvalidInput(str(exc).strip("'\"")) from None
    extra = info.extra_dejson
    options: dict[str, Any] = {}
    if info.login:
        options["key"], options["secret"] = info.login, info.password or ""
    if extra.get("aws_session_token"):
        options["token"] = extra["aws_session_token"]
    client = {k: extra[k] for k in ("endpoint_url", "region_name") if extra.get(k)}
    if client:
        options["client_kwargs"] = client
    return options


class ObjectStoragePath:
    """A path of an object store (see the module docstring): pathlib's names, fsspec's file system."""

    protocol: str
    conn_id: str | None
    path: str

    def __init__(self, url: str | ObjectStoragePath, *parts: str, conn_id: str | None = None) -> None:
        if isinstance(url, ObjectStoragePath):
            self.protocol, self.conn_id, self.path = url.protocol, conn_id or url.conn_id, url.path
        else:
            split = urlsplit(str(url))
            protocol = split.scheme or "file"
            if protocol not in PROTOCOLS:
                raise InvalidInput(f"ObjectStoragePath {url!r}: ledger reads and writes {', '.join(PROTOCOLS)}:// "
                                   "paths only")
            user, _, host = split.netloc.rpartition("@")
            self.protocol, self.conn_id = protocol, conn_id or user or None
            self.path = (host + split.path) if protocol == "s3" else (split.path if split.scheme else str(url))
            if protocol == "s3" and self.conn_id is None:
                self.conn_id = DEFAULT_AWS_CONN
        for part in parts:
            self.path = posixpath.join(self.path, part)
        self._fs: Any = None

    # -- the path ---------------------------------------------------------------------------------------------
    def __truediv__(self, other: str) -> ObjectStoragePath:
        return ObjectStoragePath(self, str(other).lstrip("/") if self.path else str(other))

    def __str__(self) -> str:
        return f"{self.protocol}://{self.path}"

    def __repr__(self) -> str:
        return f"ObjectStoragePath({self.as_uri()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStoragePath) and (self.protocol, self.conn_id, self.path.rstrip("/")) == (
            other.protocol, other.conn_id, other.path.rstrip("/"))

    def __hash__(self) -> int:
        return hash((self.protocol, self.conn_id, self.path.rstrip("/")))

    def as_uri(self) -> str:
        """The URL with its connection (`s3://conn@bucket/key`): what passes between tasks."""
        return f"{self.protocol}://{self.conn_id}@{self.path}" if self.conn_id else str(self)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def stem(self) -> str:
        return str(posixpath.splitext(self.name)[0])

    @property
    def suffix(self) -> str:
        return posixpath.splitext(self.name)[1]

    @property
    def parent(self) -> ObjectStoragePath:
        made = ObjectStoragePath(self)
        made.path = posixpath.dirname(self.path.rstrip("/"))
        return made

    @property
    def bucket(self) -> str:
        return self.path.split("/", 1)[0] if self.protocol == "s3" else ""

    @property
    def key(self) -> str:
        return self.path.split("/", 1)[1] if self.protocol == "s3" and "/" in self.path else ""

    # -- the store --------------------------------------------------------------------------------------------
    @property
    def fs(self) -> Any:
        """The fsspec file system of the path (made once)."""
        if self._fs is None:
            import fsspec

            if self.protocol == "s3":
                try:
                    import s3fs  # noqa: F401
                except ImportError:
                    raise InvalidInput("s3:// paths need s3fs, which is not installed: pip install 'ledger[s3]'") \
                        from None
            self._fs = fsspec.filesystem(self.protocol, **(_s3_options(self.conn_id) if self.protocol == "s3"
                                                           else {}))
        return self._fs

    def open(self, mode: str = "r", **kwargs: Any) -> Any:
        return self.fs.open(self.path, mode, **kwargs)

    def read_bytes(self) -> bytes:
        data: bytes = self.fs.cat_file(self.path)
        return data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        self.fs.pipe_file(self.path, data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def is_dir(self) -> bool:
        return bool(self.fs.isdir(self.path))

    def is_file(self) -> bool:
        return bool(self.fs.isfile(self.path))

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        if self.exists() and not exist_ok:
            raise FileExistsError(str(self))
        self.fs.makedirs(self.path, exist_ok=True) if parents else self.fs.mkdir(self.path)

    def iterdir(self) -> Iterator[ObjectStoragePath]:
        for found in self.fs.ls(self.path, detail=False):
            child = ObjectStoragePath(self)
            child.path = str(found)
            yield child

    def glob(self, pattern: str) -> Iterator[ObjectStoragePath]:
        for found in self.fs.glob(posixpath.join(self.path, pattern)):
            child = ObjectStoragePath(self)
            child.path = str(found)
            yield child

    def stat(self) -> dict[str, Any]:
        info: dict[str, Any] = self.fs.info(self.path)
        return info

    def size(self) -> int:
        return int(self.fs.size(self.path))

    def unlink(self, missing_ok: bool = False) -> None:
        if missing_ok and not self.exists():
            return
        self.fs.rm_file(self.path)

    def rm(self, recursive: bool = False) -> None:
        self.fs.rm(self.path, recursive=recursive)

    def copy(self, dst: ObjectStoragePath | str, recursive: bool = False) -> None:
        """Copy to `dst`, in the same store or across stores (file to s3 and back)."""
        target = dst if isinstance(dst, ObjectStoragePath) else ObjectStoragePath(dst)
        if target.is_dir() or str(target).endswith("/"):
            target = target / self.name
        if (target.protocol, target.conn_id) == (self.protocol, self.conn_id):
            self.fs.copy(self.path, target.path, recursive=recursive)
            return
        with self.open("rb") as src, target.open("wb") as out:
            out.write(src.read())

    def move(self, dst: ObjectStoragePath | str) -> None:
        self.copy(dst)
        self.unlink()
