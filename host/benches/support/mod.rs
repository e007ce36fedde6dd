//! What the whole-controller benchmarks share: knobs from the environment, statistics, the
//! resident size of a process, and the real host against an API server over HTTPS.

#![allow(dead_code)]

pub mod native_vm;

use std::path::{Path, PathBuf};

use wasmctrl::apiserver::{ApiServer, HttpServer};

use super::common::process::Process;

/// `name` from the environment as a number, else `default`.
pub fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The samples in ascending order.
pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// min, median, max.
pub fn spread(v: Vec<f64>) -> (f64, f64, f64) {
    let v = sorted(v);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

/// The value at fraction `p` of sorted samples (nearest rank).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Resident anonymous bytes of process `pid` (`RssAnon` in /proc): what the process holds on its
/// own, without the pages of files it maps (its binary's code, which processes of the same
/// binary on one node share and the kernel can drop and read again).
#[allow(dead_code)] // not every benchmark that includes this module reads it
pub fn anon(pid: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib: u64 = (status.lines())
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    kib * 1024
}

/// Resident bytes of process `pid` (`"self"` for this one), from /proc.
pub fn rss(pid: &str) -> u64 {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// CPU time (user + system) this process has used, in seconds, from /proc.
pub fn cpu_seconds() -> f64 {
    process_cpu_seconds("self")
}

/// CPU time (user + system) process `pid` (or `self`) has used, in seconds, from /proc. The
/// kernel reports it in USER_HZ ticks, which Linux fixes at 100 per second for user space.
pub fn process_cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis
    // start at field 3, so utime and stime (fields 14 and 15) are the 12th and 13th of them.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    ticks as f64 / 100.0
}

/// Minor page faults this process has taken (field 10 of /proc/self/stat, the 8th after the
/// command name).
pub fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    (after.split_whitespace().nth(7))
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// Bytes in MiB.
pub fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

/// A fresh API server in this process, listening over HTTPS, and a kubeconfig file for it in
/// `dir`.
pub async fn serve(dir: &Path) -> (ApiServer, HttpServer, PathBuf) {
    let server = ApiServer::builder().history(100_000).build().unwrap();
    let http = server.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, http.kubeconfig()).unwrap();
    (server, http, kubeconfig)
}

/// `wasmctrl run` (the bench-profile binary) over `plugins`, probes and metrics on free ports,
/// with the artifact cache in `cache` when given, logging to `log`.
pub fn run_host(kubeconfig: &Path, plugins: &Path, cache: Option<&Path>, log: PathBuf) -> Process {
    let cache = cache.map(|c| ["--cache-dir", c.to_str().unwrap()]);
    run_host_with(
        kubeconfig,
        plugins,
        cache.as_ref().map_or(&[][..], |c| &c[..]),
        &[],
        log,
    )
}

/// As [`run_host`], with more arguments and environment variables.
pub fn run_host_with(
    kubeconfig: &Path,
    plugins: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
    log: PathBuf,
) -> Process {
    let mut args = vec![
        "run",
        "--plugins",
        plugins.to_str().unwrap(),
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--health-probe-bind-address",
        "127.0.0.1:0",
        "--metrics-bind-address",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Process::wasmctrl(&args, log, envs)
}

/// One row of figures: its label and how to read it off a round.
pub type Figure<'a, R> = (&'a str, fn(&R) -> f64);

/// Prints `rows` of figures for the wasmctrl and native sides: median (min..max) of each over
/// the rounds in `results`, and the ratio of the medians.
pub fn print_figures<R>(
    results: &std::collections::BTreeMap<&str, Vec<R>>,
    rows: &[Figure<'_, R>],
) {
    let stat = |label: &str, f: fn(&R) -> f64| spread(results[label].iter().map(f).collect());
    let rounds = results.values().map(Vec::len).max().unwrap_or(0);
    println!("  figures: median (min..max) over {rounds} rounds");
    for &(what, f) in rows {
        let (wmin, wmed, wmax) = stat("wasmctrl", f);
        let (nmin, nmed, nmax) = stat("native", f);
        println!(
            "  {what:<22} wasmctrl {wmed:>10.2} ({wmin:.2}..{wmax:.2})   native {nmed:>10.2} ({nmin:.2}..{nmax:.2})   ratio {:.2}",
            wmed / nmed
        );
    }
}
