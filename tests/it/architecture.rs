//! The architecture check: the code keeps to the arrows and rules drawn in ARCHITECTURE.md.
//!
//! The tables in ARCHITECTURE.md are the configuration; this file only reads them and scans
//! `src/**/*.rs`. Comments and string contents are blanked before scanning (so a doc comment
//! that names `crate::runtime` is not an import), except that environment variable names are
//! looked for inside string literals, where they live. `#[cfg(test)]` modules are left out of
//! the import check (a unit test may reach across to check a contract), not of the others.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the markdown table between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, each
/// as its cells (header and separator rows dropped).
fn table(doc: &str, name: &str) -> Vec<Vec<String>> {
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {begin} marker"));
    let stop = doc[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {end} marker"))
        + start;
    doc[start + begin.len()..stop]
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The backticked names in a table cell (`—` is none).
fn names(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The source with comments and the contents of string and character literals blanked
/// (line breaks stay, so offsets map to the same lines), and the string literals with their
/// offsets.
struct Lexed {
    code: String,
    literals: Vec<(usize, String)>,
}

fn lex(src: &str) -> Lexed {
    let b = src.as_bytes();
    let mut code = Vec::with_capacity(b.len());
    let mut literals = Vec::new();
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied().unwrap_or(0);
        // Comments (block comments nest).
        if c == b'/' && next == b'/' {
            while i < b.len() && b[i] != b'\n' {
                code.push(b' ');
                i += 1;
            }
            continue;
        }
        if c == b'/' && next == b'*' {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    code.extend([b' ', b' ']);
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    code.extend([b' ', b' ']);
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    code.push(blank(b[i]));
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"…", r#"…"#, br"…".
        let prev_ident =
            i > 0 && ident(b[i - 1]) && !(b[i - 1] == b'b' && (i < 2 || !ident(b[i - 2])));
        if c == b'r' && !prev_ident {
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            if b.get(j) == Some(&b'"') {
                let hashes = j - i - 1;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                code.resize(code.len() + (j + 1 - i), b' ');
                i = j + 1;
                let start = i;
                while i < b.len() && !b[i..].starts_with(&close) {
                    code.push(blank(b[i]));
                    i += 1;
                }
                literals.push((start, String::from_utf8_lossy(&b[start..i]).into_owned()));
                code.resize(code.len() + close.len().min(b.len() - i), b' ');
                i += close.len();
                continue;
            }
        }
        if c == b'"' {
            code.push(b'"');
            i += 1;
            let start = i;
            while i < b.len() && b[i] != b'"' {
                let step = if b[i] == b'\\' { 2 } else { 1 };
                for k in 0..step.min(b.len() - i) {
                    code.push(blank(b[i + k]));
                }
                i += step;
            }
            let end = i.min(b.len());
            literals.push((start, String::from_utf8_lossy(&b[start..end]).into_owned()));
            code.push(b'"');
            i += 1;
            continue;
        }
        // Character literals ('x', '\n', '{'); a quote followed by an identifier and no
        // closing quote is a lifetime.
        if c == b'\'' {
            let len = if next == b'\\' {
                b[i + 2..].iter().position(|&x| x == b'\'').map(|p| p + 3)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(ch + 2)
            };
            if let Some(len) = len {
                for k in 0..len {
                    code.push(blank(b[i + k]));
                }
                i += len;
                continue;
            }
        }
        code.push(c);
        i += 1;
    }
    code.truncate(b.len());
    Lexed {
        code: String::from_utf8_lossy(&code).into_owned(),
        literals,
    }
}

/// `code` with every `#[cfg(test)] mod NAME { … }` blanked.
fn without_test_modules(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|p| p + from) {
        from = at + 1;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        let Some(after_mod) = rest
            .strip_prefix("pub(crate) mod ")
            .or_else(|| rest.strip_prefix("mod "))
        else {
            continue;
        };
        let Some(open) = after_mod.find(['{', ';']) else {
            continue;
        };
        if after_mod.as_bytes()[open] == b';' {
            continue;
        }
        let start = code.len() - after_mod.len() + open;
        let mut depth = 0usize;
        let mut end = code.len();
        for (k, ch) in code[start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        for byte in &mut out[at..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The parts named by the paths `prefix::NAME` and `prefix::{NAME, NAME::…}` in `code`, with
/// the offset of each.
fn imports(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix).map(|p| p + from) {
        from = at + prefix.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':' || c == '$') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's top-level items, split by commas.
            let mut depth = 0usize;
            let mut item = String::new();
            let mut items = Vec::new();
            for ch in group.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        item.push(ch);
                    }
                    '}' if depth == 0 => break,
                    '}' => {
                        depth -= 1;
                        item.push(ch);
                    }
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    c => item.push(c),
                }
            }
            items.push(item);
            for item in items {
                let name: String = item.trim().chars().take_while(|&c| is_ident(c)).collect();
                if !name.is_empty() {
                    found.push((at, name));
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            if !name.is_empty() {
                found.push((at, name));
            }
        }
    }
    found
}

/// Offsets where `token` occurs in `text` as a whole token (not inside a longer identifier).
fn occurrences(text: &str, token: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(token).map(|p| p + from) {
        from = at + token.len();
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        let starts_ident = token.chars().next().is_some_and(is_ident);
        let ends_ident = token.chars().next_back().is_some_and(is_ident);
        if (starts_ident && before.is_some_and(|c| is_ident(c) || c == '#'))
            || (ends_ident && after.is_some_and(is_ident))
        {
            continue;
        }
        found.push(at);
    }
    found
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every `.rs` file under `dir` (relative to the root) as its path from the root and its text.
fn sources(dir: &str) -> Vec<(String, String)> {
    rust_files(&root().join(dir))
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(root())
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            let src = std::fs::read_to_string(&p).expect("read source");
            (rel, src)
        })
        .collect()
}

/// `src/PART/…` or `src/PART.rs` → `PART`; `src/lib.rs` → `lib`.
fn part_of(rel: &str) -> String {
    let rest = rel.strip_prefix("src/").unwrap_or(rel);
    let first = rest.split('/').next().unwrap_or(rest);
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
}

/// Whether `rel` (a path from the repository root) is inside `place` (a part name, a file
/// `src/….rs`, or a folder `src/…/`).
fn is_in(rel: &str, place: &str) -> bool {
    if place.ends_with(".rs") {
        rel == place
    } else if place.ends_with('/') {
        rel.starts_with(place)
    } else {
        part_of(rel) == place
    }
}

/// The rules of ARCHITECTURE.md.
struct Rules {
    arrows: BTreeMap<String, BTreeSet<String>>,
    exceptions: Vec<(String, String)>,
    only_in: Vec<(Vec<String>, Vec<String>)>,
}

fn rules(doc: &str) -> Rules {
    let mut arrows = BTreeMap::new();
    for row in table(doc, "arrows") {
        let part = names(&row[0]).pop().expect("a part name in backticks");
        arrows.insert(part, names(&row[1]).into_iter().collect());
    }
    let exceptions = table(doc, "exceptions")
        .into_iter()
        .flat_map(|row| {
            let file = names(&row[0]).pop().expect("a file in backticks");
            names(&row[1]).into_iter().map(move |p| (file.clone(), p))
        })
        .collect();
    let only_in = table(doc, "only-in")
        .into_iter()
        .map(|row| (names(&row[0]), names(&row[1])))
        .collect();
    Rules {
        arrows,
        exceptions,
        only_in,
    }
}

/// Every place in `files` (path from the root, source) that breaks `rules`, as
/// `file:line: what`.
fn violations(rules: &Rules, files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    let parts: BTreeSet<&String> = rules.arrows.keys().collect();
    for (rel, src) in files {
        let part = part_of(rel);
        let lexed = lex(src);
        if let Some(allowed) = rules.arrows.get(&part) {
            let code = without_test_modules(&lexed.code);
            let prefix = if part == "main" { "boyd::" } else { "crate::" };
            for (at, to) in imports(&code, prefix) {
                let known = parts.contains(&to);
                let excepted = rules.exceptions.iter().any(|(f, p)| f == rel && *p == to);
                if known && to != part && !allowed.contains(&to) && !excepted {
                    out.push(format!(
                        "{rel}:{}: `{part}` imports `{to}` ({prefix}{to}), an arrow ARCHITECTURE.md does not draw; remove the import or add the arrow with its reason",
                        line_of(&code, at)
                    ));
                }
            }
        } else if part != "lib" {
            out.push(format!(
                "{rel}: part `{part}` is not in ARCHITECTURE.md's arrows table; add its row"
            ));
        }
        for (tokens, places) in &rules.only_in {
            if places.iter().any(|p| is_in(rel, p)) {
                continue;
            }
            for token in tokens {
                // Environment variable names are looked for as whole string literals (the
                // name a program reads); other tokens in the code.
                let found: Vec<usize> = if token.starts_with("BOYD_") {
                    lexed
                        .literals
                        .iter()
                        .filter(|(_, text)| text == token)
                        .map(|&(at, _)| at)
                        .collect()
                } else {
                    occurrences(&lexed.code, token)
                };
                for at in found {
                    out.push(format!(
                        "{rel}:{}: `{token}` is allowed only in {}",
                        line_of(src, at),
                        places.join(", ")
                    ));
                }
            }
        }
    }
    out
}

fn read_doc() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the root")
}

#[test]
fn the_code_keeps_to_the_arrows_and_rules_of_architecture_md() {
    let rules = rules(&read_doc());
    let files = sources("src");
    assert!(files.len() > 50, "found only {} source files", files.len());
    let bad = violations(&rules, &files);
    assert!(
        bad.is_empty(),
        "{} place(s) cross ARCHITECTURE.md:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn every_module_of_lib_rs_has_a_row_and_every_row_a_module() {
    let rules = rules(&read_doc());
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).expect("lib.rs");
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_owned())
        .chain(["main".to_owned()])
        .collect();
    let tabled: BTreeSet<String> = rules.arrows.keys().cloned().collect();
    assert_eq!(
        declared, tabled,
        "lib.rs modules (plus main) against the arrows table"
    );
    for allowed in rules.arrows.values() {
        for p in allowed {
            assert!(tabled.contains(p), "arrow to unknown part {p}");
        }
    }
}

/// The checker itself: it finds what it must, and only that.
#[test]
fn the_checker_names_file_and_line_of_a_forbidden_import_and_ignores_comments_and_tests() {
    let rules = rules(&read_doc());
    let sizing = "\
//! Talks about crate::runtime in a comment, and \"crate::runtime\" in a string.
use crate::units::Bytes;
use crate::{kernels::cpu, runtime::gguf};
fn f() { let s = r#\"println!(\"x\")\"#; let c = '{'; }

#[cfg(test)]
mod tests {
    use crate::runtime::decoder::Decoder;
    fn g() { let _ = '}'; }
}
";
    let printer = "pub fn shout() {\n    eprintln!(\"hi\");\n    let v = \"BOYD_ENGINE\";\n}\n";
    let files = vec![
        ("src/sizing/x.rs".to_owned(), sizing.to_owned()),
        ("src/agent/y.rs".to_owned(), printer.to_owned()),
        ("src/cli/z.rs".to_owned(), printer.to_owned()),
    ];
    let bad = violations(&rules, &files);
    assert_eq!(bad.len(), 3, "{bad:#?}");
    assert!(
        bad[0].starts_with("src/sizing/x.rs:3: `sizing` imports `runtime`"),
        "{bad:#?}"
    );
    assert!(
        bad[1].starts_with("src/agent/y.rs:2: `eprintln!`"),
        "{bad:#?}"
    );
    assert!(
        bad[2].starts_with("src/agent/y.rs:3: `BOYD_ENGINE`"),
        "{bad:#?}"
    );
}

/// The agent's module graph: for each file under `src/agent/` (tests left out), the top-level
/// agent module it belongs to and the other top-level agent modules it names, through
/// `crate::agent::X` or a `super::` chain that climbs to `agent`.
fn agent_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (rel, src) in files {
        let Some(inner) = rel.strip_prefix("src/agent/") else {
            continue;
        };
        if inner == "mod.rs" || inner.ends_with("/tests.rs") || inner == "tests.rs" {
            continue;
        }
        // The module path below `agent`: a/b.rs is [a, b]; a/mod.rs is [a].
        let mut path: Vec<&str> = inner.trim_end_matches(".rs").split('/').collect();
        if path.last() == Some(&"mod") {
            path.pop();
        }
        let from = path[0].to_owned();
        let code = without_test_modules(&lex(src).code);
        let mut found = imports(&code, "crate::agent::");
        // `super::` repeated path.len() times climbs from this module to `agent`.
        let climb = "super::".repeat(path.len());
        found.extend(imports(&code, &climb));
        let edges = graph.entry(from.clone()).or_default();
        for (at, to) in found {
            if to != from && to != "super" && to != "self" {
                edges
                    .entry(to)
                    .or_insert_with(|| format!("{rel}:{}", line_of(&code, at)));
            }
        }
    }
    graph
}

/// A cycle of `graph`, each module followed by the place that imports the next, when there is
/// one.
fn a_cycle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), 1);
        stack.push(node.to_owned());
        for (next, place) in graph.get(node).into_iter().flatten() {
            if !graph.contains_key(next) {
                continue;
            }
            match state.get(next.as_str()) {
                Some(1) => {
                    let start = stack.iter().position(|n| n == next).unwrap_or(0);
                    let mut cycle: Vec<String> = stack[start..].to_vec();
                    cycle.push(format!("{next} (imported at {place})"));
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node.as_str()) {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The agent's modules form layers: no module imports one that imports it back, directly or
/// through others (answer, narrow, tally and program once did).
#[test]
fn the_agents_modules_import_each_other_without_a_cycle() {
    let files = sources("src/agent");
    let graph = agent_graph(&files);
    assert!(graph.len() > 15, "found only {} agent modules", graph.len());
    assert!(
        graph["react"].contains_key("planner"),
        "the scan misses react's imports: {:?}",
        graph["react"]
    );
    if let Some(cycle) = a_cycle(&graph) {
        panic!(
            "the agent's modules import in a cycle: {}",
            cycle.join(" -> ")
        );
    }
}

/// The cycle finder itself finds a cycle through `super::` chains and `crate::agent::` paths,
/// and ignores test modules.
#[test]
fn the_cycle_check_finds_a_cycle_and_ignores_tests() {
    let files = vec![
        (
            "src/agent/a.rs".to_owned(),
            "use super::b::f;\n#[cfg(test)]\nmod tests { use super::super::c::g; }\n".to_owned(),
        ),
        (
            "src/agent/b/mod.rs".to_owned(),
            "pub fn f() { crate::agent::c::g() }\n".to_owned(),
        ),
        (
            "src/agent/c/deep.rs".to_owned(),
            "// super::super::a::h is only a comment\nuse super::super::{a::h, b};\n".to_owned(),
        ),
        ("src/agent/d.rs".to_owned(), "use super::a::h;\n".to_owned()),
    ];
    let graph = agent_graph(&files);
    assert_eq!(
        graph["c"].keys().cloned().collect::<Vec<_>>(),
        ["a", "b"],
        "{graph:?}"
    );
    let cycle = a_cycle(&graph).expect("a -> b -> c -> a");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    let acyclic: BTreeMap<String, BTreeMap<String, String>> =
        graph.into_iter().filter(|(k, _)| k != "c").collect();
    assert!(a_cycle(&acyclic).is_none());
}

/// No file of the agent is longer than 800 lines: a part that grows past it is split by what
/// it does (issue 39).
#[test]
fn no_file_of_the_agent_is_over_800_lines() {
    let long: Vec<String> = rust_files(&root().join("src/agent"))
        .into_iter()
        .filter_map(|p| {
            let n = std::fs::read_to_string(&p)
                .expect("read source")
                .lines()
                .count();
            (n > 800).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "split these by what they do: {long:#?}");
}
