//! Observe: the sensors' readings become the world model's signals; the critical sensors,
//! read again while the model generates, are checked before Act (`recheck`).

use std::ops::ControlFlow;
use std::sync::Arc;

use super::super::observe::{
    confidence_after, FileHashSensor, HardwareSensor, LastActionSensor, LastActionSlot,
    ModelSensor, Sensor, SensorFailure, SensorReadings, UsageSlot, WatchSlot, WorkspaceSensor,
};
use super::super::risk;
use super::super::{Ooda, OodaError, OodaEvent, OodaState};
use super::{stop, Driver, Phase};

impl Driver<'_, '_> {
    // ---- Observe

    /// Read every sensor; the readings become the world model's signals.
    pub(super) fn observe(&mut self, cycle: usize) -> Result<SensorReadings, OodaError> {
        let obs = self.sensing.observe(cycle);
        let world = &mut self.s.world;
        // Signals are the latest readings; only the loop's own notes carry over.
        world.signals.retain(|k, _| k.starts_with("decide."));
        for sig in &obs.signals {
            world.signals.insert(sig.key.clone(), sig.value.clone());
        }
        for f in &obs.failed {
            world.signals.insert(
                format!("sensor.{}", f.sensor),
                format!("failed: {}", f.reason),
            );
        }
        self.s.log("observe", cycle, &obs)?;
        (self.s.on_event)(&OodaEvent::Observed { observation: &obs });
        Ok(obs)
    }

    /// Before Act: the critical sensors read while Orient and Decide generated. One that failed
    /// or ran past its timeout meanwhile lowers the observation confidence (1 − 0.3 per failed
    /// critical sensor, counting those Observe saw) and so the orientation confidence; under
    /// the threshold the run escalates instead of acting.
    pub(super) fn recheck(&mut self, cycle: usize, obs: &SensorReadings) -> Phase<()> {
        let late: Vec<SensorFailure> = self
            .sensing
            .check_watch()
            .into_iter()
            .filter(|f| !obs.failed.iter().any(|o| o.sensor == f.sensor))
            .collect();
        if late.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let all: Vec<SensorFailure> = obs.failed.iter().chain(&late).cloned().collect();
        let observation = confidence_after(&all);
        let s = &mut self.s;
        s.world.confidence = risk::orientation_confidence(observation, self.cycle_contradictions);
        for f in &late {
            s.world.signals.insert(
                format!("sensor.{}", f.sensor),
                format!("failed during generation: {}", f.reason),
            );
        }
        s.log(
            "recheck",
            cycle,
            &serde_json::json!({
                "failed": late,
                "observation_confidence": observation,
                "orientation_confidence": s.world.confidence,
            }),
        )?;
        let threshold = self.ooda.config.confidence_threshold;
        if s.world.confidence < threshold {
            let names: Vec<String> = late
                .iter()
                .map(|f| format!("{} ({})", f.sensor, f.reason))
                .collect();
            return stop(
                OodaState::Escalated,
                format!(
                    "critical sensor failed during generation: {}; orientation confidence {:.2} is below {:.2}",
                    names.join(", "),
                    s.world.confidence,
                    threshold
                ),
            );
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl Ooda<'_> {
    /// The built-in sensors (unless turned off) and the caller's.
    pub(super) fn sensors_for(
        &self,
        last_action: &LastActionSlot,
        usage: &UsageSlot,
        watch: &WatchSlot,
    ) -> Vec<Arc<dyn Sensor>> {
        let mut v: Vec<Arc<dyn Sensor>> = Vec::new();
        if self.config.builtin_sensors {
            v.push(Arc::new(LastActionSensor {
                slot: last_action.clone(),
            }));
            if let Some(ws) = &self.workspace {
                v.push(Arc::new(
                    WorkspaceSensor::new(ws.root()).hiding(ws.private().clone()),
                ));
                v.push(Arc::new(FileHashSensor {
                    workspace: ws.clone(),
                    watch: watch.clone(),
                }));
            }
            v.push(Arc::new(HardwareSensor));
            v.push(Arc::new(ModelSensor {
                slot: usage.clone(),
                context_length: self.phases.decider_ref().context_window(),
            }));
        }
        v.extend(self.sensors.iter().cloned());
        v
    }
}
