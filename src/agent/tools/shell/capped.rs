//! Running one program under limits: stdin closed, its own process group, output capped, and
//! on timeout or cancellation the whole group killed. Both the sandboxed and the unsandboxed
//! path of the shell tool end here.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::tools::{ToolError, ToolErrorKind};
use crate::lm::CancelToken;

/// Output of a capped run.
#[derive(Debug, Clone, Default)]
pub struct CappedOutput {
    /// Exit code (`None` when killed by a signal).
    pub status: Option<i32>,
    /// Stdout (lossy UTF-8), at most the cap.
    pub stdout: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Stderr, at most the cap.
    pub stderr: String,
}

fn reader<R: Read + Send + 'static>(
    r: Option<R>,
    cap: usize,
) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut truncated = false;
        let Some(mut r) = r else {
            return (kept, truncated);
        };
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    if room < n {
                        truncated = true;
                    }
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        (kept, truncated)
    })
}

/// Run a command in its own process group with stdin closed, capped output and a timeout that
/// kills the whole group (and cancellation, which does the same).
pub fn run_capped(
    mut cmd: Command,
    timeout: Duration,
    cap: usize,
    cancel: &CancelToken,
) -> Result<CappedOutput, ToolError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::not_found(format!(
            "program {:?} is not installed on this machine.",
            cmd.get_program()
        )),
        _ => ToolError::failed(format!("cannot start {:?}: {e}.", cmd.get_program())),
    })?;
    let out_h = reader(child.stdout.take(), cap);
    let err_h = reader(child.stderr.take(), cap);
    let start = Instant::now();
    let mut killed: Option<ToolErrorKind> = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(_) => break None,
        }
        if start.elapsed() >= timeout {
            killed = Some(ToolErrorKind::Timeout);
        } else if cancel.is_cancelled() {
            killed = Some(ToolErrorKind::Failed);
        }
        if killed.is_some() {
            kill_group(&mut child);
            break child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Kill stragglers in the group that still hold the pipes, then collect output.
    if killed.is_none() {
        kill_group_quiet(child.id());
    }
    let (out, out_trunc) = out_h.join().unwrap_or_default();
    let (err, _) = err_h.join().unwrap_or_default();
    match killed {
        Some(ToolErrorKind::Timeout) => Err(ToolError::new(
            ToolErrorKind::Timeout,
            format!(
                "the command ran longer than {:.1} s and was killed.",
                timeout.as_secs_f64()
            ),
        )),
        Some(_) => Err(ToolError::failed("cancelled.")),
        None => Ok(CappedOutput {
            status: status.and_then(|s| s.code()),
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stdout_truncated: out_trunc,
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }),
    }
}

fn kill_group(child: &mut std::process::Child) {
    kill_group_quiet(child.id());
    let _ = child.kill();
}

/// Send SIGKILL to the process group `pgid` (the child's pid, since it leads its own group).
fn kill_group_quiet(pgid: u32) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    #[cfg(not(unix))]
    {
        let _ = pgid;
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn timeout_kills_the_whole_process_group() {
        // sh starts a background grandchild that prints its pid; both must die on timeout.
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pidfile.display()));
        let start = Instant::now();
        let r = run_capped(cmd, Duration::from_millis(300), 1024, &CancelToken::new());
        assert_eq!(
            r.map(|_| ()).map_err(|e| e.kind),
            Err(ToolErrorKind::Timeout)
        );
        assert!(start.elapsed() < Duration::from_secs(5));
        let pid = std::fs::read_to_string(&pidfile).expect("pid written");
        let pid = pid.trim();
        // The grandchild is gone (or a zombie reaped by init shortly).
        let mut alive = true;
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // state field after the ")" : Z (zombie) or missing means dead
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            if stat.is_empty() || state == Some('Z') {
                alive = false;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive, "grandchild {pid} survived the timeout");
    }

    #[test]
    fn output_is_capped() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done");
        let out = run_capped(cmd, Duration::from_secs(10), 100, &CancelToken::new()).expect("runs");
        assert_eq!(out.stdout.len(), 100);
        assert!(out.stdout_truncated);
    }
}
