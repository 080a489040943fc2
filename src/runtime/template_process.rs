//! Chat templates rendered in a child process with a memory limit.
//!
//! A chat template comes from the model file and is untrusted code. Fuel bounds its loops and a
//! cap bounds what it prints, but a template can double a string in a variable a few dozen
//! times without printing it; the allocation that fails then ends the whole process (Rust
//! aborts on a failed allocation). So the `boyd` binary renders in a short-lived child: the same
//! executable started with [`RENDER_ARG`], which sets its own limits ([`MEMORY_LIMIT`] of
//! address space, [`CPU_LIMIT`] of CPU time, no core file), reads one request as JSON on
//! stdin and writes one JSON result on stdout. When the child dies instead — the allocator
//! aborted, the kernel stopped it — the render fails with
//! [`ChatTemplateError::Resources`] and boyd carries on.
//!
//! The binary turns this on with [`use_helper`] at start; library callers (tests, other
//! programs) render in their own process unless they do the same. A child costs one process
//! start (a few milliseconds) per render, next to a model's forward pass per token.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::lm::ChatMessage;
use crate::runtime::chat_template::{ChatTemplate, ChatTemplateError};

/// The hidden first argument that makes `boyd` a rendering process.
pub const RENDER_ARG: &str = "__render-chat-template";
/// Address space a rendering process may use.
pub const MEMORY_LIMIT: u64 = 1 << 30;
/// CPU seconds a rendering process may use (fuel stops loops long before).
pub const CPU_LIMIT: u64 = 60;
/// The largest request a rendering process reads.
const MAX_REQUEST: u64 = 256 << 20;

static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// Render every chat template of this process in a child started from `exe` (the `boyd`
/// binary, which must dispatch [`RENDER_ARG`] to [`helper_main`]). Set once; later calls are
/// ignored.
pub fn use_helper(exe: PathBuf) {
    let _ = HELPER.set(exe);
}

/// The rendering executable, when one is set.
pub(crate) fn helper() -> Option<&'static Path> {
    HELPER.get().map(PathBuf::as_path)
}

#[derive(Serialize, Deserialize)]
struct Request {
    source: String,
    bos: String,
    eos: String,
    fallback: bool,
    origin: Option<String>,
    fuel: u64,
    max_output: usize,
    messages: Vec<ChatMessage>,
    add_generation_prompt: bool,
    tools: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Text(String),
    Error(ChatTemplateError),
}

/// Render `template` in a child process started from `exe`.
pub(crate) fn render(
    exe: &Path,
    template: &ChatTemplate,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    tools: Option<&serde_json::Value>,
) -> Result<String, ChatTemplateError> {
    let (bos, eos, origin) = template.parts();
    let (fuel, max_output) = template.limits();
    let request = Request {
        source: template.source().to_string(),
        bos: bos.to_string(),
        eos: eos.to_string(),
        fallback: template.is_fallback(),
        origin: origin.map(str::to_string),
        fuel,
        max_output,
        messages: messages.to_vec(),
        add_generation_prompt,
        tools: tools.cloned(),
    };
    let failed = |what: String| ChatTemplateError::Render {
        detail: format!("{what} (the rendering process, {})", exe.display()),
    };
    let body = serde_json::to_vec(&request).map_err(|e| failed(e.to_string()))?;
    let mut child = Command::new(exe)
        .arg(RENDER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("cannot start it: {e}")))?;
    // The child reads the whole request before it writes anything, so writing first and
    // reading after cannot deadlock.
    let wrote = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(&body))
        .unwrap_or(Ok(()));
    let mut out = Vec::new();
    // JSON escapes at most 6 bytes per byte of text; anything longer is not a reply.
    let cap = (max_output as u64)
        .saturating_mul(6)
        .saturating_add(1 << 20);
    let read = child
        .stdout
        .take()
        .map(|s| s.take(cap).read_to_end(&mut out))
        .unwrap_or(Ok(0));
    let status = child
        .wait()
        .map_err(|e| failed(format!("cannot wait for it: {e}")))?;
    if let Ok(reply) = serde_json::from_slice::<Reply>(&out) {
        if status.success() {
            return match reply {
                Reply::Text(t) => Ok(t),
                Reply::Error(e) => Err(e),
            };
        }
    }
    let why = stopped_by(&status).unwrap_or_else(|| match (wrote, read) {
        (Err(e), _) | (_, Err(e)) => format!("its pipe failed: {e}"),
        _ => format!("it ended with {status} and no reply"),
    });
    Err(ChatTemplateError::Resources {
        model: template.model_name(),
        why,
    })
}

#[cfg(unix)]
fn stopped_by(status: &std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.signal()?;
    let what = match signal {
        6 => "it aborted, most likely on an allocation over its memory limit",
        9 => "it was killed",
        24 => "it ran out of CPU time",
        _ => "it was stopped",
    };
    Some(format!(
        "{what}: signal {signal}; limits {} MiB of memory, {CPU_LIMIT} s of CPU",
        MEMORY_LIMIT >> 20
    ))
}

#[cfg(not(unix))]
fn stopped_by(_: &std::process::ExitStatus) -> Option<String> {
    None
}

/// The rendering process: limit itself, read one request on stdin, write one reply on
/// stdout. Returns the process's exit code.
pub fn helper_main() -> i32 {
    limit_self();
    let mut body = Vec::new();
    if std::io::stdin()
        .take(MAX_REQUEST)
        .read_to_end(&mut body)
        .is_err()
    {
        return 2;
    }
    let Ok(req) = serde_json::from_slice::<Request>(&body) else {
        return 2;
    };
    drop(body);
    let reply = match ChatTemplate::rebuild(
        &req.source,
        &req.bos,
        &req.eos,
        req.fallback,
        req.origin.as_deref(),
        (req.fuel, req.max_output),
    )
    .and_then(|t| t.render_here(&req.messages, req.add_generation_prompt, req.tools.as_ref()))
    {
        Ok(text) => Reply::Text(text),
        Err(e) => Reply::Error(e),
    };
    let mut stdout = std::io::stdout().lock();
    match serde_json::to_writer(&mut stdout, &reply).map(|()| stdout.flush()) {
        Ok(Ok(())) => 0,
        _ => 3,
    }
}

#[cfg(target_os = "linux")]
fn limit_self() {
    use nix::sys::resource::{setrlimit, Resource};
    // Best effort: a limit the kernel refuses leaves the others in place.
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
    let _ = setrlimit(Resource::RLIMIT_AS, MEMORY_LIMIT, MEMORY_LIMIT);
    let _ = setrlimit(Resource::RLIMIT_CPU, CPU_LIMIT, CPU_LIMIT);
}

#[cfg(not(target_os = "linux"))]
fn limit_self() {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::Role;

    #[test]
    fn a_request_and_its_reply_survive_the_trip_as_json() {
        let mut t = ChatTemplate::chatml("<s>", "</s>");
        t.set_origin("m.gguf");
        let (bos, eos, origin) = t.parts();
        let req = Request {
            source: t.source().to_string(),
            bos: bos.into(),
            eos: eos.into(),
            fallback: true,
            origin: origin.map(str::to_string),
            fuel: 1000,
            max_output: 10,
            messages: vec![ChatMessage::new(Role::User, "hello there, a long message")],
            add_generation_prompt: true,
            tools: None,
        };
        let back: Request =
            serde_json::from_slice(&serde_json::to_vec(&req).expect("json")).expect("parse");
        let again = ChatTemplate::rebuild(
            &back.source,
            &back.bos,
            &back.eos,
            back.fallback,
            back.origin.as_deref(),
            (back.fuel, back.max_output),
        )
        .expect("rebuilds");
        assert!(again.is_fallback());
        // The limits travelled: ten bytes of output are not enough.
        let err = again
            .render_here(&back.messages, true, None)
            .expect_err("over the cap");
        assert!(
            matches!(err, ChatTemplateError::OutputTooLarge { ref model, limit: 10 } if model == "m.gguf"),
            "{err}"
        );
        let reply: Reply =
            serde_json::from_slice(&serde_json::to_vec(&Reply::Error(err)).expect("json"))
                .expect("parse");
        assert!(matches!(
            reply,
            Reply::Error(ChatTemplateError::OutputTooLarge { .. })
        ));
    }
}
