//! Path arguments typed by the workspace: in a small workspace, the file tools' `path`
//! arguments become an enum of the paths that exist (plus any file the task names), so the
//! output constraint can only produce a path the tool will accept.
//!
//! A 0.5B planner shown `config.toml` in the listing still called `read_file` with `"."` and
//! `list_dir` with a folder the task mentioned but the workspace lacks. With the enum, a wrong
//! path is not a sentence the grammar allows. A file the task names that does not exist stays
//! in the enum on purpose: reading it is how the agent learns, from the tool's not-found
//! error, that it is missing.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::{Tool, Toolset, WithSchema};

/// Workspaces with more paths than this keep free-text path arguments.
pub const MAX_CHOICES: usize = 300;

/// Folders not shown to the agent's path choices.
const SKIPPED_DIRS: &[&str] = &[".boyd", ".git"];

/// The paths in a workspace, relative to its root, with `/` separators.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspacePaths {
    /// Regular files.
    pub files: Vec<String>,
    /// Folders (without a trailing `/`).
    pub dirs: Vec<String>,
}

impl WorkspacePaths {
    /// Walk `root` (links not followed, 16 levels at most); `None` when there are more than
    /// [`MAX_CHOICES`] paths.
    /// boyd's own files ([`super::Private::from_env`]) are left out.
    pub fn scan(root: &Path) -> Option<Self> {
        let mut out = Self::default();
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let private = super::Private::from_env();
        walk(&root, &root, &private, "", 0, &mut out)?;
        out.files.sort();
        out.dirs.sort();
        Some(out)
    }
}

fn walk(
    root: &Path,
    dir: &Path,
    private: &super::Private,
    prefix: &str,
    depth: usize,
    out: &mut WorkspacePaths,
) -> Option<()> {
    if depth > 16 {
        return Some(());
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Some(());
    };
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Ok(ft) = ent.file_type() else { continue };
        if private.hides(root, &ent.path()) {
            continue;
        }
        let rel = format!("{prefix}{name}");
        if ft.is_dir() {
            if depth == 0 && SKIPPED_DIRS.contains(&name.as_str()) {
                continue;
            }
            out.dirs.push(rel.clone());
            walk(
                root,
                &ent.path(),
                private,
                &format!("{rel}/"),
                depth + 1,
                out,
            )?;
        } else if ft.is_file() {
            out.files.push(rel);
        }
        if out.files.len() + out.dirs.len() > MAX_CHOICES {
            return None;
        }
    }
    Some(())
}

/// A relative path without a leading `./` or trailing `/`: `./data/` and `data` name one folder.
pub fn trim_rel(p: &str) -> &str {
    p.trim_start_matches("./").trim_end_matches('/')
}

/// `p` normalized by [`trim_rel`] when it is a relative path that stays inside the workspace
/// (not empty, not absolute, no `..`): a path a task may name.
pub fn relative_in_task(p: &str) -> Option<&str> {
    let p = trim_rel(p);
    (!p.is_empty() && !p.starts_with('/') && !p.split('/').any(|c| c == "..")).then_some(p)
}

/// Whether two relative paths name the same file or folder ([`trim_rel`] of each).
pub fn same_path(a: &str, b: &str) -> bool {
    trim_rel(a) == trim_rel(b)
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

/// Relative file and folder names the task mentions (`deps.toml`, `logs/worker.log`,
/// `reports/`), normalized; absolute paths and `..` are left out.
pub fn paths_in_task(task: &str) -> (Vec<String>, Vec<String>) {
    static FILE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static DIR: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        regex::Regex::new(
            r"(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\.[A-Za-z][A-Za-z0-9]{0,5}\b",
        )
        .ok()
    });
    let dir = DIR.get_or_init(|| regex::Regex::new(r"(?:[A-Za-z0-9_.-]+/)+").ok());
    let clean = |p: &str| relative_in_task(p).map(str::to_string);
    // A match right after a `/` is the tail of an absolute path.
    let after_slash = |start: usize| task[..start].ends_with('/');
    // A host name ("uploads.example.com") or a mail address is not a file.
    let host = |m: &regex::Match| {
        let ext = m.as_str().rsplit('.').next().unwrap_or_default();
        matches!(ext, "com" | "org" | "net" | "edu" | "gov") || task[..m.start()].ends_with('@')
    };
    let mut files: Vec<String> = file
        .as_ref()
        .map(|re| {
            re.find_iter(task)
                .filter(|m| !after_slash(m.start()) && !host(m))
                .filter_map(|m| clean(m.as_str()))
                .collect()
        })
        .unwrap_or_default();
    // Dotfiles (".env", "config/.npmrc"), but not an extension named as a kind of file (".py
    // files", "the .md extension").
    static DOTFILE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    if let Some(re) = DOTFILE
        .get_or_init(|| {
            regex::Regex::new(
                r"(?:^|[\s(`'\x22])((?:[A-Za-z0-9_-]+/)*\.[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9])",
            )
            .ok()
        })
        .as_ref()
    {
        for c in re.captures_iter(task) {
            let Some(m) = c.get(1) else { continue };
            let next = task[m.end()..]
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            let kind = ["file", "files", "extension", "extensions", "suffix"]
                .iter()
                .any(|k| next.trim_matches(|c: char| !c.is_alphanumeric()) == *k);
            // ".png" in "(.png, .jpg or .svg)" is a type, not a file named ".png".
            let ext = m.as_str().rsplit('/').next().unwrap_or_default();
            let common_type = matches!(
                ext.trim_start_matches('.'),
                "png"
                    | "jpg"
                    | "jpeg"
                    | "gif"
                    | "svg"
                    | "webp"
                    | "md"
                    | "txt"
                    | "py"
                    | "rs"
                    | "go"
                    | "js"
                    | "ts"
                    | "json"
                    | "yaml"
                    | "yml"
                    | "toml"
                    | "csv"
                    | "log"
                    | "sql"
                    | "html"
                    | "css"
                    | "sh"
                    | "ini"
                    | "xml"
                    | "pdf"
                    | "c"
                    | "h"
                    | "cpp"
                    | "java"
            );
            if kind || common_type || task[m.end()..].starts_with(|c: char| c.is_alphanumeric()) {
                continue;
            }
            if let Some(p) = clean(m.as_str()) {
                if !files.contains(&p) {
                    files.push(p);
                }
            }
        }
    }
    let dirs: Vec<String> = dir
        .as_ref()
        .map(|re| {
            re.find_iter(task)
                .filter(|m| !after_slash(m.start()))
                .filter(|m| {
                    // A folder named on its own ("data/"), not the folder part of a file path.
                    !task[m.end()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
                .filter_map(|m| clean(m.as_str()))
                .collect()
        })
        .unwrap_or_default();
    (files, dirs)
}

/// Most words in a typed search query.
pub const QUERY_MAX_WORDS: usize = 5;

/// The JSON-schema pattern of a query of 1..=[`QUERY_MAX_WORDS`] of `words` separated by
/// single spaces (each word is letters, digits, `_` or `-`, so none needs escaping beyond `-`).
pub fn query_pattern(words: &[String]) -> String {
    let alt = words
        .iter()
        .map(|w| w.replace('-', "\\-"))
        .collect::<Vec<_>>()
        .join("|");
    format!("^({alt})( ({alt})){{0,{}}}$", QUERY_MAX_WORDS - 1)
}

/// `inner`'s schema with its `path` an enum of `choices` and, when `query_words` is not empty,
/// its `query` made of those words.
fn typed_schema(inner: &dyn Tool, choices: &[String], query_words: &[String]) -> Value {
    let mut schema = inner.args_schema();
    plain_filters(&mut schema);
    if let Some(path) = schema
        .get_mut("properties")
        .and_then(Value::as_object_mut)
        .and_then(|p| p.get_mut("path"))
    {
        *path = serde_json::json!({ "enum": choices });
    }
    if !query_words.is_empty() {
        if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            if props.contains_key("query") {
                props.insert(
                    "query".into(),
                    serde_json::json!({
                        "type": "string",
                        "pattern": query_pattern(query_words),
                        "description": "words of the task to find"
                    }),
                );
                // Task words are plain words; a regex flag would only let the model switch the
                // matching off.
                props.remove("regex");
            }
        }
    }
    schema
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

/// Optional arguments that change what a tool returns are a trap for a small planner: under
/// the constraint it fills in every property offered. On the dev split, `count: true` on a
/// look-up and `kind: "dirs"` beside `ext` cost four tasks, and `ext` offered only as the
/// extensions the task writes still lost one (the filtered listing answered it at the first
/// call; the planner listed on). So `count`, `kind` and `ext` are left out of `schema`; the
/// tools still take them from callers that pass them.
fn plain_filters(schema: &mut Value) {
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for name in ["count", "kind", "ext"] {
            props.remove(name);
        }
    }
}

/// `tools` with [`plain_filters`] applied to the file tools' schemas, for a workspace whose
/// paths are not typed.
pub fn with_plain_filters(tools: &Toolset) -> Toolset {
    let mut out = tools.clone();
    for name in [super::files::LIST_DIR, "search_text"] {
        if let Some(inner) = tools.get(name) {
            let mut schema = inner.args_schema();
            plain_filters(&mut schema);
            out.add(Arc::new(WithSchema::new(inner.clone(), schema)));
        }
    }
    out
}

/// The words a typed search query may use: the task's content words that are plain words or
/// identifiers (paths and file names are left to the `path` argument).
pub fn query_words(task: &str) -> Vec<String> {
    let mut w: Vec<String> = task
        .split(|c: char| {
            c.is_whitespace() || matches!(c, ',' | ';' | '?' | '!' | '"' | '(' | ')' | ':')
        })
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| {
            w.chars().count() >= 2
                && w.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
                && !crate::agent::words::STOPWORDS.contains(&w.as_str())
        })
        .collect();
    w.sort();
    w.dedup();
    w
}

/// `tools` with the path arguments of `read_file`, `list_dir` and `search_text` typed by the
/// workspace at `root` and the paths `task` names, and `search_text`'s query typed by the
/// task's words; `tools` unchanged when the workspace is too large to enumerate.
///
/// A 0.5B planner searched for the guard's own sentence or for the timestamp of the line it
/// had just read; a query made of the task's words cannot be either. A folder is offered as
/// `data` and `data/`: with only `data`, a model that wrote the task's `data/` had to go on to
/// a subfolder.
pub fn constrain_paths(tools: &Toolset, root: &Path, task: &str) -> Toolset {
    let Some(ws) = WorkspacePaths::scan(root) else {
        return with_plain_filters(tools);
    };
    let (task_files, task_dirs) = paths_in_task(task);
    let files = dedup(ws.files.iter().cloned().chain(task_files).collect());
    let dirs = dedup(
        std::iter::once(".".to_string())
            .chain(
                ws.dirs
                    .iter()
                    .cloned()
                    .chain(task_dirs)
                    .flat_map(|d| [format!("{d}/"), d]),
            )
            .collect(),
    );
    let words = query_words(task);
    let mut out = tools.clone();
    let plan: [(&str, Vec<String>); 3] = [
        ("read_file", files.clone()),
        (super::files::LIST_DIR, dirs.clone()),
        (
            "search_text",
            dedup(dirs.into_iter().chain(files.iter().cloned()).collect()),
        ),
    ];
    for (name, choices) in plan {
        if choices.is_empty() {
            continue;
        }
        if let Some(inner) = tools.get(name) {
            let query: &[String] = if name == "search_text" { &words } else { &[] };
            let schema = typed_schema(inner.as_ref(), &choices, query);
            out.add(Arc::new(WithSchema::new(inner.clone(), schema)));
        }
    }
    if let Some(inner) = tools.get(super::table::TABLE) {
        let data: Vec<String> = files
            .iter()
            .filter(|f| super::table::read::kind_of(f).is_some())
            .cloned()
            .collect();
        if let Some(schema) = table_schema(root, &data, &task_files_of(task)) {
            out.add(Arc::new(WithSchema::new(inner.clone(), schema)));
        }
    }
    out
}

/// The files `task` names.
fn task_files_of(task: &str) -> Vec<String> {
    paths_in_task(task).0
}

/// The table tool's schema for the data files `data` of the workspace at `root`: `path` an
/// enum of them, and `field` an enum of the file's own fields when the file is known: the one
/// data file the task names, or the workspace's only one. `None` without data files.
fn table_schema(root: &Path, data: &[String], named: &[String]) -> Option<Value> {
    if data.is_empty() {
        return None;
    }
    let named_data: Vec<&String> = named.iter().filter(|n| data.contains(n)).collect();
    let known = match (named_data.as_slice(), data) {
        ([one], _) => Some(one.as_str()),
        ([], [only]) => Some(only.as_str()),
        _ => None,
    };
    let fields = known.and_then(|p| {
        let ws = super::Sandbox::new(root).ok()?;
        super::table::fields_with_values(&ws, p)
    });
    Some(super::table::schema(Some(data), fields.as_deref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_names_files_and_folders() {
        let (f, d) = paths_in_task(
            "Add up reports/q3.csv and ./reports/q4.csv; how many files are in data/? Not /etc/passwd.x or ../up.txt",
        );
        assert_eq!(f, vec!["reports/q3.csv", "reports/q4.csv"]);
        assert_eq!(d, vec!["data"]);
        let (f, _) =
            paths_in_task("Which version of serde_json is pinned in deps.toml? It is 1.0.128.");
        assert_eq!(f, vec!["deps.toml"]);
    }

    #[test]
    fn dotfiles_are_named_and_host_names_and_extensions_are_not() {
        let (f, _) = paths_in_task(
            "How many connections are left, given DB_POOL_SIZE in .env and deploy.ini?",
        );
        assert_eq!(f, vec!["deploy.ini", ".env"]);
        let (f, _) = paths_in_task(
            "What body size does nginx accept for uploads.example.com in nginx/site.conf?",
        );
        assert_eq!(f, vec!["nginx/site.conf"]);
        let (f, _) = paths_in_task("How many .py files and .md files are there? Mail ops@corp.io.");
        assert!(f.is_empty(), "{f:?}");
        let (f, _) = paths_in_task("Every file is an image (.png, .jpg or .svg) except one.");
        assert!(f.is_empty(), "{f:?}");
        let (f, _) = paths_in_task("Which key in config/.npmrc sets the registry?");
        assert_eq!(f, vec!["config/.npmrc"]);
    }

    #[test]
    fn file_tools_get_an_enum_of_existing_and_named_paths() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(dir.path().join("logs/old")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join(".boyd")).expect("mkdir");
        std::fs::write(dir.path().join("config.toml"), "x").expect("write");
        std::fs::write(dir.path().join("logs/old/a.log"), "x").expect("write");
        let tools = constrain_paths(
            &Toolset::builtin(None),
            dir.path(),
            "What is in secrets.toml?",
        );
        let names: Vec<&str> = tools.names();
        assert_eq!(
            names,
            Toolset::builtin(None).names(),
            "same tools, same order"
        );
        let read = tools.get("read_file").expect("test value").args_schema();
        assert_eq!(
            read["properties"]["path"]["enum"],
            serde_json::json!(["config.toml", "logs/old/a.log", "secrets.toml"])
        );
        assert_eq!(read["required"], serde_json::json!(["path"]));
        let list = tools.get("list_dir").expect("test value").args_schema();
        assert_eq!(
            list["properties"]["path"]["enum"],
            serde_json::json!([".", "logs/", "logs", "logs/old/", "logs/old"])
        );
        assert_eq!(list["properties"]["recursive"]["type"], "boolean");
        assert!(
            tools.get("calculator").expect("test value").args_schema()["properties"]["expression"]
                .is_object()
        );
    }

    #[test]
    fn the_planners_constraint_leaves_out_the_filters_the_tools_take() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(dir.path().join("docs")).expect("mkdir");
        std::fs::write(dir.path().join("docs/a.md"), "x").expect("write");
        let task = "How many .md files are in docs/?";
        let typed = constrain_paths(&Toolset::builtin(None), dir.path(), task);
        let plain = with_plain_filters(&Toolset::builtin(None));
        for tools in [typed, plain] {
            let list = tools.get("list_dir").expect("tool").args_schema();
            let search = tools.get("search_text").expect("tool").args_schema();
            for (schema, name) in [(&list, "ext"), (&list, "kind"), (&search, "count")] {
                assert!(schema["properties"].get(name).is_none(), "{name}: {schema}");
            }
            assert!(list["properties"].get("recursive").is_some());
        }
        // The tools themselves still take them.
        let full = Toolset::builtin(None);
        let full = full.get("search_text").expect("tool").args_schema();
        assert!(full["properties"].get("count").is_some());
    }

    #[test]
    fn search_queries_are_made_of_the_task_words() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::write(dir.path().join("app.log"), "x").expect("write");
        let task = "app.log records when the disk filled up. What was the job id of that backup?";
        assert_eq!(
            query_words(task),
            vec!["backup", "disk", "filled", "id", "job", "records", "up"]
        );
        let tools = constrain_paths(&Toolset::builtin(None), dir.path(), task);
        let search = tools.get("search_text").expect("search").args_schema();
        assert!(search["properties"].get("regex").is_none());
        let pattern = search["properties"]["query"]["pattern"]
            .as_str()
            .expect("a pattern");
        let re = regex::Regex::new(pattern).expect("the pattern compiles");
        assert!(re.is_match("disk backup"));
        assert!(re.is_match("backup job id"));
        assert!(!re.is_match("System guard: you already ran this exact action"));
        assert!(!re.is_match("2026-03-02T08:00:00.600Z INFO"));
        assert!(
            !re.is_match("disk disk disk disk disk disk"),
            "at most five words"
        );
        let read = tools.get("read_file").expect("read").args_schema();
        assert!(read["properties"].get("query").is_none());
    }

    #[test]
    fn a_large_workspace_keeps_free_text_paths() {
        let dir = tempfile::tempdir().expect("tmp");
        for i in 0..=MAX_CHOICES {
            std::fs::write(dir.path().join(format!("f{i}.txt")), "x").expect("write");
        }
        let tools = constrain_paths(&Toolset::builtin(None), dir.path(), "t");
        let read = tools.get("read_file").expect("test value").args_schema();
        assert!(read["properties"]["path"].get("enum").is_none());
    }
}
