//! Predicted next to measured: one [`Row`] per component, with the signed error.
//!
//! `error % = (predicted − measured) / measured × 100`: positive when the model
//! over-predicts. A row may carry a target (|error| ≤ target %) from the acceptance criteria;
//! `pass` is then filled in.

use serde::Serialize;

/// What a row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Tokens per second.
    TokPerSec,
}

/// One component: predicted, measured, error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Component name (`weights`, `kv @ d2048`, `decode tg128 @ d512`).
    pub component: String,
    /// Unit of `predicted` and `measured`.
    pub unit: Unit,
    /// The sizing model's figure.
    pub predicted: f64,
    /// The measurement (mean for speeds).
    pub measured: f64,
    /// Standard deviation of the measurement, when repeated.
    pub sd: Option<f64>,
    /// Signed error in percent; `None` when the measurement is zero and the prediction is not.
    pub error_pct: Option<f64>,
    /// Acceptance bound on |error %|, when there is one.
    pub target_pct: Option<f64>,
    /// Whether |error %| ≤ target.
    pub pass: Option<bool>,
    /// What the figures mean, where not obvious.
    pub note: String,
}

/// Signed error of `predicted` against `measured`, in percent. Both zero is a 0 % error;
/// a zero (or non-finite) measurement otherwise has no relative error.
pub fn error_pct(predicted: f64, measured: f64) -> Option<f64> {
    if !(predicted.is_finite() && measured.is_finite()) {
        return None;
    }
    if measured == 0.0 {
        return (predicted == 0.0).then_some(0.0);
    }
    Some((predicted - measured) / measured * 100.0)
}

impl Row {
    /// A row without a target.
    pub fn new(component: impl Into<String>, unit: Unit, predicted: f64, measured: f64) -> Self {
        Self {
            component: component.into(),
            unit,
            predicted,
            measured,
            sd: None,
            error_pct: error_pct(predicted, measured),
            target_pct: None,
            pass: None,
            note: String::new(),
        }
    }

    /// With an acceptance bound on |error %|.
    pub fn target(mut self, pct: f64) -> Self {
        self.target_pct = Some(pct);
        self.pass = Some(self.error_pct.is_some_and(|e| e.abs() <= pct));
        self
    }

    /// With the measurement's standard deviation.
    pub fn sd(mut self, sd: f64) -> Self {
        self.sd = Some(sd);
        self
    }

    /// With a note.
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}
