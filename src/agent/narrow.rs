//! Step-by-step narrowing of the output constraint: which argument values the next action may
//! use, given the task and the steps so far. Only the constraint changes; the prompt (and so the
//! reused KV prefix) stays the same.
//!
//! A 0.5B planner decoding greedily repeats its first action word for word, reads a file next to
//! the one the task names, and sizes the model on `this` machine when the task names a GPU.
//! Nine rules, each over enum-typed arguments or the set of tools offered, none keyed to the
//! question's wording (rules 7, 9, 10 and 13, which were, went in issue 39, and rule 5 reads digits now, not words; ARCHITECTURE.md
//! says what replaced them):
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
//! 5. **Arithmetic done.** Once successful calculator calls have used every number the task
//!    states (at least two; zeros and ones aside), only the final answer is offered: a small
//!    model otherwise feeds the result back into the same product until the step limit.
//! 6. **A model tool needs a named model.** A tool whose required `model` argument is an enum
//!    (`size_model`) is offered only when the task names one of the models (as people write
//!    them: "Llama-3-70B" names llama-3.1-70b) or the tool can read a config file instead.
//! 8. **A named identifier is searched for everywhere.** When the task names no path but an
//!    identifier (`DEFAULT_REGION`, `MaxBatchSize`; not a value a tool takes, like `Q4_K_M`),
//!    the search is the only tool offered until one has run, and `search_text`'s path is the
//!    whole workspace until a search has found something: the model searched file after file
//!    for a constant one search of `.` finds, or read one unrelated file and gave up.
//!
//! 11. **A named model is sized first.** A task that names a model the sizing tool knows
//!     offers only `size_model` until it has answered for each named preset, then only the
//!     answer (and the calculator, when more than one model-preset pair was sized).
//! 12. **Named hardware is described first.** A question that names hardware presets and no
//!     model offers only `hardware` until each named preset is described (rule 3 drops each).
//!
//! And `read_blob`'s id is an enum of the blobs the run holds.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::tools::choices::{constrain_paths, paths_in_task, relative_in_task, trim_rel};
use super::tools::compute::COMPUTE;
use super::tools::files::{FILE_READERS, NO_MATCHES};
use super::tools::table::TABLE;
use super::tools::{Toolset, WithSchema, FINAL_ANSWER};
use super::types::{Action, ObservationKind, Step};
use super::words::numbers_in;

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

fn same_path(a: &str, b: &str) -> bool {
    trim_rel(a) == trim_rel(b)
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
    tools.clone()
}

/// Rule 5: every number the task states (at least two; zeros and ones aside) appears in a
/// successful calculator or compute expression. Digits only: no word of the task is read.
pub fn arithmetic_done(task: &str, steps: &[Step]) -> bool {
    let mut wanted: Vec<f64> = numbers_in(task)
        .into_iter()
        .map(f64::abs)
        .filter(|v| *v != 0.0 && *v != 1.0)
        .collect();
    wanted.sort_by(f64::total_cmp);
    wanted.dedup();
    if wanted.len() < 2 {
        return false;
    }
    let used: Vec<f64> = calls(steps)
        .filter(|(name, _, ok)| (*name == "calculator" || *name == COMPUTE) && *ok)
        .flat_map(|(_, args, _)| {
            args.as_object()
                .into_iter()
                .flat_map(|m| m.values())
                .filter_map(Value::as_str)
                .flat_map(numbers_in)
                .collect::<Vec<f64>>()
        })
        .map(f64::abs)
        .collect();
    wanted
        .iter()
        .all(|w| used.iter().any(|u| (u - w).abs() <= 1e-9 * w.max(1.0)))
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

/// The files and folders `task` names (rule 2's paths).
pub fn named_paths(task: &str) -> Vec<String> {
    let (files, dirs) = paths_in_task(task);
    files.into_iter().chain(dirs).collect()
}

/// [`named_paths`], and the files without an extension the task names by a path with a folder
/// ("network/hosts", "deploy/Dockerfile") that are files in the workspace at `root`: the
/// text alone cannot tell them from folders, and the model answered from the first file
/// without reading the second.
pub fn named_paths_in(task: &str, root: Option<&Path>) -> Vec<String> {
    use std::sync::OnceLock;
    static BARE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let mut named = named_paths(task);
    let (Some(root), Some(re)) = (
        root,
        BARE.get_or_init(|| regex::Regex::new(r"(?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_-]+").ok())
            .as_ref(),
    ) else {
        return named;
    };
    for m in re.find_iter(task) {
        let rest = &task[m.end()..];
        let continues = rest.starts_with('/')
            || (rest.starts_with('.') && rest[1..].starts_with(char::is_alphanumeric));
        if task[..m.start()].ends_with(['/', '.', '@']) || continues {
            continue;
        }
        let Some(p) = relative_in_task(m.as_str()) else {
            continue;
        };
        if root.join(p).is_file() && !named.iter().any(|n| same_path(n, p)) {
            named.push(p.to_string());
        }
    }
    named
}

/// `allowed` with its enum arguments narrowed by the rules above for the next step. `task` is
/// the user's task (not the overview under it); `named_paths` the files and folders it names.
pub fn narrow(allowed: &Toolset, task: &str, named_paths: &[String], steps: &[Step]) -> Toolset {
    if arithmetic_done(task, steps) {
        let mut only = Toolset::new();
        if let Some(t) = allowed.get(FINAL_ANSWER) {
            only.add(t.clone());
        }
        return only;
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

/// Whether `task` names an identifier (`DEFAULT_REGION`, `MaxBatchSize`) that is not a value a
/// tool takes (`Q4_K_M` is a quant, not something to search files for).
fn names_identifier(allowed: &Toolset, task: &str) -> bool {
    let values: Vec<String> = allowed
        .iter()
        .flat_map(|t| {
            let schema = t.args_schema();
            schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| props.values().filter_map(enum_values).flatten().collect())
                .unwrap_or_else(Vec::new)
        })
        .map(|v| squash(&v))
        .collect();
    task.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| (w.contains('_') && w.chars().any(char::is_alphabetic)) || camel_case(w))
        .any(|w| !values.contains(&squash(w)))
}

/// Rules 11 and 12 over the narrowed set `out`:
///
/// 11. **A named model is sized first.** When the task names a model the sizing tool knows and
///     asks about its memory, fit or speed, `size_model` is the only tool offered until it has
///     answered for each named model on each named preset: a 0.5B decider copied the
///     calculator example's thought and divided the context length by 1024 seventeen times
///     instead. Then only the answer is offered (and the calculator, when the question
///     compares or sizes more than one pair): the model sized the same model again and
///     described the GPU until the guard stopped the run.
/// 12. **Named hardware is described first.** When the task names hardware presets and no
///     model, `hardware` is the only tool offered while a named preset is undescribed (rule 3
///     drops each one described): a comparison of two presets was answered from one.
fn sizing_first(allowed: &Toolset, out: &Toolset, task: &str, steps: &[Step]) -> Option<Toolset> {
    let named_in = |tool: &str, prop: &str| -> Vec<String> {
        allowed
            .get(tool)
            .and_then(|t| enum_values(&t.args_schema()["properties"][prop]))
            .map(|v| named_values(task, &v))
            .unwrap_or_default()
    };
    let models = named_in("size_model", "model");
    if !models.is_empty() {
        // Each named model on each named preset (on any, when the task names none).
        let presets = named_presets(task);
        let sized: Vec<(String, Option<String>)> = calls(steps)
            .filter(|(name, _, ok)| *name == "size_model" && *ok)
            .filter_map(|(_, args, _)| {
                let model = args.get("model")?.as_str()?.to_string();
                let hw = args.get("hw").and_then(Value::as_str).map(str::to_string);
                Some((model, hw))
            })
            .collect();
        let not_sized: Vec<(&String, Option<&String>)> = models
            .iter()
            .flat_map(|m| {
                let hws: Vec<Option<&String>> = if presets.is_empty() {
                    vec![None]
                } else {
                    presets.iter().map(Some).collect()
                };
                hws.into_iter().map(move |h| (m, h))
            })
            .filter(|(m, h)| {
                !sized
                    .iter()
                    .any(|(sm, sh)| sm == *m && h.is_none_or(|h| sh.as_ref() == Some(h)))
            })
            .collect();
        if !not_sized.is_empty() {
            let sizer = out.get("size_model")?;
            // The models not sized everywhere yet; for one model, the presets left.
            let mut left_models: Vec<&String> = not_sized.iter().map(|(m, _)| *m).collect();
            left_models.dedup();
            let left_presets: Vec<&String> = not_sized.iter().filter_map(|(_, h)| *h).collect();
            let mut schema = sizer.args_schema();
            let mut narrowed = false;
            if left_models.len() < models.len() {
                schema["properties"]["model"] = serde_json::json!({ "enum": left_models });
                narrowed = true;
            }
            if models.len() == 1 && !left_presets.is_empty() && left_presets.len() < presets.len() {
                schema["properties"]["hw"] = serde_json::json!({ "enum": left_presets });
                narrowed = true;
            }
            return Some(only(if narrowed {
                Arc::new(WithSchema::new(sizer.clone(), schema))
            } else {
                sizer.clone()
            }));
        }
        // Everything asked is sized: the answer, or a calculation first when the question
        // compares figures (the model sized the same model again, then described the GPU,
        // until the guard stopped it).
        let pairs = models.len() * presets.len().max(1);
        let mut answer = Toolset::new();
        for name in [FINAL_ANSWER, "calculator"] {
            if name == "calculator" && pairs < 2 {
                continue;
            }
            if let Some(t) = out.get(name) {
                answer.add(t.clone());
            }
        }
        return (!answer.is_empty()).then_some(answer);
    }
    let presets = named_presets(task);
    let hw = out.get("hardware")?;
    let left = enum_values(&hw.args_schema()["properties"]["preset"]).unwrap_or_default();
    if presets.is_empty() || !left.iter().any(|p| presets.contains(p)) {
        return None;
    }
    Some(only(hw.clone()))
}

/// The hardware presets the task names (`this` is not a preset: it names nothing by itself).
fn named_presets(task: &str) -> Vec<String> {
    crate::sizing::Hardware::presets()
        .map(|all| named_in_presets(task, &all))
        .unwrap_or_default()
}

fn named_in_presets(task: &str, presets: &[crate::sizing::Hardware]) -> Vec<String> {
    let names: Vec<String> = presets.iter().map(|h| h.name.clone()).collect();
    named_values(task, &names)
}

/// The hardware the task names, as the values of `size_model`'s `hw` and `hardware`'s
/// `preset`: the presets it names, or, naming none, the device its memory size describes ("24 GB GPU", "8 GB RAM"), unless the
/// task is about this machine. Read by tokens ([`crate::sizing::described::read`]), so the
/// model copies a value instead of choosing `this` for a question about other hardware.
fn hardware_in_task(task: &str) -> Vec<String> {
    let Ok(all) = crate::sizing::Hardware::presets() else {
        return Vec::new();
    };
    let named = named_in_presets(task, &all);
    let r = crate::sizing::described::read(task, &all);
    let Some(gib) = r.memory_gib.filter(|g| g.is_finite() && *g > 0.0) else {
        return named;
    };
    let size = if gib.fract() == 0.0 {
        format!("{gib:.0} GB")
    } else {
        format!("{gib:.1} GB")
    };
    match named.as_slice() {
        [] if !super::tools::sizing::asks_about_this_machine(task) => {
            let class = match r.class {
                crate::sizing::described::DeviceClass::Gpu => "GPU",
                crate::sizing::described::DeviceClass::Apple => "Mac",
                crate::sizing::described::DeviceClass::Cpu => "RAM",
            };
            vec![format!("{size} {class}")]
        }
        _ => named,
    }
}

/// A tool set of `tool` alone.
fn only(tool: Arc<dyn super::tools::Tool>) -> Toolset {
    let mut set = Toolset::new();
    set.add(tool);
    set
}

/// Whether `w` is written in camel case (`MaxBatchSize`, `parseHeader`): three or more
/// capitals that start a lower-case run, or a lower-case start and one such capital in seven or
/// more letters. Product names with two humps ("TypeScript", "GitHub") are not.
fn camel_case(w: &str) -> bool {
    let c: Vec<char> = w.chars().collect();
    if !c.iter().all(|x| x.is_ascii_alphanumeric()) {
        return false;
    }
    let humps = c
        .windows(2)
        .filter(|p| p[0].is_ascii_uppercase() && p[1].is_ascii_lowercase())
        .count();
    humps >= 3 || (c.first().is_some_and(char::is_ascii_lowercase) && humps >= 1 && c.len() >= 7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::types::{Observation, StepTimings};
    use crate::lm::Usage;
    use serde_json::json;

    fn done(index: usize, tool: &str, args: Value, kind: ObservationKind) -> Step {
        Step {
            index,
            thought: String::new(),
            action: Some(Action::tool(tool, args)),
            raw: String::new(),
            observation: Observation::new(kind, "x".to_string()),
            fingerprint: None,
            timings: StepTimings::default(),
            usage: Usage::default(),
        }
    }

    fn enum_of(tools: &Toolset, tool: &str, prop: &str) -> Vec<String> {
        enum_values(&tools.get(tool).expect("tool").args_schema()["properties"][prop])
            .expect("an enum")
    }

    #[test]
    fn values_the_task_names_narrow_the_enum_and_spent_ones_drop_out() {
        let tools = Toolset::builtin(None);
        let task = "How many times more bandwidth does the H200 have than the RTX 4090?";
        let n = narrow(&tools, task, &[], &[]);
        let mut presets = enum_of(&n, "hardware", "preset");
        presets.sort();
        assert_eq!(presets, vec!["h200", "rtx-4090"]);
        let steps = vec![done(
            1,
            "hardware",
            json!({"preset": "h200"}),
            ObservationKind::Output,
        )];
        let n = narrow(&tools, task, &[], &steps);
        assert_eq!(enum_of(&n, "hardware", "preset"), vec!["rtx-4090"]);
        let steps = vec![
            steps[0].clone(),
            done(
                2,
                "hardware",
                json!({"preset": "rtx-4090"}),
                ObservationKind::Output,
            ),
        ];
        let n = narrow(&tools, task, &[], &steps);
        assert!(n.get("hardware").is_none(), "nothing left to describe");
        assert!(n.get("calculator").is_some());
        // Rule 6: the task names no model, so size_model is not offered.
        assert!(n.get("size_model").is_none());
        // size_model has several required arguments: rule 3 does not apply to it. A model
        // written as people write it ("Llama-3-70B") names the catalog's llama-3.1-70b.
        let task = "How fast would Llama-3-70B decode on the H200 and on the RTX 4090?";
        let n = narrow(&tools, task, &[], &steps);
        let mut hw = enum_of(&n, "size_model", "hw");
        hw.sort();
        assert_eq!(hw, vec!["h200", "rtx-4090"]);
        assert_eq!(enum_of(&n, "size_model", "model"), vec!["llama-3.1-70b"]);
        // A named value of an optional argument makes it required.
        let tools = Toolset::builtin(None).with(crate::agent::tools::SizeModel::extended());
        let n = narrow(
            &tools,
            "Does mistral-7b at Q8_0 fit on an m1-pro?",
            &[],
            &[],
        );
        let schema = n.get("size_model").expect("size_model").args_schema();
        assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q8_0"]);
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(required.contains(&"quant"), "{required:?}");
        // Rule 4: a modifier the task does not name is not offered.
        let n = narrow(&tools, "Does mistral-7b fit on an m1-pro?", &[], &[]);
        let schema = n.get("size_model").expect("size_model").args_schema();
        assert!(schema["properties"].get("quant").is_none(), "{schema}");
        assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
        assert!(schema["properties"].get("hw").is_some(), "{schema}");
        // A short value is named by a word of its own, not by letters across two words: "of
        // 32,768" does not name the f32 KV type; "Q8_0" and "h200" still name themselves.
        let n = narrow(
            &tools,
            "How many GB does qwen2.5-7b at Q4_K_M need with a context of 32,768 tokens on an h200?",
            &[],
            &[],
        );
        let schema = n.get("size_model").expect("size_model").args_schema();
        assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
        assert_eq!(enum_of(&n, "size_model", "hw"), vec!["h200"]);
        assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q4_K_M"]);
        let n = narrow(
            &tools,
            "Does mistral-7b fit on an m1-pro with an f16 KV cache?",
            &[],
            &[],
        );
        assert_eq!(enum_of(&n, "size_model", "kv_type"), vec!["f16"]);
        // "Q8_0" alone is the weights' quantization, not the cache's type.
        let n = narrow(
            &tools,
            "Will mistral-7b quantized to Q8_0 run on the m1-pro?",
            &[],
            &[],
        );
        let schema = n.get("size_model").expect("size_model").args_schema();
        assert!(schema["properties"].get("kv_type").is_none(), "{schema}");
        assert_eq!(enum_of(&n, "size_model", "quant"), vec!["Q8_0"]);
        let n = narrow(
            &tools,
            "mistral-7b at Q8_0 with a q8_0 KV cache on the m1-pro?",
            &[],
            &[],
        );
        assert_eq!(enum_of(&n, "size_model", "kv_type"), vec!["q8_0"]);
    }

    #[test]
    fn a_file_without_an_extension_is_named_when_the_workspace_has_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("network")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("fleet/racks")).expect("mkdir");
        std::fs::write(dir.path().join("network/hosts"), "10.0.0.1 web-1\n").expect("write");
        std::fs::write(dir.path().join("fleet/hosts.json"), "[]").expect("write");
        let task = "Which host in fleet/hosts.json has the fullest disk? Give its IP address from network/hosts.";
        assert_eq!(named_paths(task), vec!["fleet/hosts.json"]);
        assert_eq!(
            named_paths_in(task, Some(dir.path())),
            vec!["fleet/hosts.json", "network/hosts"]
        );
        // A folder, or a path that is not there, is not a file the task names.
        let task = "Count the files in fleet/racks and read network/routes.";
        assert!(named_paths_in(task, Some(dir.path())).is_empty());
        assert_eq!(named_paths_in(task, None), named_paths(task));
    }

    #[test]
    fn a_stated_context_is_the_only_ctx_and_none_stated_leaves_the_default() {
        let tools = Toolset::builtin(None);
        let ctx_of = |task: &str| {
            let n = narrow(&tools, task, &[], &[]);
            n.get("size_model").expect("size_model").args_schema()
        };
        let schema = ctx_of("With a 4k context, how fast would mistral-7b decode on an rtx-3090?");
        assert_eq!(schema["properties"][CTX]["enum"], json!([4096]), "{schema}");
        assert!(
            schema["required"]
                .as_array()
                .expect("required")
                .contains(&json!(CTX)),
            "{schema}"
        );
        let schema = ctx_of("Can llama-3.1-70b run with 65,536 tokens of context on an h100-sxm?");
        assert_eq!(
            schema["properties"][CTX]["enum"],
            json!([65536]),
            "{schema}"
        );
        // No context stated: the tool's default, not a number the model makes up.
        let schema = ctx_of("What is the largest context llama-3.1-8b can use on an rtx-4090?");
        assert!(schema["properties"].get(CTX).is_none(), "{schema}");
    }

    #[test]
    fn a_named_model_is_sized_first_and_named_hardware_described_first() {
        let tools = Toolset::builtin(None);
        let names = |t: &Toolset| t.iter().map(|t| t.name().to_string()).collect::<Vec<_>>();
        // Rule 11: only size_model until it has answered, then the rest comes back.
        let task = "Roughly how many tokens per second would llama-3.1-8b at Q4_K_M decode on an rtx-3090 with an 8192-token context?";
        assert_eq!(names(&narrow(&tools, task, &[], &[])), vec!["size_model"]);
        let sized = vec![done(
            1,
            "size_model",
            json!({"model": "llama-3.1-8b", "hw": "rtx-3090"}),
            ObservationKind::Output,
        )];
        // Sized: only the answer (the model sized it again and described the GPU instead).
        let after = narrow(&tools, task, &[], &sized);
        assert_eq!(names(&after), vec![FINAL_ANSWER]);
        // Two presets: each is sized, the other one next, then the answer and the calculator.
        let two = "How fast would llama-3.1-8b decode on an rtx-3090 and on an h200?";
        assert_eq!(
            enum_of(&narrow(&tools, two, &[], &sized), "size_model", "hw"),
            vec!["h200"]
        );
        let both = vec![
            sized[0].clone(),
            done(
                2,
                "size_model",
                json!({"model": "llama-3.1-8b", "hw": "h200"}),
                ObservationKind::Output,
            ),
        ];
        let after = narrow(&tools, two, &[], &both);
        assert!(after.get("calculator").is_some() && after.get(FINAL_ANSWER).is_some());
        assert!(after.get("size_model").is_none());
        // Two models: the one not sized yet.
        let pair = "Which decodes faster on an rtx-3090, llama-3.1-8b or qwen2.5-7b?";
        assert_eq!(
            enum_of(&narrow(&tools, pair, &[], &sized), "size_model", "model"),
            vec!["qwen2.5-7b"]
        );
        // A failed call has not answered.
        let failed = vec![done(
            1,
            "size_model",
            json!({"model": "llama-3.1-8b", "hw": "rtx-3090"}),
            ObservationKind::ToolError {
                kind: crate::agent::tools::ToolErrorKind::InvalidArgs,
            },
        )];
        assert_eq!(
            names(&narrow(&tools, task, &[], &failed)),
            vec!["size_model"]
        );
        // Rule 12: a comparison of two presets describes both before anything else.
        let task = "Which has more memory bandwidth, the H200 or the M2 Ultra?";
        let n = narrow(&tools, task, &[], &[]);
        assert_eq!(names(&n), vec!["hardware"]);
        let one = vec![done(
            1,
            "hardware",
            json!({"preset": "h200"}),
            ObservationKind::Output,
        )];
        let n = narrow(&tools, task, &[], &one);
        assert_eq!(names(&n), vec!["hardware"]);
        assert_eq!(enum_of(&n, "hardware", "preset"), vec!["m2-ultra"]);
        let both = vec![
            one[0].clone(),
            done(
                2,
                "hardware",
                json!({"preset": "m2-ultra"}),
                ObservationKind::Output,
            ),
        ];
        assert!(narrow(&tools, task, &[], &both).get(FINAL_ANSWER).is_some());
        // "this" alone names no hardware; a task naming neither leaves the set alone.
        let n = narrow(&tools, "What is 17 * 23 on this calculator?", &[], &[]);
        assert!(n.get("calculator").is_some() && n.get("hardware").is_some());
    }

    #[test]
    fn once_every_number_is_used_only_the_answer_is_offered() {
        let tools = Toolset::builtin(None);
        let task = "A depot ships 1,284 crates a day, 6 days a week. How many in 13 weeks?";
        let calc = |e: &str| {
            done(
                1,
                "calculator",
                serde_json::json!({ "expression": e }),
                ObservationKind::Output,
            )
        };
        assert!(!arithmetic_done(task, &[]));
        assert!(!arithmetic_done(task, &[calc("1284 * 6")]));
        assert!(arithmetic_done(
            task,
            &[calc("1284 * 6"), calc("7704 * 13")]
        ));
        let n = narrow(&tools, task, &[], &[calc("1284*6*13")]);
        assert_eq!(n.names(), vec![FINAL_ANSWER]);
        // One number is not arithmetic to finish.
        assert!(!arithmetic_done("What is sqrt(144)?", &[calc("sqrt(144)")]));
    }

    #[test]
    fn blob_ids_are_the_blobs_the_run_holds() {
        let tools = Toolset::builtin(None);
        assert!(narrow(&tools, "t", &[], &[]).get("read_blob").is_none());
        let mut s = done(
            1,
            "read_file",
            json!({"path": "a.log"}),
            ObservationKind::Output,
        );
        s.observation.blob = Some("ab".repeat(32));
        let n = narrow(&tools, "t", &[], &[s]);
        assert_eq!(enum_of(&n, "read_blob", "blob"), vec!["ab".repeat(32)]);
    }

    #[test]
    fn hardware_named_by_its_memory_is_the_only_hw_value_and_this_machine_stays_free() {
        let tools = Toolset::builtin(None);
        let n = narrow(
            &tools,
            "Is 20 GB of VRAM enough for llama-3.1-70b?",
            &[],
            &[],
        );
        assert_eq!(enum_of(&n, "size_model", "hw"), vec!["20 GB GPU"]);
        let n = narrow(&tools, "Would llama-3.1-8b run in 6 GB RAM?", &[], &[]);
        assert_eq!(enum_of(&n, "size_model", "hw"), vec!["6 GB RAM"]);
        // About this machine: hw stays free text (the model may pass "this").
        let n = narrow(
            &tools,
            "Does a 2 GB llama-3.2-1b fit on this machine?",
            &[],
            &[],
        );
        let schema = n.get("size_model").expect("size_model").args_schema();
        assert_eq!(schema["properties"]["hw"]["type"], "string", "{schema}");
    }

    #[test]
    fn a_task_that_names_no_value_leaves_the_enum_whole() {
        let tools = Toolset::builtin(None);
        let n = narrow(&tools, "What is 2 + 2?", &[], &[]);
        let schema = |t: &Toolset| t.get("hardware").expect("hardware").args_schema();
        assert_eq!(schema(&n), schema(&tools));
    }

    #[test]
    fn an_identifier_without_a_path_is_searched_for_everywhere_until_found() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("src")).expect("mkdir");
        std::fs::write(dir.path().join("src/app.py"), "x = 1").expect("write");
        std::fs::write(dir.path().join("src/defaults.py"), "DEFAULT_REGION = 'eu'").expect("write");
        let task = "Some file in this workspace defines DEFAULT_REGION. What is its value?";
        let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
        let n = narrow(&tools, task, &[], &[]);
        assert_eq!(enum_of(&n, "search_text", "path"), vec!["."]);
        // Before any search, the search is the only look offered.
        let names: Vec<&str> = n.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["search_text"]);
        // A quant is a value a tool takes, not an identifier to search for.
        let quant = "How much memory does qwen2.5-7b at Q4_K_M need?";
        assert!(!names_identifier(&tools, quant));
        // Found: every path is open again.
        let steps = vec![done(
            1,
            "search_text",
            json!({"query": "DEFAULT_REGION", "path": "."}),
            ObservationKind::Output,
        )];
        let n = narrow(&tools, task, &[], &steps);
        assert!(enum_of(&n, "search_text", "path").len() > 1);
        // No identifier: no narrowing.
        let n = narrow(&tools, "Which file sets the region?", &[], &[]);
        assert!(enum_of(&n, "search_text", "path").len() > 1);
    }

    #[test]
    fn named_paths_come_first_then_a_read_file_is_not_read_again() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("config.toml"), "a = 1").expect("write");
        std::fs::write(dir.path().join("notes.txt"), "b").expect("write");
        let task = "What API key is stored in secrets.toml?";
        let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
        let named = vec!["secrets.toml".to_string()];
        let n = narrow(&tools, task, &named, &[]);
        assert_eq!(enum_of(&n, "read_file", "path"), vec!["secrets.toml"]);
        assert!(n.get("list_dir").is_none(), "no folder is named");
        assert!(
            n.get(FINAL_ANSWER).is_none(),
            "no answer before the named file is read"
        );
        assert!(
            n.get("calculator").is_none(),
            "no calculation before the named file is read"
        );
        let missing = ObservationKind::ToolError {
            kind: crate::agent::tools::ToolErrorKind::NotFound,
        };
        let steps = vec![done(
            1,
            "read_file",
            json!({"path": "secrets.toml"}),
            missing,
        )];
        let n = narrow(&tools, task, &named, &steps);
        assert_eq!(
            enum_of(&n, "read_file", "path"),
            vec!["config.toml", "notes.txt", "secrets.toml"],
            "touched: every path is open again, and a failed read may be retried"
        );
        assert!(
            n.get(FINAL_ANSWER).is_some(),
            "touched: the answer is offered"
        );
        let steps = vec![done(
            1,
            "read_file",
            json!({"path": "config.toml"}),
            ObservationKind::Output,
        )];
        let n = narrow(
            &tools,
            "What is in config.toml?",
            &["config.toml".into()],
            &steps,
        );
        assert_eq!(
            enum_of(&n, "read_file", "path"),
            vec!["notes.txt", "secrets.toml"]
        );
    }
}
