//! Code readers about files and folders: counts of a listing's entries by type, the odd file
//! out, a key or file the workspace does not hold (`not found`), counts of statuses, a missing
//! section and the line after an event.

use super::*;

/// Words people use for a file type, and its extension.
pub(super) const TYPE_WORDS: &[(&str, &str)] = &[
    ("markdown", "md"),
    ("python", "py"),
    ("rust", "rs"),
    ("csv", "csv"),
    ("json", "json"),
    ("yaml", "yaml"),
    ("toml", "toml"),
    ("sql", "sql"),
    ("log", "log"),
    ("text", "txt"),
];

/// Words that make "how many files" a question a listing's counts do not answer (size, age,
/// content, name).
pub(super) const NOT_A_PLAIN_COUNT: &[&str] = &[
    "than", "larger", "smaller", "bigger", "contain", "contains", "mention", "mentions", "named",
    "called", "empty", "modified", "older", "newer", "lines", "bytes", "size",
];

/// The answer to "how many (.md) files are in docs/": the counts `list_dir` printed for the
/// folder the task names, read by code. The answer step, shown "total: 9 files in data and its
/// subfolders", answered with another listing's total or a file count it added up itself.
/// The tree's count unless the task asks for the top level only ("directly"); a file type the
/// task names (".md", "Markdown") is read off the listing's by-type line.
pub fn dir_count_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |x: &str| w.iter().any(|v| v == x);
    // Files must be what is counted: "how many (.md / Markdown) files", not "how many tables
    // are defined in the .sql files".
    let file_word = |x: &String| x == "files" || x == "file";
    let dir_word = |x: &String| {
        matches!(
            x.as_str(),
            "folders" | "directories" | "subfolders" | "subdirectories" | "dirs"
        )
    };
    let counts = |what: &dyn Fn(&String) -> bool| {
        w.windows(2)
            .enumerate()
            .any(|(i, p)| p[0] == "how" && p[1] == "many" && w[i + 2..].iter().take(3).any(what))
    };
    let counts_files = counts(&file_word);
    let counts_dirs = !counts_files && counts(&dir_word);
    if !(counts_files || counts_dirs) || NOT_A_PLAIN_COUNT.iter().any(|x| has(x)) {
        return None;
    }
    let (files, dirs) = crate::agent::tools::choices::paths_in_task(task);
    let [dir] = dirs.as_slice() else {
        return None;
    };
    let text = listing_of(dir, steps)?;
    let direct_only = has("directly") || (has("top") && has("level")) || has("immediate");
    if counts_dirs {
        let total = text.lines().find(|l| l.starts_with("total:"))?;
        let direct = regex::Regex::new(r"and (\d+) folders? directly").ok()?;
        let below = regex::Regex::new(r"\((\d+) folders? below it\)").ok()?;
        let n = if direct_only {
            direct.captures(total)?.get(1)?.as_str().to_string()
        } else {
            match below.captures(total) {
                Some(c) => c.get(1)?.as_str().to_string(),
                // "and 0 folders directly in": none below either.
                None => direct.captures(total)?.get(1)?.as_str().to_string(),
            }
        };
        return Some(if direct_only {
            format!("{n} folders directly in {dir}/")
        } else {
            format!("{n} folders in {dir}/, counting nested ones")
        });
    }
    // A type named as ".md" (the file-path pattern sees "(.md)" as no path) or by its word.
    let dotted = task
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | '?'))
        .find_map(|t| t.strip_prefix('.'))
        .filter(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_alphanumeric()))
        .map(str::to_lowercase);
    let ext = dotted.or_else(|| {
        TYPE_WORDS
            .iter()
            .find(|(word, _)| has(word))
            .map(|(_, e)| e.to_string())
    });
    if !files.is_empty() && ext.is_none() {
        return None;
    }
    if let Some(ext) = ext {
        let by_type = text.lines().find(|l| l.starts_with("by type,"))?;
        let (_, counts) = by_type.split_once(": ")?;
        let want = format!(".{ext}");
        let n = counts
            .split(", ")
            .find_map(|c| {
                c.split_once(' ')
                    .filter(|(_, e)| *e == want)
                    .map(|(n, _)| n)
            })
            .unwrap_or("0");
        return Some(format!("{n} {want} files in {dir}/ and its subfolders"));
    }
    let total = text.lines().find(|l| l.starts_with("total:"))?;
    let tree = regex::Regex::new(r"(\d+) files? in \S+ and its subfolders").ok()?;
    let direct = regex::Regex::new(r"^total: (\d+) files? and").ok()?;
    if direct_only {
        let n = direct.captures(total)?.get(1)?.as_str();
        return Some(format!("{n} files directly in {dir}/"));
    }
    let n = tree.captures(total)?.get(1)?.as_str();
    Some(format!("{n} files in {dir}/ and its subfolders"))
}

/// The last listing of the folder `dir` the steps hold (its whole text).
pub(super) fn listing_of<'a>(dir: &str, steps: &'a [Step]) -> Option<&'a str> {
    let listed = |s: &&Step| {
        s.observation.kind == ObservationKind::Output
            && matches!(&s.action, Some(Action::ToolCall { name, .. }) if name == crate::agent::tools::files::LIST_DIR)
            && call_path(s) == Some(dir)
    };
    steps.iter().rev().find(listed).map(whole_text)
}

/// The answer to "every file under assets/ is an image except one; which?" or "what is the
/// only .txt file in docs/?": the one file of a type the listing counted once — the type the
/// task names, or (when the task names types to leave out) the one type counted once that
/// it does not name — when the listing shows that file's path.
pub fn odd_file_answer(task: &str, steps: &[Step]) -> Option<String> {
    let w = words(task);
    let has = |x: &str| w.iter().any(|v| v == x);
    if !(has("only") || has("except") || has("but")) || !(has("file") || has("one")) {
        return None;
    }
    let (_, dirs) = crate::agent::tools::choices::paths_in_task(task);
    let [dir] = dirs.as_slice() else {
        return None;
    };
    let text = listing_of(dir, steps)?;
    let by_type = text.lines().find(|l| l.starts_with("by type,"))?;
    let (_, counts) = by_type.split_once(": ")?;
    let counted: Vec<(usize, &str)> = counts
        .split(", ")
        .filter_map(|c| {
            let (n, e) = c.split_once(' ')?;
            Some((n.parse().ok()?, e.strip_prefix('.')?))
        })
        .collect();
    let lower = task.to_lowercase();
    let named = |e: &str| {
        lower.contains(&format!(".{e}"))
            || TYPE_WORDS.iter().any(|(word, x)| *x == e && has(word))
            || (matches!(e, "png" | "jpg" | "jpeg" | "svg" | "gif" | "webp")
                && (has("image") || has("images")))
    };
    let negated = has("not") || has("except") || has("isn") || has("other") || has("but");
    let once: Vec<&str> = counted
        .iter()
        .filter(|(n, e)| *n == 1 && named(e) != negated)
        .map(|(_, e)| *e)
        .collect();
    let [ext] = once.as_slice() else {
        return None;
    };
    let suffix = format!(".{ext}");
    // Entries are "path (N bytes)"; the count lines before them hold ": ".
    let path = text.lines().filter(|l| !l.contains(": ")).find_map(|l| {
        let p = l.split(" (").next()?.trim();
        p.ends_with(&suffix).then_some(p)
    })?;
    Some(format!("{path} (the only {suffix} file in {dir}/)"))
}

/// The exact terms the task names — identifiers (`LOG_LEVEL`, `max_conn`), quoted phrases
/// (`'hex bolt M8'`) and file names — that appear in none of `block` (compared without case).
/// A small model otherwise answers a question about a missing key with a neighbouring value.
pub fn absent_terms(task: &str, block: &str) -> Vec<String> {
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
            || (w.contains('.') && letters >= 2 && !w.ends_with('.'));
        if identifier {
            terms.push(w.to_string());
        }
    }
    let hay = block.to_lowercase();
    let mut out: Vec<String> = Vec::new();
    for t in terms {
        if !hay.contains(&t.to_lowercase()) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// What the tools found: the usable outputs and the workspace overview, without the calls'
/// arguments and without searches that matched nothing (both echo the words searched for).
pub(super) fn found_text(steps: &[Step], overview: Option<&str>) -> String {
    let mut out: String = overview.unwrap_or_default().to_string();
    for step in steps.iter().filter(|s| usable(s)) {
        let text = step.observation.text.trim_start();
        // A search that matched nothing echoes the words it looked for on its first line.
        let text = match text.strip_prefix(NO_MATCHES) {
            Some(rest) => rest.split_once('\n').map_or("", |(_, found)| found),
            None => text,
        };
        out.push('\n');
        out.push_str(text);
    }
    out
}

/// The answer when the task asks for a key the files it names do not hold: "What is LOG_LEVEL
/// in settings.py?" after settings.py was read and shows no LOG_LEVEL anywhere. Shown the file
/// and told the key is absent, a 0.5B model still answered with a neighbouring line
/// ("MAX_RETRIES = 5"); no model can answer from outputs that lack the key, so the answer is
/// that it was not found. Only exact keys (`LOG_LEVEL`, `max_conn`: with an underscore) and
/// quoted phrases count, and only once a named file has been read. A named file that does not
/// exist is answered the same way.
pub fn not_found_answer(task: &str, steps: &[Step], overview: Option<&str>) -> Option<String> {
    let named = crate::agent::tools::choices::named_paths(task);
    // A file the task names that does not exist (and no later call found): nothing can be
    // answered from it, whatever else was read.
    let missing = named.iter().map(|n| trim_rel(n)).find(|n| {
        let on_n = |s: &&Step| call_path(s) == Some(*n);
        steps.iter().filter(on_n).any(|s| {
            s.observation.kind
                == ObservationKind::ToolError {
                    kind: ToolErrorKind::NotFound,
                }
        }) && !steps
            .iter()
            .filter(on_n)
            .any(|s| s.observation.kind == ObservationKind::Output)
            && !found_elsewhere(n, steps)
    });
    if let Some(path) = missing {
        return Some(format!(
            "{path} was not found: it does not exist in the workspace."
        ));
    }
    let read: Vec<&str> = steps
        .iter()
        .filter(|s| s.observation.kind == ObservationKind::Output)
        .filter_map(call_path)
        .filter(|p| named.iter().any(|n| trim_rel(n) == *p))
        .collect();
    let first = read.first()?;
    // Every file the task names was looked at: the term may be in the one not read yet.
    let (files, _) = crate::agent::tools::choices::paths_in_task(task);
    if !files
        .iter()
        .all(|f| steps.iter().any(|s| call_path(s) == Some(trim_rel(f))))
    {
        return None;
    }
    let quoted = |t: &str| task.contains(&format!("'{t}'")) || task.contains(&format!("\"{t}\""));
    let exact: Vec<String> = absent_terms(task, &found_text(steps, overview))
        .into_iter()
        .filter(|t| (t.contains('_') || camel_case(t) || quoted(t)) && !named.contains(t))
        .collect();
    if let Some(term) = exact.first() {
        return Some(format!("{term} was not found in {first}."));
    }
    missing_section(task, steps, first)
}

/// The answer to "how many requests in access.log ended with HTTP status 500?": the requests
/// of a whole log read whose status field is that code, read by code. A status is the field
/// after a request's closing quote (`"GET / HTTP/1.1" 500 1024`, the common log format) or a
/// `status=500` / `status: 500` pair; the code as a substring also matches byte counts,
/// latencies and timestamps (the agent model answered 12 for 4).
pub fn status_count_answer(task: &str, steps: &[Step]) -> Option<String> {
    use std::sync::OnceLock;
    static RES: OnceLock<Option<[regex::Regex; 2]>> = OnceLock::new();
    let [asked, field] = RES
        .get_or_init(|| {
            Some([
                regex::Regex::new(r"(?i)\b(?:status|http|code|error)\s+(?:code\s+)?([1-5]\d\d)\b")
                    .ok()?,
                regex::Regex::new(r#"(?:" |\bstatus[=:] ?)([1-5]\d\d)\b"#).ok()?,
            ])
        })
        .as_ref()?;
    if !asks_count(task) {
        return None;
    }
    let code = asked.captures(task)?.get(1)?.as_str();
    let named = crate::agent::tools::choices::named_paths(task);
    for step in steps.iter().filter(|s| usable(s)) {
        let Some((path, text)) = whole_read_of_named(step, &named) else {
            continue;
        };
        let statuses: Vec<&str> = text
            .lines()
            .filter_map(crate::agent::tally::content)
            .filter_map(|l| field.captures(l).and_then(|c| c.get(1)).map(|m| m.as_str()))
            .collect();
        // A log of requests: most of its lines carry a status.
        let lines = text
            .lines()
            .filter_map(crate::agent::tally::content)
            .count();
        if statuses.len() < 5 || statuses.len() * 2 < lines {
            continue;
        }
        let n = statuses.iter().filter(|s| **s == code).count();
        return Some(format!(
            "{n} ({n} of the {} requests in {path} have status {code})",
            statuses.len()
        ));
    }
    None
}

/// Whether a bare file name (`robots.txt`, no folder) that is not at the workspace's top was
/// found deeper: a later call read a path ending in it, or a listing showed one.
pub(super) fn found_elsewhere(name: &str, steps: &[Step]) -> bool {
    if name.contains('/') {
        return false;
    }
    let deeper = format!("/{name}");
    let listed = format!("/{name} (");
    steps
        .iter()
        .filter(|s| s.observation.kind == ObservationKind::Output)
        .any(|s| {
            call_path(s).is_some_and(|p| p.ends_with(&deeper))
                || s.observation
                    .text
                    .lines()
                    .any(|l| l.trim().contains(&listed))
        })
}

/// Words that qualify a section noun without naming a section ("the main server", "the
/// default profile").
pub(super) const NOT_SECTION_NAMES: &[&str] = &[
    "main",
    "primary",
    "default",
    "current",
    "new",
    "old",
    "first",
    "last",
    "same",
    "whole",
    "entire",
    "local",
    "remote",
    "public",
    "private",
    "given",
    "named",
    "following",
    "this",
    "that",
    "each",
    "every",
    "other",
    "one",
    "only",
    "its",
    "their",
    "live",
];

/// "staging was not found in config/environments.yaml (its sections: development, test,
/// production)": the task asks about "the staging environment", and the file read is organized
/// in sections (YAML top-level keys over nested ones, `[sections]`) none of which, nor any other
/// line, holds that name. Shown the other environments, the 0.5B model answered with the
/// first one's host.
pub(super) fn missing_section(task: &str, steps: &[Step], first: &str) -> Option<String> {
    use std::sync::OnceLock;
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let re = RE
        .get_or_init(|| {
            regex::Regex::new(
                r"(?i)\b(?:the|an?)\s+\[?([a-z][a-z0-9_-]*)\]?\s+(environment|env|section|profile|stage|tier|cluster|region|namespace|workspace|deployment)\b",
            )
            .ok()
        })
        .as_ref()?;
    let name = re
        .captures_iter(task)
        .map(|c| c[1].to_lowercase())
        .find(|n| !NOT_SECTION_NAMES.contains(&n.as_str()))?;
    let mut sections: Vec<String> = Vec::new();
    let mut hay = String::new();
    for step in steps.iter().filter(|s| usable(s)) {
        let lines: Vec<&str> = whole_text(step)
            .lines()
            .filter_map(crate::agent::tally::content)
            .collect();
        for (i, line) in lines.iter().enumerate() {
            hay.push_str(&line.to_lowercase());
            hay.push('\n');
            let t = line.trim_end();
            let section = if let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']'))
            {
                Some(inner.trim())
            } else if let Some(key) = t.strip_suffix(':') {
                // A top-level YAML key whose next line is indented under it.
                let nested = lines
                    .get(i + 1)
                    .is_some_and(|n| n.starts_with(' ') || n.starts_with('\t'));
                (!key.starts_with([' ', '\t', '-', '#']) && nested).then_some(key.trim())
            } else {
                None
            };
            if let Some(sec) = section.filter(|x| !x.is_empty()) {
                if !sections.iter().any(|have| have == sec) {
                    sections.push(sec.to_string());
                }
            }
        }
    }
    if sections.len() < 2 || words(&hay).contains(&name) {
        return None;
    }
    Some(format!(
        "{name} was not found in {first} (its sections: {}).",
        sections.join(", ")
    ))
}

/// How far past the event line [`line_after`] looks.
pub(super) const AFTER_LINES: usize = 200;

/// For a question about what happened "after" an event ("what pid did it get after the
/// restart?"): the first line after the best line (the event) in the same output that holds a
/// word of the question the event line lacks ("pid"), said as such. The pid before the restart
/// sits in the log's first line, which a small model copied.
pub(super) fn line_after(task: &str, steps: &[Step], event: &str) -> Option<String> {
    let tw = words(task);
    if !tw.iter().any(|w| w == "after") {
        return None;
    }
    let event_words = words(event);
    // "What pid …", "which port …": the asked noun, else every word of the question.
    let asked: Vec<String> = tw
        .windows(2)
        .filter(|p| p[0] == "what" || p[0] == "which")
        .map(|p| p[1].clone())
        .collect();
    let wanted: Vec<String> = if asked.is_empty() {
        keywords(task)
    } else {
        asked
    }
    .into_iter()
    .filter(|k| !event_words.contains(k))
    .collect();
    for step in steps.iter().filter(|s| usable(s)) {
        let lines: Vec<&str> = whole_text(step).lines().collect();
        let content = |l: &str| {
            crate::agent::tally::content(l)
                .unwrap_or(l)
                .trim()
                .to_string()
        };
        let Some(at) = lines.iter().position(|l| content(l) == event.trim()) else {
            continue;
        };
        for line in lines.iter().skip(at + 1).take(AFTER_LINES) {
            let c = content(line);
            let lw = words(&c);
            if let Some(k) = wanted.iter().find(|k| lw.contains(k)) {
                return Some(format!("The first line after it that names {k}:\n{c}"));
            }
        }
    }
    None
}
