//! Which CPUs a process may run on, so that a benchmark on one machine can give the
//! database cores of its own, as if it ran on a machine of its own.

use anyhow::{bail, Context, Result};

/// A CPU list as `taskset -c` and the kernel write it: "0", "0,2", "1-3,6".
pub fn parse_list(text: &str) -> Result<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim) {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let first: usize = first
            .parse()
            .with_context(|| format!("{part:?} in the CPU list {text:?} is not a CPU number"))?;
        let last: usize = last
            .parse()
            .with_context(|| format!("{part:?} in the CPU list {text:?} is not a CPU number"))?;
        if last < first || last >= 1024 {
            bail!("{part:?} in the CPU list {text:?} is not a range of CPUs");
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Written as [`parse_list`] reads it.
pub fn format_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(target_os = "linux")]
mod imp {
    use anyhow::{Context, Result};
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;

    /// The CPUs this process may run on now.
    pub fn allowed() -> Result<Vec<usize>> {
        of(std::process::id())
    }

    /// The CPUs the main thread of process `pid` may run on, as the kernel has them.
    pub fn of(pid: u32) -> Result<Vec<usize>> {
        let pid = i32::try_from(pid).context("process id")?;
        let set = sched_getaffinity(Pid::from_raw(pid))
            .with_context(|| format!("reading the CPUs of process {pid}"))?;
        Ok((0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect())
    }

    /// Every thread of process `pid` to `cpus`; threads it starts later inherit them
    /// from the thread that starts them.
    pub fn pin(pid: u32, cpus: &[usize]) -> Result<()> {
        let mut set = CpuSet::new();
        for &c in cpus {
            set.set(c).with_context(|| format!("CPU {c}"))?;
        }
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .with_context(|| format!("listing the threads of process {pid}"))?;
        for task in tasks {
            let name = task?.file_name();
            let Some(tid) = name.to_str().and_then(|t| t.parse::<i32>().ok()) else {
                continue;
            };
            // A thread that ended since the listing is no error.
            match sched_setaffinity(Pid::from_raw(tid), &set) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(e) => return Err(e).with_context(|| format!("pinning thread {tid} of {pid}")),
            }
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use anyhow::{bail, Result};

    pub fn allowed() -> Result<Vec<usize>> {
        bail!("CPU affinity is only supported on Linux")
    }

    pub fn of(_pid: u32) -> Result<Vec<usize>> {
        bail!("CPU affinity is only supported on Linux")
    }

    pub fn pin(_pid: u32, _cpus: &[usize]) -> Result<()> {
        bail!("CPU affinity is only supported on Linux")
    }
}

pub use imp::{allowed, of, pin};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_and_write_as_taskset_does() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("3,1-2, 6").unwrap(), vec![1, 2, 3, 6]);
        assert_eq!(format_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        for bad in ["", "a", "2-1", "1-", "-3", "1,,2", "5000"] {
            assert!(parse_list(bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn every_thread_of_a_process_is_pinned() {
        let all = allowed().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        pin(child.id(), &all[..1]).unwrap();
        assert_eq!(of(child.id()).unwrap(), &all[..1]);
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let line = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap();
        assert_eq!(line.split(':').nth(1).unwrap().trim(), all[0].to_string());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
