//! Records the tools showed (a CSV's rows, a file's `key: value` blocks, a Markdown table): the
//! record with the largest or smallest field, a mean, a multiple, and the records that match
//! the values a task names.

use super::*;

/// A record's `(key, value)` fields.
pub(super) type Fields = Vec<(String, String)>;

/// Words asking for the record with the largest figure, and those asking for the smallest.
pub(super) const LARGEST: &[&str] = &[
    "largest", "highest", "most", "biggest", "maximum", "max", "greatest",
];
pub(super) const SMALLEST: &[&str] = &["smallest", "lowest", "least", "fewest", "minimum", "min"];

/// The scalar fields of some lines of one file: a one-object JSON text's top-level fields, or
/// its `key = value` / `key: value` lines (quotes dropped), in order.
pub(super) fn fields_of(body: &[&str]) -> Vec<(String, String)> {
    let joined = body.join("\n");
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(&joined) {
        return map
            .into_iter()
            .filter_map(|(k, v)| match v {
                serde_json::Value::String(s) => Some((k, s)),
                serde_json::Value::Number(n) => Some((k, n.to_string())),
                _ => None,
            })
            .collect();
    }
    if body.len() > 1 {
        // One JSON object per line (search hits of several lines of a file).
        let per_line: Vec<(String, String)> = body.iter().flat_map(|l| fields_of(&[l])).collect();
        if !per_line.is_empty() {
            return per_line;
        }
    }
    body.iter()
        .filter_map(|l| {
            let (k, v) = l.split_once(['=', ':'])?;
            let k = k.trim().trim_matches('"');
            (!k.is_empty() && !k.contains(' ') && !k.contains('{'))
                .then(|| (k.to_string(), v.trim().trim_matches('"').to_string()))
        })
        .collect()
}

/// The fields of each file the steps read whole (`read_file`) or matched lines of
/// (`search_text`), by path, in reading order.
pub(super) fn records(steps: &[Step]) -> Vec<(String, Vec<(String, String)>)> {
    let mut out: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut add = |path: &str, f: Vec<(String, String)>| {
        if f.is_empty() {
            return;
        }
        match out.iter_mut().find(|(p, _)| p == path) {
            Some((_, have)) => {
                for kv in f {
                    if !have.iter().any(|(k, _)| *k == kv.0) {
                        have.push(kv);
                    }
                }
            }
            None => out.push((path.to_string(), f)),
        }
    };
    for s in steps
        .iter()
        .filter(|s| s.observation.kind == ObservationKind::Output)
    {
        let Some(Action::ToolCall { name, .. }) = &s.action else {
            continue;
        };
        let text = crate::agent::outputs::whole_text(s);
        if name == "read_file" {
            let body: Vec<&str> = text.lines().filter_map(content).collect();
            add(&source(s), fields_of(&body));
        } else if name == "search_text" {
            let mut by_file: Vec<(&str, Vec<&str>)> = Vec::new();
            for (path, line) in text.lines().filter_map(search_hit) {
                match by_file.iter_mut().find(|(p, _)| *p == path) {
                    Some((_, lines)) => lines.push(line),
                    None => by_file.push((path, vec![line])),
                }
            }
            for (path, lines) in by_file {
                add(path, fields_of(&lines));
            }
        }
    }
    out
}

/// The answer to "which team in reports/ has the largest total, and what is it?": of the files
/// read that hold the figure the task names (`total`, `port`), the one with the largest (or
/// smallest) value, named by its first text field and its path. Shown three such files, the
/// 0.5B model answered with the first file's line; picking a maximum is code's work.
pub fn extreme_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |list: &[&str]| w.iter().any(|v| list.contains(&v.as_str()));
    // "Which has more bandwidth: A or B?" picks the larger of two as "the most" does of many.
    let which = w.first().is_some_and(|x| x == "which");
    let more = which && has(&["more", "higher", "faster", "larger", "bigger", "greater"]);
    let less = which && has(&["less", "lower", "slower", "smaller", "fewer"]);
    let largest = has(LARGEST) || more;
    if largest == (has(SMALLEST) || less) {
        return None;
    }
    if more || less {
        return extreme_figure(task, steps, largest, 2);
    }
    let records = records(steps);
    // The figure: a field the task names whose value is a number in two or more files.
    let key = w.iter().find_map(|word| {
        let holding = records
            .iter()
            .filter(|(_, f)| {
                f.iter()
                    .any(|(k, v)| k.eq_ignore_ascii_case(word) && number(v).is_some())
            })
            .count();
        (holding >= 2).then(|| word.clone())
    });
    let Some(key) = key else {
        return extreme_figure(task, steps, largest, 3);
    };
    let mut best: Option<(f64, &str, &String, &Fields)> = None;
    for (path, f) in &records {
        let Some((_, v)) = f.iter().find(|(k, _)| k.eq_ignore_ascii_case(&key)) else {
            continue;
        };
        let Some((x, _)) = number(v) else { continue };
        let better = best.is_none_or(|b| if largest { x > b.0 } else { x < b.0 });
        if better {
            best = Some((x, v.as_str(), path, f));
        }
    }
    let (_, value, path, f) = best?;
    let name = f
        .iter()
        .find(|(k, v)| !k.eq_ignore_ascii_case(&key) && number(v).is_none() && !v.is_empty());
    Some(match name {
        Some((k, n)) => format!("{n} ({k} = {n}; {key} = {value} in {path})"),
        None => format!("{path} ({key} = {value})"),
    })
}

/// The subject (a hardware preset, a model) whose figure under the label the task names is the
/// largest (or smallest) of three or more the tools showed: "which of these presets has the
/// highest matrix throughput?".
pub(super) fn extreme_figure(
    task: &str,
    steps: &[Step],
    largest: bool,
    least: usize,
) -> Option<String> {
    let (label, values) = asked_figures(task, steps, 2)?;
    if values.len() < least {
        return None;
    }
    let best = values.iter().fold(None::<&Figure>, |b, f| match b {
        Some(b) if (largest && b.1 >= f.1) || (!largest && b.1 <= f.1) => Some(b),
        _ => Some(f),
    })?;
    Some(format!(
        "{} ({label}: {:.*}{}, the {} of {} compared)",
        best.0,
        best.3,
        best.1,
        with_unit(&best.2),
        if largest { "largest" } else { "smallest" },
        values.len()
    ))
}

/// The answer to "a workstation holds four GPUs matching the rtx-5060-ti preset; how much GPU
/// memory is that in total?": the one quantity the task states times the one figure a tool
/// showed for the subject the task names. Shown the preset's 16 GiB, the 0.5B model answered
/// 16 GiB.
pub fn multiple_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_for_total(task) || asks_to_compare(task) {
        return None;
    }
    let stated = quantities(task, false);
    let [n] = stated.as_slice() else {
        return None;
    };
    if *n < 2.0 || n.fract() != 0.0 {
        return None;
    }
    // A context length is not a count of cards ("Using ctx=2048, what is the total memory").
    if crate::agent::words::stated_contexts(task).contains(&(*n as u64)) {
        return None;
    }
    // Figures of the sizing tools only: "the two teams in team_a.txt and team_b.txt" counts
    // files, whose figures the totals add.
    let tool_steps: Vec<Step> = steps
        .iter()
        .filter(|s| {
            matches!(&s.action, Some(Action::ToolCall { name, .. })
                if name == "hardware" || name == "size_model")
        })
        .cloned()
        .collect();
    let (label, values) = asked_figures(task, &tool_steps, 1)?;
    let [(subj, v, unit, d)] = values.as_slice() else {
        return None;
    };
    let lower = task.to_lowercase();
    if !lower.contains(&subj.to_lowercase()) {
        return None;
    }
    // "16.00 GiB" of "memory: 17.18 GB (16.00 GiB)" when the task asks in GiB.
    let asked = steps
        .iter()
        .filter(|s| usable(s) && subject(s).as_deref() == Some(subj.as_str()))
        .flat_map(|s| s.observation.text.lines())
        .filter_map(|l| {
            let line = content(l).unwrap_or(l);
            let (l, rest) = line.split_once([':', '='])?;
            (l.trim() == label).then_some(rest)
        })
        .flat_map(amounts)
        .find(|(_, u, _)| words(task).iter().any(|w| w.eq_ignore_ascii_case(u)));
    let (v, unit, d) = asked.unwrap_or((*v, unit.clone(), *d));
    Some(format!(
        "{:.*}{} ({n} × {:.*}{} of {label} for {subj})",
        d,
        n * v,
        with_unit(&unit),
        d,
        v,
        with_unit(&unit)
    ))
}

/// Every "number unit" of a text: "17.18 GB (16.00 GiB)" → (17.18, "GB", 2), (16.0, "GiB", 2).
pub(super) fn amounts(text: &str) -> Vec<(f64, String, usize)> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .collect::<Vec<_>>()
        .windows(2)
        .filter_map(|p| {
            let (v, d) = number(p[0])?;
            let unit = p[1].trim_end_matches(['.', ';']);
            (!unit.is_empty() && unit.chars().all(|c| c.is_alphabetic() || c == '/'))
                .then(|| (v, unit.to_string(), d))
        })
        .collect()
}

/// Whether the task asks for a mean ("mean", "average").
pub fn asks_mean(task: &str) -> bool {
    let w = words(task);
    w.iter().any(|x| x == "average")
        || (w.iter().any(|x| x == "mean") && !crate::agent::words::mean_is_verb(&w))
}

/// Decimals a task asks its answer rounded to: "round to one decimal", "two decimal places",
/// "to the nearest whole number".
pub(super) fn asked_decimals(task: &str) -> Option<usize> {
    let w = words(task);
    if w.windows(2).any(|p| p[0] == "whole" && p[1] == "number")
        || w.windows(2).any(|p| p[0] == "nearest" && p[1] == "integer")
    {
        return Some(0);
    }
    let at = w.iter().position(|x| x == "decimal" || x == "decimals")?;
    let n = w.get(at.checked_sub(1)?)?;
    ["zero", "one", "two", "three", "four"]
        .iter()
        .position(|x| x == n)
        .or_else(|| n.parse().ok())
}

/// The answer to "what is the mean p99 latency across the three runs?": the mean of the figure
/// under the label the task names, over every file (or preset) that showed one. Shown three
/// tables, the 0.5B model answered with the first one's p50.
pub fn mean_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_mean(task) {
        return None;
    }
    let (label, values) = asked_figures(task, steps, 2)?;
    if values.iter().any(|v| v.2 != values[0].2) {
        return None;
    }
    let mean = values.iter().map(|v| v.1).sum::<f64>() / values.len() as f64;
    let d =
        asked_decimals(task).unwrap_or_else(|| values.iter().map(|v| v.3).max().unwrap_or(0) + 1);
    let each: Vec<String> = values
        .iter()
        .map(|(s, v, _, dv)| format!("{s}: {v:.dv$}", dv = *dv))
        .collect();
    Some(format!(
        "{mean:.d$}{} (mean {label} of {} values: {})",
        with_unit(&values[0].2),
        values.len(),
        each.join(", ")
    ))
}

/// Words asking for the record with the largest value of a field, besides [`LARGEST`].
pub(super) const LARGEST_ALSO: &[&str] = &["fullest", "busiest", "heaviest", "longest"];
/// And the smallest.
pub(super) const SMALLEST_ALSO: &[&str] = &["emptiest", "lightest", "shortest"];

/// The answer to "among the hosts in fleet/hosts.json that run ubuntu-22.04, which one has the
/// fullest disk?": of the records of a file read whole (a JSON array of objects, CSV rows)
/// that hold every text value the task names, the one with the largest (or smallest) value of
/// the numeric field whose name shares most words with the task, named by its first text field
/// — with the line of another output that holds that name (its address in `network/hosts`).
pub fn record_extreme_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    let largest = has(LARGEST) || has(LARGEST_ALSO);
    if largest == (has(SMALLEST) || has(SMALLEST_ALSO)) || asks_count(task) {
        return None;
    }
    let keys = keywords(task);
    let lower = format!(" {} ", w.join(" "));
    let named = |v: &str| names_value(&lower, &keys, v);
    for (step, table) in read_tables(steps) {
        if table.len() < 2 {
            continue;
        }
        // The numeric field the task names most words of ("disk" → disk_used_pct).
        let field_score = |k: &str| {
            words(&k.replace(['_', '-'], " "))
                .iter()
                .filter(|x| {
                    keys.iter()
                        .any(|t| t == *x || (stem(t).len() >= 4 && stem(t) == stem(x)))
                })
                .count()
        };
        let mut best_field: Option<(usize, &str)> = None;
        for (k, v) in table.iter().flatten() {
            let n = field_score(k);
            if number(v).is_some() && n > 0 && best_field.is_none_or(|(m, _)| n > m) {
                best_field = Some((n, k));
            }
        }
        let Some((_, field)) = best_field else {
            continue;
        };
        let mut filters: Vec<(&str, &str)> = Vec::new();
        for (k, v) in table.iter().flatten() {
            if number(v).is_none() && named(v) && !filters.contains(&(k.as_str(), v.as_str())) {
                filters.push((k, v));
            }
        }
        let holds = |rec: &Vec<(String, String)>| {
            let fields: Vec<&str> = filters.iter().map(|(k, _)| *k).collect();
            fields.iter().all(|f| {
                rec.iter()
                    .any(|(k, v)| k == f && filters.iter().any(|(fk, fv)| fk == f && fv == v))
            })
        };
        let mut best: Option<(f64, &Vec<(String, String)>)> = None;
        for rec in table.iter().filter(|r| holds(r)) {
            let Some(x) = rec
                .iter()
                .find(|(k, _)| k == field)
                .and_then(|(_, v)| number(v))
            else {
                continue;
            };
            if best.is_none_or(|(b, _)| if largest { x.0 > b } else { x.0 < b }) {
                best = Some((x.0, rec));
            }
        }
        let (_, rec) = best?;
        let (name_key, name) = rec
            .iter()
            .find(|(k, v)| number(v).is_none() && !filters.iter().any(|(fk, _)| fk == k))?;
        let value = rec
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())?;
        let filter_text: Vec<String> = filters.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        let mut out = format!(
            "{name} ({name_key} = {name}; {field} = {value}, the {} of the records in {}{})",
            if largest { "largest" } else { "smallest" },
            source(step),
            if filter_text.is_empty() {
                String::new()
            } else {
                format!(" with {}", filter_text.join(" and "))
            }
        );
        // Where another output names it: its address, its owner.
        let lname = name.to_lowercase();
        let other = steps
            .iter()
            .filter(|s| usable(s) && s.index != step.index)
            .find_map(|s| {
                s.observation.text.lines().find_map(|l| {
                    let line = content(l).unwrap_or(l).trim();
                    let lw = words(line);
                    (lw.len() > words(name).len()
                        && line
                            .to_lowercase()
                            .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
                            .any(|t| t == lname))
                    .then(|| format!("{}: {line}", source(s)))
                })
            });
        if let Some(o) = other {
            out.push_str(&format!("; {o}"));
        }
        return Some(out);
    }
    None
}

/// Words that turn a filter around ("not open", "other than backend"): a count under them is
/// not the count of the records the named values select.
pub(super) const NEGATIONS: &[&str] = &[
    "not",
    "except",
    "excluding",
    "other",
    "without",
    "isn't",
    "aren't",
    "non",
    "unless",
];

/// One file's records: each a list of (field, value) pairs with scalar values as text.
pub(super) type Table = Vec<Vec<(String, String)>>;

/// The records of a whole file's text: the longest array of objects in a JSON document (at any
/// depth), or the rows of a CSV text under its header.
pub(super) fn table_of(text: &str) -> Option<Table> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        fn longest(v: &serde_json::Value) -> Option<&Vec<serde_json::Value>> {
            let (own, children): (Option<&Vec<serde_json::Value>>, Vec<&serde_json::Value>) =
                match v {
                    serde_json::Value::Array(a) => (
                        (!a.is_empty() && a.iter().all(serde_json::Value::is_object)).then_some(a),
                        a.iter().collect(),
                    ),
                    serde_json::Value::Object(m) => (None, m.values().collect()),
                    _ => (None, Vec::new()),
                };
            children
                .into_iter()
                .filter_map(longest)
                .chain(own)
                .max_by_key(|a| a.len())
        }
        let rows = longest(&v)?;
        let scalar = |x: &serde_json::Value| match x {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            serde_json::Value::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        return Some(
            rows.iter()
                .filter_map(serde_json::Value::as_object)
                .map(|m| {
                    m.iter()
                        .filter_map(|(k, v)| Some((k.clone(), scalar(v)?)))
                        .collect()
                })
                .collect(),
        );
    }
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()?
        .split(',')
        .map(|h| h.trim().to_string())
        .collect();
    if header.len() < 2 || header.iter().any(|h| h.is_empty() || h.contains(' ')) {
        return None;
    }
    let rows: Table = lines
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            (cells.len() == header.len()).then(|| {
                header
                    .iter()
                    .zip(cells)
                    .map(|(h, c)| (h.clone(), c.trim_matches('"').to_string()))
                    .collect()
            })
        })
        .collect();
    (rows.len() >= 2).then_some(rows)
}

/// Whether the task (its words joined by spaces, padded with one on each side, and its
/// keywords) names the text value `v`: the value's words — three at most — in order among the
/// task's, one of them a content word ("open", not "a").
pub(super) fn names_value(lower: &str, keys: &[String], v: &str) -> bool {
    let vw = words(v);
    !vw.is_empty()
        && vw.len() <= 3
        && vw.iter().any(|x| keys.contains(x))
        && lower.contains(&format!(" {} ", vw.join(" ")))
}

/// The records of every file the steps read whole ([`table_of`]), with the step that read it.
pub(super) fn read_tables(steps: &[Step]) -> Vec<(&Step, Table)> {
    steps
        .iter()
        .filter(|s| usable(s))
        .filter(|s| matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == "read_file"))
        .filter_map(|s| {
            let body: Vec<&str> = crate::agent::outputs::whole_text(s)
                .lines()
                .filter_map(content)
                .collect();
            Some((s, table_of(&body.join("\n"))?))
        })
        .collect()
}

/// The answer to "how many tickets in tickets.json are open and assigned to the backend
/// team?": the records of a file read whole (a JSON array of objects, CSV rows) whose fields
/// hold every value the task names — values of one field are alternatives, values of two
/// fields must both hold. Shown the file, the 0.5B model counted the lines that say "open";
/// a record has several lines, and "open" alone is not the question.
pub fn matching_records_answer(task: &str, steps: &[Step]) -> Option<String> {
    // "How many GB of its quota …" asks for a quantity, not for a number of records.
    if !asks_count(task) || crate::agent::words::asks_measure(task) {
        return None;
    }
    let w = words(task);
    if w.iter().any(|x| NEGATIONS.contains(&x.as_str())) || !quoted_phrases(task).is_empty() {
        return None;
    }
    // "How many units of …" asks for a quantity column's value, not for a number of records.
    let counted = w
        .windows(2)
        .find(|p| p[0] == "how" && p[1] == "many")
        .and_then(|_| w.iter().skip_while(|x| *x != "many").nth(1));
    if counted.is_some_and(|c| COUNT_COLUMNS.contains(&c.as_str())) {
        return None;
    }
    let lower = format!(" {} ", w.join(" "));
    let keys = keywords(task);
    // A value the task names: the value's words, in order, among the task's words, one of
    // them a content word ("open", not "a").
    let named = |v: &str| names_value(&lower, &keys, v);
    for (step, table) in read_tables(steps) {
        // field → the values the task names, over all records; only text values (a number
        // in the task is a quantity, not a filter).
        let mut filters: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for rec in &table {
            for (k, v) in rec {
                if number(v).is_none() && named(v) {
                    let vals = filters.entry(k).or_default();
                    if !vals.contains(&v.as_str()) {
                        vals.push(v);
                    }
                }
            }
        }
        // A numeric field the counted noun names ("how many seats": a `seats` column) holds
        // the answer, not the number of records.
        let names_numeric_field = counted.is_some_and(|c| {
            table.iter().flatten().any(|(k, v)| {
                number(v).is_some() && {
                    let k = k.to_lowercase();
                    k == *c || stem(&k) == stem(c)
                }
            })
        });
        if filters.is_empty() || names_numeric_field {
            continue;
        }
        let hits: Vec<&Vec<(String, String)>> = table
            .iter()
            .filter(|rec| {
                filters.iter().all(|(k, vals)| {
                    rec.iter()
                        .any(|(rk, rv)| rk == k && vals.contains(&rv.as_str()))
                })
            })
            .collect();
        let condition: Vec<String> = filters
            .iter()
            .map(|(k, vals)| format!("{k} = {}", vals.join(" or ")))
            .collect();
        let ids: Vec<&str> = hits
            .iter()
            .filter_map(|rec| rec.first().map(|(_, v)| v.as_str()))
            .collect();
        let id_field = table
            .first()
            .and_then(|r| r.first())
            .map_or("", |(k, _)| k.as_str());
        return Some(format!(
            "{} ({} of the {} records in {} have {}{})",
            hits.len(),
            hits.len(),
            table.len(),
            source(step),
            condition.join(" and "),
            if ids.is_empty() || ids.len() > 12 {
                String::new()
            } else {
                format!("; {id_field}: {}", ids.join(", "))
            }
        ));
    }
    None
}
