//! Final answers that copy the prompt's placeholders: a 0.5B decider answered
//! "<result, copied exactly>" before calling any tool, the examples' `<…>` text instead of a
//! value. Such an answer is refused like a repeat ([`DropReason::Placeholder`]) and the decider
//! proposes again.

use super::decide::{best, Assessment, DropReason};

/// The `<…>` spans of `text` written as placeholders are: a letter right after `<`, no space
/// before `>`, one line, at most 80 characters inside (`3 < 4 and 5 > 2` holds none).
fn bracketed(text: &str) -> impl Iterator<Item = &str> {
    text.split('<').skip(1).filter_map(|rest| {
        let (inside, _) = rest.split_once('>')?;
        (inside.len() <= 80
            && !inside.contains('\n')
            && inside.starts_with(char::is_alphabetic)
            && !inside.ends_with(char::is_whitespace))
        .then_some(inside)
    })
}

/// Drop each final answer that holds a `<…>` span none of `sources` (the task and the tool
/// outputs) contains — the prompt examples' placeholder copied instead of a value
/// ([`DropReason::Placeholder`]) — and choose again among the rest. `Vec<u8>` or `<div>` read
/// from a file stand.
pub fn drop_placeholders(assessed: &mut [Assessment], sources: &[&str]) -> Option<usize> {
    for a in assessed
        .iter_mut()
        .filter(|a| a.is_final && a.dropped.is_none())
    {
        let Some(answer) = a.answer_text() else {
            continue;
        };
        let invented = bracketed(&answer).any(|span| {
            let span = format!("<{span}>");
            !sources.iter().any(|s| s.contains(&span))
        });
        if invented {
            a.dropped = Some(DropReason::Placeholder);
        }
    }
    best(assessed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::ooda::decide::{assess, Approvals, Candidate, Policy};
    use crate::agent::ooda::world::WorldModel;
    use crate::agent::tools::Toolset;

    #[test]
    fn a_placeholder_answer_is_dropped_and_a_tool_call_chosen_instead() {
        let mut world = WorldModel::new("What is 17 * 3?", 20.0, None);
        world.confidence = 0.9;
        let tools = Toolset::builtin(None);
        let d = tempfile::tempdir().expect("tempdir");
        let approvals = Approvals::new(None, "r", d.path(), Vec::new());
        let run = |answer: &str, sources: &[&str]| {
            let cands = vec![
                Candidate::answer(answer),
                Candidate::tool("calculator", serde_json::json!({"expression": "17 * 3"})),
            ];
            let (mut a, chosen) = assess(
                &cands,
                &world,
                &tools,
                &Policy::default(),
                &approvals,
                &|_| false,
                0.0,
            );
            assert_eq!(chosen, Some(0), "the answer ranks first");
            let chosen = drop_placeholders(&mut a, sources);
            (chosen, a[0].dropped.clone())
        };
        assert_eq!(
            run("<result>", &["What is 17 * 3?"]),
            (Some(1), Some(DropReason::Placeholder))
        );
        assert_eq!(
            run("<the day of the week, copied exactly>", &[]).1,
            Some(DropReason::Placeholder)
        );
        // Angle brackets a source holds, and comparisons, are answers.
        assert_eq!(run("Vec<u8>", &["fn f() -> Vec<u8>"]), (Some(0), None));
        assert_eq!(run("3 < 4 and 5 > 2", &[]), (Some(0), None));
        assert_eq!(run("51", &[]), (Some(0), None));
    }
}
