//! Step-by-step narrowing of the output constraint: which argument values the next action may
//! use, given the task and the steps so far. Only the constraint changes; the prompt (and so the
//! reused KV prefix) stays the same.
//!
//! A 0.5B planner decoding greedily repeats its first action word for word, reads a file next to
//! the one the task names, and sizes the model on `this` machine when the task names a GPU.
//! Twelve rules, each over enum-typed arguments or the set of tools offered, none keyed to the
//! question's wording (rules 7, 9, 10 and 13 were, and are gone: ARCHITECTURE.md, "What replaced
//! the keyword machinery"):
//!
//! 1. **Task-named values.** When the task names some values of an enum argument (the GPU
//!    preset, the model, the quant), the argument is narrowed to those. A context length the
//!    task states ("8k", "65,536 tokens of context", "ctx=2048") is `ctx`'s only value; with
//!    none stated, `ctx` is not offered (the tool's default): the model passed 137,400 for "an
//!    8192-token context" and 4090 for "a 4k context … on an rtx-3090".
//! 2. **Task-named paths first.** While a file or folder the task names has not been touched,
//!    the file tools may only touch such a path (a missing one too: its not-found error is the
//!    answer to a question about it), and neither the final answer nor the calculator is
//!    offered.
//! 3. **No second identical look.** A value of a tool's only required enum argument that
//!    already succeeded (a file read, a folder listed recursively, a preset described) is left
//!    out; a tool with no value left is not offered.
//! 4. **Modifiers only when named.** An optional enum argument of a tool that has required
//!    arguments (`size_model`'s quant and KV type) is offered only when the task names one of
//!    its values: a greedy small model fills every optional argument it is shown.
//! 5. **Arithmetic done.** Once successful calculator calls have used every quantity the
//!    task states (at least one; ones aside), only the final answer is offered: a small model
//!    otherwise feeds the result back into the same product until the step limit (it turned
//!    a right 26.39 m/s into 4e22 by multiplying by 1000 five times).
//! 6. **A model tool needs a named model.** A tool whose required `model` argument is an enum
//!    (`size_model`) is offered only when the task names one of the models (as people write
//!    them: "Llama-3-70B" names llama-3.1-70b) or the tool can read a config file instead.
//! 8. **A named identifier is searched for everywhere.** When the task names no path but an
//!    identifier (`DEFAULT_REGION`, `MaxBatchSize`; not a value a tool takes, like `Q4_K_M`),
//!    the search is the only tool offered until one has run, and `search_text`'s path is the
//!    whole workspace until a search has found something: the model searched file after file
//!    for a constant one search of `.` finds, or read one unrelated file and gave up.
//!
//! 11. **A named model is sized first.** A question that names a model the sizing tool knows
//!     offers only `size_model` until it has answered for each named preset, then only the
//!     answer (and the calculator, for more than one model and preset).
//!
//! 12. **Named hardware is described first.** A question that names hardware presets and no
//!     model offers only `hardware` until each named preset is described (rule 3 drops each).
//!
//! 14. **Records are asked through the table tool.** Once a file of records the task names
//!     (CSV, TSV, JSON lines, or a JSON or YAML file its read showed to be a list) has been
//!     read, only `table` on such files is offered until a table call has answered: the
//!     model read the rows and then searched for a column's name, or answered a total with
//!     one row's figure.
//!
//! 15. **A refused value is not offered again.** When a call failed as invalid arguments and
//!     the error names the value one of its enum arguments had (other than a path: "no value
//!     of status is a number; total needs a numeric field"), that value is left out of the
//!     argument while another is left: the model wrote the same refused `table` call until
//!     the guard stopped the run.
//!
//! 16. **A table answer is the answer.** Once a `table` call has answered (some record
//!     matched) and every file the task names has been looked at, only the final answer is
//!     offered, as after arithmetic (rule 5). The first query on a file is written by a
//!     focused request over its fields (`agent::query`); the planner went on to write its own
//!     from the transcript, dropped one of two conditions, and its figure became the answer.
//!
//! And `read_blob`'s id is an enum of the blobs the run holds; the `hardware` tool is offered
//! only for hardware the task names, or for this machine when the task is about it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::tools::choices::{constrain_paths, same_path, trim_rel};
use super::tools::compute::COMPUTE;
use super::tools::files::{FILE_READERS, NO_MATCHES};
use super::tools::table::TABLE;
use super::tools::{Toolset, WithSchema, FINAL_ANSWER};
use super::types::{Action, ObservationKind, Step};
use super::words::quantities;

mod rules;
use rules::*;

/// The file tools whose `path` is narrowed by rule 2.
const FILE_TOOLS: &[&str] = &["read_file", "list_dir", SEARCH_TEXT, TABLE];

/// The context-length argument rule 1 narrows to the contexts a task states.
const CTX: &str = "ctx";

/// The KV-cache type argument, named only by a task that speaks of the cache.
const KV_TYPE: &str = "kv_type";

/// Whether `task` speaks of the KV cache ("KV", "cache").
fn mentions_kv_cache(task: &str) -> bool {
    super::words::words(task)
        .iter()
        .any(|w| matches!(w.as_str(), "kv" | "cache" | "kvcache"))
}

/// The search tool rule 7 points at a folder.
const SEARCH_TEXT: &str = "search_text";

/// Lower-case letters and digits only: "RTX 4090" and "rtx-4090" both read "rtx4090".
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The values of `choices` the task names (compared without case or punctuation; values of
/// fewer than two letters or digits are never "named").
pub fn named_values(task: &str, choices: &[String]) -> Vec<String> {
    let t = squash(task);
    // A short value ("f32", "Q8_0", "h200") is named only as a word of its own: "a context of
    // 32,768 tokens" squashes to "…contextof32768…", which holds "f32".
    let task_words: Vec<String> = task
        .split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    ',' | ';' | '?' | '!' | '(' | ')' | '"' | '\'' | ':' | '/'
                )
        })
        .map(|w| squash(w.trim_end_matches('.')))
        .filter(|w| !w.is_empty())
        .collect();
    let exact: Vec<String> = choices
        .iter()
        .filter(|c| {
            let s = squash(c);
            match s.chars().count() {
                0 | 1 => false,
                2..=4 => task_words.contains(&s),
                _ => t.contains(&s),
            }
        })
        .cloned()
        .collect();
    if !exact.is_empty() {
        // The most specific value wins: "llama-3.1-8b" names the model, not also its family
        // "llama-3.1".
        let specific: Vec<String> = exact
            .iter()
            .filter(|c| {
                !exact.iter().any(|o| {
                    o.len() > c.len() && o.starts_with(c.as_str()) && o[c.len()..].starts_with('-')
                })
            })
            .cloned()
            .collect();
        return specific;
    }
    // Model names as people write them: "Llama-3-70B" for llama-3.1-70b, "Qwen 2.5 14B" for
    // qwen2.5-14b. A value with a parameter count names itself when the task has a word
    // starting with its family and the same count.
    let task_words = super::words::words(task);
    choices
        .iter()
        .filter(|c| {
            let tokens = super::words::words(c);
            let family: String = tokens
                .first()
                .map(|f| f.chars().take_while(char::is_ascii_alphabetic).collect())
                .unwrap_or_default();
            let size = tokens.iter().find(|w| {
                w.strip_suffix('b')
                    .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            });
            family.len() >= 3
                && size.is_some_and(|size| {
                    task_words.iter().any(|w| w.starts_with(&family))
                        && task_words.iter().any(|w| w == size)
                })
        })
        .cloned()
        .collect()
}

/// The string values of an enum property.
fn enum_values(prop: &Value) -> Option<Vec<String>> {
    prop.get("enum")?
        .as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn path_of(args: &Value) -> Option<String> {
    let p = args.get("path")?.as_str()?;
    let p = trim_rel(p);
    Some(if p.is_empty() { ".".into() } else { p.into() })
}

/// The tool calls of `steps` (name, args, whether the tool returned output).
fn calls(steps: &[Step]) -> impl Iterator<Item = (&str, &Value, bool)> {
    steps.iter().filter_map(|s| match &s.action {
        Some(Action::ToolCall { name, args }) => Some((
            name.as_str(),
            args,
            s.observation.kind == ObservationKind::Output,
        )),
        _ => None,
    })
}

/// The value of `tool`'s only required enum property that rule 3 leaves out after a success,
/// with that property's name.
fn spent_values(tool: &str, prop: &str, steps: &[Step]) -> HashSet<String> {
    calls(steps)
        .filter(|(name, _, ok)| *name == tool && *ok)
        .filter(|(name, args, _)| {
            // A folder listed without `recursive` may still be listed with it.
            *name != "list_dir" || args.get("recursive").and_then(Value::as_bool) == Some(true)
        })
        .filter_map(|(_, args, _)| {
            if prop == "path" {
                path_of(args)
            } else {
                args.get(prop)?.as_str().map(str::to_string)
            }
        })
        .collect()
}

/// The tool set a run starts from, shaped for its workspace: in an empty workspace the file
/// readers can only fail (a small model otherwise lists folders that do not exist instead of
/// computing, measured on the dev split), so they are left out; in a small workspace, with
/// `typed_paths`, path arguments are an enum of the paths there and the files the task names,
/// so the constraint cannot produce a path that does not exist.
pub fn shape(tools: &Toolset, root: Option<&Path>, task: &str, typed_paths: bool) -> Toolset {
    let Some(root) = root else {
        return tools.clone();
    };
    let empty = std::fs::read_dir(root).is_ok_and(|mut d| d.next().is_none());
    if empty {
        return FILE_READERS
            .iter()
            .fold(tools.clone(), |t, name| t.without(name));
    }
    if typed_paths {
        return constrain_paths(tools, root, task);
    }
    super::tools::choices::with_plain_filters(tools)
}

/// Rule 5: every quantity the task states (at least one, ones aside) appears in a successful
/// calculator expression.
pub fn arithmetic_done(task: &str, steps: &[Step]) -> bool {
    let wanted: Vec<f64> = quantities(task, false)
        .into_iter()
        .filter(|v| *v != 1.0)
        .collect();
    if wanted.is_empty() {
        return false;
    }
    let used: Vec<f64> = calls(steps)
        .filter(|(name, _, ok)| *name == "calculator" && *ok)
        .filter_map(|(_, args, _)| {
            args.get("expression")?
                .as_str()
                .map(|e| quantities(e, true))
        })
        .flatten()
        .collect();
    wanted.iter().all(|w| {
        used.iter()
            .any(|u| (u - w).abs() <= 1e-9 * w.abs().max(1.0))
    })
}

/// Only the final answer of `allowed` (rules 5 and 16).
fn answer_only(allowed: &Toolset) -> Toolset {
    let mut only = Toolset::new();
    if let Some(t) = allowed.get(FINAL_ANSWER) {
        only.add(t.clone());
    }
    only
}

/// `narrow` for the next step, or `None` when it would leave nothing but the answer on the
/// first step, or nothing at all (the run then keeps `base`).
pub fn narrow_step(
    base: &Toolset,
    task: &str,
    named_paths: &[String],
    steps: &[Step],
) -> Option<Toolset> {
    let n = narrow(base, task, named_paths, steps);
    let useful = n.iter().any(|t| t.name() != FINAL_ANSWER) || !steps.is_empty() && !n.is_empty();
    useful.then_some(n)
}

/// `allowed` with its enum arguments narrowed by the rules above for the next step. `task` is
/// the user's task (not the overview under it); `named_paths` the files and folders it names.
pub fn narrow(allowed: &Toolset, task: &str, named_paths: &[String], steps: &[Step]) -> Toolset {
    if arithmetic_done(task, steps) {
        return answer_only(allowed);
    }
    // Rule 2: task-named paths not yet touched by any file tool. A search that matched
    // nothing in a file has not shown it: the words asked for may be worded otherwise there.
    let untouched: Vec<&String> = named_paths
        .iter()
        .filter(|p| {
            !steps.iter().any(|s| match &s.action {
                Some(Action::ToolCall { name, args }) => {
                    FILE_TOOLS.contains(&name.as_str())
                        && path_of(args).is_some_and(|a| same_path(&a, p))
                        && !(name == SEARCH_TEXT
                            && s.observation.text.trim_start().starts_with(NO_MATCHES))
                }
                _ => false,
            })
        })
        .collect();
    // Rule 16: a table call that answered, with every named file looked at, leaves the answer.
    if untouched.is_empty() && table_answered(steps) {
        return answer_only(allowed);
    }
    // Rule 8: an identifier the task names, searched for over the whole workspace first.
    let find_everywhere = named_paths.is_empty()
        && names_identifier(allowed, task)
        && !steps.iter().any(|s| {
            matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == SEARCH_TEXT)
                && s.observation.kind == ObservationKind::Output
                && !s.observation.text.trim_start().starts_with(NO_MATCHES)
        });
    // Blob ids are typed by the blobs this run holds (a 64-digit id is where a small model
    // drops a digit); a focused preview's blob is not for paging (the model paged a log's
    // blob instead of searching it).
    let blobs: Vec<String> = steps
        .iter()
        .filter(|s| s.observation.collapsed || !s.observation.focused)
        .filter_map(|s| s.observation.blob.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = Toolset::new();
    for tool in allowed.iter() {
        let mut schema = tool.args_schema();
        if let Some(blob) = schema.pointer_mut("/properties/blob") {
            if blobs.is_empty() {
                continue;
            }
            *blob = serde_json::json!({ "enum": blobs });
            out.add(Arc::new(WithSchema::new(tool.clone(), schema)));
            continue;
        }
        let required: Vec<String> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
            out.add(tool.clone());
            continue;
        };
        // Rule 6: a tool about a model the task does not name (a calculation, a hardware
        // question) is not offered; a small model sized "gemma-3-12b" to answer how long a
        // file copy takes. A config file in the workspace can stand in for the name.
        if required.iter().any(|r| r == "model")
            && !props.contains_key("config")
            && props
                .get("model")
                .and_then(enum_values)
                .is_some_and(|models| named_values(task, &models).is_empty())
        {
            continue;
        }
        let mut changed = false;
        // size_model's hw is free text ("24 GB GPU"); when the task names presets, they are
        // its only values, as for any enum.
        let hw_key = match tool.name() {
            "size_model" => Some("hw"),
            "hardware" => Some("preset"),
            _ => None,
        };
        if let Some(key) = hw_key {
            let named = hardware_in_task(task);
            if let (false, Some(hw)) = (named.is_empty(), props.get_mut(key)) {
                *hw = serde_json::json!({ "enum": named });
                changed = true;
            } else if let (true, "hardware", Some(hw)) =
                (named.is_empty(), tool.name(), props.get_mut(key))
            {
                // No hardware named: the only machine to describe is this one, when the task
                // is about it; otherwise there is none (the model described "qwen2.5", then an
                // H100, then this machine to count the days between two dates).
                if !super::tools::sizing::asks_about_this_machine(task) {
                    continue;
                }
                *hw = serde_json::json!({ "enum": ["this"] });
                changed = true;
            }
        }
        let mut emptied = false;
        let mut newly_required: Vec<String> = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        // Rule 1 for a context length: the contexts the task states are the only values, and
        // stated; with none stated the argument is left to its default (rule 4).
        if let Some(ctx) = props.get_mut(CTX) {
            let contexts = super::words::stated_contexts(task);
            if contexts.is_empty() {
                if !required.iter().any(|r| r == CTX) {
                    dropped.push(CTX.to_string());
                    changed = true;
                }
            } else {
                ctx["enum"] = Value::from(contexts);
                if !required.iter().any(|r| r == CTX) {
                    newly_required.push(CTX.to_string());
                }
                changed = true;
            }
        }
        let enum_required: Vec<&String> = required
            .iter()
            .filter(|r| {
                props
                    .get(r.as_str())
                    .is_some_and(|p| enum_values(p).is_some())
            })
            .collect();
        // The argument rule 3 watches: the only required one, or `list_dir`'s folder.
        let only_required = match enum_required.as_slice() {
            [one] if required.len() == 1 => Some((*one).clone()),
            [] if tool.name() == "list_dir" => Some("path".to_string()),
            _ => None,
        };
        for (key, prop) in props.iter_mut() {
            let Some(values) = enum_values(prop) else {
                continue;
            };
            let mut keep = values.clone();
            if key == "path" {
                if FILE_TOOLS.contains(&tool.name()) && !untouched.is_empty() {
                    keep.retain(|v| untouched.iter().any(|p| same_path(v, p)));
                }

                if tool.name() == SEARCH_TEXT && find_everywhere && keep.iter().any(|v| v == ".") {
                    keep.retain(|v| v == ".");
                }
            } else {
                let mut named = named_values(task, &keep);
                // "Q8_0" names the weights' quantization; it names the KV cache's type only
                // when the task speaks of the cache (the model sized a q8_0 cache for "mistral-7b
                // quantized to Q8_0").
                if key == KV_TYPE && !mentions_kv_cache(task) {
                    named.clear();
                }
                // Rule 4: an optional enum of a tool that has required arguments is a modifier
                // (a quant, a KV type): offered only when the task names one of its values.
                if named.is_empty() && !required.contains(key) && !required.is_empty() {
                    dropped.push(key.clone());
                    changed = true;
                    continue;
                }
                if !named.is_empty() {
                    keep = named;
                    // A value the task names is one the action states: an optional argument
                    // left out would fall back to its default (a small model sized Q4_K_M
                    // when the task asked for Q8_0).
                    if !required.contains(key) {
                        newly_required.push(key.clone());
                        changed = true;
                    }
                }
            }
            // Rule 15: a value the tool refused, naming it, is not offered again while another
            // is left.
            if key != "path" {
                let refused = refused_values(tool.name(), key, steps);
                if keep.iter().any(|v| !refused.contains(v)) {
                    keep.retain(|v| !refused.contains(v));
                }
            }
            if only_required.as_deref() == Some(key.as_str()) {
                let spent = spent_values(tool.name(), key, steps);
                keep.retain(|v| {
                    !spent.iter().any(|s| {
                        if key == "path" {
                            same_path(v, s)
                        } else {
                            v == s
                        }
                    })
                });
            }
            if keep.len() != values.len() {
                changed = true;
                if keep.is_empty() {
                    emptied = true;
                    break;
                }
                prop["enum"] = Value::from(keep);
            }
        }
        if emptied {
            // An argument with no value left: the tool is not offered this step.
            continue;
        }
        for key in &dropped {
            props.remove(key);
        }
        if !newly_required.is_empty() {
            let all: Vec<Value> = required
                .iter()
                .chain(&newly_required)
                .map(|k| Value::from(k.as_str()))
                .collect();
            schema["required"] = Value::from(all);
        }
        if changed {
            out.add(Arc::new(WithSchema::new(tool.clone(), schema)));
        } else {
            out.add(tool.clone());
        }
    }
    // Rule 2, continued: no answer before a file the task names has been looked at (a small
    // model otherwise answers a question about config.toml without reading it).
    // Nor a calculation: its numbers are in the files (a small model "summed the prices"
    // before reading the price list).
    if !untouched.is_empty() && out.iter().any(|t| FILE_TOOLS.contains(&t.name())) {
        out = out
            .without(FINAL_ANSWER)
            .without("calculator")
            .without(COMPUTE);
    }
    // Rule 14: a file of records the task names (CSV, TSV, JSON lines, a JSON or YAML list) is asked
    // through the table tool once it has been read: a small model read the rows and then
    // searched for a column's name, or answered with one row's figure for a total.
    if untouched.is_empty() {
        if let Some(t) = record_files_unasked(&out, named_paths, steps) {
            return t;
        }
    }
    // Rules 11 and 12: the sizing model or a preset the task names is looked at first.
    if untouched.is_empty() {
        if let Some(first) = sizing_first(allowed, &out, task, steps) {
            return first;
        }
    }
    // Rule 8, first step of it: before any search, the search is the only look offered (the
    // model read one unrelated file and answered "not found").
    if find_everywhere && !calls(steps).any(|(name, _, _)| name == SEARCH_TEXT) {
        if let Some(search) = out.get(SEARCH_TEXT) {
            return only(search.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
