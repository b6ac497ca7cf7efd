"""Airflow's Amazon provider, its S3 basics, in ledger's namespace: `S3Hook`, `S3KeySensor`,
`S3CreateObjectOperator` and `S3DeleteObjectsOperator`, on boto3 (the optional extra `ledger[s3]`), as Airflow's.

The AWS connection is read by id as the other providers read it (ledger's, then `AIRFLOW_CONN_<ID>`:
ledger/airflow_compat/sql.py): its login and password are the access key id and secret, its extra (JSON or the
URI's query string) may give `region_name`, `endpoint_url` (an S3-compatible server), `aws_session_token` and
`verify`. When the connection is not defined, boto3's own credential chain is used (AWS_* variables, the
instance's role), as Airflow does; `aws_conn_id=None` asks for that chain directly.
"""

from __future__ import annotations

import fnmatch
import gzip
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ledger.airflow_compat.connection_lookup import connection
from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.airflow_compat.graph import AirflowException, AirflowNotFoundException
from ledger.airflow_compat.operators import BaseOperator

DEFAULT_CONN = "aws_default"


def boto3_module() -> Any:
    try:
        import boto3
    except ImportError:
        raise AirflowException("the S3 provider needs boto3, which is not installed: "
                               "pip install 'ledger[s3]'") from None
    return boto3


def client_options(aws_conn_id: str | None, region_name: str | None = None,
                   verify: bool | str | None = None) -> dict[str, Any]:
    """boto3 client arguments from connection `aws_conn_id` (see the module docstring)."""
    options: dict[str, Any] = {}
    if aws_conn_id is not None:
        try:
            info = connection(aws_conn_id)
        except AirflowNotFoundException:
            if aws_conn_id != DEFAULT_CONN:
                raise
            info = None
        if info is not None:
            extra = info.extra_dejson
            if info.login:
                options["aws_access_key_id"] = info.login
                options["aws_secret_access_key"] = info.password or ""
            for key in ("region_name", "endpoint_url", "aws_session_token", "verify"):
                if extra.get(key):
                    options[key] = extra[key]
            if info.host and "endpoint_url" not in options:  # a host given the URI's way
                options["endpoint_url"] = info.host if "://" in info.host else f"https://{info.host}"
    if region_name:
        options["region_name"] = region_name
    if verify is not None:
        options["verify"] = verify
    if isinstance(options.get("verify"), str) and options["verify"].lower() in ("true", "false"):
        options["verify"] = options["verify"].lower() == "true"
    return options


def parse_s3_url(url: str) -> tuple[str, str]:
    """(bucket, key) of `s3://bucket/key`; AirflowException for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in ("s3", "s3a", "s3n") or not parts.netloc:
        raise AirflowException(f"{url!r} is not an S3 URL like s3://bucket/key")
    return parts.netloc, parts.path.lstrip("/")


def bucket_and_key(key: str, bucket_name: str | None) -> tuple[str, str]:
    """A key and its bucket, as Airflow's hook takes them: a full s3:// URL, or a key with `bucket_name`."""
    if bucket_name is None:
        return parse_s3_url(key)
    if "://" in key:
        found, rest = parse_s3_url(key)
        if found != bucket_name:
            raise AirflowException(f"key {key!r} names bucket {found!r}, not bucket_name {bucket_name!r}")
        return found, rest
    return bucket_name, key


class S3Hook:
    """Airflow's S3Hook: `get_conn()` is the boto3 S3 client; the methods DAG code calls most."""

    conn_name_attr = "aws_conn_id"
    default_conn_name = DEFAULT_CONN

    def __init__(self, aws_conn_id: str | None = DEFAULT_CONN, region_name: str | None = None,
                 verify: bool | str | None = None, extra_args: dict[str, Any] | None = None,
                 transfer_config_args: dict[str, Any] | None = None, **_: Any) -> None:
        if transfer_config_args:
            raise AirflowException("S3Hook(transfer_config_args=...) is not supported by ledger's S3 provider; "
                                   "call boto3 from a @task for tuned transfers")
        self.aws_conn_id, self.region_name, self.verify = aws_conn_id, region_name, verify
        self.extra_args = dict(extra_args or {})
        self._client: Any = None

    def get_conn(self) -> Any:
        if self._client is None:
            self._client = boto3_module().client(
                "s3", **client_options(self.aws_conn_id, self.region_name, self.verify))
        return self._client

    @property
    def conn(self) -> Any:
        return self.get_conn()

    parse_s3_url = staticmethod(parse_s3_url)

    def check_for_bucket(self, bucket_name: str) -> bool:
        try:
            self.get_conn().head_bucket(Bucket=bucket_name)
        except self.get_conn().exceptions.ClientError:
            return False
        return True

    def create_bucket(self, bucket_name: str, region_name: str | None = None) -> None:
        region = region_name or self.get_conn().meta.region_name
        if region in (None, "us-east-1"):
            self.get_conn().create_bucket(Bucket=bucket_name)
        else:
            self.get_conn().create_bucket(Bucket=bucket_name,
                                          CreateBucketConfiguration={"LocationConstraint": region})

    def _objects(self, bucket_name: str, prefix: str = "", delimiter: str = "") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        pages = self.get_conn().get_paginator("list_objects_v2").paginate(
            Bucket=bucket_name, Prefix=prefix, Delimiter=delimiter)
        for page in pages:
            found += page.get("Contents", [])
        return found

    def list_keys(self, bucket_name: str, prefix: str = "", delimiter: str = "", **_: Any) -> list[str]:
        return [o["Key"] for o in self._objects(bucket_name, prefix or "", delimiter or "")]

    def list_prefixes(self, bucket_name: str, prefix: str = "", delimiter: str = "", **_: Any) -> list[str]:
        found: list[str] = []
        for page in self.get_conn().get_paginator("list_objects_v2").paginate(
                Bucket=bucket_name, Prefix=prefix or "", Delimiter=delimiter or ""):
            found += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        return found

    def head_object(self, key: str, bucket_name: str | None = None) -> dict[str, Any] | None:
        bucket, name = bucket_and_key(key, bucket_name)
        try:
            found: dict[str, Any] = self.get_conn().head_object(Bucket=bucket, Key=name)
        except self.get_conn().exceptions.ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                return None
            raise
        return found

    def check_for_key(self, key: str, bucket_name: str | None = None) -> bool:
        return self.head_object(key, bucket_name) is not None

    def get_key(self, key: str, bucket_name: str | None = None) -> Any:
        """The boto3 resource's Object of the key (`.get()["Body"].read()`, `.key`, `.content_length`...)."""
        bucket, name = bucket_and_key(key, bucket_name)
        resource = boto3_module().resource("s3", **client_options(self.aws_conn_id, self.region_name, self.verify))
        obj = resource.Object(bucket, name)
        obj.load()
        return obj

    def read_key(self, key: str, bucket_name: str | None = None) -> str:
        bucket, name = bucket_and_key(key, bucket_name)
        body: bytes = self.get_conn().get_object(Bucket=bucket, Key=name)["Body"].read()
        return body.decode("utf-8")

    def get_wildcard_key(self, wildcard_key: str, bucket_name: str | None = None,
                         delimiter: str = "") -> str | None:
        """The first key matching the shell-style pattern (its fixed prefix listed), or None."""
        bucket, pattern = bucket_and_key(wildcard_key, bucket_name)
        prefix = re.split(r"[\[*?]", pattern, maxsplit=1)[0]
        return next((k for k in self.list_keys(bucket, prefix, delimiter) if fnmatch.fnmatch(k, pattern)), None)

    def check_for_wildcard_key(self, wildcard_key: str, bucket_name: str | None = None,
                               delimiter: str = "") -> bool:
        return self.get_wildcard_key(wildcard_key, bucket_name, delimiter) is not None

    def load_bytes(self, bytes_data: bytes, key: str, bucket_name: str | None = None, replace: bool = False,
                   encrypt: bool = False, acl_policy: str | None = None, compression: str | None = None) -> None:
        bucket, name = bucket_and_key(key, bucket_name)
        if not replace and self.check_for_key(name, bucket):
            raise ValueError(f"The key {name} already exists.")
        if compression not in (None, "gzip"):
            raise NotImplementedError(f"Received {compression} compression type. Only gzip is supported")
        args = dict(self.extra_args)
        if encrypt:
            args["ServerSideEncryption"] = "AES256"
        if acl_policy:
            args["ACL"] = acl_policy
        data = gzip.compress(bytes_data) if compression == "gzip" else bytes_data
        self.get_conn().put_object(Bucket=bucket, Key=name, Body=data, **args)

    def load_string(self, string_data: str, key: str, bucket_name: str | None = None, replace: bool = False,
                    encrypt: bool = False, encoding: str | None = None, acl_policy: str | None = None,
                    compression: str | None = None) -> None:
        self.load_bytes(string_data.encode(encoding or "utf-8"), key, bucket_name, replace, encrypt, acl_policy,
                        compression)

    def load_file(self, filename: str | os.PathLike[str], key: str, bucket_name: str | None = None,
                  replace: bool = False, encrypt: bool = False, gzip: bool = False,
                  acl_policy: str | None = None) -> None:
        with open(filename, "rb") as f:
            self.load_bytes(f.read(), key, bucket_name, replace, encrypt, acl_policy, "gzip" if gzip else None)

    def download_file(self, key: str, bucket_name: str | None = None, local_path: str | None = None,
                      preserve_file_name: bool = False, use_autogenerated_subdir: bool = True) -> str:
        """The object saved to a file under `local_path` (default: the temporary folder); its path."""
        bucket, name = bucket_and_key(key, bucket_name)
        folder = local_path or tempfile.gettempdir()
        if preserve_file_name:
            if use_autogenerated_subdir:
                folder = tempfile.mkdtemp(prefix="airflow_tmp_dir_", dir=folder)
            path = os.path.join(folder, os.path.basename(name))
        else:
            handle, path = tempfile.mkstemp(prefix="airflow_tmp_", dir=folder)
            os.close(handle)
        self.get_conn().download_file(bucket, name, path)
        return path

    def copy_object(self, source_bucket_key: str, dest_bucket_key: str, source_bucket_name: str | None = None,
                    dest_bucket_name: str | None = None, **_: Any) -> None:
        src_bucket, src_key = bucket_and_key(source_bucket_key, source_bucket_name)
        dst_bucket, dst_key = bucket_and_key(dest_bucket_key, dest_bucket_name)
        self.get_conn().copy_object(Bucket=dst_bucket, Key=dst_key,
                                    CopySource={"Bucket": src_bucket, "Key": src_key}, **self.extra_args)

    def delete_objects(self, bucket: str, keys: str | Sequence[str]) -> None:
        names = [keys] if isinstance(keys, str) else list(keys)
        for start in range(0, len(names), 1000):  # S3's limit per request
            answer = self.get_conn().delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in names[start:start + 1000]]})
            if answer.get("Errors"):
                raise AirflowException(f"Errors when deleting: {[e['Key'] for e in answer['Errors']]}")


class S3KeySensor(BaseSensorOperator):
    """Airflow's S3KeySensor: waits until every key of `bucket_key` exists (shell-style patterns with
    `wildcard_match`, regular expressions with `use_regex`), and `check_fn(objects)` holds when given (each
    object a dict with its `Size` and the `metadata_keys` asked for)."""

    template_fields: ClassVar[tuple[str, ...]] = ("bucket_key", "bucket_name")

    def __init__(self, *, bucket_key: str | list[str], bucket_name: str | None = None,
                 wildcard_match: bool = False, check_fn: Callable[..., bool] | None = None,
                 aws_conn_id: str | None = DEFAULT_CONN, verify: bool | str | None = None,
                 use_regex: bool = False, metadata_keys: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bucket_key, self.bucket_name = bucket_key, bucket_name
        self.wildcard_match, self.use_regex, self.check_fn = wildcard_match, use_regex, check_fn
        self.aws_conn_id, self.verify = aws_conn_id, verify
        self.metadata_keys = list(metadata_keys or ["Size"])

    def _found(self, hook: S3Hook, key: str) -> list[dict[str, Any]]:
        bucket, name = bucket_and_key(key, self.bucket_name)
        if self.wildcard_match or self.use_regex:
            prefix = "" if self.use_regex else re.split(r"[\[*?]", name, maxsplit=1)[0]
            return [{"Key": o["Key"], "Size": o["Size"]} for o in hook._objects(bucket, prefix)
                    if (re.match(name, o["Key"]) if self.use_regex else fnmatch.fnmatch(o["Key"], name))]
        head = hook.head_object(name, bucket)
        if head is None:
            return []
        return [{"Key": name, "Size": head.get("ContentLength"),
                 **{k: head.get(k) for k in self.metadata_keys if k != "Size"}}]

    def poke(self, context: Mapping[str, Any]) -> bool:  # type: ignore[override]
        hook = S3Hook(aws_conn_id=self.aws_conn_id, verify=self.verify)
        keys = [self.bucket_key] if isinstance(self.bucket_key, str) else list(self.bucket_key)
        found = [self._found(hook, key) for key in keys]
        if not all(found):
            return False
        if self.check_fn is None:
            return True
        objects = [o for each in found for o in each]
        return bool(self.check_fn(objects))


class S3CreateObjectOperator(BaseOperator):
    """Airflow's S3CreateObjectOperator: writes `data` (text or bytes) to `s3_key` of `s3_bucket`."""

    template_fields: ClassVar[tuple[str, ...]] = ("s3_bucket", "s3_key", "data")

    def __init__(self, *, s3_key: str, data: str | bytes, s3_bucket: str | None = None, replace: bool = False,
                 encrypt: bool = False, acl_policy: str | None = None, encoding: str | None = None,
                 compression: str | None = None, aws_conn_id: str | None = DEFAULT_CONN,
                 verify: bool | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.s3_bucket, self.s3_key, self.data, self.replace = s3_bucket, s3_key, data, replace
        self.encrypt, self.acl_policy, self.encoding, self.compression = encrypt, acl_policy, encoding, compression
        self.aws_conn_id, self.verify = aws_conn_id, verify

    def execute(self, context: Mapping[str, Any]) -> None:
        hook = S3Hook(aws_conn_id=self.aws_conn_id, verify=self.verify)
        bucket, key = bucket_and_key(self.s3_key, self.s3_bucket)
        if isinstance(self.data, str):
            hook.load_string(self.data, key, bucket, self.replace, self.encrypt, self.encoding, self.acl_policy,
                             self.compression)
        else:
            hook.load_bytes(self.data, key, bucket, self.replace, self.encrypt, self.acl_policy, self.compression)


class S3DeleteObjectsOperator(BaseOperator):
    """Airflow's S3DeleteObjectsOperator: deletes `keys` of `bucket`, or every key under `prefix`."""

    template_fields: ClassVar[tuple[str, ...]] = ("keys", "bucket", "prefix")

    def __init__(self, *, bucket: str, keys: str | list[str] | None = None, prefix: str | None = None,
                 aws_conn_id: str | None = DEFAULT_CONN, verify: bool | str | None = None, **kwargs: Any) -> None:
        for unsupported in ("from_datetime", "to_datetime"):
            if kwargs.get(unsupported) is not None:
                raise AirflowException(f"S3DeleteObjectsOperator({unsupported}=...) is not supported by ledger's S3 "
                                       "provider; give keys or a prefix")
            kwargs.pop(unsupported, None)
        if (keys is None) == (prefix is None):
            raise AirflowException("Either keys or prefix should be set.")
        super().__init__(**kwargs)
        self.bucket, self.keys, self.prefix = bucket, keys, prefix
        self.aws_conn_id, self.verify = aws_conn_id, verify

    def execute(self, context: Mapping[str, Any]) -> None:
        hook = S3Hook(aws_conn_id=self.aws_conn_id, verify=self.verify)
        keys = self.keys if self.keys is not None else hook.list_keys(self.bucket, prefix=self.prefix or "")
        if keys:
            hook.delete_objects(self.bucket, keys)
