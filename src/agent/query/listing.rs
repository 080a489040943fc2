//! The listing: the arguments of a first `list_dir` call written by a short, focused request
//! over the workspace's folders and file extensions, as the table query writes a first
//! `table` call.
//!
//! From a long transcript the 0.5B planner listed the right folder but left out the filter
//! the question states ("how many Markdown (.md) files are inside docs/" listed every file of
//! docs/, then searched for "docs" and answered from that), or listed one subfolder after
//! another and answered from the last. `list_dir` can filter by extension and by files or folders and counts what it
//! keeps, and asked with only the question, the folders and the extensions in front of it, the
//! model sets those arguments. The model still writes the listing; the constraint keeps it to
//! what the workspace holds: the folder is one of its folders and the extension one its files
//! have.

use serde_json::{json, Value};

use crate::agent::tools::choices::{same_path, WorkspacePaths};
use crate::agent::tools::Sandbox;
use crate::agent::types::PlannerError;
use crate::lm::{CancelToken, ChatMessage, LanguageModel, Role};
use crate::lm::{SamplingParams, Usage};

/// How a step whose arguments the request wrote is marked in the run's record.
pub const HOW: &str = "written by a focused request over the workspace's folders";

/// The system prompt of the listing request.
pub const SYSTEM: &str = "You turn a question about the files and folders of a project into one directory listing. Reply with one JSON object:\n\
\"path\": the folder the question is about (\".\" for the whole project);\n\
\"depth\": \"direct\" (only what sits directly in that folder) or \"all\" (its subfolders too, at any depth);\n\
\"show\": \"files\", \"folders\" or \"both\";\n\
\"ext\": the file extension the question restricts the files to, or \"any\".";

/// Most tokens of the reply.
const MAX_TOKENS: usize = 80;

/// The `ext` choice that is no filter.
const ANY: &str = "any";

/// What the listing request is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ListingRequest {
    /// The system and user messages.
    pub messages: Vec<ChatMessage>,
    /// The schema of the reply.
    pub schema: Value,
}

/// A file's extension as the request offers it (`.md`); `None` for `Makefile` or `.env`.
fn extension(file: &str) -> Option<String> {
    let name = file.rsplit('/').next().unwrap_or(file);
    crate::agent::tools::files::extension_of(name).map(|e| format!(".{e}"))
}

/// The listing request for `task` over the workspace `paths`, of the folder `planned` (the
/// planner's choice) when that is one of its folders: the planner named the right folder far
/// more often than the filter, and offered every folder the request picked `.` for "inside
/// docs/".
pub fn listing_request(
    task: &str,
    paths: &WorkspacePaths,
    planned: Option<&str>,
) -> ListingRequest {
    let mut folders: Vec<String> = vec![".".to_string()];
    folders.extend(paths.dirs.iter().map(|d| format!("{d}/")));
    if let Some(p) = planned.and_then(|p| folders.iter().find(|f| same_path(f, p))) {
        folders = vec![p.clone()];
    }
    let mut exts: Vec<String> = paths.files.iter().filter_map(|f| extension(f)).collect();
    exts.sort();
    exts.dedup();
    // The extension is one the question names (".yaml", "md") when it names exactly one, as
    // a table query's condition is required on a value the question names: offered `any`
    // too, the model kept `any` for "how many .yaml files" and for ".json files (.jsonl do
    // not count)" alike. The listing still counts everything the filter left out. With
    // several named, the model picks one of them or `any` ("every file is a .png, .jpg or
    // .svg except one"); with none, `any` or any extension the files have.
    let named = crate::agent::words::words(task);
    let (mut ext_choices, rest): (Vec<String>, Vec<String>) = exts
        .into_iter()
        .partition(|e| named.iter().any(|w| w == e.trim_start_matches('.')));
    match ext_choices.len() {
        0 => {
            ext_choices.push(ANY.to_string());
            ext_choices.extend(rest);
        }
        1 => {}
        _ => ext_choices.push(ANY.to_string()),
    }
    let user = format!(
        "{}: {}\nFile extensions: {}\n\nQuestion: {task}",
        if folders.len() == 1 {
            "Folder"
        } else {
            "Folders"
        },
        folders.join(", "),
        match ext_choices
            .iter()
            .filter(|e| *e != ANY)
            .cloned()
            .collect::<Vec<_>>()
        {
            shown if shown.is_empty() => "none".to_string(),
            shown => shown.join(", "),
        }
    );
    ListingRequest {
        messages: vec![
            ChatMessage::new(Role::System, SYSTEM),
            ChatMessage::new(Role::User, user),
        ],
        schema: json!({
            "type": "object",
            "properties": {
                "path": {"enum": folders},
                "depth": {"enum": ["direct", "all"]},
                "show": {"enum": ["files", "folders", "both"]},
                "ext": {"enum": ext_choices}
            },
            "required": ["path", "depth", "show", "ext"],
            "additionalProperties": false
        }),
    }
}

/// The `list_dir` arguments of a reply (`{"path": "docs/", "depth": "all", "show": "files",
/// "ext": ".md"}` is `{"path": "docs/", "recursive": true, "ext": "md"}`); `None` when the
/// reply is not a listing. Files are listed with the folders that hold them (an unfiltered
/// listing counts files by folder and by type); folders have no extension, so an `ext` with
/// `show: folders` is dropped.
pub fn arguments(reply: &Value) -> Option<Value> {
    let s = |k: &str| reply.get(k).and_then(Value::as_str);
    let mut args = json!({ "path": s("path")?, "recursive": s("depth")? == "all" });
    let ext = s("ext")?;
    if s("show")? == "folders" {
        args["kind"] = json!("dirs");
    } else if ext != ANY {
        args["ext"] = json!(ext.trim_start_matches('.'));
    }
    Some(args)
}

/// Write the arguments of a first `list_dir` call for `task` over the workspace `ws` (of the
/// folder `planned`, the planner's, when it is one) and the tokens it used; `None` when the workspace is too large to offer its folders or the reply
/// is not a listing (the planner's call runs).
pub fn write_listing(
    model: &mut dyn LanguageModel,
    sampling: &SamplingParams,
    task: &str,
    ws: &Sandbox,
    planned: Option<&str>,
    cancel: &CancelToken,
) -> Result<Option<(Value, Usage)>, PlannerError> {
    let Some(paths) = WorkspacePaths::scan(ws.root()) else {
        return Ok(None);
    };
    let req = listing_request(task, &paths, planned);
    let mut usage = Usage::default();
    let reply = super::ask_json(
        model,
        sampling,
        req.messages,
        req.schema,
        MAX_TOKENS,
        &mut usage,
        cancel,
        "listing",
    )?;
    Ok(reply.as_ref().and_then(arguments).map(|a| (a, usage)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::answer::tests::Scripted;
    use crate::lm::Constraint;

    fn paths() -> WorkspacePaths {
        WorkspacePaths {
            files: [
                "README.md",
                "docs/guide/intro.md",
                "docs/index.md",
                "docs/openapi.yaml",
                "src/main.rs",
                "Makefile",
            ]
            .map(String::from)
            .to_vec(),
            dirs: ["docs", "docs/guide", "src"].map(String::from).to_vec(),
        }
    }

    fn enum_of(req: &ListingRequest, key: &str) -> Vec<String> {
        req.schema["properties"][key]["enum"]
            .as_array()
            .expect("an enum")
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    }

    #[test]
    fn a_listing_offers_the_workspaces_folders_and_the_extensions_the_question_names() {
        // The planner's folder, when it is one, is the only choice.
        let task = "how many .md files live under docs, subfolders included?";
        let req = listing_request(task, &paths(), Some("./docs"));
        assert_eq!(enum_of(&req, "path"), ["docs/"]);
        // One extension named: the filter is required.
        assert_eq!(enum_of(&req, "ext"), [".md"]);
        assert!(
            req.messages[1]
                .content
                .starts_with("Folder: docs/\nFile extensions: .md\n\nQuestion: how many"),
            "{}",
            req.messages[1].content
        );
        // A folder the workspace lacks: every folder is offered, and with no extension named,
        // `any` first, then every extension the files have (a file without one adds none).
        let req = listing_request("what is in the project?", &paths(), Some("nowhere"));
        assert_eq!(enum_of(&req, "path"), [".", "docs/", "docs/guide/", "src/"]);
        assert_eq!(enum_of(&req, "ext"), ["any", ".md", ".rs", ".yaml"]);
        // Two named: the model picks one of them or none.
        let req = listing_request("every file is .md or .yaml but one; which?", &paths(), None);
        assert_eq!(enum_of(&req, "ext"), [".md", ".yaml", "any"]);
        assert_eq!(enum_of(&req, "depth"), ["direct", "all"]);
    }

    #[test]
    fn a_reply_becomes_the_list_dir_arguments() {
        let args = |r: Value| arguments(&r);
        assert_eq!(
            args(json!({"path": "docs/", "depth": "all", "show": "files", "ext": ".md"})),
            Some(json!({"path": "docs/", "recursive": true, "ext": "md"}))
        );
        assert_eq!(
            args(json!({"path": "src/", "depth": "direct", "show": "folders", "ext": ".md"})),
            Some(json!({"path": "src/", "recursive": false, "kind": "dirs"})),
            "folders have no extension"
        );
        assert_eq!(
            args(json!({"path": ".", "depth": "direct", "show": "both", "ext": "any"})),
            Some(json!({"path": ".", "recursive": false}))
        );
        assert_eq!(args(json!({"path": "."})), None);
    }

    #[test]
    fn the_listing_is_the_models_and_a_reply_that_is_no_listing_leaves_the_planners_call() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(t.path().join("docs/guide")).expect("mkdir");
        for f in ["docs/index.md", "docs/guide/intro.md", "docs/logo.png"] {
            std::fs::write(t.path().join(f), "x").expect("write");
        }
        let ws = Sandbox::new(t.path()).expect("sandbox");
        let task = "How many .md files are in docs/ and below?";
        let mut lm =
            Scripted::new(&[r#"{"path": "docs/", "depth": "all", "show": "files", "ext": ".md"}"#]);
        let sampling = SamplingParams::default();
        let cancel = CancelToken::new();
        let (args, _) = write_listing(&mut lm, &sampling, task, &ws, Some("docs"), &cancel)
            .expect("no error")
            .expect("a listing");
        assert_eq!(
            args,
            json!({"path": "docs/", "recursive": true, "ext": "md"})
        );
        assert!(matches!(
            &lm.requests[0].constraint,
            Some(Constraint::JsonSchema(s)) if s["properties"]["ext"]["enum"] == json!([".md"])
        ));
        let mut lm = Scripted::new(&["{}"]);
        assert!(write_listing(&mut lm, &sampling, task, &ws, None, &cancel)
            .expect("no error")
            .is_none());
    }
}
