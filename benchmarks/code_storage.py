"""Benchmark what pinning DAG versions' code costs in the database: bytes stored, and the time to register.

    python -m benchmarks.code_storage --files 1000 --package-kb 1024 --repeat 1

For each repeat: a fresh LEDGER_HOME in a temporary folder, `ledger db upgrade`, a DAGs folder with a
helper package `common/` (`--modules` modules of generated, varied Python functions, about
`--package-kb` KB of source in all) and N small DAG files, each distinct (dag_id, a parameter) and each
importing one function of `common`; then

    ledger dags list          (parses the folder and registers every DAG, its version and its code)

Measured:
  folder_bytes          sum of the sizes of the files of the DAGs folder
  code_stored_bytes     sum(length(code_blob.data)) + sum(length(code_bundle.manifest)) (compressed blobs)
  ratio                 code_stored_bytes / folder_bytes     (requirement: < 2.0)
  version_bytes         the dag_version rows' own text: structure, source_code, code_* columns
  db_bytes              size of the SQLite file (after the command, WAL checkpointed by its close)
  list_s                wall time of that first `ledger dags list`
Then one helper module is changed (a function's body) and `ledger dags list` runs again:
  new_versions          dag_version rows added (expected: N, every DAG imports the package)
  grow_code_bytes       growth of code_stored_bytes; grow_version_bytes, grow_db_bytes likewise
  relist_s              wall time of that second `ledger dags list`
Prints one JSON line with the medians (`--each` also prints one line per repeat).
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from benchmarks._common import db_upgrade, ledger_command, ledger_env, load_average, summarise

WORDS = ("account", "amount", "batch", "bucket", "cache", "column", "config", "customer", "date", "delta",
         "event", "field", "file", "frame", "group", "header", "index", "item", "key", "ledger", "limit",
         "line", "metric", "order", "owner", "partition", "path", "payload", "price", "queue", "record",
         "region", "report", "row", "schema", "score", "session", "source", "status", "table", "target",
         "total", "user", "value", "window")
VERBS = ("build", "check", "clean", "collect", "compute", "convert", "count", "filter", "format", "load",
         "merge", "normalise", "parse", "read", "render", "resolve", "split", "summarise", "validate", "write")


def _name(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def helper_function(rng: random.Random, index: int) -> str:
    """One generated, plausible helper function (varied names, constants and control flow)."""
    name = f"{rng.choice(VERBS)}_{_name(rng)}_{index}"
    args = sorted({_name(rng, 1) for _ in range(rng.randint(1, 4))})
    first = args[0]
    acc, item = _name(rng), _name(rng, 1) + "_item"
    limit, factor = rng.randint(2, 5000), round(rng.uniform(0.01, 99.0), 3)
    key = rng.choice(WORDS)
    lines = [f"def {name}({', '.join(args)}, *, {key}_limit={limit}, strict=False):",
             f'    """{rng.choice(VERBS).capitalize()} the {_name(rng).replace("_", " ")} of each '
             f'{rng.choice(WORDS)} in `{first}`',
             f"    and return the {_name(rng).replace('_', ' ')} (at most {limit} entries, scaled by {factor}).",
             '    """',
             f"    {acc} = {{}}",
             f"    for position, {item} in enumerate({first} or ()):",
             f"        if position >= {key}_limit:",
             "            break",
             f"        if {item} is None:",
             "            if strict:",
             f"                raise ValueError(f\"{name}: empty {key} at {{position}}\")",
             "            continue"]
    for _ in range(rng.randint(1, 4)):
        field_name = rng.choice(WORDS)
        op = rng.choice(("+", "-", "*"))
        lines += [f"        if isinstance({item}, dict) and {field_name!r} in {item}:",
                  f"            {acc}[{field_name!r}] = {acc}.get({field_name!r}, 0) {op} "
                  f"{item}[{field_name!r}] * {factor}",
                  f"        elif hasattr({item}, {field_name!r}):",
                  f"            {acc}.setdefault({field_name!r}, []).append(getattr({item}, {field_name!r}))"]
    for extra in args[1:]:
        lines += [f"    if {extra} is not None:", f"        {acc}[{extra!r}] = {extra}"]
    lines += [f"    return {{k: {acc}[k] for k in sorted({acc})}}", "", ""]
    return "\n".join(lines)


def write_folder(folder: Path, files: int, package_kb: int, modules: int, seed: int) -> list[tuple[str, str]]:
    """The DAGs folder: `common/` (about package_kb KB over `modules` modules) and `files` DAG files.
    Returns the (module, function) pairs of `common`."""
    rng = random.Random(seed)
    package = folder / "common"
    package.mkdir(parents=True)
    per_module = package_kb * 1024 // modules
    exported: list[tuple[str, str]] = []
    names = []
    for m in range(modules):
        module = f"mod{m:02d}"
        names.append(module)
        parts = [f'"""Helpers of the {_name(rng).replace("_", " ")} pipelines (generated for a benchmark)."""\n\n'
                 "from __future__ import annotations\n\n\n"]
        size, i = len(parts[0]), 0
        while size < per_module:
            text = helper_function(rng, m * 10_000 + i)
            parts.append(text)
            size += len(text)
            exported.append((module, text.split("(", 1)[0][4:]))
            i += 1
        (package / f"{module}.py").write_text("".join(parts))
    (package / "__init__.py").write_text('"""Shared helpers of the DAGs of this folder."""\n')
    for n in range(files):
        module, function = exported[n % len(exported)]
        (folder / f"dag_{n:05d}.py").write_text(textwrap.dedent(f"""\
            from ledger import DAG, PythonTask

            from common.{module} import {function}

            BATCH_SIZE = {n * 7 + 3}


            def step(**_):
                return {function}([{{"value": BATCH_SIZE}}])


            with DAG("code_storage_{n:05d}", schedule=None) as dag:
                PythonTask("step", step)
            """))
    return exported


def change_one_helper(folder: Path) -> None:
    """Change the code (not only a comment) of one function of one module of `common`."""
    path = folder / "common" / "mod00.py"
    text = path.read_text()
    changed = text.replace("    return {k:", "    changed_for_benchmark = True\n    return {k:", 1)
    assert changed != text
    path.write_text(changed)


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def measure_db(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    try:
        blobs, blob_count = conn.execute("SELECT coalesce(sum(length(data)), 0), count(*) FROM code_blob").fetchone()
        raw = conn.execute("SELECT coalesce(sum(size), 0) FROM code_blob").fetchone()[0]
        bundles, bundle_count = conn.execute(
            "SELECT coalesce(sum(length(manifest)), 0), count(*) FROM code_bundle").fetchone()
        versions, structure, source = conn.execute(
            "SELECT count(*), coalesce(sum(length(structure)), 0), coalesce(sum(length(source_code)), 0) "
            "FROM dag_version").fetchone()
        code_cols = conn.execute(
            "SELECT coalesce(sum(coalesce(length(code_entry), 0) + coalesce(length(code_entry_sha256), 0) "
            "+ coalesce(length(code_bundle), 0) + coalesce(length(code_snapshot), 0)), 0) FROM dag_version"
        ).fetchone()[0]
        errors = conn.execute("SELECT count(*) FROM import_error").fetchone()[0]
    finally:
        conn.close()
    return {"blob_bytes": blobs, "blob_raw_bytes": raw, "blobs": blob_count, "bundle_bytes": bundles,
            "bundles": bundle_count, "code_stored_bytes": blobs + bundles, "versions": versions,
            "structure_bytes": structure, "source_code_bytes": source, "version_code_column_bytes": code_cols,
            "version_bytes": structure + source + code_cols, "import_errors": errors,
            "db_bytes": db.stat().st_size}


def dags_list(home: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([*ledger_command(), "dags", "list", "--json"], env=ledger_env(home),
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"`ledger dags list` failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds


def one_round(workdir: Path, files: int, package_kb: int, modules: int, seed: int) -> dict[str, Any]:
    home = workdir / "home"
    home.mkdir(parents=True)
    db_upgrade(home)
    folder = home / "dags"
    write_folder(folder, files, package_kb, modules, seed)
    size = folder_bytes(folder)
    package = folder_bytes(folder / "common")
    load = load_average()
    list_s = dags_list(home)
    first = measure_db(home / "ledger.db")
    if first["versions"] != files or first["import_errors"]:
        raise SystemExit(f"expected {files} versions and no import error, found {first['versions']} versions "
                         f"and {first['import_errors']} import errors")
    change_one_helper(folder)
    relist_s = dags_list(home)
    second = measure_db(home / "ledger.db")
    return {
        "folder_bytes": size, "package_bytes": package, "dag_files_bytes": size - package,
        **first, "ratio": first["code_stored_bytes"] / size,
        "version_bytes_per_dag": first["version_bytes"] / files, "list_s": list_s,
        "new_versions": second["versions"] - first["versions"],
        "new_blobs": second["blobs"] - first["blobs"], "new_bundles": second["bundles"] - first["bundles"],
        "grow_code_bytes": second["code_stored_bytes"] - first["code_stored_bytes"],
        "grow_version_bytes": second["version_bytes"] - first["version_bytes"],
        "grow_db_bytes": second["db_bytes"] - first["db_bytes"], "relist_s": relist_s,
        "import_errors_after": second["import_errors"], "load_before": load,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000, help="DAG files (N), each importing from common/")
    parser.add_argument("--package-kb", type=int, default=1024, help="size of the helper package's source")
    parser.add_argument("--modules", type=int, default=20, help="modules of the helper package")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--each", action="store_true", help="also print one JSON line per repeat")
    parser.add_argument("--keep", metavar="DIR", type=Path, help="work in DIR and keep it instead of a temp dir")
    args = parser.parse_args(argv)
    if args.files < 1 or args.modules < 1 or args.package_kb < 1:
        parser.error("--files, --modules and --package-kb must be at least 1")

    rounds = []
    with tempfile.TemporaryDirectory(prefix="ledger-bench-") as tmp:
        base = args.keep or Path(tmp)
        for i in range(args.repeat):
            rounds.append(one_round(base / f"round{i}", args.files, args.package_kb, args.modules, args.seed))
            if args.each:
                print(json.dumps({"benchmark": "code_storage_round", "round": i,
                                  **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in rounds[-1].items()}}),
                      flush=True)

    last = rounds[-1]  # the sizes are deterministic (same seed); the times vary
    out: dict[str, Any] = {"benchmark": "code_storage", "files": args.files, "package_kb": args.package_kb,
                           "modules": args.modules, "repeat": args.repeat}
    for key in ("folder_bytes", "package_bytes", "dag_files_bytes", "code_stored_bytes", "blob_bytes",
                "blob_raw_bytes", "blobs", "bundle_bytes", "bundles", "version_bytes", "structure_bytes",
                "source_code_bytes", "version_code_column_bytes", "db_bytes"):
        out[key] = last[key]
    out["ratio"] = round(last["ratio"], 4)
    out["ratio_ok"] = last["ratio"] < 2.0
    out["version_bytes_per_dag"] = round(last["version_bytes_per_dag"], 1)
    out.update(summarise(rounds, "list_s", 3))
    for key in ("new_versions", "new_blobs", "new_bundles", "grow_code_bytes", "grow_version_bytes",
                "grow_db_bytes"):
        out[key] = last[key]
    out["new_versions_ok"] = last["new_versions"] == args.files
    out.update(summarise(rounds, "relist_s", 3))
    out["load_before"] = [r["load_before"] for r in rounds]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
