//! The model's thread: it owns the `LanguageModel` and runs one generation at a time from a
//! bounded queue, sending pieces and the result back over a channel per job.
//!
//! Design decision: the runtime's session (KV cache, prefix reuse) is plain blocking code and
//! the model is only `Send`, so it stays on one OS thread and the async side talks to it through
//! channels. A job whose client has gone (its channel closed or its token cancelled) is skipped,
//! and a running one stops at the next token.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::api::{ApiError, ChatRequest};
use super::Stats;
use crate::lm::{CancelToken, FinishReason, GenOutput, LanguageModel, LmError, TokenLogprob};

/// One generation to run.
pub(crate) struct Job {
    /// The parsed request.
    pub req: ChatRequest,
    /// Send each piece of text (streamed requests) or only the result.
    pub stream: bool,
    /// Cancelled when the client goes away or the generation deadline passes.
    pub cancel: CancelToken,
    /// Where pieces and the result go.
    pub events: mpsc::UnboundedSender<Event>,
}

/// What a job sends back.
pub(crate) enum Event {
    /// A piece of text and the log-probabilities of the tokens that produced it (empty unless
    /// the request asked for them); streamed requests only.
    Piece(String, Vec<TokenLogprob>),
    /// The end.
    Done(Result<Reply, ApiError>),
}

/// A finished generation.
pub(crate) struct Reply {
    /// Text, finish reason, usage.
    pub out: GenOutput,
    /// Every generated token's log-probabilities, when the request asked for them.
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// Start the worker owning `model`; returns the queue (`queue` jobs may wait).
pub(crate) fn spawn(
    model: Box<dyn LanguageModel + Send>,
    queue: usize,
    stats: Arc<Stats>,
) -> std::io::Result<mpsc::Sender<Job>> {
    let (tx, rx) = mpsc::channel(queue);
    std::thread::Builder::new()
        .name("serve-model".into())
        .spawn(move || run(model, rx, &stats))?;
    Ok(tx)
}

fn run(mut model: Box<dyn LanguageModel + Send>, mut rx: mpsc::Receiver<Job>, stats: &Stats) {
    while let Some(mut job) = rx.blocking_recv() {
        if job.cancel.is_cancelled() || job.events.is_closed() {
            Stats::add(&stats.skipped_jobs, 1);
            continue;
        }
        Stats::add(&stats.generations, 1);
        let events = job.events.clone();
        let cancel = job.cancel.clone();
        let stream = job.stream;
        let mut on_text = |piece: &str, logprobs: &[TokenLogprob]| {
            let gone = if stream {
                let e = Event::Piece(piece.to_string(), logprobs.to_vec());
                events.send(e).is_err()
            } else {
                events.is_closed()
            };
            if gone {
                cancel.cancel();
            }
        };
        // A panic in the model answers this request with a 500 and keeps the server up.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            generate(model.as_mut(), &mut job.req, &mut on_text, &job.cancel)
        }))
        .unwrap_or_else(|_| Err(LmError::Backend("the model panicked".into())));
        if let Ok(Reply { out, .. }) = &result {
            Stats::add(&stats.generated_tokens, out.usage.generated_tokens as u64);
            if out.finish == FinishReason::Cancelled {
                Stats::add(&stats.generations_cancelled, 1);
            }
        }
        let _ = job.events.send(Event::Done(result.map_err(ApiError::from)));
    }
}

/// Generate for `req` (with log-probabilities when it asks for them); when `max_tokens` was
/// not given and the context is too small for the default, retry with what the context leaves.
fn generate(
    model: &mut dyn LanguageModel,
    req: &mut ChatRequest,
    on_text: &mut dyn FnMut(&str, &[TokenLogprob]),
    cancel: &CancelToken,
) -> Result<Reply, LmError> {
    let mut once = |req: &ChatRequest| match req.logprobs {
        None => model
            .generate(&req.gen, &mut |p| on_text(p, &[]), cancel)
            .map(|out| Reply {
                out,
                logprobs: None,
            }),
        Some(top) => model
            .generate_logprobs(&req.gen, top, on_text, cancel)
            .map(|(out, l)| Reply {
                out,
                logprobs: Some(l),
            }),
    };
    match once(req) {
        Err(LmError::ContextExceeded {
            prompt, context, ..
        }) if !req.max_tokens_given && prompt < context => {
            req.gen.max_tokens = context - prompt;
            once(req)
        }
        other => other,
    }
}
