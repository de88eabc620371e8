#!/usr/bin/env python3
"""The dispatch ratio of `run_cost` over several code layouts, against the code before a change.

    python3 benches/dispatch_layouts/dispatch_layouts.py DIR [--layouts 4] [--runs 20]
        [--before REPO]

Where a function lands in the binary moves `run_cost`'s ratios by up to 5% from build to build on
this kind of machine, even when the code on the measured path does not change: one build's figure
cannot tell a 3% change from layout luck. This script builds `phaseo-agent/benches/run_cost.rs`
(this checkout's copy, with `benches/one_call/`) as a crate of its own in DIR, once per layout and
per checkout, and runs the binaries' `interleaved` step alternately. Layout 0 is the bench as it
is; layout k adds a padding function of 12 * k arms called once before the measurement, which
moves the code linked after it. Each crate depends on `phaseo-agent` alone (with the bench's own
dependencies, versions pinned by this repository's `Cargo.lock`), as `run_cost` is built.

`--before REPO` builds the same layouts against another checkout of this repository (say,
`git worktree add /tmp/before main`), so a change is measured against the code before it,
layout for layout, in the same run.

Prints, per checkout and layout, the median over the runs of each run's median ratio to the serde
floor (`tool_macro`, `one_call_run`, `one_call_run_polled`), then, per checkout, the median of
all its runs over every layout.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "phaseo-agent" / "benches"
MEASURES = ["tool_macro", "one_call_run", "one_call_run_polled"]

MANIFEST = """[package]
name = "run_cost_layout"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
phaseo-agent = {{ path = "{repo}/phaseo-agent" }}
criterion = {{ version = "0.8", default-features = false, features = ["cargo_bench_support"] }}
futures = {{ version = "0.3", default-features = false, features = ["std", "async-await"] }}
schemars = "1"
serde = {{ version = "1", features = ["derive"] }}
serde_json = {{ version = "1", features = ["float_roundtrip"] }}
tokio = {{ version = "1", features = ["rt", "rt-multi-thread", "time", "sync", "macros"] }}
"""


def log(message: str) -> None:
    print(f"[dispatch-layouts] {message}", file=sys.stderr, flush=True)


def bench_source(layout: int) -> str:
    """`run_cost.rs` with layout `layout`'s padding."""
    source = (BENCH / "run_cost.rs").read_text()
    if layout == 0:
        return source
    marker = "fn interleaved(_: &mut Criterion) {"
    if marker not in source:
        sys.exit(f"run_cost.rs has no `{marker}`: update this script")
    source = source.replace(marker, marker + "\n    black_box(pad(black_box(ARGS)));")
    arms = "\n".join(f"        {i} => x.len() * {i + 7} + {i * 13}," for i in range(12 * layout))
    return source + f"""
/// Layout {layout}'s padding: code that moves what is linked after it.
#[inline(never)]
fn pad(x: &str) -> usize {{
    match x.bytes().filter(u8::is_ascii_digit).count() {{
{arms}
        _ => 0,
    }}
}}
"""


def build(work: Path, label: str, repo: Path, layout: int) -> Path:
    crate = work / f"{label}_{layout}"
    (crate / "src").mkdir(parents=True, exist_ok=True)
    (crate / "Cargo.toml").write_text(MANIFEST.format(repo=repo))
    shutil.copy(REPO / "Cargo.lock", crate / "Cargo.lock")
    shutil.copytree(BENCH / "one_call", crate / "src" / "one_call", dirs_exist_ok=True)
    (crate / "src" / "main.rs").write_text(bench_source(layout))
    target = work / f"target_{label}"
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    log(f"building {label}, layout {layout}")
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=crate, env=env, check=True)
    binary = work / f"bin_{label}_{layout}"
    shutil.copy(target / "release" / "run_cost_layout", binary)
    return binary


def run(binary: Path) -> dict[str, float]:
    out = subprocess.run(
        [str(binary), "--bench", "interleaved"], capture_output=True, text=True, check=True
    ).stdout
    ratios = {}
    for name in MEASURES:
        found = re.search(rf"{name} / floor = ([0-9.]+)x", out)
        if not found:
            sys.exit(f"no `{name}` ratio in the output of {binary}:\n{out}")
        ratios[name] = float(found.group(1))
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--layouts", type=int, default=4)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--before", type=Path)
    args = parser.parse_args()
    work = args.dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    checkouts = [("now", REPO)]
    if args.before:
        checkouts.append(("before", args.before.resolve()))
    binaries = {
        (label, layout): build(work, label, repo, layout)
        for layout in range(args.layouts)
        for label, repo in checkouts
    }
    results: dict[tuple[str, int], list[dict[str, float]]] = {key: [] for key in binaries}
    for i in range(args.runs):
        log(f"run {i + 1}/{args.runs}")
        # Alternating, layout by layout and checkout by checkout, so the two builds of a layout
        # run side by side.
        for key, binary in binaries.items():
            results[key].append(run(binary))

    def median(rows: list[dict[str, float]], name: str) -> float:
        return statistics.median(row[name] for row in rows)

    print(f"\n{args.runs} runs, median of each run's median ratio to the serde floor\n")
    print("| checkout | layout | " + " | ".join(MEASURES) + " |")
    print("|---|---|" + "---|" * len(MEASURES))
    for (label, layout), rows in results.items():
        cells = " | ".join(f"{median(rows, name):.3f}×" for name in MEASURES)
        print(f"| {label} | {layout} | {cells} |")
    for label, _ in checkouts:
        rows = [row for (l, _), rs in results.items() if l == label for row in rs]
        cells = " | ".join(f"{median(rows, name):.3f}×" for name in MEASURES)
        print(f"| {label} | all | {cells} |")


if __name__ == "__main__":
    main()
