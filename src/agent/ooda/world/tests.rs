use super::*;

#[test]
fn the_orienter_does_not_rewrite_what_sensors_and_tools_observed() {
    let mut w = WorldModel::new("t", 10.0, None);
    let mut r = OrientReport::default();
    w.apply_claims(
        &[FactClaim::new("host memory for the model", "enough", 0.9)],
        HOST_MEMORY_SOURCE,
        1,
        false,
        &mut r,
    );
    w.apply_claims(
        &[FactClaim::new("qty", "845", 0.5)],
        "model",
        1,
        false,
        &mut r,
    );
    let (kept, refused) = w.interpretable(vec![
        FactClaim::new("Host memory for the model", "160 bytes", 0.9),
        FactClaim::new("qty", "846", 0.5),
        FactClaim::new("name", "hex bolt M8", 0.5),
    ]);
    let kept: Vec<&str> = kept.iter().map(|c| c.key.as_str()).collect();
    assert_eq!(kept, vec!["qty", "name"]);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].1, HOST_MEMORY_SOURCE);
}

#[test]
fn the_state_leaves_out_outputs_the_record_shows_and_file_hashes() {
    let mut w = WorldModel::new("t", 10.0, None);
    let report = super::super::act::ActionReport {
        action_id: 1,
        cycle: 1,
        tool: "read_file".into(),
        args: serde_json::json!({"path": "a.txt"}),
        fingerprint: "f".into(),
        status: OutcomeStatus::Verified,
        output: "a.txt (1 lines):\n1: port = 8088".into(),
        discrepancies: Vec::new(),
        cost: 0.0,
        elapsed_s: 0.0,
        implicit: false,
        approval: None,
        error: None,
    };
    w.record_action(&report, false);
    let mut r = OrientReport::default();
    let key = action_key(&report.tool, &report.args);
    w.apply_claims(
        &[
            FactClaim::new(&key, "a.txt (1 lines): 1: port = 8088", 0.95),
            FactClaim::new(format!("{FILE_HASH_PREFIX}a.txt"), "ab12", 0.95),
            FactClaim::new("port", "8088", 0.6),
        ],
        "action 1",
        1,
        false,
        &mut r,
    );
    assert_eq!(w.facts.len(), 3);
    let state = w.render_state();
    assert!(state.contains("- port = 8088"), "{state}");
    assert!(!state.contains(&key) && !state.contains("ab12"), "{state}");
    // The output is still shown, once, in the record.
    assert_eq!(
        w.render().matches("port = 8088").count(),
        2,
        "{}",
        w.render()
    );
}

#[test]
fn contradiction_is_checked_before_update() {
    let mut w = WorldModel::new("t", 10.0, None);
    let mut r = OrientReport::default();
    w.apply_claims(
        &[FactClaim::new("Port", "8088", 0.95)],
        "action 1",
        1,
        false,
        &mut r,
    );
    w.apply_claims(
        &[FactClaim::new("port", "9090", 0.9)],
        "action 2",
        2,
        false,
        &mut r,
    );
    assert_eq!(r.contradictions.len(), 1);
    assert_eq!(r.contradictions[0].severity, Severity::High);
    assert_eq!(
        w.facts["port"].value, "8088",
        "a high contradiction is not applied"
    );
    assert_eq!(w.open_high().count(), 1);
    assert_eq!(w.accept_reviewed(), 1);
    assert_eq!(w.facts["port"].value, "9090");
    let mut r = OrientReport::default();
    w.apply_claims(
        &[FactClaim::new("mood", "calm", 0.5)],
        "model",
        3,
        false,
        &mut r,
    );
    w.apply_claims(
        &[FactClaim::new("mood", "tense", 0.5)],
        "model",
        3,
        false,
        &mut r,
    );
    assert_eq!(r.contradictions[0].severity, Severity::Low);
    assert_eq!(r.contradictions[0].kind, ContradictionKind::ModelFact);
    assert_eq!(w.facts["mood"].value, "tense");
    assert_eq!(w.facts["mood"].disputed[0].value, "calm", "both kept");
    assert!((w.facts["mood"].confidence - 0.25).abs() < 1e-12);
    assert!(w.render().contains("disputed: model said calm"));
}
