//! Peak resident memory of the benchmark's own process (Linux), for the
//! benchmarks that report a memory budget.

/// Resets the kernel's peak RSS mark (Linux 4.0+), so each measurement
/// stands on its own.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// `VmHWM` from `/proc/self/status`, in MB.
pub fn peak_rss_mb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}
