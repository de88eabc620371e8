#!/usr/bin/env python3
"""OpenAI strict-mode oracle for the JSON Schemas phaseo-agent emits.

Usage: interop/strict_check.py FILE.json

FILE holds {name: schema, ...}. Each schema goes through
`agents.strict_schema.ensure_strict_json_schema` from the OpenAI Agents SDK
(PyPI openai-agents==0.24.0), the function the SDK runs on a tool schema
before it sends it with `strict: true`. Per schema it prints one of:

  OK       the oracle returns it unchanged: strict-ready
  CHANGED  the oracle rewrites it; a short path diff follows
           (+ added, - removed, ~ changed; at most 15 lines)
  ERROR    the oracle raises (e.g. additionalProperties:true, a root anyOf)

A difference only in the order of a `required` array does not count.
Exit code: 0 if every schema is OK, 1 otherwise, 2 on unreadable input.

On first use it creates the venv $PHASEO_INTEROP_CACHE/venv-strict
(default ~/.cache/phaseo-agent/interop/venv-strict) with openai-agents and
re-executes itself there. Runs with any python3 >= 3.10 (stdlib only until
then).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

AGENTS_REQUIREMENT = "openai-agents==0.24.0"
VENV_NAME = "venv-strict"
MAX_DIFF_LINES = 15


def log(msg: str) -> None:
    print(f"[interop] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    env = os.environ.get("PHASEO_INTEROP_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "phaseo-agent" / "interop"


def ensure_venv(requirements: list[str]) -> Path:
    """Same scheme as interop/lib.sh ensure_venv: a .phaseo-ok marker holds a
    hash of the pip arguments; a flock serialises concurrent installs."""
    cache = cache_dir()
    venv = cache / VENV_NAME
    marker = venv / ".phaseo-ok"
    py = venv / "bin" / "python"
    stamp = hashlib.sha256(" ".join(requirements).encode()).hexdigest()[:16]

    def ready() -> bool:
        return py.exists() and marker.is_file() and marker.read_text() == stamp

    if ready():
        return venv
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".lock-venv-{VENV_NAME}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready():
            return venv
        log(f"creating venv {venv} (pip install {' '.join(requirements)})")
        shutil.rmtree(venv, ignore_errors=True)
        base = os.environ.get("PHASEO_INTEROP_PYTHON") or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
        subprocess.run(
            [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
            check=True,
            stdout=sys.stderr,
        )
        marker.write_text(stamp)
    return venv


def reexec_in_venv() -> None:
    venv = ensure_venv([AGENTS_REQUIREMENT])
    if Path(sys.prefix).resolve() == venv.resolve():
        return
    py = str(venv / "bin" / "python")
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


def canonical(x, key=None):
    if isinstance(x, dict):
        return {k: canonical(v, k) for k, v in x.items()}
    if isinstance(x, list):
        items = [canonical(v) for v in x]
        if key == "required" and all(isinstance(v, str) for v in items):
            return sorted(items)
        return items
    return x


def short(v, n: int = 90) -> str:
    import json

    s = json.dumps(v, separators=(",", ":"))
    return s if len(s) <= n else s[: n - 3] + "..."


def diff(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in list(a) + [k for k in b if k not in a]:
            p = f"{path}/{k.replace('~', '~0').replace('/', '~1')}"
            if k not in b:
                out.append(f"- {p}: {short(a[k])}")
            elif k not in a:
                out.append(f"+ {p}: {short(b[k])}")
            else:
                out.extend(diff(a[k], b[k], p))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out.extend(diff(x, y, f"{path}/{i}"))
        return out
    if type(a) is not type(b) or a != b:
        return [f"~ {path or '/'}: {short(a)} -> {short(b)}"]
    return []


def main() -> int:
    import copy
    import json

    from agents.strict_schema import ensure_strict_json_schema

    args = sys.argv[1:]
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    path = args[0]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"strict_check: cannot read {path}: {e}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict) or not doc:
        print(f"strict_check: {path} must be a non-empty JSON object {{name: schema}}", file=sys.stderr)
        return 2

    counts = {"ok": 0, "changed": 0, "error": 0}
    for name, schema in doc.items():
        if not isinstance(schema, dict):
            counts["error"] += 1
            print(f"ERROR    {name}: not a schema object ({type(schema).__name__})")
            continue
        try:
            strict = ensure_strict_json_schema(copy.deepcopy(schema))
        except Exception as e:  # UserError, ValueError, TypeError, ...
            counts["error"] += 1
            print(f"ERROR    {name}: ensure_strict_json_schema raised {type(e).__name__}: {e}")
            continue
        d = diff(canonical(schema), canonical(strict))
        if not d:
            counts["ok"] += 1
            print(f"OK       {name}")
            continue
        counts["changed"] += 1
        print(f"CHANGED  {name}: ensure_strict_json_schema rewrites it ({len(d)} differences):")
        for line in d[:MAX_DIFF_LINES]:
            print(f"           {line}")
        if len(d) > MAX_DIFF_LINES:
            print(f"           ... {len(d) - MAX_DIFF_LINES} more")
    total = sum(counts.values())
    print(f"strict_check: {counts['ok']} ok, {counts['changed']} changed, {counts['error']} error (of {total})")
    return 0 if counts["ok"] == total else 1


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    reexec_in_venv()
    try:
        sys.exit(main())
    except BrokenPipeError:
        os._exit(1)
