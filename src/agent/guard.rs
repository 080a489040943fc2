//! The action-fingerprint cache: catches a model that repeats itself.
//!
//! A fingerprint is the SHA-256 of the tool name and the canonical JSON of the arguments (object
//! keys sorted, no whitespace), so `{"a":1,"b":2}` and `{ "b": 2, "a": 1 }` are the same action.
//! Repeating an action that failed gets a guard observation instead of a second run; repeating
//! one that succeeded gets the earlier observation back with an instruction to answer from it
//! (a small model often re-reads a file whose answer is already on screen); choosing the same
//! fingerprint `stuck_after` times ends the run as `Stuck`. Tools that poll are exempt.

use std::collections::HashMap;

use serde_json::Value;

use super::condense::sha256_hex;

/// Canonical JSON: object keys sorted recursively, compact.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                if let Some(val) = map.get(*k) {
                    write_canonical(val, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Fingerprint of a tool call.
pub fn fingerprint(tool: &str, args: &Value) -> String {
    let mut s = String::with_capacity(64);
    s.push_str(tool);
    s.push('\n');
    s.push_str(&canonical_json(args));
    sha256_hex(s.as_bytes())
}

/// What the cache says about an action about to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// It failed before with this error; do not run it again.
    RepeatOfFailure {
        /// The earlier error text.
        error: String,
    },
    /// It succeeded before with this observation; show it again instead of running.
    RepeatOfSuccess {
        /// The earlier observation text.
        observation: String,
    },
    /// Chosen `count` times: the run is stuck.
    Stuck {
        /// Times chosen, including this one.
        count: usize,
    },
}

/// Counts fingerprints and remembers failures.
#[derive(Debug, Clone)]
pub struct ActionCache {
    stuck_after: usize,
    counts: HashMap<String, usize>,
    failures: HashMap<String, String>,
    successes: HashMap<String, String>,
}

impl ActionCache {
    /// A cache that declares `Stuck` on the `stuck_after`-th identical action (minimum 2).
    pub fn new(stuck_after: usize) -> Self {
        Self {
            stuck_after: stuck_after.max(2),
            counts: HashMap::new(),
            failures: HashMap::new(),
            successes: HashMap::new(),
        }
    }

    /// Record that `fp` was chosen and say what to do. `exempt` (polling tools) runs again
    /// unless it failed before: a failure repeats the same way, polling or not.
    pub fn check(&mut self, fp: &str, exempt: bool) -> Verdict {
        if exempt && !self.failures.contains_key(fp) {
            return Verdict::Run;
        }
        let n = self.counts.entry(fp.to_string()).or_insert(0);
        *n += 1;
        if *n >= self.stuck_after {
            return Verdict::Stuck { count: *n };
        }
        if let Some(error) = self.failures.get(fp) {
            return Verdict::RepeatOfFailure {
                error: error.clone(),
            };
        }
        match self.successes.get(fp) {
            Some(observation) => Verdict::RepeatOfSuccess {
                observation: observation.clone(),
            },
            None => Verdict::Run,
        }
    }

    /// Remember that `fp` succeeded with `observation`.
    pub fn record_success(&mut self, fp: &str, observation: &str) {
        self.successes
            .insert(fp.to_string(), observation.to_string());
    }

    /// Remember that `fp` failed with `error`.
    pub fn record_failure(&mut self, fp: &str, error: &str) {
        self.failures.insert(fp.to_string(), error.to_string());
    }

    /// Times `fp` was chosen.
    pub fn count(&self, fp: &str) -> usize {
        self.counts.get(fp).copied().unwrap_or(0)
    }
}

/// The guard observation for a repeat of a failed action.
pub fn repeat_message(error: &str) -> String {
    format!(
        "System guard: you already ran this exact action and got: {error} Running it again will fail the same way; choose a different approach (other arguments or another tool)."
    )
}

/// The guard observation for a repeat of an action that succeeded: the earlier result again,
/// and what to do with it.
pub fn repeat_success_message(observation: &str) -> String {
    format!(
        "System guard: you already ran this exact action. It returned:\n{observation}\nIf this holds the answer, call final_answer now; otherwise use a different tool."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_recursively() {
        let a: Value = serde_json::json!({"b": 2, "a": {"z": [1, {"y": 1, "x": 2}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"z":[1,{"x":2,"y":1}]},"b":2}"#
        );
        let b: Value =
            serde_json::from_str(r#"{ "a": {"z": [1, {"x": 2, "y": 1}], "c": null}, "b": 2 }"#)
                .unwrap_or(Value::Null);
        assert_eq!(fingerprint("t", &a), fingerprint("t", &b));
        assert_ne!(fingerprint("t", &a), fingerprint("u", &a));
    }

    #[test]
    fn cache_guards_failures_and_detects_stuck() {
        let mut c = ActionCache::new(3);
        assert_eq!(c.check("x", false), Verdict::Run);
        c.record_failure("x", "E");
        assert_eq!(
            c.check("x", false),
            Verdict::RepeatOfFailure { error: "E".into() }
        );
        assert_eq!(c.check("x", false), Verdict::Stuck { count: 3 });
        // A success is shown again once, then the third identical choice is stuck.
        assert_eq!(c.check("ok", false), Verdict::Run);
        c.record_success("ok", "port = 8088");
        assert_eq!(
            c.check("ok", false),
            Verdict::RepeatOfSuccess {
                observation: "port = 8088".into()
            }
        );
        assert_eq!(c.check("ok", false), Verdict::Stuck { count: 3 });
        for _ in 0..10 {
            assert_eq!(c.check("poll", true), Verdict::Run);
        }
        // A polling action that failed is guarded like any other.
        c.record_failure("poll", "E");
        assert!(matches!(
            c.check("poll", true),
            Verdict::RepeatOfFailure { .. } | Verdict::Stuck { .. }
        ));
    }
}
