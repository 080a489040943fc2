//! Code readers that look a value up: the line that holds the key a task names (with one hop
//! across files for a linked name) and `key = value` answers read off a config line.

use super::*;

/// The answer to a look-up chain: "The backup log in logs/ records a failed backup with an
/// error code. What does *that* code mean according to docs/error_codes.md?". The file the
/// question names last (read whole) is where the answer is; the value to look up is in the
/// best lines of the other outputs. The answer is the line of that file holding most of the
/// best lines' identifiers (the rarer in it, the more they count), shown with the line it
/// was found from. Shown both files, the 0.5B model answered with the code.
pub fn lookup_answer(task: &str, steps: &[Step]) -> Option<String> {
    if crate::agent::program::wants_program(task, steps) || asks_count(task) {
        return None;
    }
    // A look-up as narrowing rule 13 sees it: the paths named first hold the key, the path
    // named last (read whole) is where it is looked up.
    let (sources, target) = crate::agent::narrow::lookup_parts(task)?;
    let target = [target];
    let b_step = steps
        .iter()
        .rev()
        .filter(|s| usable(s))
        .find(|s| whole_read_of_named(s, &target).is_some())?;
    let b_path = call_path(b_step)?;
    // The other outputs' best lines, with the path each came from (a file's name holds ids
    // too: db/migrations/0016_checkout.sql).
    let others: Vec<Step> = steps
        .iter()
        .filter(|s| call_path(s) != Some(b_path))
        .cloned()
        .collect();
    // The key is in the files the task names first (rule 13's sources): a search over the
    // whole workspace also shows B's own header, and a listing of the sources shows folder
    // names, neither of which is the key. When the task names an identifier (`FIXME`), only
    // a line holding it is the key, even a comment, which the ranking puts after data lines.
    let identifiers: Vec<String> = crate::agent::narrow::task_identifiers(task)
        .iter()
        .map(|t| t.to_lowercase())
        .collect();
    let mut ranked: Vec<(usize, String, usize)> = ranked_lines(task, &others)
        .into_iter()
        .filter(|(_, shown, index)| {
            let step = steps.iter().find(|s| s.index == *index);
            let file = match step {
                Some(s) if is_search_step(s) => shown
                    .strip_prefix('[')
                    .and_then(|r| r.split_once(']'))
                    .map(|x| x.0),
                Some(s) => call_path(s),
                None => None,
            };
            file.is_some_and(|f| {
                trim_rel(f) != b_path && sources.iter().any(|r| crate::agent::narrow::within(f, r))
            })
        })
        .collect();
    let holds_identifier = |line: &str| {
        identifiers
            .iter()
            .any(|t| holds_token(&line.to_lowercase(), t))
    };
    if !identifiers.is_empty() {
        // Not found yet: a folder's names or another comment are not the key.
        ranked.retain(|(_, l, _)| holds_identifier(l));
    }
    let mut best: Vec<(String, usize)> = top(&ranked)
        .iter()
        .take(BEST_LINES)
        .map(|(_, l, i)| (l.clone(), *i))
        .collect();
    if best.is_empty() && identifiers.is_empty() {
        // Code that shares no word with the question ("builds every request URL from an
        // environment variable": `const origin = import.meta.env.VITE_API_ORIGIN;`): every
        // line of a short source file read whole is a candidate key.
        for s in steps.iter().filter(|s| usable(s) && !is_search_step(s)) {
            let Some(path) = call_path(s) else { continue };
            let text = whole_text(s);
            let short = text.lines().count() <= SHORT_SOURCE_LINES + 1;
            if path == b_path || !is_whole_read(text) || !short {
                continue;
            }
            if sources
                .iter()
                .any(|r| crate::agent::narrow::within(path, r))
            {
                best.extend(
                    text.lines()
                        .skip(1)
                        .filter_map(crate::agent::tally::content)
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| (l.trim().to_string(), s.index)),
                );
            }
        }
    }
    if best.is_empty() {
        return None;
    }
    let task_lower = task.to_lowercase();
    let mut tokens: Vec<String> = Vec::new();
    for (line, index) in &best {
        let path = steps
            .iter()
            .find(|s| s.index == *index)
            .and_then(call_path)
            .unwrap_or_default();
        // `VITE_API_ORIGIN` is a token of its own (besides `vite`, `api` and `origin`): it is
        // not `VITE_API_ORIGIN_V1`.
        let text = format!("{line} {path}");
        let identifiers = text
            .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
            .map(|t| t.trim_matches(['-', '_']).to_lowercase())
            .filter(|t| t.contains('_'));
        let parts = text
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .map(|t| t.trim_matches('-').to_lowercase());
        for t in identifiers.chain(parts) {
            let keep = t.chars().count() >= 3
                && !task_lower.contains(&t)
                && !crate::agent::words::STOPWORDS.contains(&t.as_str());
            if keep && !tokens.contains(&t) {
                tokens.push(t);
            }
        }
    }
    // B's lines (a CSV row as name=value pairs), and how often each token is in them.
    let text = whole_text(b_step);
    let mut header: Option<Vec<String>> = None;
    let mut lines: Vec<(String, String)> = Vec::new();
    for line in text.lines().skip(1) {
        let Some(content) = crate::agent::tally::content(line) else {
            continue;
        };
        let content = content.trim();
        if content.is_empty() {
            continue;
        }
        if let Some(h) = csv_header(line, content) {
            header = Some(h);
            continue;
        }
        let shown = header
            .as_ref()
            .and_then(|h| csv_row(h, content))
            .unwrap_or_else(|| content.to_string());
        lines.push((content.to_lowercase(), shown));
    }
    let df = |t: &str| lines.iter().filter(|(l, _)| holds_word(l, t)).count();
    let weights: Vec<(String, f64)> = tokens
        .iter()
        .filter_map(|t| {
            let n = df(t);
            (n > 0).then(|| {
                let id = if t.chars().any(|c| c.is_ascii_digit() || c == '_') {
                    2.0
                } else {
                    1.0
                };
                (t.clone(), id / n as f64)
            })
        })
        .collect();
    let mut scored: Vec<(f64, usize, usize)> = lines
        .iter()
        .enumerate()
        .map(|(i, (l, _))| {
            let held: Vec<&(String, f64)> =
                weights.iter().filter(|(t, _)| holds_word(l, t)).collect();
            (held.iter().map(|(_, w)| *w).sum::<f64>(), held.len(), i)
        })
        .filter(|(w, _, _)| *w > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (w, held, i) = *scored.first()?;
    let clear = scored.get(1).is_none_or(|(w2, _, _)| *w2 < w);
    // One identifier only it holds, or two of the best lines' words.
    if !clear || (w < 1.0 && held < 2) {
        return None;
    }
    // The key line: the best line holding most of what the answer's line holds.
    let answer_line = &lines[i].0;
    let from = best
        .iter()
        .max_by_key(|(l, _)| {
            let l = l.to_lowercase();
            let n = weights
                .iter()
                .filter(|(t, _)| holds_word(&l, t) && holds_word(answer_line, t))
                .count();
            (n, std::cmp::Reverse(l.len()))
        })
        .map_or("", |(l, _)| l.as_str());
    let answer = format!(
        "{b_path}: {} (looked up from: {})",
        lines[i].1,
        crate::agent::tools::truncate_str(from, 120)
    );
    Some(answer.chars().take(FINAL_ANSWER_MAX_CHARS).collect())
}

/// Identifier-like values (`gpu-runner-07`, `pnguyen`, `bx-121`) to follow to another file,
/// each with the file it came from: the values of the best lines, and every identifier of a
/// file whose name holds an id the task gives (`4471`). None the task itself holds.
pub(super) fn link_tokens(task: &str, steps: &[Step], scored: &[Scored]) -> Vec<(String, String)> {
    let task_lower = task.to_lowercase();
    let ids: Vec<&str> = task
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3 && w.chars().all(|c| c.is_ascii_digit()))
        .collect();
    let ident = |t: &str| {
        t.len() >= 4
            && t.chars().any(char::is_alphabetic)
            && t.chars()
                .any(|c| c.is_ascii_digit() || c == '-' || c == '_')
            && t.matches(':').count() < 2
            && !task_lower.contains(t)
    };
    // A value of a best line may be a plain word ("owner = pnguyen"); an id-named file's
    // words are mostly prose, so only its identifiers count.
    let value =
        |t: &str| t.len() >= 4 && t.chars().any(char::is_alphabetic) && !task_lower.contains(t);
    let tokens_of = |text: &str, keep: &dyn Fn(&str) -> bool| -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_' || c == '.'))
            .map(|t| t.trim_matches(['.', '-', '_']).to_lowercase())
            .filter(|t| keep(t))
            .collect()
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |file: &str, t: String| {
        if !out.iter().any(|(f, x)| f == file && *x == t) {
            out.push((file.to_string(), t));
        }
    };
    for step in steps.iter().filter(|s| usable(s)) {
        let Some(path) = call_path(step) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        if ids.iter().any(|id| name.contains(id)) {
            for line in whole_text(step).lines().skip(1).take(50) {
                let content = crate::agent::tally::content(line).unwrap_or(line);
                for t in tokens_of(content, &ident) {
                    add(path, t);
                }
            }
        }
    }
    let best = scored.iter().map(|x| x.score).max().unwrap_or(0);
    for line in scored.iter().filter(|x| x.score == best).take(BEST_LINES) {
        let (false, Some(path)) = (line.comment, line.path.as_deref()) else {
            continue;
        };
        // The values: after a key's `=` or `:`.
        for part in line.shown.split(", ") {
            if let Some((_, v)) = part.split_once(['=', ':']) {
                for t in tokens_of(v, &value) {
                    add(path, t);
                }
            }
        }
    }
    out
}

/// Words that ask for a figure worked out from the values read, not one value as written.
pub(super) const WORKED_OUT: &[&str] = &[
    "left",
    "remaining",
    "remain",
    "after",
    "per",
    "each",
    "average",
    "mean",
    "times",
    "difference",
    "sum",
    "total",
    "combined",
    "together",
    "percent",
    "percentage",
    "ratio",
    "more",
    "less",
];

/// The answer to "what port does the database listen on according to db.toml?" when exactly one
/// line of the outputs shares most words with the question and that line is a `key = value`
/// setting (`[database] port = 5432`): its value. The answer step, shown that line as the best
/// match, still copied a neighbouring search hit once. Not for questions that name two files or
/// ask for a figure worked out from the values.
pub fn key_value_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    if WORKED_OUT.iter().any(|x| w.iter().any(|v| v == x)) {
        return None;
    }
    let (files, _) = crate::agent::tools::choices::paths_in_task(task);
    if files.len() > 1 {
        return None;
    }
    let ranked = ranked_lines(task, steps);
    let setting = regex::Regex::new(
        r#"^(?:\[[^\]]+\] )?"?([A-Za-z_][A-Za-z0-9_.-]*)"?\s*[=:]\s*(.+?),?\s*$"#,
    )
    .ok()?;
    // Among the best lines, the settings whose key is a word of the task ("replicas: 6" for
    // "how many replicas"): a line of prose that quotes the word ("run `kubectl scale
    // --replicas=0`") can rank as high, and is not the setting.
    let keys = crate::agent::words::keywords(task);
    let names_task_word = |line: &str| {
        setting.captures(line).is_some_and(|c| {
            c.get(1).is_some_and(|k| {
                k.as_str()
                    .to_lowercase()
                    .split(['_', '.', '-'])
                    .any(|part| keys.iter().any(|w| stem(w) == stem(part)))
            })
        })
    };
    let top = ranked.first()?.0;
    let keyed: Vec<&(usize, String, usize)> = ranked
        .iter()
        .take(8)
        .filter(|r| r.0 + 1 >= top && names_task_word(&r.1))
        .collect();
    let best = match keyed[..] {
        [one] => one,
        [a, b, ..] if a.0 > b.0 => a,
        _ => {
            let best = ranked.first()?;
            if ranked.get(1).is_some_and(|r| r.0 == best.0) {
                return None;
            }
            best
        }
    };
    let caps = setting.captures(&best.1)?;
    // "requests==2.32.3": the second `=` belongs to the operator, not the value.
    let value = caps.get(2)?.as_str().trim_start_matches('=').trim_start();
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    // A value with a comment, a list or a table is not one value.
    if value.is_empty() || value.contains(['#', '[', '{', ',']) {
        return None;
    }
    Some(
        format!("{value} ({})", best.1)
            .chars()
            .take(FINAL_ANSWER_MAX_CHARS)
            .collect(),
    )
}
