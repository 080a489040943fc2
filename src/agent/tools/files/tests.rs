//! Tests of the file tools.

use std::path::Path;

use super::list::most_files;
use super::search::line_shape;
use super::*;
use crate::agent::tools::{Sandbox, Tool, ToolContext};

fn touch(root: &Path, rel: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("test value")).expect("test value");
    std::fs::write(p, "x").expect("test value");
}

#[test]
fn most_files_names_the_largest_subfolder_counting_its_tree() {
    let t = tempfile::tempdir().expect("test value");
    for f in [
        "logs/a/1",
        "logs/a/2",
        "logs/b/1",
        "logs/b/deep/2",
        "logs/b/deep/3",
        "logs/c/1",
    ] {
        touch(t.path(), f);
    }
    let ws = Sandbox::new(t.path()).expect("test value");
    let logs = ws.root().join("logs");
    let line = most_files(&ws, &logs, "logs/").expect("test value");
    assert_eq!(
        line,
        "most files: logs/b/ (3 files, counting its subfolders; next: logs/a/ with 2)"
    );
    touch(t.path(), "logs/a/3");
    let tie = most_files(&ws, &logs, "logs/").expect("test value");
    assert!(
        tie.starts_with("most files: logs/a/ and logs/b/ (3 files each"),
        "{tie}"
    );
    // One subfolder: nothing to compare.
    assert_eq!(most_files(&ws, &logs.join("b"), "logs/b/"), None);
}

#[test]
fn a_search_that_finds_none_of_its_words_shows_the_tasks_best_lines() {
    let t = tempfile::tempdir().expect("test value");
    let mut log = String::new();
    for i in 0..200 {
        log.push_str(&format!("INFO worker: job {i} finished\n"));
    }
    log.push_str("ERROR backup: write failed: No space left on device (job_id=backup-7731)\n");
    std::fs::write(t.path().join("app.log"), log).expect("test value");
    let mut ctx = ToolContext {
        workspace: Some(crate::agent::tools::Sandbox::new(t.path()).expect("test value")),
        blob_dir: t.path().join("blobs"),
        cancel: crate::lm::CancelToken::new(),
        task: Some(
            "app.log records when the disk filled up and a backup failed. What was the job id?"
                .into(),
        ),
    };
    let args = serde_json::json!({"query": "disk", "path": "app.log"});
    let out = SearchText.call(args.clone(), &ctx).expect("test value");
    assert!(out.starts_with(NO_MATCHES), "{out}");
    let fallback: Vec<&str> = out.lines().skip(2).collect();
    assert!(fallback[0].contains("backup-7731"), "{out}");
    // Without a task (or for a regex), no task words: only the log's rare lines follow.
    ctx.task = None;
    let out = SearchText.call(args, &ctx).expect("test value");
    assert!(!out.contains("task's words"), "{out}");
    assert!(
        out.lines()
            .last()
            .is_some_and(|l| l.contains("backup-7731")),
        "{out}"
    );
}

/// `n` routine log lines (`routine(i)`), with `event` right after line `at` (0-based).
fn log_with_event(n: usize, routine: impl Fn(usize) -> String, at: usize, event: &str) -> String {
    let mut log = String::new();
    for i in 0..n {
        log.push_str(&routine(i));
        log.push('\n');
        if i == at {
            log.push_str(event);
            log.push('\n');
        }
    }
    log
}

/// A tool context over the workspace `root`, for no task.
fn ctx_in(root: &Path) -> ToolContext {
    ToolContext {
        workspace: Some(crate::agent::tools::Sandbox::new(root).expect("test value")),
        blob_dir: root.join("blobs"),
        cancel: crate::lm::CancelToken::new(),
        task: None,
    }
}

#[test]
fn a_long_files_preview_leads_with_the_tasks_lines_and_its_events() {
    let t = tempfile::tempdir().expect("test value");
    let log = log_with_event(
        400,
        |i| {
            format!(
                "2026-05-01T09:{:02}:{:02}Z INFO worker: job {i} done",
                i / 60,
                i % 60
            )
        },
        333,
        "2026-05-01T09:05:33Z ERROR archiver: nightly archive failed code=A77",
    );
    std::fs::write(t.path().join("jobs.log"), log).expect("test value");
    let ctx = ctx_in(t.path());
    let out = ReadFile
        .call(serde_json::json!({"path": "jobs.log"}), &ctx)
        .expect("test value");
    // The output itself stays whole (the answer step reads it).
    assert!(
        out.starts_with("jobs.log (401 lines):\n1: "),
        "{}",
        &out[..80]
    );
    let task = "Which code did the failed archive run log in jobs.log?";
    let preview = read_preview("read_file", task, &out).expect("a preview");
    let event = "335: 2026-05-01T09:05:33Z ERROR archiver: nightly archive failed code=A77";
    let lines: Vec<&str> = preview.lines().collect();
    assert_eq!(lines[0], "jobs.log (401 lines), too long to show whole.");
    assert_eq!(lines[2], event, "{preview}");
    // Shown once, not again among the rare lines; the first lines follow.
    assert_eq!(preview.matches("code=A77").count(), 1, "{preview}");
    assert!(preview.contains("\n1: 2026-05-01T09:00:00Z INFO worker: job 0 done\n"));
    // Other tools, short files and ranged reads keep the usual condensed view.
    assert_eq!(read_preview("search_text", task, &out), None);
    let short = "a.txt (2 lines):\n1: x\n2: y";
    assert_eq!(read_preview("read_file", task, short), None);
    let part = ReadFile
        .call(
            serde_json::json!({"path": "jobs.log", "start_line": 1, "end_line": 300}),
            &ctx,
        )
        .expect("test value");
    assert_eq!(read_preview("read_file", task, &part), None);
    // The condenser shows the preview in place of the head.
    let obs = crate::agent::condense::Condenser::default()
        .condense_with(
            crate::agent::types::ObservationKind::Output,
            out.clone(),
            &t.path().join("blobs"),
            Some(preview.clone()),
        )
        .expect("test value");
    assert!(obs.text.contains(event), "{}", obs.text);
    assert_eq!(obs.full.as_deref(), Some(out.as_str()));
}

#[test]
fn a_search_worded_unlike_the_log_shows_its_rare_lines() {
    let t = tempfile::tempdir().expect("test value");
    let log = log_with_event(
        300,
        |i| {
            let path = ["/a", "/b", "/c"][i % 3];
            format!(
                "2026-03-02T08:{:02}:{:02}Z INFO http: GET {path} status=200 dur_ms={i}",
                i / 60,
                i % 60
            )
        },
        150,
        "2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4",
    );
    std::fs::write(t.path().join("sys.log"), log).expect("test value");
    let ctx = ctx_in(t.path());
    let out = SearchText
        .call(
            serde_json::json!({"query": "illegal memory access", "path": "sys.log"}),
            &ctx,
        )
        .expect("test value");
    assert!(out.starts_with(NO_MATCHES), "{out}");
    let rare: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("The rare lines"))
        .skip(1)
        .collect();
    assert_eq!(
        rare,
        vec![
            "sys.log:152: 2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4"
        ]
    );
    // A read of the log's first lines shows the event too.
    let read = ReadFile
        .call(
            serde_json::json!({"path": "sys.log", "start_line": 1, "end_line": 5}),
            &ctx,
        )
        .expect("test value");
    assert!(
        read.ends_with(
            "152: 2026-03-02T08:02:30Z ERROR imgproxy[4411]: segfault at 0 ip 7f3a error 4\n"
        ),
        "{read}"
    );
    // Routine lines of one shape are never rare.
    assert_eq!(
        line_shape("T1 INFO http: GET /a status=200"),
        line_shape("T2 INFO http: GET /a status=404")
    );
}

#[test]
fn a_count_search_gives_the_total_first_and_each_files_count() {
    let t = tempfile::tempdir().expect("test value");
    std::fs::create_dir_all(t.path().join("src/net")).expect("test value");
    std::fs::write(
        t.path().join("src/a.rs"),
        "// TODO: split\nfn a() {}\n// todo again\n",
    )
    .expect("test value");
    std::fs::write(t.path().join("src/net/b.rs"), "// TODO one\n").expect("test value");
    std::fs::write(t.path().join("src/c.rs"), "fn c() {}\n").expect("test value");
    let ctx = ctx_in(t.path());
    let out = SearchText
        .call(
            serde_json::json!({"query": "TODO", "path": "src", "count": true}),
            &ctx,
        )
        .expect("test value");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("total: 3 matching lines") && lines[0].contains("in 2 files"),
        "{out}"
    );
    assert_eq!(&lines[1..3], ["src/a.rs: 2", "src/net/b.rs: 1"], "{out}");
    // Then the lines themselves, so a count asked on a look-up still shows the answer.
    assert_eq!(lines[3], "matching lines:", "{out}");
    assert_eq!(lines.len(), 7, "{out}");
    assert!(lines[4].starts_with("src/a.rs:1: // TODO"), "{out}");
    // None found is a count too, not the fallback lines.
    let none = SearchText
        .call(serde_json::json!({"query": "FIXME", "count": true}), &ctx)
        .expect("test value");
    assert!(none.starts_with("total: 0 matching lines"), "{none}");
    assert_eq!(none.lines().count(), 1, "{none}");
}

#[test]
fn list_dir_filters_by_extension_and_kind_and_counts_what_it_keeps() {
    let t = tempfile::tempdir().expect("test value");
    for f in [
        "src/main.rs",
        "src/lib.RS",
        "src/notes.md",
        "src/net/tcp.rs",
        "src/net/deep/udp.rs",
        "src/Makefile",
    ] {
        touch(t.path(), f);
    }
    let ctx = ctx_in(t.path());
    let call = |args: serde_json::Value| ListDir.call(args, &ctx);
    let rs = call(serde_json::json!({"path": "src", "ext": ".rs"})).expect("test value");
    let lines: Vec<&str> = rs.lines().collect();
    assert_eq!(lines[0], "total: 2 .rs files directly in src", "{rs}");
    assert_eq!(
        lines[1],
        "also: 4 .rs files counting its subfolders; without the filter, 6 files and 2 folders there in all",
    );
    assert_eq!(lines.len(), 4, "{rs}");
    assert!(
        lines[2..]
            .iter()
            .all(|l| l.contains(".rs ") || l.contains(".RS ")),
        "{rs}"
    );
    let tree = call(serde_json::json!({"path": "src", "ext": "*.rs", "recursive": true}))
        .expect("test value");
    assert_eq!(tree.lines().count(), 6, "{tree}");
    assert!(tree.contains("src/net/deep/udp.rs"), "{tree}");
    assert!(!tree.contains("src/net/ ("), "folders are left out: {tree}");
    let dirs = call(serde_json::json!({"path": "src", "kind": "dirs", "recursive": true}))
        .expect("test value");
    assert!(
        dirs.starts_with(
            "total: 2 folders in src and its subfolders\nalso: 1 folder directly in src; "
        ),
        "{dirs}"
    );
    let files = call(serde_json::json!({"path": "src", "kind": "files"})).expect("test value");
    assert!(
        files
            .starts_with("total: 4 files directly in src\nalso: 6 files counting its subfolders; "),
        "{files}"
    );
    assert!(!files.contains("net/"), "{files}");
    let none = call(serde_json::json!({"path": "src/net/deep", "ext": "py"})).expect("test value");
    assert_eq!(
        none,
        "total: 0 .py files directly in src/net/deep\nalso: 0 .py files counting its subfolders; without the filter, 1 file and 0 folders there in all"
    );
    // Contradictory or empty filters are errors the model can fix, not an empty listing.
    for bad in [
        serde_json::json!({"ext": "rs", "kind": "dirs"}),
        serde_json::json!({"ext": ""}),
        serde_json::json!({"ext": "../x"}),
        serde_json::json!({"kind": "links"}),
    ] {
        assert!(call(bad.clone()).is_err(), "{bad}");
    }
}
