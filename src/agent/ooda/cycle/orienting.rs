//! Orient: memory recalled, the last action's rule claims and the orienter's claims checked
//! against the world model before it is updated, the orientation confidence, compression.

use super::*;

impl Driver<'_, '_> {
    /// Memory, the last action's rule claims and the orienter's claims, each checked against
    /// the world model before it is updated; the orientation confidence; compression. Stops
    /// for review on a contradiction against a high-confidence fact.
    pub(super) fn orient(&mut self, cycle: usize, obs: &SensorReadings, model: bool) -> Phase<()> {
        let mut report = OrientReport::default();
        self.retrieve_memory(cycle, &mut report);
        let extraction = if !model {
            Ok(crate::agent::ooda::orient::Extraction::default())
        } else {
            let input = OrientInput {
                world: &self.s.world,
                observation: obs,
                last_action: self.s.new_action.as_ref(),
                tools: &self.tools,
                candidates: self.ooda.config.candidates,
                cancel: &self.ooda.cancel,
            };
            self.ooda.phases.orienter().extract(&input)
        };
        let extraction = match extraction {
            Ok(e) => e,
            Err(e) => return planner_stop("orient", e),
        };
        let s = &mut self.s;
        s.counters.orient_calls += extraction.model_calls;
        if extraction.model_calls > 0 {
            s.add_usage(&extraction.usage);
        }
        report.model_calls = extraction.model_calls;
        if let Some(e) = &extraction.error {
            report.extraction_errors.push(e.clone());
            s.counters.parse_failures += 1;
        }
        for c in &extraction.unsupported {
            report.extraction_errors.push(format!(
                "left out {} = {:?}: not in the observation",
                c.key, c.value
            ));
        }
        // What actions and sensors say about the world, checked against it like any fact.
        for (c, src) in std::mem::take(&mut self.action_claims) {
            s.world.apply_claims(&[c], &src, cycle, false, &mut report);
        }
        s.world.apply_claims(
            &sensor_claims(obs),
            "sensor files",
            cycle,
            false,
            &mut report,
        );
        for (c, src) in resource_claims(obs) {
            s.world.apply_claims(&[c], src, cycle, false, &mut report);
        }
        if let Some(a) = s.new_action.take() {
            let src = format!("action {}", a.action_id);
            s.world
                .apply_claims(&rule_claims(Some(&a)), &src, cycle, false, &mut report);
        }
        let name = self.ooda.phases.orienter().name();
        let (claims, refused) = s.world.interpretable(extraction.claims);
        for (c, owner) in refused {
            report.extraction_errors.push(format!(
                "left out {} = {:?}: that key is an observation ({owner}), not the model's to rewrite",
                c.key, c.value
            ));
        }
        s.world
            .apply_claims(&claims, &name, cycle, false, &mut report);
        for c in &report.contradictions {
            s.counters.contradictions += 1;
            s.audit.record(
                AuditEvent::Contradiction {
                    key: c.key.clone(),
                    old: c.old.value.clone(),
                    new: c.new.value.clone(),
                    severity: c.severity.as_str().into(),
                },
                false,
            )?;
        }
        self.cycle_contradictions = report.contradictions.len();
        s.world.confidence =
            risk::orientation_confidence(obs.confidence, report.contradictions.len());
        s.world.elapsed_s = s.elapsed();
        self.compress(cycle)?;
        let s = &mut self.s;
        s.log("orient", cycle, &report)?;
        (s.on_event)(&OodaEvent::Oriented {
            cycle,
            report: &report,
            world: &s.world,
        });
        let high: Vec<String> = s
            .world
            .open_high()
            .map(|c| {
                format!(
                    "{}: known {:?} (confidence {:.2}, {}), now {:?} ({})",
                    c.key, c.old.value, c.old.confidence, c.old.source, c.new.value, c.new.source
                )
            })
            .collect();
        if !high.is_empty() {
            return stop(
                OodaState::PausedForReview,
                format!(
                    "contradiction against a high-confidence fact: {}",
                    high.join("; ")
                ),
            );
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Facts of earlier runs relevant to the objective and the last output, as priors; and the
    /// outcomes of earlier runs' actions, recalled into the world model Orient and Decide see.
    pub(super) fn retrieve_memory(&mut self, cycle: usize, report: &mut OrientReport) {
        let Some(mem) = &self.ooda.memory else { return };
        let s = &mut self.s;
        let mut query = s.world.objective.clone();
        if let Some(a) = &s.new_action {
            query.push(' ');
            query.push_str(truncate_str(&a.output, 400));
        }
        let k = self.ooda.config.memory_k;
        // Earlier outcomes of actions like the ones this task needs (the store is this
        // workspace's), for the orienter and the decider to see.
        s.world.recalled = mem
            .retrieve_kind(&query, k, MemoryKind::Outcome)
            .into_iter()
            .map(|(_, e)| RecalledOutcome::of(e))
            .collect();
        report.recalled = s.world.recalled.clone();
        let claims: Vec<(FactClaim, String)> = mem
            .retrieve_kind(&query, k, MemoryKind::Fact)
            .into_iter()
            .map(|(_, e)| {
                (
                    FactClaim::new(&e.key, &e.value, e.confidence * PRIOR_DISCOUNT),
                    format!("memory:{}", e.source),
                )
            })
            .collect();
        for (c, src) in claims {
            s.world.apply_claims(&[c], &src, cycle, true, report);
        }
    }

    /// Summarize older steps when the world model is over its share of the context.
    pub(super) fn compress(&mut self, cycle: usize) -> Result<(), OodaError> {
        let s = &mut self.s;
        let Some((steps, before, after)) =
            s.world.compress_if_needed(self.ooda.config.world_tokens, 3)
        else {
            return Ok(());
        };
        s.counters.compressions += 1;
        s.audit.record(
            AuditEvent::Compressed {
                steps,
                tokens_before: before,
                tokens_after: after,
            },
            false,
        )?;
        s.log(
            "compress",
            cycle,
            &serde_json::json!({"steps": steps, "tokens_before": before, "tokens_after": after}),
        )?;
        (s.on_event)(&OodaEvent::Compressed {
            steps,
            tokens_before: before,
            tokens_after: after,
        });
        Ok(())
    }

    // ---- Decide
}
