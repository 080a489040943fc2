//! The approval policy: tiers per tool, declared implicit-guidance rules, the risk budget, and
//! the approval tokens a session holds.
//!
//! The effective policy of a run is the user's (the command line's `--policy`, else
//! `<config dir>/policy.toml`, else the built-in defaults), tightened by the workspace's
//! `.boyd/policy.toml`: a workspace may make a tool's tier stricter (auto → token → deny) and
//! lower the risk budget, and nothing else.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::agent::approval::{ApprovalKey, Ledger};
use crate::agent::tools::{Tool, Toolset, FINAL_ANSWER};

/// How a tool may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Runs without asking (default for reversible tools).
    Auto,
    /// Needs an approval token for the exact action (default for irreversible tools).
    Token,
    /// Never runs.
    Deny,
}

impl Tier {
    /// How strict the tier is: auto < token < deny.
    pub fn strictness(self) -> u8 {
        match self {
            Tier::Auto => 0,
            Tier::Token => 1,
            Tier::Deny => 2,
        }
    }

    /// Name.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Auto => "auto",
            Tier::Token => "token",
            Tier::Deny => "deny",
        }
    }
}

/// A declared implicit-guidance rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// After a verified call of `tool`, answer with its output.
    FinalAfter {
        /// The tool.
        tool: String,
    },
}

/// An approval policy: tiers, implicit-guidance rules and a risk budget.
///
/// The effective policy of a run is the user's (the command line's `--policy`, else
/// `<config dir>/policy.toml`, else the built-in defaults), tightened by the workspace's
/// `.boyd/policy.toml`: a workspace may make a tool's tier stricter (auto → token → deny) and
/// lower the risk budget, and nothing else; its looser entries and its rules are refused and
/// listed by [`Policy::report`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Tier per tool name (tools not listed: auto when reversible, token when not).
    #[serde(default)]
    pub tiers: BTreeMap<String, Tier>,
    /// Implicit-guidance rules.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Risk budget override.
    #[serde(default)]
    pub risk_budget: Option<f64>,
    /// Escalation threshold of the orientation and decision confidence (0..1; default 0.3).
    #[serde(default)]
    pub confidence_threshold: Option<f64>,
    /// Confidence above which a contradicted fact pauses the run for review (0..1; default
    /// 0.8; tune it per deployment).
    #[serde(default)]
    pub contradiction_threshold: Option<f64>,
    /// Where this policy came from (for the run-start report).
    #[serde(skip)]
    pub source: Option<String>,
    /// The workspace's tightening layer, when the workspace has a policy file.
    #[serde(skip)]
    pub workspace: Option<WorkspacePolicy>,
}

/// A workspace's policy file, applied only where it tightens the user's policy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspacePolicy {
    /// The file.
    pub path: std::path::PathBuf,
    /// Its tiers (each applies only when stricter than the user's tier for the tool).
    pub tiers: BTreeMap<String, Tier>,
    /// Its risk budget (applies only when lower).
    pub risk_budget: Option<f64>,
    /// Its escalation threshold (applies only when higher).
    pub confidence_threshold: Option<f64>,
    /// Its contradiction threshold (applies only when lower: more contradictions pause).
    pub contradiction_threshold: Option<f64>,
    /// How many implicit-guidance rules it declared (refused: rules are the user's to set).
    pub rules: usize,
}

/// The values a policy file may override and a workspace's may only tighten, as the command
/// line (or the defaults) gives them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    /// Risk budget.
    pub risk_budget: f64,
    /// Escalation threshold of the orientation and decision confidence.
    pub confidence_threshold: f64,
    /// Confidence above which a contradicted fact pauses the run.
    pub contradiction_threshold: f64,
}

impl Default for Baseline {
    fn default() -> Self {
        Self {
            risk_budget: super::risk::DEFAULT_RISK_BUDGET,
            confidence_threshold: super::risk::DEFAULT_CONFIDENCE_THRESHOLD,
            contradiction_threshold: super::risk::DEFAULT_CONTRADICTION_THRESHOLD,
        }
    }
}

/// The effective policy, as printed at run start (and in `--json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyReport {
    /// Where the user's policy came from.
    pub source: String,
    /// The workspace's policy file, if it has one.
    pub workspace_file: Option<std::path::PathBuf>,
    /// The effective tier of every tool.
    pub tiers: BTreeMap<String, Tier>,
    /// Entries of the workspace file that would have loosened the policy, refused.
    pub refused: Vec<String>,
    /// Entries of the workspace file that tightened the policy.
    pub tightened: Vec<String>,
}

/// Errors reading a policy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Cannot read.
    #[error("cannot read policy {path}")]
    Read {
        /// File.
        path: std::path::PathBuf,
        /// OS error.
        #[source]
        source: std::io::Error,
    },
    /// Bad TOML.
    #[error("bad policy {path}: {reason}")]
    Parse {
        /// File.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
    /// The workspace's policy file resolves outside the workspace (or cannot be resolved).
    #[error("workspace policy {path} is a link that leads outside the workspace (or nowhere); replace it with a plain TOML file")]
    Outside {
        /// File.
        path: std::path::PathBuf,
    },
    /// The workspace's policy file is not a regular file.
    #[error("workspace policy {path} is not a regular file (a FIFO, device or directory); remove it or make it a plain TOML file")]
    NotAFile {
        /// File.
        path: std::path::PathBuf,
    },
}

/// Where a workspace keeps its policy.
pub const POLICY_PATH: &str = ".boyd/policy.toml";
/// The user's policy file inside the config directory.
pub const USER_POLICY_FILE: &str = "policy.toml";
/// Largest policy file read.
const POLICY_MAX_BYTES: u64 = 1 << 20;

fn default_tier(tool: &dyn Tool) -> Tier {
    if tool.risk().reversible {
        Tier::Auto
    } else {
        Tier::Token
    }
}

impl Policy {
    /// Parse TOML.
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, PolicyError> {
        let p: Self = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        for (name, v) in [
            ("confidence_threshold", p.confidence_threshold),
            ("contradiction_threshold", p.contradiction_threshold),
        ] {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    return Err(PolicyError::Parse {
                        path: path.to_path_buf(),
                        reason: format!("{name} = {v}: give a number between 0 and 1"),
                    });
                }
            }
        }
        Ok(p)
    }

    /// Load a policy file.
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        let read = |source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        };
        // Only regular files (a FIFO would block the read), and not without bound: the
        // shared bounded read every tool's path goes through.
        use crate::agent::tools::sandbox::{read_regular, SandboxError};
        let bytes = read_regular(&path.display().to_string(), path, POLICY_MAX_BYTES).map_err(
            |e| match e {
                SandboxError::NotRegular { .. } => PolicyError::NotAFile {
                    path: path.to_path_buf(),
                },
                SandboxError::TooLarge { size, limit, .. } => PolicyError::Parse {
                    path: path.to_path_buf(),
                    reason: format!("it is {size} bytes, more than the {limit} a policy may have"),
                },
                SandboxError::NotFound { .. } => {
                    read(std::io::Error::from(std::io::ErrorKind::NotFound))
                }
                other => read(std::io::Error::other(other.to_string())),
            },
        )?;
        let text = String::from_utf8(bytes).map_err(|_| PolicyError::Parse {
            path: path.to_path_buf(),
            reason: "it is not UTF-8 text".into(),
        })?;
        let mut p = Self::from_toml(&text, path)?;
        p.source = Some(path.display().to_string());
        Ok(p)
    }

    /// The workspace's policy alone, or the default when it has none. It is a tightening layer,
    /// not a policy of its own: use [`Policy::effective`] for a run.
    pub fn for_workspace(root: &Path) -> Result<Self, PolicyError> {
        let p = root.join(POLICY_PATH);
        match std::fs::symlink_metadata(&p) {
            Ok(_) => Self::load(&p),
            Err(_) => Ok(Self::default()),
        }
    }

    /// The user's policy: `cli` (the `--policy` file) if given, else `<config dir>/policy.toml`
    /// when it exists, else the defaults.
    pub fn for_user(cli: Option<&Path>) -> Result<Self, PolicyError> {
        if let Some(p) = cli {
            let mut pol = Self::load(p)?;
            pol.source = Some(format!("--policy {}", p.display()));
            return Ok(pol);
        }
        if let Ok(dir) = crate::agent::approval::config_dir() {
            let p = dir.join(USER_POLICY_FILE);
            if p.exists() {
                let mut pol = Self::load(&p)?;
                pol.source = Some(format!("user config {}", p.display()));
                return Ok(pol);
            }
        }
        Ok(Self {
            source: Some("built-in defaults".into()),
            ..Self::default()
        })
    }

    /// The effective policy of a run: the user's ([`Policy::for_user`]) tightened by the
    /// workspace's `.boyd/policy.toml`, if any.
    pub fn effective(cli: Option<&Path>, workspace: Option<&Path>) -> Result<Self, PolicyError> {
        let mut p = Self::for_user(cli)?;
        if let Some(root) = workspace {
            let path = root.join(POLICY_PATH);
            if std::fs::symlink_metadata(&path).is_ok() {
                // The workspace's file must be the workspace's: a link to a file elsewhere is
                // refused rather than read.
                let inside = match (path.canonicalize(), root.canonicalize()) {
                    (Ok(real), Ok(root)) => real.starts_with(&root),
                    _ => false,
                };
                if !inside {
                    return Err(PolicyError::Outside { path });
                }
                p.tighten_with(&Self::load(&path)?, &path);
            }
        }
        Ok(p)
    }

    /// Add `ws` (read from `path`) as this policy's workspace layer: it can only tighten.
    pub fn tighten_with(&mut self, ws: &Policy, path: &Path) {
        self.workspace = Some(WorkspacePolicy {
            path: path.to_path_buf(),
            tiers: ws.tiers.clone(),
            risk_budget: ws.risk_budget,
            confidence_threshold: ws.confidence_threshold,
            contradiction_threshold: ws.contradiction_threshold,
            rules: ws.rules.len(),
        });
    }

    /// The user's tier of a tool, before the workspace layer.
    fn user_tier(&self, tool: &dyn Tool) -> Tier {
        self.tiers
            .get(tool.name())
            .copied()
            .unwrap_or_else(|| default_tier(tool))
    }

    /// The tier of a tool: the user's, or the workspace's where that is stricter.
    pub fn tier(&self, tool: &dyn Tool) -> Tier {
        if tool.name() == FINAL_ANSWER {
            return Tier::Auto;
        }
        let user = self.user_tier(tool);
        match self
            .workspace
            .as_ref()
            .and_then(|w| w.tiers.get(tool.name()))
        {
            Some(&w) if w.strictness() > user.strictness() => w,
            _ => user,
        }
    }

    /// The risk budget: the user's (or `cli`), lowered by the workspace's when that is lower.
    pub fn effective_budget(&self, cli: f64) -> f64 {
        let user = self.risk_budget.unwrap_or(cli);
        match self.workspace.as_ref().and_then(|w| w.risk_budget) {
            Some(b) if b.is_finite() && b >= 0.0 && b < user => b,
            _ => user,
        }
    }

    /// The escalation threshold: the user's (or `cli`), raised by the workspace's when that is
    /// higher (a stricter run escalates sooner).
    pub fn effective_confidence_threshold(&self, cli: f64) -> f64 {
        let user = self.confidence_threshold.unwrap_or(cli);
        match self.workspace.as_ref().and_then(|w| w.confidence_threshold) {
            Some(t) if (0.0..=1.0).contains(&t) && t > user => t,
            _ => user,
        }
    }

    /// The contradiction threshold: the user's (or `cli`), lowered by the workspace's when that
    /// is lower (more contradictions pause for review).
    pub fn effective_contradiction_threshold(&self, cli: f64) -> f64 {
        let user = self.contradiction_threshold.unwrap_or(cli);
        match self
            .workspace
            .as_ref()
            .and_then(|w| w.contradiction_threshold)
        {
            Some(t) if (0.0..=1.0).contains(&t) && t < user => t,
            _ => user,
        }
    }

    /// Tiers of every tool in the set, for display.
    pub fn tiers_for(&self, tools: &Toolset) -> Vec<(String, Tier)> {
        tools
            .iter()
            .map(|t| (t.name().to_string(), self.tier(t.as_ref())))
            .collect()
    }

    /// The effective tiers, and what the workspace layer tightened and what of it was refused
    /// (a looser tier, a higher budget, a lower escalation threshold, a higher contradiction
    /// threshold, rules), against the user's values or else `base`.
    pub fn report(&self, tools: &Toolset, base: &Baseline) -> PolicyReport {
        let cli_budget = base.risk_budget;
        let mut refused = Vec::new();
        let mut tightened = Vec::new();
        if let Some(w) = &self.workspace {
            let file = w.path.display();
            for (name, &t) in &w.tiers {
                match tools.get(name) {
                    Some(tool) if name != FINAL_ANSWER => {
                        let user = self.user_tier(tool.as_ref());
                        if t.strictness() < user.strictness() {
                            refused.push(format!(
                                "{file}: {name} = \"{}\" would loosen the user's tier \"{}\"; refused",
                                t.as_str(),
                                user.as_str()
                            ));
                        } else if t.strictness() > user.strictness() {
                            tightened.push(format!("{name}: {} → {}", user.as_str(), t.as_str()));
                        }
                    }
                    _ if name == FINAL_ANSWER && t != Tier::Auto => {
                        refused.push(format!("{file}: {name} cannot be gated; ignored"))
                    }
                    _ => {}
                }
            }
            if let Some(b) = w.risk_budget {
                let user = self.risk_budget.unwrap_or(cli_budget);
                if !(b.is_finite() && b >= 0.0) || b > user {
                    refused.push(format!(
                        "{file}: risk_budget = {b} would raise the user's {user}; refused"
                    ));
                } else if b < user {
                    tightened.push(format!("risk budget: {user} → {b}"));
                }
            }
            if let Some(t) = w.confidence_threshold {
                let user = self
                    .confidence_threshold
                    .unwrap_or(base.confidence_threshold);
                if !(0.0..=1.0).contains(&t) {
                    refused.push(format!(
                        "{file}: confidence_threshold = {t} is not between 0 and 1; refused"
                    ));
                } else if t < user {
                    refused.push(format!(
                        "{file}: confidence_threshold = {t} would lower the user's escalation threshold {user}; refused"
                    ));
                } else if t > user {
                    tightened.push(format!("escalation threshold: {user} → {t}"));
                }
            }
            if let Some(t) = w.contradiction_threshold {
                let user = self
                    .contradiction_threshold
                    .unwrap_or(base.contradiction_threshold);
                if !(0.0..=1.0).contains(&t) {
                    refused.push(format!(
                        "{file}: contradiction_threshold = {t} is not between 0 and 1; refused"
                    ));
                } else if t > user {
                    refused.push(format!(
                        "{file}: contradiction_threshold = {t} would raise the user's {user} (fewer contradictions would pause for review); refused"
                    ));
                } else if t < user {
                    tightened.push(format!("contradiction threshold: {user} → {t}"));
                }
            }
            if w.rules > 0 {
                refused.push(format!(
                    "{file}: {} implicit-guidance rule(s) refused (rules come from the user's policy only)",
                    w.rules
                ));
            }
        }
        PolicyReport {
            source: self
                .source
                .clone()
                .unwrap_or_else(|| "set by the caller".into()),
            workspace_file: self.workspace.as_ref().map(|w| w.path.clone()),
            tiers: self.tiers_for(tools).into_iter().collect(),
            refused,
            tightened,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Approvals available to this session

/// Tokens given to this session (`resume --approve`), checked against each gated candidate.
#[derive(Debug, Clone)]
pub struct Approvals {
    key: Option<ApprovalKey>,
    run_id: String,
    ledger: Ledger,
    tokens: Vec<String>,
}

impl Approvals {
    /// Approvals for `run_id` with ledger in `run_dir`.
    pub fn new(
        key: Option<ApprovalKey>,
        run_id: &str,
        run_dir: &Path,
        tokens: Vec<String>,
    ) -> Self {
        Self {
            key,
            run_id: run_id.into(),
            ledger: Ledger::new(run_dir),
            tokens,
        }
    }

    /// No token was given to this run.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// A token that is valid for `fp` now and not spent.
    pub fn find(&self, fp: &str) -> Option<String> {
        let key = self.key.as_ref()?;
        self.tokens
            .iter()
            .find(|t| {
                key.check(t, &self.run_id, fp).is_ok() && !self.ledger.is_spent(t).unwrap_or(true)
            })
            .cloned()
    }

    /// The key.
    pub fn key(&self) -> Option<&ApprovalKey> {
        self.key.as_ref()
    }
    /// The ledger.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }
    /// The run.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_toml() {
        let p = Policy::from_toml(
            "risk_budget = 5.0\n[tiers]\nwrite_file = \"auto\"\nshell = \"deny\"\n[[rules]]\nkind = \"final_after\"\ntool = \"calculator\"\n",
            Path::new("p.toml"),
        );
        let p = p.unwrap_or_default();
        assert_eq!(p.tiers.get("shell"), Some(&Tier::Deny));
        assert_eq!(
            p.rules,
            vec![Rule::FinalAfter {
                tool: "calculator".into()
            }]
        );
        assert!(Policy::from_toml("[tiers]\nx = \"maybe\"\n", Path::new("p")).is_err());
        assert!(Policy::from_toml("confidence_threshold = 1.5\n", Path::new("p")).is_err());
        let mut user = Policy::from_toml(
            "confidence_threshold = 0.4\ncontradiction_threshold = 0.9\n",
            Path::new("p"),
        )
        .unwrap_or_default();
        assert_eq!(user.effective_confidence_threshold(0.3), 0.4);
        let ws = Policy::from_toml(
            "confidence_threshold = 0.2\ncontradiction_threshold = 0.5\n",
            Path::new("w"),
        )
        .unwrap_or_default();
        user.tighten_with(&ws, Path::new("w"));
        assert_eq!(
            user.effective_confidence_threshold(0.3),
            0.4,
            "a workspace cannot lower the escalation threshold"
        );
        assert_eq!(user.effective_contradiction_threshold(0.8), 0.5);
    }
}
