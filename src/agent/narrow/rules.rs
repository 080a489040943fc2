//! Rules 8, 11, 12, 14, 15 and 16 of the narrowing (see the parent module): the record files a
//! `table` call has not answered (14) and whether one has (16), whether a task names an
//! identifier (8), sizing or hardware first when a task names a model or a preset (11, 12), and
//! refused values (15).

use super::*;
use crate::agent::types::ToolErrorKind;

/// Rule 14: only `table`, on the record files the task names that no table call has answered
/// yet, when there are any and `table` is offered.
pub(super) fn record_files_unasked(
    out: &Toolset,
    named_paths: &[String],
    steps: &[Step],
) -> Option<Toolset> {
    let table = out.get(TABLE)?.clone();
    let is_records = |p: &str| match crate::agent::tools::table::read::kind_of(p) {
        Some("csv" | "tsv" | "jsonl") => true,
        Some(kind @ ("json" | "yaml")) => read_as_list(steps, p, kind),
        _ => false,
    };
    let asked: Vec<String> = calls(steps)
        .filter(|(name, _, ok)| *name == TABLE && *ok)
        .filter_map(|(_, args, _)| path_of(args))
        .collect();
    if !asked.is_empty() {
        return None;
    }
    let mut schema = table.args_schema();
    let values = enum_values(&schema["properties"]["path"]).unwrap_or_default();
    let files: Vec<String> = values
        .into_iter()
        .filter(|v| is_records(v) && named_paths.iter().any(|p| same_path(v, p)))
        .collect();
    if files.is_empty() {
        return None;
    }
    schema["properties"]["path"] = serde_json::json!({ "enum": files });
    Some(only(Arc::new(WithSchema::new(table, schema))))
}

/// Whether a `read_file` of `path` showed a list at the top of the document: a JSON file whose
/// first line opens an array, a YAML file whose first item is a list entry. Such a file holds
/// records as a CSV does (a config object is read for its keys instead).
fn read_as_list(steps: &[Step], path: &str, kind: &str) -> bool {
    steps.iter().any(|s| {
        let read = matches!(&s.action, Some(Action::ToolCall { name, args })
            if name == "read_file" && path_of(args).is_some_and(|a| same_path(&a, path)));
        read && s.observation.kind == ObservationKind::Output
            && s.observation
                .text
                .lines()
                .filter_map(crate::agent::outputs::content)
                .map(str::trim)
                .find(|c| !c.is_empty() && !c.starts_with('#') && c != &"---")
                .is_some_and(|c| match kind {
                    "json" => c.starts_with('['),
                    _ => c.starts_with("- "),
                })
    })
}

/// Rule 16: whether a `table` call has answered: it succeeded and some record matched.
pub(super) fn table_answered(steps: &[Step]) -> bool {
    steps
        .iter()
        .any(|s| crate::agent::outputs::table_answer_path(s).is_some())
}

/// Whether `task` names an identifier (`DEFAULT_REGION`, `MaxBatchSize`) that is not a value a
/// tool takes (`Q4_K_M` is a quant, not something to search files for).
pub(super) fn names_identifier(allowed: &Toolset, task: &str) -> bool {
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
        .filter(|w| {
            (w.contains('_') && w.chars().any(char::is_alphabetic))
                || crate::agent::outputs::camel_case(w)
        })
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
pub(super) fn sizing_first(
    allowed: &Toolset,
    out: &Toolset,
    task: &str,
    steps: &[Step],
) -> Option<Toolset> {
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
            if name == "calculator" && pairs <= 1 {
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
pub(super) fn named_presets(task: &str) -> Vec<String> {
    crate::sizing::Hardware::presets()
        .map(|all| named_in_presets(task, &all))
        .unwrap_or_default()
}

pub(super) fn named_in_presets(task: &str, presets: &[crate::sizing::Hardware]) -> Vec<String> {
    let names: Vec<String> = presets.iter().map(|h| h.name.clone()).collect();
    named_values(task, &names)
}

/// The hardware the task names, as the values of `size_model`'s `hw` and `hardware`'s
/// `preset`: the presets it names, or, naming none, the device its memory size describes ("24 GB GPU", "8 GB RAM"), unless the
/// task is about this machine. Read by tokens ([`crate::sizing::described::read`]), so the
/// model copies a value instead of choosing `this` for a question about other hardware.
pub(super) fn hardware_in_task(task: &str) -> Vec<String> {
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
        [] if !crate::agent::tools::sizing::asks_about_this_machine(task) => {
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
pub(super) fn only(tool: Arc<dyn crate::agent::tools::Tool>) -> Toolset {
    let mut set = Toolset::new();
    set.add(tool);
    set
}

/// Rule 15: the values of `tool`'s argument `prop` that a call refused as invalid arguments
/// with an error naming the value (as a whole word: `status`, not `status_code`).
pub(super) fn refused_values(tool: &str, prop: &str, steps: &[Step]) -> HashSet<String> {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    steps
        .iter()
        .filter(|s| {
            s.observation.kind
                == ObservationKind::ToolError {
                    kind: ToolErrorKind::InvalidArgs,
                }
        })
        .filter_map(|s| match &s.action {
            Some(Action::ToolCall { name, args }) if name == tool => {
                let v = args.get(prop)?.as_str()?;
                let text = crate::agent::outputs::whole_text(s);
                let named = !v.is_empty()
                    && text.match_indices(v).any(|(at, _)| {
                        !word(text[..at].chars().next_back())
                            && !word(text[at + v.len()..].chars().next())
                    });
                named.then(|| v.to_string())
            }
            _ => None,
        })
        .collect()
}
