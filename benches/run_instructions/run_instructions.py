#!/usr/bin/env python3
"""Instructions per one-call run by callgrind, with a fixed-cost allocator, against the code before.

    python3 benches/run_instructions/run_instructions.py DIR [--before REPO] [--allocator bump|system]

Wall time of `run_cost`'s one-call run moves by several percent with code layout, and callgrind on
glibc's allocator is no steadier: how much `malloc` and `free` cost depends on what the heap held
before (the same binary gave 21,316 and 23,512 instructions per run in two sessions). With
`--allocator bump` (the default) every allocation costs the same few instructions and nothing is
freed, so two builds differ only by their own code and by how many allocations they make, and the
count is the same from one run to the next.

The script writes a crate per checkout in DIR (this checkout, and `--before REPO`, say a
`git worktree add --detach /tmp/before <commit>`), each depending on that checkout's
`phaseo-agent` with its `Cargo.lock` and running `phaseo-agent/benches/one_call` (the agent of
`run_cost` and of `tests/run_allocations.rs`), polled by a minimal executor. It runs each under
`valgrind --tool=callgrind` (address randomisation off) for 100 and for 1,100 runs, and prints the
slope: instructions per run without the one-time set-up, with the allocations per run and the
ratio of this checkout to the one before. Needs valgrind and `setarch`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNS = (100, 1100)

MANIFEST = """[package]
name = "run_instructions"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
phaseo-agent = {{ path = "{repo}/phaseo-agent" }}
futures = {{ version = "0.3", default-features = false, features = ["std", "async-await"] }}
schemars = "1"
serde = {{ version = "1", features = ["derive"] }}
serde_json = "1"
"""

MAIN = r"""//! The one-call run, counted: allocations by a counting allocator that forwards to the system's
//! or, with BUMP set, hands out memory from one arena at a fixed cost and frees nothing.

#[path = "{one_call}"]
mod one_call;

use std::alloc::{{GlobalAlloc, Layout, System}};
use std::pin::pin;
use std::sync::atomic::{{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed}};
use std::task::{{Context, Poll, Waker}};

struct Counting;
static COUNT: AtomicU64 = AtomicU64::new(0);
static BUMP: AtomicBool = AtomicBool::new(false);
static NEXT: AtomicUsize = AtomicUsize::new(0);
static START: AtomicUsize = AtomicUsize::new(usize::MAX);
static END: AtomicUsize = AtomicUsize::new(0);

fn bump(layout: Layout) -> *mut u8 {{
    let align = layout.align().max(16);
    let at = (NEXT.load(Relaxed) + align - 1) & !(align - 1);
    if at + layout.size() > END.load(Relaxed) {{
        return std::ptr::null_mut();
    }}
    NEXT.store(at + layout.size(), Relaxed);
    at as *mut u8
}}

fn in_arena(ptr: *mut u8) -> bool {{
    (START.load(Relaxed)..END.load(Relaxed)).contains(&(ptr as usize))
}}

unsafe impl GlobalAlloc for Counting {{
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {{
        COUNT.fetch_add(1, Relaxed);
        if BUMP.load(Relaxed) {{ bump(layout) }} else {{ unsafe {{ System.alloc(layout) }} }}
    }}
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {{
        if !in_arena(ptr) {{
            unsafe {{ System.dealloc(ptr, layout) }}
        }}
    }}
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {{
        COUNT.fetch_add(1, Relaxed);
        if !BUMP.load(Relaxed) {{
            return unsafe {{ System.realloc(ptr, layout, size) }};
        }}
        let new = bump(unsafe {{ Layout::from_size_align_unchecked(size, layout.align()) }});
        unsafe {{ std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(size)) }};
        if !in_arena(ptr) {{
            unsafe {{ System.dealloc(ptr, layout) }}
        }}
        new
    }}
}}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn block_on<F: Future>(future: F) -> F::Output {{
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {{
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {{
            return output;
        }}
    }}
}}

fn main() {{
    let runs: u64 = std::env::args().nth(1).and_then(|n| n.parse().ok()).expect("a run count");
    let agent = one_call::agent();
    block_on(one_call::run_once(&agent));
    if std::env::var_os("BUMP").is_some() {{
        let size = 256 << 20;
        let arena = unsafe {{ System.alloc(Layout::from_size_align(size, 4096).unwrap()) }} as usize;
        NEXT.store(arena, Relaxed);
        END.store(arena + size, Relaxed);
        START.store(arena, Relaxed);
        BUMP.store(true, Relaxed);
    }}
    let before = COUNT.load(Relaxed);
    for _ in 0..runs {{
        block_on(one_call::run_once(&agent));
    }}
    println!("allocations per run: {{}}", (COUNT.load(Relaxed) - before) as f64 / runs as f64);
}}
"""


def log(message: str) -> None:
    print(f"[run-instructions] {message}", file=sys.stderr, flush=True)


def build(work: Path, label: str, repo: Path) -> Path:
    crate = work / label
    (crate / "src").mkdir(parents=True, exist_ok=True)
    (crate / "Cargo.toml").write_text(MANIFEST.format(repo=repo))
    shutil.copy(repo / "Cargo.lock", crate / "Cargo.lock")
    one_call = repo / "phaseo-agent" / "benches" / "one_call" / "mod.rs"
    (crate / "src" / "main.rs").write_text(MAIN.format(one_call=one_call))
    log(f"building {label} ({repo})")
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=crate, check=True)
    return crate / "target" / "release" / "run_instructions"


def instructions(binary: Path, runs: int, bump: bool, out: Path) -> tuple[int, float]:
    env = dict(os.environ)
    env.pop("BUMP", None)
    if bump:
        env["BUMP"] = "1"
    done = subprocess.run(
        ["setarch", "-R", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         str(binary), str(runs)],
        env=env, capture_output=True, text=True, check=True,
    )
    allocations = float(re.search(r"allocations per run: ([0-9.]+)", done.stdout).group(1))
    totals = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
    return int(totals.group(1)), allocations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--before", type=Path)
    parser.add_argument("--allocator", choices=["bump", "system"], default="bump")
    args = parser.parse_args()
    work = args.dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    checkouts = [("now", REPO)]
    if args.before:
        checkouts.append(("before", args.before.resolve()))
    per_run = {}
    for label, repo in checkouts:
        binary = build(work, label, repo)
        (low, _), (high, allocations) = (
            instructions(binary, runs, args.allocator == "bump", work / f"{label}.{runs}.out")
            for runs in RUNS
        )
        per_run[label] = (high - low) / (RUNS[1] - RUNS[0])
        print(f"{label}: {per_run[label]:,.0f} instructions per run, "
              f"{allocations:g} allocations per run ({args.allocator} allocator)")
    if "before" in per_run:
        print(f"now / before: {per_run['now'] / per_run['before']:.4f}x")


if __name__ == "__main__":
    main()
