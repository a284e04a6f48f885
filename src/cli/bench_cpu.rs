//! The CPU time a process has used, read from `/proc/<pid>/stat` (Linux), for the
//! benchmarks that report a server's CPU per answer (`--server-pid`).
//!
//! Owns nothing but the reading: user plus system time of every thread of the process,
//! in clock ticks of 1/100 s (the kernel's `USER_HZ`, fixed at 100 in the /proc ABI).

use std::time::Duration;

use anyhow::{Context, bail};

/// Clock ticks per second in `/proc/<pid>/stat`.
const USER_HZ: u64 = 100;

/// User plus system CPU time process `pid` has used so far.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    let ticks = ticks_of(&stat).with_context(|| format!("{path} is not a process's stat"))?;
    Ok(Duration::from_millis(ticks * 1000 / USER_HZ))
}

/// utime + stime of one `/proc/<pid>/stat` line: fields 14 and 15, counted after the
/// command name, which is in parentheses and may hold spaces and parentheses itself.
fn ticks_of(stat: &str) -> anyhow::Result<u64> {
    let Some((_, after_name)) = stat.rsplit_once(')') else {
        bail!("no command name");
    };
    // After the name: field 3 (state) is the first; utime is field 14, stime 15.
    let mut fields = after_name.split_whitespace().skip(11);
    let mut next = |name| -> anyhow::Result<u64> {
        let field = fields.next().with_context(|| format!("no {name}"))?;
        field
            .parse()
            .with_context(|| format!("{name} is {field:?}"))
    };
    Ok(next("utime")? + next("stime")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_system_ticks_are_read_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (hdl (serve) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 37 0 0 20 0 7 0 123 456 789";
        assert_eq!(ticks_of(stat).unwrap(), 287);
        assert!(ticks_of("4242 hdl S 1").is_err());
        assert!(ticks_of("4242 (hdl) S 1 2 3").is_err());
    }

    #[test]
    fn this_process_has_used_some_cpu() {
        let spent = cpu_time(std::process::id()).unwrap();
        assert!(spent < Duration::from_secs(24 * 3600), "{spent:?}");
        assert!(cpu_time(u32::MAX).is_err());
    }
}
