//! Rounds: each figure measured alternating with its floor, round by round, and reported as the
//! median of the per-round ratios with their quartiles; and the disk's flush time per round.

use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One contender of a round: measures `ops` operations and returns milliseconds per operation.
pub type Contender<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// What a set of rounds measured: per round, each contender's milliseconds per operation and the
/// disk's flush time.
pub struct Measured {
    /// `per_round[r][k]`: contender `k` in round `r`, ms per operation.
    pub per_round: Vec<Vec<f64>>,
    /// The flush time of each round, ms.
    pub flush: Vec<f64>,
}

impl Measured {
    /// The median of contender `k`'s figures, ms per operation.
    pub fn median(&self, k: usize) -> f64 {
        quartiles(self.per_round.iter().map(|r| r[k]).collect()).1
    }

    /// Quartiles (q1, median, q3) of the per-round ratios `a / b` of contenders `a` and `b`.
    pub fn ratio(&self, a: usize, b: usize) -> (f64, f64, f64) {
        quartiles(self.per_round.iter().map(|r| r[a] / r[b]).collect())
    }

    /// Quartiles of any per-round figure computed from a round's contenders.
    pub fn per_round(&self, f: impl Fn(&[f64]) -> f64) -> (f64, f64, f64) {
        quartiles(self.per_round.iter().map(|r| f(r)).collect())
    }

    /// The flush time's median, lowest and highest, ms.
    pub fn flush(&self) -> (f64, f64, f64) {
        let (_, median, _) = quartiles(self.flush.clone());
        let low = self.flush.iter().copied().fold(f64::INFINITY, f64::min);
        let high = self.flush.iter().copied().fold(0.0, f64::max);
        (median, low, high)
    }
}

/// `rounds` rounds of the contenders, the first one or two warm-up rounds not counted; in every
/// other round the order is reversed, so that neither side always follows the other (a disk
/// busy for a minute slows both sides of a round alike). The flush time is measured at the start
/// of each round.
pub fn alternate(
    label: &str,
    rounds: usize,
    flush: &Flush,
    contenders: &mut [Contender<'_>],
) -> Measured {
    for c in contenders.iter_mut() {
        c();
    }
    let mut per_round = Vec::with_capacity(rounds);
    let mut flushes = Vec::with_capacity(rounds);
    let started = Instant::now();
    for round in 0..rounds {
        flushes.push(flush.measure());
        let mut figures = vec![0.0; contenders.len()];
        let order: Vec<usize> = if round % 2 == 0 {
            (0..contenders.len()).collect()
        } else {
            (0..contenders.len()).rev().collect()
        };
        for k in order {
            figures[k] = contenders[k]();
        }
        per_round.push(figures);
        if (round + 1) % 10 == 0 || round + 1 == rounds {
            eprintln!(
                "[durable] {label}: round {}/{rounds}, {:.0} s",
                round + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    Measured {
        per_round,
        flush: flushes,
    }
}

/// Quartiles (q1, median, q3) by linear interpolation.
pub fn quartiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    assert!(!v.is_empty(), "no figures");
    v.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let pos = q * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    (at(0.25), at(0.5), at(0.75))
}

/// The disk's flush time: an 8 KiB write over the first 8 KiB of a file and its `fdatasync`
/// (`File::sync_data`), in the directory the SQLite files are in.
pub struct Flush {
    path: PathBuf,
}

impl Flush {
    pub fn new(dir: &Path) -> Self {
        Flush {
            path: dir.join("flush-probe"),
        }
    }

    /// The median of three 8 KiB writes and flushes, ms.
    pub fn measure(&self) -> f64 {
        let block = [0x5au8; 8192];
        let mut times: Vec<f64> = (0..3)
            .map(|_| {
                let file = File::options()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&self.path)
                    .expect("flush probe");
                let started = Instant::now();
                file.write_all_at(&block, 0).expect("flush probe");
                file.sync_data().expect("flush probe");
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times[1]
    }
}
