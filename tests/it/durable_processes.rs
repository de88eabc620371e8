//! Crash and race tests with real processes (`tests/bin/durable_child.rs`): a process killed
//! with SIGKILL at every journal boundary in turn and recovered by another; eight processes
//! resuming one paused run at once. Side effects are counted in a file outside the processes.
//! Run here on SQLite; `interop::postgres_store` runs the same on PostgreSQL.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn child() -> Command {
    Command::new(env!("CARGO_BIN_EXE_durable_child"))
}

/// A fresh directory for one test's database and effects files.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("phaseo-durable-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The side effects of one run: call id → the idempotency keys each run of its code saw.
fn effects(file: &Path, run_id: &str) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 3, "a torn effects line: {line:?}");
        if parts[0] == run_id {
            seen.entry(parts[1].to_owned())
                .or_default()
                .push(parts[2].to_owned());
        }
    }
    seen
}

/// Starts `start RUN_ID` crashing at `at`; returns whether it reached the crash point (and was
/// killed there) rather than finishing.
fn start_and_kill(store: &str, effects: &Path, run_id: &str, at: &str) -> bool {
    let mut process = child()
        .args([store, effects.to_str().unwrap(), "start", run_id])
        .env("PHASEO_CRASH_AT", at)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(process.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.trim() == "crash-point" {
        process.kill().unwrap(); // SIGKILL
        let status = process.wait().unwrap();
        assert!(!status.success());
        true
    } else {
        let status = process.wait().unwrap();
        assert!(status.success(), "the run without a crash failed: {status}");
        false
    }
}

/// Kills a process at every journal boundary of a whole run (its start, its pause, its resume,
/// its end), before and after each write, and recovers it in another process. Invariants: every
/// run completes; neither the plain tool nor the gated one ever ran twice; every run of the
/// idempotent tool saw one key; the journal loads (its entries chain, none duplicated or lost).
pub(crate) fn crash_at_every_boundary(store: &str, dir: &Path) {
    let mut cases = 0;
    for when in ["before", "after"] {
        for n in 1.. {
            let run_id = format!("crash_{}_{when}_{n}", std::process::id());
            let file = dir.join(format!("{run_id}.effects"));
            let at = format!("{when}:{n}");
            let crashed = start_and_kill(store, &file, &run_id, &at);
            if !crashed {
                assert!(n > 10, "a whole run took only {n} writes");
                break;
            }
            cases += 1;
            let status = child()
                .args([store, file.to_str().unwrap(), "drive", &run_id])
                .status()
                .unwrap();
            if at == "before:1" {
                // Killed before the run's first write: it was never stored, and nothing ran.
                assert_eq!(
                    status.code(),
                    Some(4),
                    "a run killed before it was stored: {status}"
                );
                assert!(effects(&file, &run_id).is_empty());
                continue;
            }
            assert!(
                status.success(),
                "recovery after a kill at {at} failed: {status}"
            );
            let seen = effects(&file, &run_id);
            let runs = |call: &str| seen.get(call).map_or(0, Vec::len);
            assert!(runs("call_1") <= 1, "notify ran twice (killed at {at})");
            // The gated deploy: at most once (a kill right after its start was recorded leaves it
            // in doubt, and the person supplies its outcome instead of running it again).
            assert!(runs("call_3") <= 1, "deploy ran twice (killed at {at})");
            let keys = seen.get("call_2").cloned().unwrap_or_default();
            assert!(!keys.is_empty(), "sync never ran (killed at {at})");
            assert!(
                keys.windows(2).all(|w| w[0] == w[1]),
                "sync saw two keys (killed at {at})"
            );
        }
    }
    assert!(cases >= 20, "only {cases} crash points");
}

/// Eight processes resume one paused run at once, `rounds` times: the approved tool's side
/// effect happens exactly once each round, one process wins and the others are refused.
pub(crate) fn eight_resumers_race(store: &str, dir: &Path, rounds: usize) {
    for round in 0..rounds {
        let run_id = format!("race_{}_{round}", std::process::id());
        let file = dir.join(format!("{run_id}.effects"));
        let paused = child()
            .args([store, file.to_str().unwrap(), "pause", &run_id])
            .output()
            .unwrap();
        assert!(
            paused.status.success(),
            "{}",
            String::from_utf8_lossy(&paused.stderr)
        );
        let out = String::from_utf8(paused.stdout).unwrap();
        let version = out
            .trim()
            .strip_prefix("version ")
            .expect("a version")
            .to_owned();
        let racers: Vec<_> = (0..8)
            .map(|_| {
                child()
                    .args([store, file.to_str().unwrap(), "resume", &run_id, &version])
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let codes: Vec<i32> = racers
            .into_iter()
            .map(|mut p| p.wait().unwrap().code().unwrap_or(-1))
            .collect();
        let won = codes.iter().filter(|&&c| c == 0).count();
        let lost = codes.iter().filter(|&&c| c == 3).count();
        assert_eq!((won, lost), (1, 7), "round {round}: exit codes {codes:?}");
        let seen = effects(&file, &run_id);
        assert_eq!(
            seen.get("call_3").map_or(0, Vec::len),
            1,
            "round {round}: deploy ran {:?}",
            seen.get("call_3")
        );
    }
}

#[test]
fn sqlite_a_process_killed_at_every_journal_boundary_is_recovered() {
    let dir = scratch("crash");
    let store = format!("sqlite:{}", dir.join("runs.db").display());
    crash_at_every_boundary(&store, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without a flush per entry (`power_safe(false)`), a killed process still loses nothing: what
/// it wrote is in the operating system's hands.
#[test]
fn sqlite_not_power_safe_still_survives_a_killed_process() {
    let dir = scratch("crash-normal");
    let store = format!("sqlite-not-power-safe:{}", dir.join("runs.db").display());
    crash_at_every_boundary(&store, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sqlite_eight_processes_resuming_one_run_run_it_once() {
    let dir = scratch("race");
    let store = format!("sqlite:{}", dir.join("runs.db").display());
    eight_resumers_race(&store, &dir, 50);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `durable_child STORE EFFECTS ARGS...` to its end: its exit code and its output.
fn child_output(store: &str, effects: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = child()
        .args([store, effects.to_str().unwrap()])
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// A child process killed and reaped when dropped: a failed assertion does not leave it running
/// (holding the test's output open).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the `billing` run `run_id` in a process of its own, and waits until its charge is in
/// the middle of its tool (held there until `hold` exists).
fn charging(store: &str, effects: &Path, run_id: &str, hold: &Path) -> Reaped {
    let mut process = child()
        .args([store, effects.to_str().unwrap(), "charge", run_id])
        .env("PHASEO_HOLD_FILE", hold)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(process.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "in-tool", "the charge never started");
    process.stdout = Some(out.into_inner());
    Reaped(process)
}

/// A process that starts while another is in the middle of a run's tool takes over nothing:
/// `recover_abandoned` leaves the live run alone, and `recover` is refused naming the holder. The
/// first process finishes the run, and the tool ran once. The run's lease is 300 ms, and the
/// second process looks after a second: only renewals kept it.
pub(crate) fn a_live_run_is_not_taken_over(store: &str, dir: &Path) {
    let run_id = format!("live_{}", std::process::id());
    let file = dir.join(format!("{run_id}.effects"));
    let hold = dir.join(format!("{run_id}.hold"));
    let mut first = charging(store, &file, &run_id, &hold);
    std::thread::sleep(std::time::Duration::from_secs(1));

    let (code, out) = child_output(store, &file, &["recover-abandoned", &run_id]);
    assert_eq!(code, Some(0), "{out}");
    // Other runs in a shared database may be listed; this one must not be.
    assert!(!out.contains(&run_id), "a live run was taken up: {out}");
    let (code, out) = child_output(store, &file, &["recover", &run_id]);
    assert_eq!(code, Some(3), "a live run was recovered: {out}");
    assert!(out.contains("is held by"), "{out}");

    std::fs::write(&hold, "").unwrap();
    let status = first.0.wait().unwrap();
    assert!(status.success(), "the first process failed: {status}");
    let seen = effects(&file, &run_id);
    assert_eq!(seen.get("call_1").map_or(0, Vec::len), 1, "{seen:?}");
}

/// A process killed in the middle of a run's tool: another process's `recover_abandoned` takes
/// the run up once its lease expires (not before), exactly once; the charge, not idempotent, is
/// in doubt and did not run again.
pub(crate) fn a_killed_run_is_taken_up_once_its_lease_expires(store: &str, dir: &Path) {
    let run_id = format!("killed_{}", std::process::id());
    let file = dir.join(format!("{run_id}.effects"));
    let hold = dir.join(format!("{run_id}.hold"));
    let mut first = charging(store, &file, &run_id, &hold);
    first.0.kill().unwrap(); // SIGKILL, mid-tool
    first.0.wait().unwrap();

    let mut taken = None;
    for _ in 0..50 {
        let (code, out) = child_output(store, &file, &["recover-abandoned", &run_id]);
        assert_eq!(code, Some(0), "{out}");
        if out.contains(&run_id) {
            taken = Some(out);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = taken.expect("the killed run was never taken up");
    assert!(
        out.contains(&format!("recovered {run_id} in_doubt")),
        "not taken up as a call in doubt: {out}"
    );
    // Taken up once: the run waits for a person now, and nothing is abandoned.
    let (_, again) = child_output(store, &file, &["recover-abandoned", &run_id]);
    assert!(!again.contains(&run_id), "taken up twice: {again}");
    let seen = effects(&file, &run_id);
    assert!(seen.get("call_1").map_or(0, Vec::len) <= 1, "{seen:?}");
}

#[test]
fn sqlite_a_replica_starting_while_a_run_is_live_takes_over_nothing() {
    let dir = scratch("live");
    let store = format!("sqlite:{}", dir.join("runs.db").display());
    a_live_run_is_not_taken_over(&store, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sqlite_a_killed_run_is_taken_up_by_another_process() {
    let dir = scratch("abandoned");
    let store = format!("sqlite:{}", dir.join("runs.db").display());
    a_killed_run_is_taken_up_once_its_lease_expires(&store, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}
