//! Act: the chosen action runs under the audit seam (a tool, or the final answer), and the
//! session ends: terminal state audited, memory stored, snapshot saved, transcript closed.

use std::time::Instant;

use super::super::act::{self, ActRequest, ActionReport};
use super::super::decide::{assess, Assessment, Candidate, DecisionRecord, Tier};
use super::super::hypothesis::Hypothesis;
use super::super::intent::{explain, save_world, IntentWhy};
use super::super::learned;
use super::super::memory::{MemoryKind, OUTCOME_PREFIX, STORE_MIN_CONFIDENCE};
use super::super::observe::file_hash;
use super::super::orient::file_hash_key;
use super::super::snapshot::{write_snapshot, Snapshot};
use super::super::world;
use super::super::world::{normalize, FactClaim};
use super::super::{OodaError, OodaEvent, OodaOutcome, OodaState};
use super::{Choice, Driver, Flow, Terminal};
use crate::agent::approval;
use crate::agent::audit::{AuditEvent, OutcomeStatus};
use crate::agent::condense::{sha256_hex, Condenser};
use crate::agent::guard::{canonical_json, fingerprint};
use crate::agent::rundir::{utc_timestamp, Record};
use crate::agent::tools::{truncate_str, FileEffect, ToolErrorKind};
use crate::agent::types::AnswerBy;
use crate::agent::types::{Action, Observation, ObservationKind, Step, StepTimings};

/// Confidence of a file's content hash taken when a tool read it.
const READ_HASH_CONFIDENCE: f64 = 0.95;

impl Driver<'_, '_> {
    /// The final answer ends the run; a tool runs under the audit seam.
    pub(super) async fn act(&mut self, cycle: usize, choice: Choice) -> Result<Flow, OodaError> {
        let a = &choice.assessment;
        if a.is_final {
            let proposed = a.answer_text().unwrap_or_default();
            // An answer taken by implicit guidance skips the model, the answer step included.
            // A rule's or a learned pattern's answer is a tool output code took as the answer.
            let (text, by) = if choice.implicit {
                (proposed, AnswerBy::Code)
            } else if let Some(w) = self.prewritten.take() {
                w
            } else if !crate::agent::grounding::answer_step_has_work(
                &proposed,
                &self.s.task,
                &self.steps,
            ) {
                (proposed, AnswerBy::Model)
            } else {
                match self.answer_step(cycle)? {
                    // An answer step that did arithmetic in its head loses to the decider's
                    // answer from the outputs (`grounding`).
                    Some((written, by))
                        if crate::agent::grounding::planner_wins(
                            &proposed,
                            &written,
                            by,
                            &self.s.task,
                            &self.steps,
                        )
                        .is_none() =>
                    {
                        (written, by)
                    }
                    _ => (proposed, AnswerBy::Model),
                }
            };
            self.act_final(a, &choice.record, &text, cycle, choice.implicit)?;
            self.answer = Some(text);
            self.answer_by = Some(by);
            return Ok(Flow::Stop(Terminal {
                state: OodaState::Completed,
                detail: None,
            }));
        }
        Ok(
            match self
                .run_tool(
                    a,
                    &choice.record,
                    cycle,
                    choice.implicit,
                    Some(choice.signature.clone()),
                )
                .await?
            {
                Ok(()) => Flow::Continue,
                Err(refusal) => {
                    self.pending = Some(a.clone());
                    Flow::Stop(Terminal::new(OodaState::Escalated, refusal))
                }
            },
        )
    }

    /// At the loop limit, a session that observed something answers from its observations
    /// (as ReAct does at its step limit, and smolagents at `max_steps`) instead of ending
    /// without an answer; the answer goes through the audit like any final answer.
    pub(super) fn answer_at_limit(&mut self, terminal: Terminal) -> Result<Terminal, OodaError> {
        let observed = self.steps.iter().any(crate::agent::outputs::usable);
        if terminal.state != OodaState::MaxLoopsExceeded || self.answer.is_some() || !observed {
            return Ok(terminal);
        }
        let cycle = self.session_cycles;
        let Some((text, by)) = self.answer_step(cycle)? else {
            return Ok(terminal);
        };
        let tools = self.ooda.tools;
        let polls = |name: &str| tools.get(name).is_some_and(|t| t.polls());
        let (assessed, chosen) = assess(
            &[Candidate::answer(&text)],
            &self.s.world,
            tools,
            &self.ooda.config.policy,
            &self.s.approvals,
            &polls,
            0.0,
        );
        let Some(i) = chosen else {
            return Ok(terminal);
        };
        let why = format!("{}: answer from the observations", terminal.state.as_str());
        let record = DecisionRecord {
            cycle,
            implicit: false,
            guidance: Some(why.clone()),
            candidates: assessed.clone(),
            chosen,
            parse_error: None,
        };
        self.s.log("decide", cycle, &record)?;
        self.act_final(&assessed[i], &record, &text, cycle, false)?;
        self.answer = Some(text);
        self.answer_by = Some(by);
        Ok(Terminal {
            state: OodaState::Completed,
            detail: Some(format!(
                "{}; answered from the observations",
                terminal
                    .detail
                    .unwrap_or_else(|| terminal.state.as_str().to_string())
            )),
        })
    }

    /// The answer written from this session's tool outputs (`agent::answer`), when the answer
    /// mode asks for it (with nothing observed, the answer step may still work out a figure
    /// from the task's numbers); the decider's usage is counted. A failed answer step leaves
    /// the proposed answer in place.
    fn answer_step(&mut self, cycle: usize) -> Result<Option<(String, AnswerBy)>, OodaError> {
        if !self.ooda.config.answer.from_observations() {
            return Ok(None);
        }
        let out = self.ooda.phases.decider().answer(
            &self.s.task,
            &self.steps,
            Some(self.s.world.overview.as_str()).filter(|o| !o.is_empty()),
            &self.ooda.cancel,
        );
        match out {
            Ok(Some(o)) => {
                self.s.add_usage(&o.usage);
                self.s.log(
                    "answer",
                    cycle,
                    &serde_json::json!({"answer": o.answer, "by": o.by, "how": o.how, "generated_tokens": o.usage.generated_tokens}),
                )?;
                Ok(Some((o.answer, o.by)))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                tracing::warn!("answer step failed ({e}); keeping the proposed answer");
                Ok(None)
            }
        }
    }

    /// Run a chosen tool action. `Ok(Err(reason))` when its approval token was refused at the
    /// last moment (the action did not run).
    pub(super) async fn run_tool(
        &mut self,
        a: &Assessment,
        record: &DecisionRecord,
        cycle: usize,
        implicit: bool,
        sig: Option<String>,
    ) -> Result<Result<(), String>, OodaError> {
        let Some(tool) = self.ooda.tools.get(&a.tool).cloned() else {
            return Ok(Err(format!("no tool named {}", a.tool)));
        };
        let s = &mut self.s;
        let mut approval_sha = None;
        let tier = self.ooda.config.policy.tier(tool.as_ref());
        if tier == Tier::Deny {
            return Ok(Err(format!("{} is denied by the workspace policy", a.tool)));
        }
        if tier == Tier::Token {
            if fingerprint(&a.tool, &a.args) != a.fingerprint {
                return Ok(Err(format!(
                    "{} {}: the action does not match the fingerprint it was approved for",
                    a.tool,
                    canonical_json(&a.args)
                )));
            }
            let Some(token) = a.token.as_deref() else {
                return Ok(Err(format!("{} needs an approval token", a.tool)));
            };
            let Some(key) = s.approvals.key().cloned() else {
                return Ok(Err("no approval key to check the token".into()));
            };
            match approval::verify_and_spend(
                &key,
                s.approvals.ledger(),
                token,
                &s.run_id,
                &a.fingerprint,
            ) {
                Ok(h) => approval_sha = Some(h),
                Err(e) => return Ok(Err(format!("approval refused: {e}"))),
            }
        }
        // What the action is expected to produce: open in the snapshot the intent names,
        // settled by the outcome below.
        let hypothesis = Hypothesis::expect(cycle, a);
        self.s.log("hypothesis", cycle, &hypothesis)?;
        (self.s.on_event)(&OodaEvent::Hypothesis {
            hypothesis: &hypothesis,
        });
        self.s.world.hypotheses.push(hypothesis);
        let why = self.why(record)?;
        let s = &mut self.s;
        let t0 = Instant::now();
        let args = crate::agent::tools::normalize_args(tool.as_ref(), a.args.clone());
        let id = s.next_action_id;
        s.next_action_id += 1;
        let report = act::execute(
            ActRequest {
                action_id: id,
                cycle,
                tool: tool.clone(),
                args,
                fingerprint: a.fingerprint.clone(),
                implicit,
                approval: approval_sha,
                timeout: self.ooda.config.action_timeout,
                risk: a.risk,
                why: Some(why),
            },
            &self.ctx,
            &self.ooda.postconditions,
            s.audit.as_mut(),
        )
        .await?;
        s.counters.actions += 1;
        if a.irreversible {
            s.counters.irreversible += 1;
        }
        let preview = crate::agent::tools::files::read_preview(
            &report.tool,
            &s.world.objective,
            &report.output,
        );
        s.world
            .record_action_shown(&report, a.irreversible, preview.as_deref());
        if let Some(h) = s.world.hypotheses.last_mut() {
            h.settle(&report);
            let h = h.clone();
            s.log("hypothesis", cycle, &h)?;
            (s.on_event)(&OodaEvent::Hypothesis { hypothesis: &h });
        }
        if report.status == OutcomeStatus::Verified && tool.polls() {
            if let Some(sig) = sig {
                s.guidance.learn(sig, &report.tool, &report.args);
            }
        }
        self.note_file_effects(&report, tool.file_effect());
        let s = &mut self.s;
        if let Ok(mut g) = s.last_action.lock() {
            *g = Some(report.clone());
        }
        // The usual transcript step, so `boyd runs show` lists OODA actions too.
        let kind = match report.status {
            OutcomeStatus::Verified | OutcomeStatus::Unverified => ObservationKind::Output,
            OutcomeStatus::Failed => ObservationKind::ToolError {
                kind: report.error.unwrap_or(ToolErrorKind::Failed),
            },
            OutcomeStatus::TimedOut => ObservationKind::ToolError {
                kind: ToolErrorKind::Timeout,
            },
        };
        let dir = s.run_dir.blob_dir();
        let observation = Condenser {
            limit: self.ooda.config.observation_limit,
        }
        .condense_with(kind, report.output.clone(), &dir, preview)
        .unwrap_or_else(|_| Observation::new(kind, truncate_str(&report.output, 1500)));
        let cycle_s = s.cycle_start.elapsed().as_secs_f64();
        let step = Step {
            index: id as usize,
            thought: a.thought.clone(),
            action: Some(Action::tool(&report.tool, report.args.clone())),
            raw: String::new(),
            observation,
            fingerprint: Some(report.fingerprint.clone()),
            timings: StepTimings {
                // Orient and Decide of this cycle: its time up to the tool.
                plan_s: (cycle_s - t0.elapsed().as_secs_f64()).max(0.0),
                tool_s: report.elapsed_s,
                total_s: cycle_s,
            },
            usage: s.cycle_usage.clone(),
        };
        s.run_dir.append(&Record::Step(step.clone()))?;
        self.steps.push(step);
        let s = &mut self.s;
        s.log("act", cycle, &report)?;
        (s.on_event)(&OodaEvent::Acted { report: &report });
        s.new_action = Some(report);
        Ok(Ok(()))
    }

    /// What a file tool's action says about the workspace (its `Tool::file_effect`): a read
    /// file's content hash is a
    /// claim (checked against an earlier read in the next Orient) and the file is watched from
    /// now on; a file this run wrote or deleted changed as expected, so its old hash is dropped
    /// rather than contradicted.
    fn note_file_effects(&mut self, report: &ActionReport, effect: FileEffect) {
        if effect == FileEffect::None || report.status == OutcomeStatus::Failed {
            return;
        }
        let (Some(ws), Some(path)) = (
            self.ooda.workspace.as_ref(),
            report.args.get("path").and_then(serde_json::Value::as_str),
        ) else {
            return;
        };
        let key = file_hash_key(path);
        let Ok(mut watch) = self.watch.lock() else {
            return;
        };
        match effect {
            FileEffect::Reads => {
                if let Some(h) = file_hash(ws, path) {
                    self.action_claims.push((
                        FactClaim::new(&key, h, READ_HASH_CONFIDENCE),
                        format!("action {}", report.action_id),
                    ));
                    watch.insert(path.to_string());
                }
            }
            FileEffect::Writes => {
                self.s.world.facts.remove(&normalize(&key));
                watch.insert(path.to_string());
            }
            FileEffect::Deletes => {
                self.s.world.facts.remove(&normalize(&key));
                watch.remove(path);
            }
            FileEffect::None => {}
        }
    }

    /// Why the decision's choice runs: the world model it was taken in, saved under its hash.
    fn why(&self, record: &DecisionRecord) -> Result<IntentWhy, OodaError> {
        let sha = save_world(&self.s.run_path, &self.s.world)?;
        Ok(explain(record, sha, self.s.world.confidence))
    }

    /// The final answer: an intent and an outcome in the audit log, a transcript step.
    fn act_final(
        &mut self,
        a: &Assessment,
        record: &DecisionRecord,
        text: &str,
        cycle: usize,
        implicit: bool,
    ) -> Result<(), OodaError> {
        let why = self.why(record)?;
        let s = &mut self.s;
        let id = s.next_action_id;
        s.next_action_id += 1;
        s.audit.record(
            AuditEvent::Intent {
                action_id: id,
                cycle,
                tool: a.tool.clone(),
                args: a.args.clone(),
                fingerprint: a.fingerprint.clone(),
                irreversible: false,
                approval: None,
                implicit,
                why: Some(Box::new(why)),
            },
            true,
        )?;
        let (status, discrepancies) = if text.trim().is_empty() {
            (
                OutcomeStatus::Unverified,
                vec!["the answer is empty".to_string()],
            )
        } else {
            (OutcomeStatus::Verified, Vec::new())
        };
        s.audit.record(
            AuditEvent::Outcome {
                action_id: id,
                fingerprint: a.fingerprint.clone(),
                status,
                cost: 0.0,
                discrepancies,
                output_sha256: sha256_hex(text.as_bytes()),
            },
            false,
        )?;
        let cycle_s = s.cycle_start.elapsed().as_secs_f64();
        s.run_dir.append(&Record::Step(Step {
            index: id as usize,
            thought: a.thought.clone(),
            action: Some(Action::answer(text)),
            raw: String::new(),
            observation: Observation::new(ObservationKind::Final, text),
            fingerprint: Some(a.fingerprint.clone()),
            timings: StepTimings {
                plan_s: cycle_s,
                tool_s: 0.0,
                total_s: cycle_s,
            },
            usage: s.cycle_usage.clone(),
        }))?;
        Ok(())
    }

    /// Log the terminal state, store memory, save the snapshot, end the transcript.
    pub(super) fn finish(mut self, terminal: Terminal) -> Result<OodaOutcome, OodaError> {
        let Terminal { state, detail } = terminal;
        let (answer, pending) = (self.answer.take(), self.pending.take());
        let answer_by = answer.as_ref().and(self.answer_by.take());
        let s = &mut self.s;
        s.audit.record(
            AuditEvent::Terminal {
                state: state.as_str().into(),
                detail: detail.clone(),
            },
            true,
        )?;
        s.world.elapsed_s = s.elapsed();
        // Memory: verified facts and action outcomes of this run.
        if let Some(mem) = self.ooda.memory.as_mut() {
            for f in s.world.facts.values() {
                if !f.prior && f.confidence >= STORE_MIN_CONFIDENCE {
                    mem.upsert(&f.key, &f.value, f.confidence, &s.run_id, MemoryKind::Fact);
                }
            }
            for c in &s.world.completed {
                let status = match c.status {
                    OutcomeStatus::Verified => "verified",
                    OutcomeStatus::Unverified => "unverified",
                    OutcomeStatus::Failed => "failed",
                    OutcomeStatus::TimedOut => "timed out",
                };
                mem.upsert(
                    &format!("{OUTCOME_PREFIX}{}", world::action_key(&c.tool, &c.args)),
                    &format!("{status}: {}", world::one_line(&c.output, 200)),
                    1.0,
                    &s.run_id,
                    MemoryKind::Outcome,
                );
            }
            // Each step of a completed run is one success of its learned pattern.
            if let (OodaState::Completed, Some(a)) = (state, answer.as_ref()) {
                if s.world.summary.is_empty() {
                    learned::learn_run(mem, &s.task, &s.world.completed, a, &s.run_id);
                }
            }
            mem.save()?;
        }
        let snap = Snapshot {
            run_id: s.run_id.clone(),
            task: s.task.clone(),
            state,
            detail: detail.clone(),
            answer: answer.clone(),
            world: s.world.clone(),
            pending: pending.clone(),
            counters: s.counters.clone(),
            workspace: self.ooda.workspace.as_ref().map(|w| w.root().to_path_buf()),
            next_action_id: s.next_action_id,
            guidance: s.guidance.clone(),
            saved_at: utc_timestamp(),
        };
        write_snapshot(&s.run_path, &snap, self.ooda.approval_key.as_ref())?;
        let outcome = OodaOutcome {
            run_id: s.run_id.clone(),
            run_dir: s.run_path.clone(),
            task: s.task.clone(),
            state,
            answer,
            answer_by,
            detail,
            pending_fingerprint: pending.as_ref().map(|p| p.fingerprint.clone()),
            pending_action: pending
                .as_ref()
                .map(|p| format!("{} {}", p.tool, canonical_json(&p.args))),
            counters: s.counters.clone(),
            elapsed_s: s.start.elapsed().as_secs_f64(),
            planner: self.ooda.decider_name(),
            budget_left: s.world.risk_budget_remaining,
        };
        let ro = outcome.to_run_outcome();
        s.run_dir.append(&Record::End(ro.clone()))?;
        s.run_dir.write_outcome(&ro)?;
        s.log("terminal", s.world.loop_count, &outcome)?;
        (s.on_event)(&OodaEvent::Finished { outcome: &outcome });
        Ok(outcome)
    }
}
