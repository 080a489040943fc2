//! Where an answer's numbers come from. A number the model writes that neither the task nor any
//! tool output holds was made up or worked out in the model's head, and a 0.5B model's mental
//! arithmetic is mostly wrong ("17 * 23 + 4 = 402" after the calculator said 395). The check
//! does not depend on how the question is worded: it compares figures, not words. It rejects an
//! answer; it never writes one.

use super::tools::FINAL_ANSWER;
use super::types::AnswerOutput;
use super::types::{Action, AnswerBy, Observation, ObservationKind, Step};
use super::words::{figures_in, number_words};

/// The numbers of `answer` (as written) that the task and the observations of `steps` do not
/// hold. A figure counts as held when some source number equals it, or rounds to it at the
/// precision the answer writes it with ("31.84" from "31.8359"); signs are ignored (a date's
/// "-03" is a hyphen, not a minus). Counts the task writes in words ("three files") count too.
pub fn ungrounded(answer: &str, task: &str, steps: &[Step]) -> Vec<String> {
    let mut sources: Vec<f64> = figures_in(task).into_iter().map(|(_, v)| v.abs()).collect();
    sources.extend(number_words(task));
    for s in steps {
        // What a tool returned, and errors that state facts; not the guard's own messages.
        if matches!(s.observation.kind, ObservationKind::Guard) {
            continue;
        }
        sources.extend(
            figures_in(&s.observation.text)
                .into_iter()
                .map(|(_, v)| v.abs()),
        );
    }
    figures_in(answer)
        .into_iter()
        .filter(|(written, value)| !held(written, value.abs(), &sources))
        .map(|(written, _)| written.trim_start_matches('-').to_string())
        .collect()
}

/// Whether the answer step has work when the planner proposes `proposed`: something was
/// observed to answer from, or nothing was and the proposal states a number neither the task
/// nor any output holds (the planner's own arithmetic, which the answer step works out by a
/// program). A proposal like "no" to "Is 12 prime?" stands as given.
pub fn answer_step_has_work(proposed: &str, task: &str, steps: &[Step]) -> bool {
    steps.iter().any(super::outputs::usable) || !ungrounded(proposed, task, steps).is_empty()
}

/// Whether `sources` hold `value`, written as `written`: equal, or equal once rounded to the
/// decimals `written` shows.
fn held(written: &str, value: f64, sources: &[f64]) -> bool {
    let decimals = written.split_once('.').map_or(0, |(_, frac)| {
        frac.chars().take_while(char::is_ascii_digit).count()
    });
    let scale = 10f64.powi(decimals.min(12) as i32);
    sources
        .iter()
        .any(|&s| s == value || ((s * scale).round() / scale - value).abs() <= 0.5 / scale * 1e-6)
}

/// What a run does with the planner's final answer: the answer it keeps (see [`pick_answer`])
/// and, when that answer states a number from nowhere, the message that sends the planner back
/// (see [`send_back`]) instead of ending the run.
pub struct Conclusion {
    /// The answer kept.
    pub answer: String,
    /// Who made it.
    pub by: AnswerBy,
    /// How it was made, for the step's record (none for the planner's own answer as given).
    pub how: Option<String>,
    /// The message that sends the planner back; `None` ends the run with `answer`.
    pub back: Option<String>,
}

impl Conclusion {
    /// The planner answered `proposed` and the answer step wrote `rewritten`; the planner may
    /// be sent back when `may_send_back`.
    pub fn new(
        proposed: String,
        rewritten: Option<AnswerOutput>,
        task: &str,
        steps: &[Step],
        may_send_back: bool,
    ) -> Self {
        let (answer, by, how) = pick_answer(proposed, rewritten, task, steps);
        let back = send_back(&answer, by, task, steps, may_send_back);
        Self {
            answer,
            by,
            how,
            back,
        }
    }

    /// The step's action and observation: the final answer, or the guard's message.
    pub fn step(&self) -> (Option<Action>, Observation) {
        let action = Some(Action::Final {
            answer: self.answer.clone(),
        });
        let observation = match &self.back {
            Some(text) => Observation::new(ObservationKind::Guard, text.clone()),
            None => Observation::new(ObservationKind::Final, self.answer.clone()),
        };
        (action, observation)
    }
}

/// The answer a run keeps when the planner answers `proposed` and the answer step wrote
/// `rewritten`: the answer step's, unless it holds a number neither the task nor a tool output
/// holds while the planner's answer holds none (the answer step then did arithmetic in its
/// head; see [`ungrounded`]). With how the kept answer was made, for the step's record.
fn pick_answer(
    proposed: String,
    rewritten: Option<AnswerOutput>,
    task: &str,
    steps: &[Step],
) -> (String, AnswerBy, Option<String>) {
    let Some(o) = rewritten else {
        return (proposed, AnswerBy::Model, None);
    };
    if let Some(made_up) = planner_wins(&proposed, &o.answer, o.by, task, steps) {
        let how = format!(
            "the planner's; the answer step wrote {:?}, with {} found in no tool output",
            o.answer,
            made_up.join(", ")
        );
        return (proposed, AnswerBy::Model, Some(how));
    }
    (o.answer, o.by, Some(o.how))
}

/// The made-up numbers of `written` (the answer step's answer, made `by`) when the planner's
/// `proposed` answer should be kept instead: `written` is the model's own text, holds numbers
/// no tool output or the task holds, and `proposed` holds none.
pub fn planner_wins(
    proposed: &str,
    written: &str,
    by: AnswerBy,
    task: &str,
    steps: &[Step],
) -> Option<Vec<String>> {
    if by != AnswerBy::Model || proposed.trim().is_empty() {
        return None;
    }
    let made_up = ungrounded(written, task, steps);
    (!made_up.is_empty() && ungrounded(proposed, task, steps).is_empty()).then_some(made_up)
}

/// The message that sends the planner back when the model's answer `answer` states a number
/// that neither the task nor any tool output holds, and `may` (once a run, with steps left).
/// Answers code or a program made are not checked: their numbers were computed.
fn send_back(answer: &str, by: AnswerBy, task: &str, steps: &[Step], may: bool) -> Option<String> {
    if !may || by != AnswerBy::Model {
        return None;
    }
    let made_up = ungrounded(answer, task, steps);
    if made_up.is_empty() {
        return None;
    }
    Some(format!(
        "System check: the answer {answer:?} states {}, which no tool output and not the task holds. \
         Work the number out with a tool (calculator for arithmetic, search_text with count=true or \
         list_dir to count, table for records), then call {FINAL_ANSWER} with the figure it prints.",
        made_up.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(text: &str) -> Step {
        Step {
            index: 1,
            thought: String::new(),
            action: Some(Action::ToolCall {
                name: "calculator".into(),
                args: serde_json::json!({}),
            }),
            raw: String::new(),
            observation: Observation::new(ObservationKind::Output, text),
            fingerprint: None,
            timings: Default::default(),
            usage: Default::default(),
        }
    }

    #[test]
    fn a_number_no_output_holds_is_ungrounded() {
        let steps = [output("395")];
        let task = "What is 17 * 23, plus 4?";
        assert_eq!(ungrounded("395", task, &steps), Vec::<String>::new());
        // The task's own numbers are held; the made-up result is not.
        assert_eq!(ungrounded("17 * 23 + 4 = 402", task, &steps), ["402"]);
        assert_eq!(
            ungrounded("Paris", "capital of France?", &[]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn rounding_thousands_separators_dates_and_number_words_are_held() {
        let steps = [output(
            "memory: 34.2 GB (31.8359 GiB)\nrows: 1234567\nreleased 2024-03-15",
        )];
        let task = "How many of the three files ...?";
        for answer in [
            "31.84 GiB",
            "31.8 GiB",
            "1,234,567 rows",
            "2024-03-15",
            "3 files",
            "34.2 GB",
        ] {
            assert_eq!(
                ungrounded(answer, task, &steps),
                Vec::<String>::new(),
                "{answer}"
            );
        }
        // Rounded the wrong way, or a digit changed: not held.
        assert_eq!(ungrounded("31.83 GiB", task, &steps), ["31.83"]);
        assert_eq!(ungrounded("1,234,568", task, &steps), ["1,234,568"]);
    }

    #[test]
    fn the_guards_own_messages_are_not_a_source() {
        let mut guard = output("you already ran this exact action 2 times");
        guard.observation.kind = ObservationKind::Guard;
        assert_eq!(ungrounded("2", "How many?", &[guard]), ["2"]);
    }
}
