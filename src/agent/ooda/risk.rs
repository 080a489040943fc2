//! Risk and confidence: the one place the loop's numbers come from.
//!
//! - **Risk** of an action = declared cost × (3 if irreversible) × (1 + uncertainty), where the
//!   uncertainty is 1 − the orientation confidence. Every candidate's risk is compared with the
//!   risk budget left ([`RiskAssessment::fits`]); one over it is refused with the numbers in the
//!   trace. An action that runs debits the budget by the risk it took ([`RiskAssessment::risk`]);
//!   a budget at zero stops consequential actions until a human adds to it (`boyd resume
//!   --add-budget`).
//! - **Confidence chain**: observation ([`observation_confidence`]: 1 − 0.3 × the critical
//!   sensors that failed this cycle; a non-critical sensor's failure is recorded, not counted) →
//!   orientation
//!   ([`orientation_confidence`]: × 0.9, or at most 0.4 after any contradiction this cycle) →
//!   decision ([`decision_confidence`]: × the risk assessment's confidence). Decide escalates
//!   instead of deciding when the orientation confidence is under the policy's threshold (0.3 by
//!   default), and refuses a candidate whose decision confidence is under it.

use serde::{Deserialize, Serialize};

use crate::agent::tools::{Cost, RiskProfile};

/// Risk multiplier of an irreversible action.
pub const IRREVERSIBLE_FACTOR: f64 = 3.0;
/// Observation confidence lost per failed critical sensor.
pub const CRITICAL_SENSOR_PENALTY: f64 = 0.3;
/// Orientation confidence = observation confidence × this, without contradictions.
pub const ORIENTATION_FACTOR: f64 = 0.9;
/// Orientation confidence after any contradiction (at most).
pub const CONTRADICTION_CONFIDENCE: f64 = 0.4;
/// The default risk budget.
pub const DEFAULT_RISK_BUDGET: f64 = 20.0;
/// The default escalation threshold of the orientation (and decision) confidence.
pub const DEFAULT_CONFIDENCE_THRESHOLD: f64 = 0.3;
/// The default confidence above which a contradicted fact pauses the run for review.
pub const DEFAULT_CONTRADICTION_THRESHOLD: f64 = 0.8;
/// How sure an assessment of an irreversible action is: its effect cannot be checked by undoing
/// it, and nothing in the run has shown what it does.
pub const IRREVERSIBLE_ASSESSMENT_CONFIDENCE: f64 = 0.8;

/// Observation confidence when `critical_failed` critical sensors failed this cycle:
/// 1 − 0.3 × that count, never below 0.
pub fn observation_confidence(critical_failed: usize) -> f64 {
    (1.0 - CRITICAL_SENSOR_PENALTY * critical_failed as f64).max(0.0)
}

/// Risk-budget units of a declared cost.
pub fn cost_units(c: Cost) -> f64 {
    match c {
        Cost::Low => 1.0,
        Cost::Medium => 3.0,
        Cost::High => 8.0,
    }
}

/// The risk of one candidate action.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RiskAssessment {
    /// Declared cost in budget units.
    pub cost: f64,
    /// Irreversible.
    pub irreversible: bool,
    /// 1 − orientation confidence.
    pub uncertainty: f64,
    /// cost × (3 if irreversible) × (1 + uncertainty).
    pub risk: f64,
    /// How sure this assessment is (1 for a reversible declared tool, 0.8 for an irreversible
    /// one).
    pub confidence: f64,
}

impl RiskAssessment {
    /// No risk (a final answer).
    pub fn none() -> Self {
        Self {
            cost: 0.0,
            irreversible: false,
            uncertainty: 0.0,
            risk: 0.0,
            confidence: 1.0,
        }
    }

    /// Whether the action fits in the budget left.
    pub fn fits(&self, remaining: f64) -> bool {
        self.risk <= remaining + 1e-9
    }
}

/// Assess a tool's declared risk under this orientation confidence.
pub fn assess_risk(profile: RiskProfile, orientation_confidence: f64) -> RiskAssessment {
    let cost = cost_units(profile.cost);
    let irreversible = !profile.reversible;
    let uncertainty = 1.0 - orientation_confidence.clamp(0.0, 1.0);
    let factor = if irreversible {
        IRREVERSIBLE_FACTOR
    } else {
        1.0
    };
    RiskAssessment {
        cost,
        irreversible,
        uncertainty,
        risk: cost * factor * (1.0 + uncertainty),
        confidence: if irreversible {
            IRREVERSIBLE_ASSESSMENT_CONFIDENCE
        } else {
            1.0
        },
    }
}

/// Orientation confidence: the observation's × 0.9, or at most 0.4 when this cycle found any
/// contradiction (a contradiction never raises it).
pub fn orientation_confidence(observation: f64, contradictions: usize) -> f64 {
    let c = observation.clamp(0.0, 1.0) * ORIENTATION_FACTOR;
    if contradictions > 0 {
        c.min(CONTRADICTION_CONFIDENCE)
    } else {
        c
    }
}

/// Decision confidence: the orientation's × the risk assessment's.
pub fn decision_confidence(orientation: f64, assessment: &RiskAssessment) -> f64 {
    orientation.clamp(0.0, 1.0) * assessment.confidence
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn risk_grows_with_cost_irreversibility_and_uncertainty() {
        let low = RiskProfile {
            cost: Cost::Low,
            reversible: true,
        };
        let sure = assess_risk(low, 1.0);
        assert!((sure.risk - 1.0).abs() < 1e-12);
        let unsure = assess_risk(low, 0.5);
        assert!((unsure.risk - 1.5).abs() < 1e-12);
        let irr = assess_risk(
            RiskProfile {
                cost: Cost::Medium,
                reversible: false,
            },
            0.9,
        );
        assert!((irr.risk - 3.0 * 3.0 * 1.1).abs() < 1e-9);
        assert!((irr.confidence - IRREVERSIBLE_ASSESSMENT_CONFIDENCE).abs() < 1e-12);
        assert!(!irr.fits(9.8) && irr.fits(9.9));
    }

    #[test]
    fn the_confidence_chain() {
        assert!((orientation_confidence(1.0, 0) - 0.9).abs() < 1e-12);
        assert!((orientation_confidence(1.0, 2) - 0.4).abs() < 1e-12);
        assert!((orientation_confidence(0.25, 1) - 0.225).abs() < 1e-12);
        let a = assess_risk(
            RiskProfile {
                cost: Cost::Low,
                reversible: false,
            },
            0.4,
        );
        assert!((decision_confidence(0.4, &a) - 0.32).abs() < 1e-12);
    }
}
