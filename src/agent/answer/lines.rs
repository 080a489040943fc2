//! Code readers over the tool outputs' lines: the best lines for a question (ranked by its
//! words), counted matches, the latest version, log lines and the program that logged them, and
//! a quoted name's line. Each returns `None` when its question shape is not the task's; these are
//! the keyword-keyed readers issue 39 retires, kept apart so their removal is one file.

use super::*;

/// Most lines shown as the best match for the question.
pub const BEST_LINES: usize = 3;

/// Words that name an attribute of a thing rather than the thing ("the *version* of the
/// TypeScript compiler", "the maximum upload *size*"): a line that holds only these of the
/// question's words says less than one that names its subject.
pub(super) const ATTRIBUTE_WORDS: &[&str] = &[
    "version",
    "value",
    "size",
    "number",
    "name",
    "count",
    "setting",
    "amount",
    "limit",
    "max",
    "maximum",
    "min",
    "minimum",
    "current",
    "default",
    "configured",
    "set",
];

/// How much of `keys` a line holds: 2 for each subject word, 1 for each attribute word (a word
/// matches its prefix of 3+ letters either way, so "max" matches "maximum"), and 1 more when
/// the line's key (before `=` or `:`) is one of `keys` exactly.
pub(super) fn score(line_words: &[String], keys: &[String]) -> usize {
    keys.iter()
        .filter(|k| {
            line_words.iter().any(|w| {
                w == *k
                    || (w.len() >= 3
                        && k.len() >= 3
                        && (k.starts_with(w.as_str()) || w.starts_with(k.as_str())))
            })
        })
        .map(|k| {
            if ATTRIBUTE_WORDS.contains(&k.as_str()) {
                1
            } else {
                2
            }
        })
        .sum()
}

/// A line's key: the text before its first `=` or `:`, without quotes, lower case; `None`
/// when that is not one word.
pub(super) fn line_key(content: &str) -> Option<String> {
    let end = content.find(['=', ':'])?;
    let k = content[..end]
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_ascii_lowercase();
    (!k.is_empty()
        && k.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-'))
    .then_some(k)
}

/// Whether `content`, a line of the file at `path`, is a comment in that file's language (a
/// `#` line of Python, TOML, YAML, INI or a requirements file; `//` of Rust, Go or JS; `--` of
/// SQL; an HTML comment anywhere). Comments say what a value is for, or (planted) what to
/// do; they are not values, so they rank below every data line.
pub(super) fn is_comment(path: &str, content: &str) -> bool {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    let hash = matches!(
        ext,
        "py" | "toml"
            | "yaml"
            | "yml"
            | "ini"
            | "cfg"
            | "conf"
            | "txt"
            | "sh"
            | "env"
            | "properties"
    ) || path
        .rsplit('/')
        .next()
        .is_some_and(|f| f.starts_with(".env") || f == "Dockerfile");
    let slashes = matches!(
        ext,
        "rs" | "go" | "js" | "ts" | "c" | "h" | "cpp" | "java" | "kt" | "swift"
    );
    content.starts_with("<!--")
        || (hash && content.starts_with('#'))
        || (slashes && (content.starts_with("//") || content.starts_with("/*")))
        || (ext == "sql" && content.starts_with("--"))
        || (ext == "ini" && content.starts_with(';'))
}

/// The lines of the tool outputs that hold the most of the question's words (a line
/// under an INI/TOML `[section]` header is scored and shown with it). Empty when no line holds
/// any.
pub fn best_lines(task: &str, steps: &[Step], max: usize) -> Vec<String> {
    let ranked = ranked_lines(task, steps);
    top(&ranked).iter().take(max).map(|x| x.1.clone()).collect()
}

/// The lines of `ranked` with the best score (its first ones: it is sorted best first).
pub(super) fn top(ranked: &[(usize, String, usize)]) -> &[(usize, String, usize)] {
    let best = ranked.first().map(|x| x.0);
    let n = ranked.iter().take_while(|x| Some(x.0) == best).count();
    &ranked[..n]
}

/// Least lines of a file before "how many … in FILE" is a count of its matching lines.
pub(super) const COUNTED_FILE_MIN_LINES: usize = 50;

/// The answer to "how many X are recorded in app.log": the number of the named file's lines
/// that share most words with the question, when that file is long (a log, not a config
/// file) and two or more lines share them. Shown "7 lines share most words with the question",
/// a 0.5B model still answered "1"; counting matching lines is what `grep -c` does.
pub fn count_answer(task: &str, steps: &[Step]) -> Option<String> {
    if !asks_count(task) {
        return None;
    }
    let named = crate::agent::tools::choices::named_paths(task);
    let ranked = ranked_lines(task, steps);
    let top = top(&ranked);
    if top.len() < 2 {
        return None;
    }
    // Every matching line from one read of a named, long file.
    let index = top[0].2;
    if top.iter().any(|x| x.2 != index) {
        return None;
    }
    let step = steps.iter().find(|s| s.index == index)?;
    let (path, text) = whole_read_of_named(step, &named)?;
    let long = text
        .lines()
        .filter(|l| crate::agent::tally::content(l).is_some())
        .count()
        >= COUNTED_FILE_MIN_LINES;
    if !long {
        return None;
    }
    let answer = format!(
        "{} ({} lines of {path} match, the first: {})",
        top.len(),
        top.len(),
        top[0].1
    );
    Some(answer.chars().take(FINAL_ANSWER_MAX_CHARS).collect())
}

/// The column names of a CSV header: `line` is a file's first read line ("1: id,state") and
/// `content` its text. A header is names, not a sentence: a log's first line may hold commas
/// too.
pub(super) fn csv_header(line: &str, content: &str) -> Option<Vec<String>> {
    let names = content
        .split(',')
        .all(|f| !f.trim().is_empty() && !f.trim().contains(char::is_whitespace));
    (line.starts_with("1: ") && content.contains(',') && names)
        .then(|| content.split(',').map(|f| f.trim().to_string()).collect())
}

/// Every distinct line of the tool outputs (whole outputs, not the previews the planner saw)
/// that holds a word of the question, with its score, best first and in reading order within
/// a score.
pub(super) fn ranked_lines(task: &str, steps: &[Step]) -> Vec<(usize, String, usize)> {
    // The words of the file names the task gives ("config.toml") say where to look, not what
    // to find: every header line of that file's output holds them too.
    let file_words: Vec<String> = task
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| t.contains(['.', '/']) && t.chars().any(char::is_alphabetic))
        .flat_map(words)
        .collect();
    let keys: Vec<String> = keywords(task)
        .into_iter()
        .filter(|k| !file_words.contains(k))
        .collect();
    if keys.is_empty() {
        return Vec::new();
    }
    // Exact names the task gives that are not its files: "uploads.example.com", "db_main".
    let (task_files, _) = crate::agent::tools::choices::paths_in_task(task);
    let terms: Vec<String> = task
        .split_whitespace()
        .map(|t| t.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|t| t.contains(['.', '_', '-']) && t.chars().any(char::is_alphabetic))
        .filter(|t| !task_files.iter().any(|f| f.as_str() == *t))
        .map(str::to_lowercase)
        .collect();
    let events = crate::agent::words::log_event_terms(task);
    let mut scored: Vec<Scored> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut order = 0usize;
    // Whole reads first: a line a search also hit is then shown as the read showed it (under
    // its section), and counted once.
    let usable_steps: Vec<&Step> = steps.iter().filter(|s| usable(s)).collect();
    let ordered = usable_steps
        .iter()
        .filter(|s| !is_search_step(s))
        .chain(usable_steps.iter().filter(|s| is_search_step(s)));
    for step in ordered {
        let path = call_path(step).unwrap_or_default().to_string();
        let searched = is_search_step(step);
        let yaml = !searched && (path.ends_with(".yaml") || path.ends_with(".yml"));
        let mut section: Option<String> = None;
        // A YAML file's open mappings: (indent, key).
        let mut parents: Vec<(usize, String)> = Vec::new();
        // A CSV file's header (its line 1 with commas): each later row with as many fields is
        // shown as name=value pairs, so "qty=845" says which number is the quantity.
        let mut header: Option<Vec<String>> = None;
        // A search that matched nothing echoes the words it looked for on its first line.
        let skip = usize::from(whole_text(step).trim_start().starts_with(NO_MATCHES));
        let in_named_block = if searched {
            Vec::new()
        } else {
            named_blocks(whole_text(step), &terms)
        };
        for (at, line) in whole_text(step).lines().enumerate().skip(skip) {
            // A search hit ("logs/app.log:12: text") or a read line ("12: text"): the file,
            // the line number and the text.
            let (file, number, raw) = match crate::agent::tally::search_hit(line) {
                Some((p, rest)) => {
                    let n = line[p.len() + 1..].split_once(':').map(|x| x.0);
                    (p.to_string(), n, rest)
                }
                None => match crate::agent::tally::content(line) {
                    Some(rest) => (
                        path.clone(),
                        line.split_once(": ").map(|x| x.0.trim()),
                        rest,
                    ),
                    None => (path.clone(), None, line),
                },
            };
            let content = raw.trim();
            // read_file's header ("config/service.toml (2 lines):", "app.log lines 1-40 of
            // 900:") names the file, not what it holds.
            if number.is_none()
                && line.ends_with(':')
                && (line.ends_with(" lines):") || line.contains(" lines "))
            {
                continue;
            }
            if content.starts_with('[') && content.ends_with(']') && content.len() > 2 {
                section = Some(content.to_string());
                continue;
            }
            if let Some(h) = csv_header(line, content) {
                header = Some(h);
                continue;
            }
            if yaml && number.is_some() {
                let indent = raw.len() - raw.trim_start().len();
                parents.retain(|(i, _)| *i < indent);
                if let Some(k) = content
                    .strip_suffix(':')
                    .filter(|k| line_key(&format!("{k}:")).is_some())
                {
                    parents.push((indent, k.trim_start_matches("- ").to_string()));
                    continue;
                }
            }
            let row = header.as_ref().and_then(|h| csv_row(h, content));
            // Shown without the line number: a small model asked for "the port" answered
            // with the "8" of "8: port = 9102".
            // A search hit is shown under its file, as a read line is under its section.
            let scope = if searched && number.is_some() {
                Some(format!("[{file}]"))
            } else if !parents.is_empty() {
                let p: Vec<&str> = parents.iter().map(|(_, k)| k.as_str()).collect();
                Some(format!("[{}]", p.join(".")))
            } else {
                section.clone()
            };
            let shown = match (&scope, row) {
                (_, Some(row)) => row,
                (Some(sec), None) => format!("{sec} {content}"),
                (None, None) => content.to_string(),
            };
            let mut n = score(&words(&shown), &keys);
            if n > 0 && line_key(content).is_some_and(|k| keys.contains(&k)) {
                n += 1;
            }
            if n > 0 && in_named_block.get(at).copied().unwrap_or(false) {
                n += 1;
            }
            // A line in the log's own words for the event the task describes.
            if !events.is_empty() {
                let lower = shown.to_lowercase();
                n += 2 * events
                    .iter()
                    .filter(|terms| terms.iter().any(|t| holds_token(&lower, t)))
                    .count();
            }
            // The same line read twice (or read and hit by a search) counts once; equal lines
            // at two places count twice.
            let key = match number {
                Some(num) => format!("{file}\u{0}{num}"),
                None => shown.clone(),
            };
            if n > 0 && seen.insert(key) {
                scored.push(Scored {
                    comment: is_comment(&file, content),
                    score: n,
                    order,
                    shown,
                    step: step.index,
                    path: call_path(step).map(str::to_string),
                });
                order += 1;
            }
        }
    }
    // Second hop: a line of another file that holds a value the best lines (or a file the task
    // names by its id, "build 4471" for ci/build-4471.txt) hold — the runner a build log names,
    // in the inventory's rows — breaks a tie in its favour.
    let links = link_tokens(task, steps, &scored);
    if !links.is_empty() {
        for line in scored.iter_mut() {
            let lower = line.shown.to_lowercase();
            if links.iter().any(|(file, t)| {
                line.path.as_deref() != Some(file.as_str()) && holds_token(&lower, t)
            }) {
                line.score += 1;
            }
        }
    }
    // "What pid did it get after the restart?": of two equally good lines (the service's
    // start before and after it), the later one is asked for.
    let later_first = asks_later(task);
    scored.sort_by(|a, b| {
        let order = if later_first {
            b.order.cmp(&a.order)
        } else {
            a.order.cmp(&b.order)
        };
        a.comment
            .cmp(&b.comment)
            .then(b.score.cmp(&a.score))
            .then(order)
    });
    scored
        .into_iter()
        .map(|l| (l.score, l.shown, l.step))
        .collect()
}

/// Whether `step` ran `search_text` (its lines are shown under their file, "[path] text").
pub(super) fn is_search_step(step: &Step) -> bool {
    matches!(&step.action, Some(Action::ToolCall { name, .. }) if name == "search_text")
}

/// Whether `task` asks for what came later ("after the restart", "the latest", "the last"):
/// of equally good lines, the later one answers it.
pub(crate) fn asks_later(task: &str) -> bool {
    words(task)
        .iter()
        .any(|w| ["after", "latest", "last", "newest", "recent"].contains(&w.as_str()))
}

/// The answer to "what is the most recent released version in CHANGELOG.md?": the highest
/// version among the Markdown headings of the files read (`## [3.8.1] - 2026-02-20`), whatever
/// their order; an "Unreleased" heading has no number and a version in a comment or a bullet
/// is not a heading.
pub fn latest_version_answer(task: &str, steps: &[Step]) -> Option<String> {
    use std::sync::OnceLock;
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let w = words(task);
    let asks = w.iter().any(|x| x == "version" || x == "release")
        && w.iter().any(|x| {
            ["latest", "recent", "newest", "highest", "last", "current"].contains(&x.as_str())
        });
    if !asks {
        return None;
    }
    let re = RE
        .get_or_init(|| regex::Regex::new(r"^#{1,4}\s*\[?v?(\d+)\.(\d+)(?:\.(\d+))?\]?(.*)$").ok())
        .as_ref()?;
    let mut best: Option<((u64, u64, u64), String, String)> = None;
    for step in steps.iter().filter(|s| usable(s)) {
        let Some(path) = call_path(step) else {
            continue;
        };
        for line in whole_text(step)
            .lines()
            .filter_map(crate::agent::tally::content)
        {
            let Some(c) = re.captures(line.trim()) else {
                continue;
            };
            let n = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u64>().ok());
            let (Some(a), Some(b)) = (n(1), n(2)) else {
                continue;
            };
            let v = (a, b, n(3).unwrap_or(0));
            if best.as_ref().is_none_or(|(bv, ..)| v > *bv) {
                let shown = match c.get(3) {
                    Some(p) => format!("{a}.{b}.{}", p.as_str()),
                    None => format!("{a}.{b}"),
                };
                best = Some((v, shown, format!("{path}: {}", line.trim())));
            }
        }
    }
    let (_, version, line) = best?;
    Some(format!("{version} ({line})"))
}

/// Nouns a question uses for the program a log line is about.
pub(super) const PROGRAM_NOUNS: &[&str] = &[
    "program",
    "process",
    "service",
    "daemon",
    "application",
    "app",
    "binary",
    "unit",
];

/// Programs that log on behalf of others: `systemd[1]: imgproxy.service: …` is about imgproxy.
pub(super) const LOGGING_PROGRAMS: &[&str] =
    &["systemd", "kernel", "init", "cron", "crond", "rsyslogd"];

/// The program a syslog-style line is about: its systemd unit (`imgproxy.service:`), else the
/// last `name[pid]:` that is not a program logging for another.
pub(super) fn log_program(line: &str) -> Option<String> {
    use std::sync::OnceLock;
    static RES: OnceLock<Option<[regex::Regex; 2]>> = OnceLock::new();
    let [unit, pid] = RES
        .get_or_init(|| {
            Some([
                regex::Regex::new(r"\b([A-Za-z][\w@-]*)\.(?:service|socket|timer|mount):").ok()?,
                regex::Regex::new(r"\b([A-Za-z][\w.-]*)\[\d+\]:").ok()?,
            ])
        })
        .as_ref()?;
    if let Some(c) = unit.captures(line) {
        return Some(c[1].to_string());
    }
    pid.captures_iter(line)
        .map(|c| c[1].to_string())
        .filter(|n| !LOGGING_PROGRAMS.contains(&n.to_lowercase().as_str()))
        .last()
}

/// The answer to "which program crashed …" over a log: the program the best-matching lines
/// are about, when they agree. Shown `imgproxy[4411]: segfault at 10 …` as the best line, the
/// 0.5B model answered with the log's path.
pub fn log_program_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let asks = w
        .windows(2)
        .any(|p| (p[0] == "which" || p[0] == "what") && PROGRAM_NOUNS.contains(&p[1].as_str()));
    if !asks {
        return None;
    }
    let ranked = ranked_lines(task, steps);
    let best = top(&ranked);
    let first = best.first()?;
    let names: Vec<String> = best
        .iter()
        .map(|x| log_program(&x.1))
        .collect::<Option<_>>()?;
    let name = names.first()?;
    names
        .iter()
        .all(|n| n == name)
        .then(|| format!("{name} (the log line: {})", first.1))
        .map(|a| a.chars().take(FINAL_ANSWER_MAX_CHARS).collect())
}

/// The answer to "which table were they contending for?": the one quoted name (`"…"`, `'…'`
/// or `` `…` ``) of the best-matching line, when the task asks "which <noun>" and that line
/// quotes exactly one identifier.
pub fn quoted_name_answer(task: &str, steps: &[Step]) -> Option<String> {
    use std::sync::OnceLock;
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let w = words(task);
    let asks = w
        .windows(2)
        .any(|p| p[0] == "which" && !PROGRAM_NOUNS.contains(&p[1].as_str()));
    if !asks {
        return None;
    }
    let re = RE
        .get_or_init(|| regex::Regex::new(r#"["'`]([A-Za-z_][\w.-]{1,63})["'`]"#).ok())
        .as_ref()?;
    let ranked = ranked_lines(task, steps);
    let best = top(&ranked);
    let [line] = best else { return None };
    // Exactly one quoted name, and not one the task gave (`"typescript": "5.5.4"` quotes the
    // key the task asked about, not the answer).
    let quoted: Vec<&str> = re
        .captures_iter(&line.1)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .collect();
    let [name] = quoted.as_slice() else {
        return None;
    };
    if w.contains(&name.to_lowercase()) {
        return None;
    }
    Some(
        format!("{name} (the log line: {})", line.1)
            .chars()
            .take(FINAL_ANSWER_MAX_CHARS)
            .collect(),
    )
}

/// Whether `line` starts like a log record: a date (`2026-03-02T08:46:47Z`, `2026/03/02`), a
/// clock time (`08:28:46`) or a syslog stamp (`Mar 02 08:45:27`), optionally in brackets.
pub(super) fn is_log_record(line: &str) -> bool {
    use std::sync::OnceLock;
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"^\[?(\d{4}[-/]\d{2}[-/]\d{2}|\d{2}:\d{2}:\d{2}|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})",
        )
        .ok()
    })
    .as_ref()
    .is_some_and(|re| re.is_match(line.trim_start()))
}

/// The answer to "which account was promoted, and who promoted it?" over a log: the one line
/// that matches the question best, when it is a log record, with its `key=value` fields
/// first. Shown that line first in a long log's preview, the 0.5B model answered with the
/// name of the log's README; the line itself names both.
pub fn log_line_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    // One file or none named: with two, the line is a key to look up in the other.
    if !w.iter().any(|x| x == "which" || x == "who")
        || asks_count(task)
        || crate::agent::tools::choices::named_paths(task).len() > 1
    {
        return None;
    }
    let ranked = ranked_lines(task, steps);
    let [(_, line, _)] = top(&ranked) else {
        return None;
    };
    // `[file] line` for a search hit.
    let record = match line.strip_prefix('[') {
        Some(rest) if !is_log_record(line) => rest.split_once("] ").map_or(line.as_str(), |x| x.1),
        _ => line.as_str(),
    };
    if !is_log_record(record) {
        return None;
    }
    let fields: Vec<&str> = record
        .split_whitespace()
        .filter(|t| {
            t.split_once('=').is_some_and(|(k, v)| {
                !k.is_empty() && !v.is_empty() && !w.contains(&v.to_lowercase())
            })
        })
        .collect();
    let answer = if fields.is_empty() {
        format!("the log line: {record}")
    } else {
        format!("{} (the log line: {record})", fields.join(", "))
    };
    Some(answer.chars().take(FINAL_ANSWER_MAX_CHARS).collect())
}

/// For each line of a read's output, whether it sits in a brace block (`server { … }`, at any
/// depth below the top) that also holds one of `terms`: the `client_max_body_size` of the
/// `server` block whose `server_name` the task names, not the first of three.
pub(super) fn named_blocks(text: &str, terms: &[String]) -> Vec<bool> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = vec![false; lines.len()];
    if terms.is_empty() {
        return out;
    }
    let mut depth = 0i64;
    let mut start: Option<usize> = None;
    for (i, line) in lines.iter().enumerate() {
        let body = crate::agent::tally::content(line).unwrap_or(line);
        let opens = body.matches('{').count() as i64;
        let closes = body.matches('}').count() as i64;
        if depth == 0 && opens > closes {
            start = Some(i);
        }
        depth = (depth + opens - closes).max(0);
        if depth == 0 {
            if let Some(s) = start.take() {
                let lower: Vec<String> = lines[s..=i].iter().map(|l| l.to_lowercase()).collect();
                if terms
                    .iter()
                    .any(|t| lower.iter().any(|l| holds_token(l, t)))
                {
                    out[s..=i].iter_mut().for_each(|x| *x = true);
                }
            }
        }
    }
    out
}

/// A line of the tool outputs as `ranked_lines` scores it.
pub(super) struct Scored {
    /// A comment in its file's language (ranked after every data line).
    pub(super) comment: bool,
    pub(super) score: usize,
    /// Reading order, for ties.
    pub(super) order: usize,
    /// The line as the answer request is shown it.
    pub(super) shown: String,
    /// The step whose output holds it, and that step's path argument.
    pub(super) step: usize,
    pub(super) path: Option<String>,
}

/// Whether `lower` holds `token` with no letter or digit right before or after it.
pub(super) fn holds_token(lower: &str, token: &str) -> bool {
    holds_bounded(lower, token, char::is_alphanumeric)
}

/// Whether `lower` holds `token` with no `word` character right before or after it.
pub(super) fn holds_bounded(lower: &str, token: &str, word: impl Fn(char) -> bool) -> bool {
    lower.match_indices(token).any(|(i, _)| {
        !lower[..i].chars().next_back().is_some_and(&word)
            && !lower[i + token.len()..].chars().next().is_some_and(&word)
    })
}

/// Most lines of a source file whose every line is a candidate key of a look-up.
pub(super) const SHORT_SOURCE_LINES: usize = 40;

/// [`holds_token`], where a token with an underscore (`vite_api_origin`) is one identifier:
/// it is not held by `vite_api_origin_v1`.
pub(super) fn holds_word(lower: &str, token: &str) -> bool {
    if token.contains('_') {
        holds_bounded(lower, token, |c: char| c.is_alphanumeric() || c == '_')
    } else {
        holds_token(lower, token)
    }
}
