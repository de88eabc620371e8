#!/usr/bin/env python3
"""Compile time of 100 tools, side by side: `#[tool]` functions, `Tool::typed` closures and rmcp
`#[tool]` methods, with the same inputs and the same bodies.

    python3 benches/compile_time/compile_time.py generate DIR [--tools N] [--before REPO]
    python3 benches/compile_time/compile_time.py measure DIR [--rounds R] [--tools N]
        [--before REPO] [--crates phaseo_fn,rmcp_router,...]

`generate` writes three crates into DIR (each its own workspace, so nothing of this repository's
features leaks in): `phaseo_fn` (`#[tool] async fn`), `phaseo_typed` (`Tool::typed` closures)
and `rmcp_router` (`#[tool_router]` methods, `#[tool_handler]`). Tool i takes input shape i % 4:

  0 flat:        a struct of a string, an integer and a bool
  1 nested:      a struct holding a struct with a `Vec`, an `Option` and a unit enum
  2 plain:       three plain arguments (`#[tool]`), the same fields as a struct elsewhere
  3 collections: a `Vec` of structs and a `HashMap`

and returns a `String` built from it with `format!`.

`--before REPO` adds a fourth crate, `phaseo_fn_before`: the same `#[tool]` functions built
against another checkout of this repository (say, `git worktree add /tmp/before main`), so a
change is measured against the code before it in the same run. `--crates` measures only the
crates listed (`rmcp_router` is always measured: ratios are to it).

`measure` generates the crates, builds their dependencies once (debug and release), then for each
round, interleaving the three crates, measures the CPU time (user + system, of cargo and every
process it starts) of:

  incremental  a one-line edit of one tool's body that keeps the line's length (a letter of a
               string changes), then `cargo build`
  resize       a one-line edit of the same body that changes the line's length (a letter is
               added to or taken from the string), then `cargo build`
  debug        `cargo clean -p CRATE`, then `cargo build` (the crate alone: dependencies are built)
  release      `cargo clean --release -p CRATE`, then `cargo build --release`

and prints each crate's median per measure and its ratio to `rmcp_router` in the same run, then
the median of each round's ratio (the builds of a round see the same load). CPU time, not wall
time, so other load on the machine matters less; read the ratios.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CRATES = ["phaseo_fn", "phaseo_typed", "rmcp_router"]
SHAPES = ["flat", "nested", "plain", "collections"]


def fields(shape: str, i: int) -> list[tuple[str, str]]:
    if shape == "flat":
        return [("query", "String"), ("limit", "u32"), ("verbose", "bool")]
    if shape == "nested":
        return [("filter", f"Filter{i}"), ("page", "Option<u32>"), ("order", f"Order{i}")]
    if shape == "plain":
        return [("name", "String"), ("count", "i64"), ("dry_run", "Option<bool>")]
    return [("items", f"Vec<Item{i}>"), ("labels", "HashMap<String, String>")]


def body(shape: str, i: int) -> str:
    if shape == "flat":
        expr = 'format!("{} {} {} (tool %d)", input.query, input.limit, input.verbose)' % i
    elif shape == "nested":
        expr = ('format!("{} {:?} {:?} {:?} (tool %d)", input.filter.field, input.filter.values, '
                'input.page, input.order)' % i)
    elif shape == "plain":
        expr = 'format!("{} {} {:?} (tool %d)", input.name, input.count, input.dry_run)' % i
    else:
        expr = ('format!("{} items, {} labels, first {:?} (tool %d)", input.items.len(), '
                'input.labels.len(), input.items.first().map(|it| (it.id, it.qty)))' % i)
    return expr


def support_types(shape: str, i: int, derive: str) -> str:
    if shape == "nested":
        return (f"{derive}\npub struct Filter{i} {{\n    /// The field to filter on.\n    pub field: String,\n"
                f"    /// The values it may take.\n    pub values: Vec<String>,\n}}\n\n"
                f"{derive}\n#[derive(Debug)]\npub enum Order{i} {{\n    Asc,\n    Desc,\n}}\n\n")
    if shape == "collections":
        return (f"{derive}\npub struct Item{i} {{\n    /// The item's id.\n    pub id: u64,\n"
                f"    /// How many.\n    pub qty: u32,\n}}\n\n")
    return ""


def input_struct(shape: str, i: int, derive: str) -> str:
    out = support_types(shape, i, derive)
    out += f"{derive}\npub struct In{i} {{\n"
    for name, ty in fields(shape, i):
        out += f"    /// The {name}.\n    pub {name}: {ty},\n"
    return out + "}\n\n"


def manifest(name: str, deps: str) -> str:
    return (f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
            f"[workspace]\n\n[dependencies]\n{deps}")


PHASEO_DEPS = (f'phaseo-agent = {{ path = "{REPO / "phaseo-agent"}" }}\n'
               'schemars = "1"\nserde = { version = "1", features = ["derive"] }\n')
RMCP_DEPS = ('rmcp = { version = "3.11", default-features = false, features = ["server", "macros"] }\n'
             'schemars = "1"\nserde = { version = "1", features = ["derive"] }\n')
DERIVE = "#[derive(serde::Deserialize, schemars::JsonSchema)]"


def gen_phaseo_fn(n: int) -> str:
    out = "//! Generated: 100 `#[tool]` functions.\n#![allow(dead_code)]\n\nuse std::collections::HashMap;\n\nuse phaseo_agent::{IntoTool, Tool, tool};\n\n"
    # The input types first, then the tools, as in the other two crates (rmcp's methods are one
    # `impl` block): an edit that changes a line's length recompiles the instantiations over
    # every type defined after it in the file, so the layouts must match.
    for i in range(n):
        if SHAPES[i % 4] != "plain":
            out += input_struct(SHAPES[i % 4], i, DERIVE)
    for i in range(n):
        shape = SHAPES[i % 4]
        if shape == "plain":
            args = ", ".join(f"{name}: {ty}" for name, ty in fields(shape, i))
            names = ", ".join(name for name, _ in fields(shape, i))
            out += (f"/// Tool {i}, plain arguments.\n#[tool]\npub async fn tool_{i}({args}) -> String {{\n"
                    f"    struct Plain {{ name: String, count: i64, dry_run: Option<bool> }}\n"
                    f"    let input = Plain {{ {names} }};\n    {body(shape, i)}\n}}\n\n")
        else:
            out += (f"/// Tool {i}, {shape} input.\n#[tool]\npub async fn tool_{i}(input: In{i}) -> String {{\n"
                    f"    {body(shape, i)}\n}}\n\n")
    out += "/// Every tool.\npub fn all() -> Vec<Tool> {\n    vec![\n"
    out += "".join(f"        tool_{i}.into_tool(),\n" for i in range(n))
    return out + "    ]\n}\n"


def gen_phaseo_typed(n: int) -> str:
    out = "//! Generated: 100 `Tool::typed` closures.\n#![allow(dead_code)]\n\nuse std::collections::HashMap;\nuse std::convert::Infallible;\n\nuse phaseo_agent::Tool;\n\n"
    for i in range(n):
        out += input_struct(SHAPES[i % 4], i, DERIVE)
    out += "/// Every tool.\npub fn all() -> Vec<Tool> {\n    vec![\n"
    for i in range(n):
        shape = SHAPES[i % 4]
        out += (f'        Tool::typed("tool_{i}", "Tool {i}, {shape} input.", |input: In{i}, _ctx| async move {{\n'
                f"            Ok::<_, Infallible>({body(shape, i)})\n        }}),\n")
    return out + "    ]\n}\n"


def gen_rmcp(n: int) -> str:
    out = ("//! Generated: 100 rmcp `#[tool]` methods.\n#![allow(dead_code)]\n\nuse std::collections::HashMap;\n\n"
           "use rmcp::handler::server::router::tool::ToolRouter;\nuse rmcp::handler::server::wrapper::Parameters;\n"
           "use rmcp::{ServerHandler, tool, tool_handler, tool_router};\n\n")
    for i in range(n):
        out += input_struct(SHAPES[i % 4], i, DERIVE)
    out += "#[derive(Clone)]\npub struct Server {\n    tool_router: ToolRouter<Self>,\n}\n\n#[tool_router]\nimpl Server {\n"
    out += "    pub fn new() -> Self {\n        Server { tool_router: Self::tool_router() }\n    }\n\n"
    for i in range(n):
        shape = SHAPES[i % 4]
        out += (f'    #[tool(description = "Tool {i}, {shape} input.")]\n'
                f"    async fn tool_{i}(&self, Parameters(input): Parameters<In{i}>) -> String {{\n"
                f"        {body(shape, i)}\n    }}\n\n")
    out += "}\n\n#[tool_handler]\nimpl ServerHandler for Server {}\n"
    return out


def phaseo_deps(repo: Path) -> str:
    return PHASEO_DEPS.replace(str(REPO / "phaseo-agent"), str(repo / "phaseo-agent"))


def generate(root: Path, n: int, before: Path | None = None) -> None:
    sources = {"phaseo_fn": (gen_phaseo_fn(n), PHASEO_DEPS, REPO),
               "phaseo_typed": (gen_phaseo_typed(n), PHASEO_DEPS, REPO),
               "rmcp_router": (gen_rmcp(n), RMCP_DEPS, None)}
    if before is not None:
        sources["phaseo_fn_before"] = (gen_phaseo_fn(n), phaseo_deps(before), before)
    for name, (source, deps, repo) in sources.items():
        crate = root / name
        (crate / "src").mkdir(parents=True, exist_ok=True)
        (crate / "Cargo.toml").write_text(manifest(name, deps))
        (crate / "src" / "lib.rs").write_text(source)
        # One lockfile for the phaseo crates' shared dependencies: the repository's own versions.
        if repo is not None:
            shutil.copy(repo / "Cargo.lock", crate / "Cargo.lock")


def cpu_of(cmd: list[str], cwd: Path, env: dict) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed in {cwd}:\n{done.stderr[-4000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def edit(crate: Path, round_: int, resize: bool) -> None:
    """The one-line edit of tool 50's string. Its last word alternates between `edit a` and
    `edit b` (same length), or between `edit a` and `edit aa` (`resize`). rustc recompiles more
    after an edit that moves the columns of what follows it on the line (the spans of the code
    after it change), so the two are measured apart."""
    lib = crate / "src" / "lib.rs"
    text = lib.read_text()
    found = re.search(r"\(tool 50(, edit [ab]+)?\)", text)
    if found is None:
        sys.exit(f"{lib}: tool 50's string is not there to edit (was it generated with --tools > 50?)")
    now = found.group(1) or ""
    if resize:
        new = ", edit a" if now == ", edit aa" else ", edit aa"
    else:
        new = {", edit a": ", edit b", ", edit b": ", edit a"}.get(now, ", edit a")
    if new == now or (not resize and len(new) != len(now) and now):
        sys.exit(f"{lib}: cannot make the edit from {now!r}")
    lib.write_text(text[:found.start()] + f"(tool 50{new})" + text[found.end():])


def measure(root: Path, rounds: int, n: int, crates: list[str], before: Path | None) -> None:
    generate(root, n, before)
    env = dict(os.environ)
    env.pop("RUSTFLAGS", None)
    for name in crates:
        crate = root / name
        env_c = dict(env, CARGO_TARGET_DIR=str(root / "target" / name))
        print(f"[compile-time] building {name} and its dependencies (debug and release)", file=sys.stderr)
        cpu_of(["cargo", "build", "--quiet"], crate, env_c)
        cpu_of(["cargo", "build", "--quiet", "--release"], crate, env_c)
    measures = ["incremental", "resize", "debug", "release"]
    results: dict[str, dict[str, list[float]]] = {c: {m: [] for m in measures} for c in crates}
    for name in crates:
        # The string in the form the edits alternate from (`edit a`), built once, unmeasured.
        edit(root / name, -1, resize=False)
        cpu_of(["cargo", "build", "--quiet"], root / name, dict(env, CARGO_TARGET_DIR=str(root / "target" / name)))
    for r in range(rounds):
        for measure_name in measures:
            for name in crates:
                crate = root / name
                env_c = dict(env, CARGO_TARGET_DIR=str(root / "target" / name))
                if measure_name in ("incremental", "resize"):
                    # After a resize the string is `edit aa` or `edit a`: the same-length edit
                    # needs `edit a`, so a resize edit of the previous round is undone, unmeasured.
                    if measure_name == "incremental" and "edit aa)" in (crate / "src" / "lib.rs").read_text():
                        edit(crate, r, resize=True)
                        cpu_of(["cargo", "build", "--quiet"], crate, env_c)
                    edit(crate, r, resize=measure_name == "resize")
                    t = cpu_of(["cargo", "build", "--quiet"], crate, env_c)
                elif measure_name == "debug":
                    cpu_of(["cargo", "clean", "--quiet", "-p", name], crate, env_c)
                    t = cpu_of(["cargo", "build", "--quiet"], crate, env_c)
                else:
                    cpu_of(["cargo", "clean", "--quiet", "--release", "-p", name], crate, env_c)
                    t = cpu_of(["cargo", "build", "--quiet", "--release"], crate, env_c)
                results[name][measure_name].append(t)
                print(f"[compile-time] round {r + 1}/{rounds} {measure_name:11} {name:16} {t:7.2f} s CPU", file=sys.stderr)
    print(f"\n{n} tools, {rounds} rounds, median CPU seconds (ratio to rmcp_router in the same run)\n")
    print(f"| crate | one-line edit | one-line edit, line resized | full debug | release |")
    print(f"|---|---|---|---|---|")
    base = {m: statistics.median(results["rmcp_router"][m]) for m in measures}
    for name in crates:
        cells = []
        for m in measures:
            med = statistics.median(results[name][m])
            cells.append(f"{med:.2f} s ({med / base[m]:.2f}×)")
        print(f"| `{name}` | " + " | ".join(cells) + " |")
    # The builds of a round run one after the other, so they see the same load: the median of the
    # rounds' ratios is steadier than the ratio of the medians on a shared machine.
    print(f"\nMedian (and range) of each round's ratio to rmcp_router:\n")
    print(f"| crate | one-line edit | one-line edit, line resized | full debug | release |")
    print(f"|---|---|---|---|---|")
    for name in crates:
        if name == "rmcp_router":
            continue
        cells = []
        for m in measures:
            ratios = [a / b for a, b in zip(results[name][m], results["rmcp_router"][m])]
            cells.append(f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})")
        print(f"| `{name}` | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["generate", "measure"])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout of this repository")
    parser.add_argument("--crates", help="comma-separated crates to measure (default: all)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    before = args.before.resolve() if args.before else None
    if before is not None and not (before / "phaseo-agent" / "Cargo.toml").is_file():
        sys.exit(f"--before {before}: not a checkout of this repository (no phaseo-agent/Cargo.toml)")
    known = CRATES + (["phaseo_fn_before"] if before is not None else [])
    crates = args.crates.split(",") if args.crates else known
    unknown = [c for c in crates if c not in known]
    if unknown:
        sys.exit(f"--crates: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    crates = [c for c in known if c in crates and c != "rmcp_router"] + ["rmcp_router"]
    if args.command == "generate":
        generate(args.dir, args.tools, before)
    else:
        started = time.time()
        measure(args.dir, args.rounds, args.tools, crates, before)
        print(f"\n({time.time() - started:.0f} s wall)", file=sys.stderr)


if __name__ == "__main__":
    main()
