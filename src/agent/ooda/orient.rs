//! Orient: fact extraction from observations, checked against what was observed.
//!
//! An `Orienter` turns the last action's output into fact claims; the loop then checks them
//! against the `WorldModel` (`super::world`) before the update. `rule_claims` are the
//! deterministic claims (a finished tool call's output is a fact about that call); a
//! model-backed orienter (`super::lm_phases::ModelPhases`) extracts more as constrained JSON,
//! and keeps only claims whose values the observation supports (`supported_by`).

use serde_json::{json, Value};

use crate::lm::{CancelToken, Usage};

use super::act::ActionReport;
use super::observe::SensorReadings;
use super::world::FILE_HASH_PREFIX;
use crate::agent::audit::OutcomeStatus;
use crate::agent::planner::PlannerError;
use crate::agent::tools::{truncate_str, Toolset};

pub use super::world::{
    action_key, collapse, normalize, CompletedStep, Contradiction, Fact, FactClaim, OrientReport,
    RefusedAction, Severity, WorldModel, HIGH_CONFIDENCE, VALUE_MAX,
};

// ---------------------------------------------------------------------------------------------
// Fact extraction

/// What an orienter sees.
#[derive(Debug, Clone, Copy)]
pub struct OrientInput<'a> {
    /// The world model before the update.
    pub world: &'a WorldModel,
    /// This cycle's observation.
    pub observation: &'a SensorReadings,
    /// The last action, when there was one since the previous Orient.
    pub last_action: Option<&'a ActionReport>,
    /// The run's tools (a model-backed orienter shares the Decide system prompt, built from
    /// them, so the runtime reuses its KV prefix when the phases alternate).
    pub tools: &'a Toolset,
    /// Candidates Decide asks for (part of that shared prompt).
    pub candidates: usize,
    /// Cancellation.
    pub cancel: &'a CancelToken,
}

/// Claims extracted from an observation (beyond `rule_claims`, which the loop always applies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    /// The claims.
    pub claims: Vec<FactClaim>,
    /// Model calls made.
    pub model_calls: usize,
    /// Token usage.
    pub usage: Usage,
    /// Why the model's output was unusable, if it was.
    pub error: Option<String>,
    /// Claims left out because the text they came from does not support them.
    pub unsupported: Vec<FactClaim>,
}

/// The numbers in a text (`-3`, `12.5`, `1,000` as 1000; `1,42` is two numbers).
fn numbers(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<f64>| {
        let t = cur.trim_end_matches(['.', ',']).replace(',', "");
        if let Ok(v) = t.parse::<f64>() {
            out.push(v);
        }
        cur.clear();
    };
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let next_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
        let thousands = c == ','
            && (1..=3).all(|k| chars.get(i + k).is_some_and(char::is_ascii_digit))
            && !chars.get(i + 4).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit()
            || (c == '.' && !cur.is_empty() && next_digit)
            || (thousands && !cur.is_empty())
            || (c == '-' && cur.is_empty() && next_digit)
        {
            cur.push(c);
        } else if !cur.is_empty() {
            flush(&mut cur, &mut out);
        }
    }
    if !cur.is_empty() {
        flush(&mut cur, &mut out);
    }
    out
}

fn normalized(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Whether `source` supports a claimed value: every number in the value occurs in the source,
/// and a value without numbers occurs in it as text (case and spacing aside). A model that
/// "extracts" a number it computed or guessed (an average, a remainder, a file name it never
/// saw) is not reporting an observation.
pub fn supported_by(value: &str, source: &str) -> bool {
    let value_numbers = numbers(value);
    if value_numbers.is_empty() {
        let v = normalized(value);
        return !v.is_empty() && normalized(source).contains(&v);
    }
    let source_numbers = numbers(source);
    value_numbers.iter().all(|v| {
        source_numbers
            .iter()
            .any(|s| (s - v).abs() <= 1e-9 * v.abs().max(1.0))
    })
}

/// Turns observations into fact claims.
pub trait Orienter {
    /// Extract claims.
    fn extract(&mut self, input: &OrientInput<'_>) -> Result<Extraction, PlannerError>;
    /// Name.
    fn name(&self) -> String;
}

/// The deterministic claims: a finished tool call's output is a fact about that call.
pub fn rule_claims(last: Option<&ActionReport>) -> Vec<FactClaim> {
    let Some(r) = last else { return Vec::new() };
    let conf = match r.status {
        OutcomeStatus::Verified => 0.95,
        OutcomeStatus::Unverified => 0.7,
        OutcomeStatus::Failed | OutcomeStatus::TimedOut => return Vec::new(),
    };
    vec![FactClaim::new(
        action_key(&r.tool, &r.args),
        truncate_str(r.output.trim(), VALUE_MAX),
        conf,
    )]
}

/// Confidence of a sensor reading as a fact.
pub const SENSOR_CONFIDENCE: f64 = 0.9;

/// The fact key of a workspace file's content hash.
pub fn file_hash_key(path: &str) -> String {
    format!("{FILE_HASH_PREFIX}{path}")
}

/// The claims of this cycle's sensor readings: each watched file's content hash. A reading that
/// differs from the hash taken when the file was read contradicts it.
pub fn sensor_claims(obs: &SensorReadings) -> Vec<FactClaim> {
    obs.signals
        .iter()
        .filter_map(|s| {
            let path = s.key.strip_prefix(super::observe::FILE_HASH_SIGNAL)?;
            Some(FactClaim::new(
                file_hash_key(path),
                &s.value,
                SENSOR_CONFIDENCE,
            ))
        })
        .collect()
}

/// The fact key of whether free memory covers what the model still needs.
pub const HOST_MEMORY_KEY: &str = "host memory for the model";
/// The fact key of whether the model's context has room.
pub const MODEL_CONTEXT_KEY: &str = "model context";
/// The share of the context at which it counts as nearly full.
pub const CONTEXT_NEARLY_FULL: f64 = 0.9;
/// Confidence of a healthy resource reading. A later degraded reading contradicts it at high
/// severity (above the default threshold 0.8: the run pauses for review).
pub const HEALTHY_CONFIDENCE: f64 = SENSOR_CONFIDENCE;
/// Confidence of a degraded resource reading: a recovery contradicts it at low severity.
pub const DEGRADED_CONFIDENCE: f64 = 0.6;

/// `N of M` → (N, M).
fn used_of(text: &str) -> Option<(u64, u64)> {
    let (n, m) = text.split_once(" of ")?;
    Some((n.trim().parse().ok()?, m.trim().parse().ok()?))
}

/// The claims of this cycle's resource readings, each with its source: whether the model's
/// context has room (`model.context_used` under 90 % of the context), and whether free memory
/// (`hardware.mem_available_mib`) covers what the model still needs — its KV cache grown to
/// the full context, at the bytes per token it has used so far (`model.kv_bytes`). A change
/// from healthy to degraded contradicts the earlier reading.
pub fn resource_claims(obs: &SensorReadings) -> Vec<(FactClaim, &'static str)> {
    let mut out = Vec::new();
    let ctx = obs.get("model.context_used").and_then(used_of);
    if let Some((used, total)) = ctx.filter(|(_, t)| *t > 0) {
        let full = used as f64 >= CONTEXT_NEARLY_FULL * total as f64;
        out.push((
            FactClaim::new(
                MODEL_CONTEXT_KEY,
                if full { "nearly full" } else { "has room" },
                if full {
                    DEGRADED_CONFIDENCE
                } else {
                    HEALTHY_CONFIDENCE
                },
            ),
            super::world::MODEL_CONTEXT_SOURCE,
        ));
    }
    let kv: Option<u64> = obs.get("model.kv_bytes").and_then(|v| v.parse().ok());
    let free: Option<u64> = obs
        .get("hardware.mem_available_mib")
        .and_then(|v| v.parse().ok());
    if let (Some((used, total)), Some(kv), Some(free_mib)) = (ctx, kv, free) {
        if used > 0 && kv > 0 {
            let need = kv / used * total.saturating_sub(used);
            let short = free_mib.saturating_mul(1 << 20) < need;
            out.push((
                FactClaim::new(
                    HOST_MEMORY_KEY,
                    if short {
                        "short of what the model needs"
                    } else {
                        "enough"
                    },
                    if short {
                        DEGRADED_CONFIDENCE
                    } else {
                        HEALTHY_CONFIDENCE
                    },
                ),
                super::world::HOST_MEMORY_SOURCE,
            ));
        }
    }
    out
}

/// Deterministic orienter: no claims beyond the rule claims the loop always applies; no model
/// calls.
#[derive(Debug, Clone, Default)]
pub struct RuleOrienter;

impl Orienter for RuleOrienter {
    fn extract(&mut self, _input: &OrientInput<'_>) -> Result<Extraction, PlannerError> {
        Ok(Extraction::default())
    }
    fn name(&self) -> String {
        "rules".into()
    }
}

/// A scripted orienter for tests: each call returns the next list of claims (then none).
#[derive(Debug, Clone, Default)]
pub struct ScriptedOrienter {
    turns: std::collections::VecDeque<Vec<FactClaim>>,
    /// Calls made.
    pub calls: usize,
}

impl ScriptedOrienter {
    /// An orienter replaying these claims.
    pub fn new(turns: impl IntoIterator<Item = Vec<FactClaim>>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            calls: 0,
        }
    }
}

impl Orienter for ScriptedOrienter {
    fn extract(&mut self, _input: &OrientInput<'_>) -> Result<Extraction, PlannerError> {
        self.calls += 1;
        Ok(Extraction {
            claims: self.turns.pop_front().unwrap_or_default(),
            model_calls: 1,
            ..Extraction::default()
        })
    }
    fn name(&self) -> String {
        "scripted".into()
    }
}

/// Most claims the model may extract per cycle.
pub const MAX_MODEL_CLAIMS: usize = 4;
/// Model-extracted facts never count as high confidence (only what tools verified does).
pub const MODEL_CONFIDENCE_CAP: f64 = 0.7;

/// The JSON schema of an extraction.
pub fn extraction_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": MAX_MODEL_CLAIMS,
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "maxLength": 60},
                        "value": {"type": "string", "maxLength": 120},
                        // A choice, not a free number: a number's digits are unbounded, and a
                        // bounded output is one the token limit can hold (`agent::bound`).
                        "confidence": {"enum": [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]}
                    },
                    "required": ["key", "value", "confidence"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["facts"],
        "additionalProperties": false
    })
}

/// Parse an extraction reply tolerantly: the first JSON object with a `facts` array (or a bare
/// array of facts).
pub fn parse_extraction(text: &str) -> Result<Vec<FactClaim>, String> {
    let start = text.find(['{', '[']).ok_or("no JSON in the reply")?;
    let mut de = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let v = match de.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(format!("invalid JSON: {e}")),
        None => return Err("no JSON in the reply".into()),
    };
    let arr = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => match o.get("facts") {
            Some(Value::Array(a)) => a.clone(),
            _ => return Err("no \"facts\" array".into()),
        },
        _ => return Err("not an object".into()),
    };
    let mut out = Vec::new();
    for item in arr.iter().take(MAX_MODEL_CLAIMS) {
        let key = item.get("key").and_then(Value::as_str).unwrap_or("").trim();
        let value = match item.get("value") {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(Value::Null) | None => continue,
            Some(other) => other.to_string(),
        };
        if key.is_empty() || value.is_empty() {
            continue;
        }
        let conf = item
            .get("confidence")
            .and_then(Value::as_f64)
            .unwrap_or(0.5);
        out.push(FactClaim::new(
            key,
            value,
            conf.clamp(0.0, MODEL_CONFIDENCE_CAP),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(signals: &[(&str, &str)]) -> SensorReadings {
        SensorReadings {
            cycle: 1,
            time: String::new(),
            signals: signals
                .iter()
                .map(|(k, v)| super::super::observe::Signal::new("t", k, *v))
                .collect(),
            failed: Vec::new(),
            confidence: 1.0,
        }
    }

    #[test]
    fn memory_short_of_the_models_need_and_a_nearly_full_context_contradict_healthy_readings() {
        use super::super::world::{ContradictionKind, Severity};
        let mut w = WorldModel::new("t", 10.0, None);
        let mut r = OrientReport::default();
        // 1000 of 8192 tokens in 1000 MiB of KV: 1 MiB a token, 7192 MiB still needed.
        let healthy = obs(&[
            ("model.context_used", "1000 of 8192"),
            ("model.kv_bytes", "1048576000"),
            ("hardware.mem_available_mib", "20000"),
        ]);
        for (c, src) in resource_claims(&healthy) {
            w.apply_claims(&[c], src, 1, false, &mut r);
        }
        assert!(r.contradictions.is_empty());
        assert_eq!(w.facts[HOST_MEMORY_KEY].value, "enough");
        assert_eq!(w.facts[MODEL_CONTEXT_KEY].value, "has room");
        // Healthy readings call for nothing and stay out of the prompts.
        assert!(!w.render().contains(MODEL_CONTEXT_KEY), "{}", w.render());
        assert!(!w.render().contains(HOST_MEMORY_KEY));
        let degraded = obs(&[
            ("model.context_used", "7500 of 8192"),
            ("model.kv_bytes", "7864320000"),
            ("hardware.mem_available_mib", "500"),
        ]);
        let mut r = OrientReport::default();
        for (c, src) in resource_claims(&degraded) {
            w.apply_claims(&[c], src, 2, false, &mut r);
        }
        assert!(w.render().contains("now \"nearly full\""), "{}", w.render());
        let kinds: Vec<(ContradictionKind, Severity)> = r
            .contradictions
            .iter()
            .map(|c| (c.kind, c.severity))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (ContradictionKind::ModelContext, Severity::High),
                (ContradictionKind::HostMemory, Severity::High)
            ]
        );
        // Reviewed and accepted, then the resources recover: low severity, both kept.
        w.accept_reviewed();
        let mut r = OrientReport::default();
        for (c, src) in resource_claims(&healthy) {
            w.apply_claims(&[c], src, 3, false, &mut r);
        }
        assert!(r.contradictions.iter().all(|c| c.severity == Severity::Low));
        assert_eq!(r.contradictions.len(), 2);
        // No model readings yet: no claims.
        assert!(resource_claims(&obs(&[("hardware.mem_available_mib", "5")])).is_empty());
    }

    #[test]
    fn claims_must_be_supported_by_what_was_observed() {
        let src = "What is 1000 mod 7?\n{\"expression\":\"1000 % 7\"}\n6";
        assert!(supported_by("6", src));
        assert!(supported_by("1000", src));
        assert!(!supported_by("3", src), "a guessed remainder");
        assert!(supported_by("5200 meters", "5.2 * 1000 = 5200"));
        assert!(supported_by("1,000", "1000 items"));
        assert!(supported_by("-11", "result: -11"));
        assert!(!supported_by("12.5", "12 + 15 + 27 = 54"));
        assert!(supported_by(
            "Ada Lovelace",
            "Author: Ada  lovelace\nStatus: draft"
        ));
        assert!(!supported_by("notes.txt", "debug = true"));
        assert!(!supported_by("", "anything"));
        assert_eq!(
            numbers("at 4., -5 and 6,000 or 2.5; 1,42"),
            vec![4.0, -5.0, 6000.0, 2.5, 1.0, 42.0]
        );
    }

    #[test]
    fn extraction_parses_tolerantly_and_caps_confidence() {
        let c = parse_extraction(
            "here: {\"facts\": [{\"key\": \"port\", \"value\": 8088, \"confidence\": 1.0}]} ok",
        )
        .unwrap_or_default();
        assert_eq!(
            c,
            vec![FactClaim::new("port", "8088", MODEL_CONFIDENCE_CAP)]
        );
        assert!(parse_extraction("nothing").is_err());
    }
}
