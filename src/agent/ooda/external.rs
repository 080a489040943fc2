//! External sensors: a user's command whose standard output is a reading.
//!
//! `boyd run --loop ooda --sensor NAME=COMMAND` (repeatable) adds a [`CommandSensor`]. The
//! command is one program and its arguments, split like the shell tool's command line (quotes,
//! no expansion, no shell: pipes, chains, redirects and substitutions are refused). It runs the
//! way the shell tool runs its programs: inside the kernel sandbox of
//! [`crate::agent::tools::jail`] with the workspace read-only (or, with `--unsandboxed-sensors`,
//! directly with a clean environment and the fixed `PATH`), stdin closed, its process group
//! killed at the sensor's timeout. Its stdout, cut at [`READING_CAP`] bytes and trimmed, is the
//! signal `external.NAME`; a non-zero exit status or a timeout is the sensor's failure, which
//! lowers the observation confidence when the sensor is critical (`--sensor-critical NAME`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::observe::{Sensor, SensorError, SensorFuture, Signal};
use crate::agent::tools::jail::{elf_interpreter, resolve_program, system_program, FIXED_PATH};
use crate::agent::tools::shell::{run_capped, split_words, CappedOutput};
use crate::agent::tools::{Jail, Sandbox, ToolError};
use crate::lm::CancelToken;

/// Most bytes of a command's stdout kept as its reading.
pub const READING_CAP: usize = 4096;
/// The signal key of an external sensor's reading is this prefix and its name.
pub const SIGNAL_PREFIX: &str = "external.";
/// Names of the built-in sensors (an external sensor may not take one).
pub const BUILTIN_SENSORS: &[&str] = &["last_action", "workspace", "files", "hardware", "model"];
/// Longest sensor name.
const NAME_MAX: usize = 40;

/// A bad external-sensor setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SensorSpecError {
    /// Not `NAME=COMMAND`.
    #[error(
        "--sensor {spec:?} is not NAME=COMMAND: {why}. Example: --sensor 'status=cat status.txt'"
    )]
    Malformed {
        /// The value given.
        spec: String,
        /// What is wrong.
        why: String,
    },
    /// Two sensors of one name.
    #[error("--sensor name {name:?} is given twice; give each sensor its own name")]
    Duplicate {
        /// The name.
        name: String,
    },
    /// A built-in sensor's name.
    #[error("--sensor name {name:?} is a built-in sensor's; choose another name")]
    Reserved {
        /// The name.
        name: String,
    },
    /// `--sensor-critical` names no sensor.
    #[error(
        "--sensor-critical {name:?} names no --sensor; add --sensor {name}=COMMAND or fix the name"
    )]
    UnknownCritical {
        /// The name.
        name: String,
    },
    /// Sensors run in the workspace.
    #[error(
        "--sensor needs --workspace: a sensor's command runs in the workspace (read-only, in the \
         shell tool's sandbox)"
    )]
    NoWorkspace,
    /// The program cannot be run.
    #[error("--sensor {name}: {reason}")]
    Program {
        /// The sensor.
        name: String,
        /// Why.
        reason: String,
    },
    /// The kernel sandbox is not available.
    #[error(
        "--sensor {name}: the sandbox cannot run it: {reason}. Pass --unsandboxed-sensors to run \
         sensor commands without the kernel sandbox (only in workspaces you trust)"
    )]
    Sandbox {
        /// The sensor.
        name: String,
        /// Why.
        reason: String,
    },
}

/// One `--sensor NAME=COMMAND`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensorSpec {
    /// Name (letters, digits, `_`, `-`).
    pub name: String,
    /// Program and arguments.
    pub words: Vec<String>,
    /// Whether its failure counts in the observation confidence.
    pub critical: bool,
}

impl SensorSpec {
    /// Parse `NAME=COMMAND` (not critical).
    pub fn parse(spec: &str) -> Result<Self, SensorSpecError> {
        let bad = |why: &str| SensorSpecError::Malformed {
            spec: spec.into(),
            why: why.into(),
        };
        let Some((name, command)) = spec.split_once('=') else {
            return Err(bad("there is no `=` between the name and the command"));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("the name is empty"));
        }
        if name.len() > NAME_MAX
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(bad(&format!(
                "the name may have only letters, digits, `_` and `-` (at most {NAME_MAX})"
            )));
        }
        if BUILTIN_SENSORS.contains(&name) {
            return Err(SensorSpecError::Reserved { name: name.into() });
        }
        if command.contains(['\n', '\r', '\0']) {
            return Err(bad("the command is one line"));
        }
        for pat in ["$(", "`", "${"] {
            if command.contains(pat) {
                return Err(bad(&format!(
                    "no shell runs the command, so {pat} would not be substituted"
                )));
            }
        }
        let words = split_words(command).map_err(|e| bad(&e))?;
        if words.is_empty() {
            return Err(bad("the command is empty"));
        }
        if let Some(w) = words
            .iter()
            .find(|w| matches!(w.as_str(), "|" | "||" | "&&" | ";" | "&" | ">" | ">>" | "<"))
        {
            return Err(bad(&format!(
                "no shell runs the command, so {w:?} would be a plain argument; run one program"
            )));
        }
        Ok(Self {
            name: name.into(),
            words,
            critical: false,
        })
    }

    /// Parse every `--sensor` and mark those `--sensor-critical` names.
    pub fn parse_all<S: AsRef<str>>(
        specs: &[S],
        critical: &[S],
    ) -> Result<Vec<Self>, SensorSpecError> {
        let mut out: Vec<Self> = Vec::new();
        for s in specs {
            let spec = Self::parse(s.as_ref())?;
            if out.iter().any(|o| o.name == spec.name) {
                return Err(SensorSpecError::Duplicate { name: spec.name });
            }
            out.push(spec);
        }
        for c in critical {
            let c = c.as_ref().trim();
            match out.iter_mut().find(|o| o.name == c) {
                Some(o) => o.critical = true,
                None => return Err(SensorSpecError::UnknownCritical { name: c.into() }),
            }
        }
        Ok(out)
    }
}

/// How a command sensor starts its program.
#[derive(Debug, Clone)]
enum Runner {
    /// In the kernel sandbox, the workspace read-only.
    Jail(Jail),
    /// Directly, in the workspace, with a clean environment.
    Direct(PathBuf),
}

/// A sensor whose reading is a command's stdout.
#[derive(Debug, Clone)]
pub struct CommandSensor {
    name: String,
    key: String,
    program: PathBuf,
    args: Vec<String>,
    critical: bool,
    timeout: Duration,
    runner: Runner,
}

impl CommandSensor {
    /// A sensor for `spec` in `workspace`, killed after `timeout`. With `sandboxed`, the
    /// kernel sandbox is checked now (a self-test of the launcher), and so is the program (an
    /// installed native program, as the sandbox requires).
    pub fn new(
        spec: &SensorSpec,
        workspace: &Sandbox,
        timeout: Duration,
        sandboxed: bool,
    ) -> Result<Self, SensorSpecError> {
        let program_err = |e: &dyn std::fmt::Display| SensorSpecError::Program {
            name: spec.name.clone(),
            reason: e.to_string(),
        };
        let program = resolve_program(&spec.words[0]).map_err(|e| program_err(&e))?;
        let runner = if sandboxed {
            let sandbox_err = |e: &dyn std::fmt::Display| SensorSpecError::Sandbox {
                name: spec.name.clone(),
                reason: e.to_string(),
            };
            let jail = Jail::new(workspace.root(), false).map_err(|e| sandbox_err(&e))?;
            jail.self_test().map_err(|e| sandbox_err(&e))?;
            let path = system_program(&program, jail.root()).map_err(|e| program_err(&e))?;
            elf_interpreter(&path).map_err(|e| program_err(&e))?;
            Runner::Jail(jail)
        } else {
            Runner::Direct(workspace.root().to_path_buf())
        };
        Ok(Self {
            key: format!("{SIGNAL_PREFIX}{}", spec.name),
            name: spec.name.clone(),
            program,
            args: spec.words[1..].to_vec(),
            critical: spec.critical,
            timeout,
            runner,
        })
    }

    /// Run the command once.
    fn run(&self) -> Result<CappedOutput, ToolError> {
        let cancel = CancelToken::new();
        match &self.runner {
            Runner::Jail(jail) => jail.run(
                &self.program.to_string_lossy(),
                &self.args,
                self.timeout,
                READING_CAP,
                &cancel,
            ),
            Runner::Direct(root) => {
                let mut cmd = Command::new(&self.program);
                cmd.args(&self.args)
                    .env_clear()
                    .env("PATH", FIXED_PATH)
                    .env("LC_ALL", "C")
                    .current_dir(root);
                run_capped(cmd, self.timeout, READING_CAP, &cancel)
            }
        }
    }
}

/// A command's output as a reading, or why it is none.
fn reading(out: CappedOutput) -> Result<String, SensorError> {
    match out.status {
        Some(0) => {
            let mut v = out.stdout.trim().to_string();
            if out.stdout_truncated {
                v.push_str(&format!(" [cut at {READING_CAP} bytes]"));
            }
            Ok(v)
        }
        code => Err(SensorError(format!(
            "exit status {}{}",
            code.map_or("killed".to_string(), |c| c.to_string()),
            match out.stderr.trim() {
                "" => String::new(),
                e => format!(": {}", crate::agent::tools::truncate_str(e, 300)),
            }
        ))),
    }
}

impl Sensor for CommandSensor {
    fn name(&self) -> &str {
        &self.name
    }
    fn critical(&self) -> bool {
        self.critical
    }
    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }
    fn read(&self) -> SensorFuture {
        // The sensor's own thread runs this future, so the blocking run is its alone.
        let me = self.clone();
        Box::pin(async move {
            let out = me.run().map_err(|e| SensorError(e.message))?;
            Ok(vec![Signal::new(&me.name, &me.key, reading(out)?)])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_is_a_name_and_one_program() {
        let s = SensorSpec::parse("build = cat 'status file.txt'").expect("parses");
        assert_eq!(s.name, "build");
        assert_eq!(s.words, vec!["cat", "status file.txt"]);
        assert!(!s.critical);
        for (bad, says) in [
            ("cat status.txt", "no `=`"),
            ("=cat x", "name is empty"),
            ("a b=cat x", "only letters"),
            ("x=", "command is empty"),
            ("x=cat a | wc -l", "\"|\" would be a plain argument"),
            ("x=echo $(id)", "would not be substituted"),
            ("x=cat 'open", "quote"),
        ] {
            let e = SensorSpec::parse(bad).expect_err(bad).to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("NAME=COMMAND"), "{e}");
        }
        assert_eq!(
            SensorSpec::parse("files=cat x"),
            Err(SensorSpecError::Reserved {
                name: "files".into()
            })
        );
    }

    #[test]
    fn critical_names_must_name_a_sensor_and_names_are_unique() {
        let v = SensorSpec::parse_all(&["a=cat x", "b=cat y"], &["b"]).expect("parses");
        assert!(!v[0].critical && v[1].critical);
        assert_eq!(
            SensorSpec::parse_all(&["a=cat x"], &["c"]),
            Err(SensorSpecError::UnknownCritical { name: "c".into() })
        );
        assert_eq!(
            SensorSpec::parse_all(&["a=cat x", "a=cat y"], &[]),
            Err(SensorSpecError::Duplicate { name: "a".into() })
        );
    }

    #[test]
    fn output_becomes_a_reading_and_a_bad_status_a_failure() {
        let ok = CappedOutput {
            status: Some(0),
            stdout: "  green\n".into(),
            ..CappedOutput::default()
        };
        assert_eq!(reading(ok), Ok("green".to_string()));
        let cut = CappedOutput {
            status: Some(0),
            stdout: "x".into(),
            stdout_truncated: true,
            ..CappedOutput::default()
        };
        assert_eq!(reading(cut), Ok("x [cut at 4096 bytes]".to_string()));
        let bad = CappedOutput {
            status: Some(3),
            stderr: "no such file\n".into(),
            ..CappedOutput::default()
        };
        assert_eq!(
            reading(bad),
            Err(SensorError("exit status 3: no such file".into()))
        );
    }
}
