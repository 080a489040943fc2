//! Why an action ran: the reasoning an intent record carries into the audit log.
//!
//! Before an action runs, Act saves the world model it was decided on to
//! `<run>/worlds/<sha256>.json` (the canonical JSON, so the file's SHA-256 is its name) and
//! writes the intent with an [`IntentWhy`]: that snapshot's hash, the chosen candidate with its
//! numbers, every other candidate with why it lost (the gate's reason, or a lower expected value),
//! and the reasoning in words. `boyd runs show` prints it under each action.

use std::path::{Path, PathBuf};

use super::decide::{Assessment, DecisionRecord};
use super::world::WorldModel;
use super::OodaError;
pub use crate::agent::audit::why::{Alternative, ChosenNote, IntentWhy};
use crate::agent::condense::sha256_hex;
use crate::agent::guard::canonical_json;

/// The folder of a run directory that holds the world-model snapshots intents name.
pub const WORLDS_DIR: &str = "worlds";

/// A number as the record keeps it: four decimals, so it reads back exactly.
fn r4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e4).round() / 1e4
    } else {
        0.0
    }
}

/// The canonical JSON of a world model and its SHA-256.
pub fn world_digest(world: &WorldModel) -> Result<(String, String), OodaError> {
    let v = serde_json::to_value(world).map_err(|e| OodaError::Io {
        action: "serialize",
        path: PathBuf::from(WORLDS_DIR),
        source: std::io::Error::other(e),
    })?;
    let text = canonical_json(&v);
    Ok((sha256_hex(text.as_bytes()), text))
}

/// The snapshot file a hash names.
pub fn world_path(run_dir: &Path, sha: &str) -> PathBuf {
    run_dir.join(WORLDS_DIR).join(format!("{sha}.json"))
}

/// Save the world model (once per distinct state) and return its hash.
pub fn save_world(run_dir: &Path, world: &WorldModel) -> Result<String, OodaError> {
    let (sha, text) = world_digest(world)?;
    let path = world_path(run_dir, &sha);
    if !path.exists() {
        let io = |action: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| OodaError::Io {
                action,
                path,
                source,
            }
        };
        let dir = run_dir.join(WORLDS_DIR);
        std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let tmp = dir.join(format!(".{sha}.tmp"));
        std::fs::write(&tmp, text.as_bytes()).map_err(io("write", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(io("rename", &path))?;
    }
    Ok(sha)
}

/// Why the candidate at `chosen` of `record` was taken over the others, in a world of
/// orientation confidence `orientation`.
pub fn explain(record: &DecisionRecord, world_sha256: String, orientation: f64) -> IntentWhy {
    let chosen = record.choice();
    let best_ev = chosen.map_or(0.0, |c| c.expected_value);
    let alternatives = record
        .candidates
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != record.chosen)
        .map(|(_, a)| Alternative {
            tool: a.tool.clone(),
            args: a.args.clone(),
            why_not: match &a.dropped {
                Some(d) => format!("dropped: {}", d.describe()),
                None => format!(
                    "viable, lower expected value {:.2} than the chosen {:.2}",
                    a.expected_value, best_ev
                ),
            },
        })
        .collect::<Vec<_>>();
    let note = chosen.map_or(
        ChosenNote {
            rank: 0,
            thought: String::new(),
            value: 0.0,
            risk: 0.0,
            expected_value: 0.0,
            decision_confidence: 0.0,
        },
        |c| ChosenNote {
            rank: c.rank,
            thought: c.thought.clone(),
            value: r4(c.value),
            risk: r4(c.risk),
            expected_value: r4(c.expected_value),
            decision_confidence: r4(c.decision_confidence),
        },
    );
    let viable = record
        .candidates
        .iter()
        .filter(|a| a.dropped.is_none())
        .count();
    let mut reasoning = match (&record.guidance, record.implicit) {
        (Some(g), true) => format!("implicit guidance (no Decide call): {g}"),
        (Some(g), false) => g.clone(),
        (None, _) => format!("\"{}\"", chosen.map_or("", |c| c.thought.as_str())),
    };
    if let Some(c) = chosen {
        reasoning.push_str(&format!(
            "; {} of {} candidates viable, this one's expected value {:.2} (value {:.2} × confidence {:.2} − risk {:.2} × weight) the highest; decision confidence {:.2}{}",
            viable,
            record.candidates.len(),
            c.expected_value,
            c.value,
            orientation,
            c.risk,
            c.decision_confidence,
            approval_note(c),
        ));
    }
    IntentWhy {
        world_sha256,
        chosen: note,
        alternatives,
        reasoning,
    }
}

fn approval_note(c: &Assessment) -> &'static str {
    if c.approved {
        "; irreversible, approved by a human's token"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ooda::decide::{assess, Approvals, Candidate, Policy};
    use crate::agent::tools::Toolset;
    use serde_json::json;

    #[test]
    fn the_why_names_the_loser_and_its_reason_and_the_snapshot_reads_back_by_its_hash() {
        let mut world = WorldModel::new("What is 6 * 7?", 20.0, None);
        world.confidence = 0.9;
        let tools = Toolset::builtin(None);
        let cands = vec![
            Candidate::tool("calculator", json!({"expression": "6*7"})),
            Candidate::tool("no_such_tool", json!({})),
            Candidate::answer("42"),
        ];
        let d = tempfile::tempdir().expect("tempdir");
        let approvals = Approvals::new(None, "r", d.path(), Vec::new());
        let (assessed, chosen) = assess(
            &cands,
            &world,
            &tools,
            &Policy::default(),
            &approvals,
            &|_| false,
            0.3,
        );
        let record = DecisionRecord {
            cycle: 1,
            implicit: false,
            guidance: None,
            candidates: assessed,
            chosen,
            parse_error: None,
        };
        let sha = save_world(d.path(), &world).expect("save");
        let text = std::fs::read(world_path(d.path(), &sha)).expect("read");
        assert_eq!(sha256_hex(&text), sha);
        let back: WorldModel = serde_json::from_slice(&text).expect("parse");
        assert_eq!(back, world);
        let why = explain(&record, sha.clone(), world.confidence);
        assert_eq!(why.world_sha256, sha);
        let chosen_tool = &record.candidates[record.chosen.expect("a choice")].tool;
        assert_eq!(why.alternatives.len(), 2);
        assert!(why
            .alternatives
            .iter()
            .any(|a| a.tool == "no_such_tool" && a.why_not == "dropped: no such tool"));
        assert!(why.alternatives.iter().all(|a| &a.tool != chosen_tool));
        assert!(
            why.reasoning.contains("2 of 3 candidates viable"),
            "{}",
            why.reasoning
        );
        // It reads back exactly as written (the audit log's byte check).
        let s = serde_json::to_string(&why).expect("json");
        let again: IntentWhy = serde_json::from_str(&s).expect("parse");
        assert_eq!(serde_json::to_string(&again).expect("json"), s);
    }
}
