//! What the answer step is shown besides the tool outputs, computed without any word list: the
//! lines that share most words with the question (stopwords aside), and the exact terms of the
//! question (identifiers, quoted phrases, file names) that no output holds. Neither is an
//! answer; the model reads them and writes its own.

use super::*;
use crate::agent::outputs::{content, is_whole_read, search_hit};

/// Most lines shown as the best match for the question.
pub const BEST_LINES: usize = 3;

/// How many of `keys` a line's words hold (a word matches its prefix of 3+ letters either way,
/// so "max" matches "maximum").
fn score(line_words: &[String], keys: &[String]) -> usize {
    keys.iter()
        .filter(|k| {
            line_words.iter().any(|w| {
                w == *k
                    || (w.len() >= 3
                        && k.len() >= 3
                        && (k.starts_with(w.as_str()) || w.starts_with(k.as_str())))
            })
        })
        .count()
}

/// A line's key: the text before its first `=` or `:`, without quotes, lower case; `None`
/// when that is not one word.
fn line_key(content: &str) -> Option<String> {
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
/// `#` line of Python, TOML, YAML, INI, shell; `//` of C-like languages; `--` of SQL; an HTML
/// comment anywhere). Comments say what a value is for, or (planted) what to do; they are not
/// values, so they rank below every data line.
fn is_comment(path: &str, content: &str) -> bool {
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

/// The lines of the tool outputs that hold the most of the question's words (a line under an
/// INI/TOML `[section]`, a YAML mapping or a CSV header is shown with it). Empty when no line
/// holds any.
pub fn best_lines(task: &str, steps: &[Step], max: usize) -> Vec<String> {
    let ranked = ranked_lines(task, steps);
    top(&ranked).iter().take(max).map(|x| x.1.clone()).collect()
}

/// The lines of `ranked` with the best score (its first ones: it is sorted best first).
fn top(ranked: &[(usize, String)]) -> &[(usize, String)] {
    let best = ranked.first().map(|x| x.0);
    let n = ranked.iter().take_while(|x| Some(x.0) == best).count();
    &ranked[..n]
}

/// The column names of a CSV header: `line` is a file's first read line ("1: id,state") and
/// `content` its text. A header is names, not a sentence: a log's first line may hold commas
/// too.
fn csv_header(line: &str, content: &str) -> Option<Vec<String>> {
    let names = content
        .split(',')
        .all(|f| !f.trim().is_empty() && !f.trim().contains(char::is_whitespace));
    (line.starts_with("1: ") && content.contains(',') && names)
        .then(|| content.split(',').map(|f| f.trim().to_string()).collect())
}

/// Whether `step` ran `search_text` (its lines are shown under their file, "[path] text").
fn is_search_step(step: &Step) -> bool {
    matches!(&step.action, Some(Action::ToolCall { name, .. }) if name == "search_text")
}

/// A line as [`ranked_lines`] scores it.
struct Scored {
    /// A comment in its file's language (ranked after every data line).
    comment: bool,
    score: usize,
    /// Reading order, for ties.
    order: usize,
    /// The line as the answer request is shown it.
    shown: String,
}

/// Every distinct line of the tool outputs (whole outputs, not the previews the planner saw)
/// that holds a word of the question, with its score, best first and in reading order within
/// a score.
pub(super) fn ranked_lines(task: &str, steps: &[Step]) -> Vec<(usize, String)> {
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
    let mut scored: Vec<Scored> = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
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
        // A CSV file's header: each later row with as many fields is shown as name=value
        // pairs, so "qty=845" says which number is the quantity.
        let mut header: Option<Vec<String>> = None;
        // A structured file read whole is ranked by its values under their key paths
        // ("services.worker.healthcheck.timeout_s: 45", "cache.pool_size: 48") and its
        // records ("mirror: name=us-east, bandwidth_mbps=250"): its lines alone
        // ("\"timeout_s\": 45", "pool_size = 48") do not say which object they are in.
        if let Some(facts) = structured_facts(&path, step) {
            for fact in facts {
                let n = score(&words(&fact), &keys);
                if n > 0 && seen.insert(format!("{path}\u{0}{fact}")) {
                    scored.push(Scored {
                        comment: false,
                        score: n,
                        order: scored.len(),
                        shown: fact,
                    });
                }
            }
            continue;
        }
        // A search that matched nothing echoes the words it looked for on its first line.
        let skip = usize::from(whole_text(step).trim_start().starts_with(NO_MATCHES));
        for line in whole_text(step).lines().skip(skip) {
            // A search hit ("logs/app.log:12: text") or a read line ("12: text"): the file,
            // the line number and the text.
            let (file, number, raw) = match search_hit(line) {
                Some((p, rest)) => {
                    let n = line[p.len() + 1..].split_once(':').map(|x| x.0);
                    (p.to_string(), n, rest)
                }
                None => match content(line) {
                    Some(rest) => (
                        path.clone(),
                        line.split_once(": ").map(|x| x.0.trim()),
                        rest,
                    ),
                    None => (path.clone(), None, line),
                },
            };
            let text = raw.trim();
            // read_file's header ("config/service.toml (2 lines):") names the file.
            if number.is_none()
                && line.ends_with(':')
                && (line.ends_with(" lines):") || line.contains(" lines "))
            {
                continue;
            }
            if text.starts_with('[') && text.ends_with(']') && text.len() > 2 {
                section = Some(text.to_string());
                continue;
            }
            if let Some(h) = csv_header(line, text) {
                header = Some(h);
                continue;
            }
            if yaml && number.is_some() {
                let indent = raw.len() - raw.trim_start().len();
                parents.retain(|(i, _)| *i < indent);
                if let Some(k) = text
                    .strip_suffix(':')
                    .filter(|k| line_key(&format!("{k}:")).is_some())
                {
                    parents.push((indent, k.trim_start_matches("- ").to_string()));
                    continue;
                }
            }
            let row = header.as_ref().and_then(|h| csv_row(h, text));
            // Shown without the line number (a small model asked for "the port" answered with
            // the "8" of "8: port = 9102"), under its file, section or mapping.
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
                (Some(sec), None) => format!("{sec} {text}"),
                (None, None) => text.to_string(),
            };
            let mut n = score(&words(&shown), &keys);
            if n > 0 && line_key(text).is_some_and(|k| keys.contains(&k)) {
                n += 1;
            }
            // The same line read twice (or read and hit by a search) counts once; equal lines
            // at two places count twice.
            let key = match number {
                Some(num) => format!("{file}\u{0}{num}"),
                None => shown.clone(),
            };
            if n > 0 && seen.insert(key) {
                scored.push(Scored {
                    comment: is_comment(&file, text),
                    score: n,
                    order: scored.len(),
                    shown,
                });
            }
        }
    }
    scored.sort_by(|a, b| {
        a.comment
            .cmp(&b.comment)
            .then(b.score.cmp(&a.score))
            .then(a.order.cmp(&b.order))
    });
    scored.into_iter().map(|l| (l.score, l.shown)).collect()
}

/// The values of a structured file (JSON, YAML, TOML, INI, `.env`) `step` read whole, each
/// under its key path, an array's or a TOML table array's objects as one record each; `None`
/// for any other output, or a file that does not parse.
fn structured_facts(path: &str, step: &Step) -> Option<Vec<String>> {
    let text = whole_text(step);
    let structured = matches!(
        crate::agent::tools::table::read::kind_of(path),
        Some("json" | "yaml" | "toml" | "ini" | "env")
    );
    if is_search_step(step) || !structured || !is_whole_read(text) {
        return None;
    }
    let body: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| content(l).unwrap_or(l))
        .collect();
    let facts = crate::agent::records::facts_of(path, &body.join("\n"))?;
    Some(facts.into_iter().map(|f| f.text).collect())
}

/// Whether `w` (with `letters` letters) reads as a file name: a dot inside and a part after
/// the last dot that starts with a letter (`config.json`, not `3.2GB` or `v1.2`).
fn file_name(w: &str, letters: usize) -> bool {
    letters >= 2
        && w.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty() && ext.chars().next().is_some_and(|c| c.is_alphabetic())
        })
}

/// `text` without whitespace, lowercased: how terms and answers are compared with outputs
/// ("3.2GB" is found in "3.2 GB").
pub(super) fn squeeze(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The exact terms the task names — identifiers (`LOG_LEVEL`, `max_conn`, `MaxBatchSize`),
/// quoted phrases (`'hex bolt M8'`) and file names — that appear in none of `found` (compared
/// without case). Told so, the model may answer that the thing asked for was not found.
pub fn absent_terms(task: &str, found: &str) -> Vec<String> {
    let mut terms: Vec<String> = quoted_phrases(task)
        .into_iter()
        .map(str::to_string)
        .collect();
    for w in task.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))) {
        let w = w.trim_matches(|c: char| matches!(c, '.' | '-' | '/'));
        let letters = w.chars().filter(|c| c.is_alphabetic()).count();
        let identifier = w.contains('_')
            || camel_case(w)
            || (letters >= 3
                && w.chars().all(|c| !c.is_lowercase())
                && w.chars().any(|c| c.is_alphabetic()))
            || file_name(w, letters);
        if identifier {
            terms.push(w.to_string());
        }
    }
    // Compared without case and without spaces: "3.2GB" is found in "3.2 GB".
    let hay = squeeze(found);
    let mut out: Vec<String> = Vec::new();
    for t in terms {
        if !hay.contains(&squeeze(&t)) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// What the tools found: the usable outputs and the workspace overview, without the calls'
/// arguments and without searches that matched nothing (both echo the words searched for).
pub fn found_text(steps: &[Step], overview: Option<&str>) -> String {
    let mut out: String = overview.unwrap_or_default().to_string();
    for step in steps.iter().filter(|s| usable(s)) {
        let text = step.observation.text.trim_start();
        let text = match text.strip_prefix(NO_MATCHES) {
            Some(rest) => rest.split_once('\n').map_or("", |(_, found)| found),
            None => text,
        };
        out.push('\n');
        out.push_str(text);
    }
    out
}
