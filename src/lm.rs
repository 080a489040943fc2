//! The `LanguageModel` seam: what the agent loops need from a model, with no candle types.
//!
//! The in-process runtime (`runtime::session`) implements it; a remote OpenAI-compatible backend
//! can too. Requests are chat messages plus sampling, stop rules, an optional output constraint
//! and budgets; the reply carries usage, including how much of the prompt came from the KV cache.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Who said a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The user or the agent loop speaking for the user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    Tool,
}

impl Role {
    /// The role name chat templates expect.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Speaker.
    pub role: Role,
    /// Text.
    pub content: String,
}

impl ChatMessage {
    /// A message with the given role.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}

/// Sampling settings. `temperature == 0` is greedy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax).
    pub temperature: f32,
    /// Keep only the k most likely tokens (0 = off).
    pub top_k: usize,
    /// Nucleus sampling mass (1.0 = off).
    pub top_p: f32,
    /// Repetition penalty over the last `repeat_last_n` tokens (1.0 = off).
    pub repeat_penalty: f32,
    /// Window of the repetition penalty.
    pub repeat_last_n: usize,
    /// Seed of the sampler's RNG.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: 299_792_458,
        }
    }
}

/// A constraint on the generated text, applied as a mask in the sampler chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "spec", rename_all = "snake_case")]
pub enum Constraint {
    /// Output must be one JSON value matching this JSON schema.
    JsonSchema(serde_json::Value),
    /// Output must match this Lark grammar (llguidance dialect).
    Lark(String),
}

/// One generation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenRequest {
    /// The conversation; the model's chat template renders it.
    pub messages: Vec<ChatMessage>,
    /// Sampling settings.
    pub sampling: SamplingParams,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop when the output ends with one of these strings (not included in the text).
    pub stop: Vec<String>,
    /// Optional output constraint.
    pub constraint: Option<Constraint>,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// End-of-sequence or end-of-turn token.
    Eos,
    /// A stop string matched.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The constraint is complete.
    ConstraintDone,
    /// Cancelled between tokens.
    Cancelled,
}

/// Token and time accounting for one request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens whose KV came from the cache.
    pub reused_tokens: usize,
    /// Prompt tokens run through the model now.
    pub prefilled_tokens: usize,
    /// Tokens generated.
    pub generated_tokens: usize,
    /// Prefill wall time in seconds.
    pub prefill_s: f64,
    /// Decode wall time in seconds.
    pub decode_s: f64,
    /// KV-cache bytes in use after the request.
    pub kv_bytes: u64,
    /// Tokens in the cache after the request.
    pub context_used: usize,
    /// Forward passes after the prefill: one per sampled token, or one per batch of a sampled
    /// token and the tokens an output constraint forced after it.
    #[serde(default)]
    pub decode_passes: usize,
    /// Generated tokens an output constraint forced (emitted without sampling).
    #[serde(default)]
    pub forced_tokens: usize,
}

impl Usage {
    /// Add `u`'s counts and times (the cache readings `kv_bytes` and `context_used` are left).
    pub fn add(&mut self, u: &Usage) {
        self.prompt_tokens += u.prompt_tokens;
        self.reused_tokens += u.reused_tokens;
        self.prefilled_tokens += u.prefilled_tokens;
        self.generated_tokens += u.generated_tokens;
        self.prefill_s += u.prefill_s;
        self.decode_s += u.decode_s;
        self.decode_passes += u.decode_passes;
        self.forced_tokens += u.forced_tokens;
    }
}

/// A finished generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenOutput {
    /// The generated text (stop string removed).
    pub text: String,
    /// Why it ended.
    pub finish: FinishReason,
    /// Accounting.
    pub usage: Usage,
}

/// One generated token with its log-probability and the most likely alternatives (the
/// `logprobs` of an OpenAI chat completion).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token's text (bytes that are not valid UTF-8 on their own become U+FFFD).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its natural-log probability under the model.
    pub logprob: f32,
    /// The most likely tokens at this position, best first.
    pub top_logprobs: Vec<TopLogprob>,
}

/// One alternative of a [`TokenLogprob`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its natural-log probability.
    pub logprob: f32,
}

/// Errors a language model reports.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LmError {
    /// The prompt plus `max_tokens` does not fit the context.
    #[error("context budget exceeded: prompt has {prompt} tokens, {max_new} more requested, context is {context}; shorten the prompt or lower --max-tokens")]
    ContextExceeded {
        /// Prompt tokens.
        prompt: usize,
        /// Requested new tokens.
        max_new: usize,
        /// Context length.
        context: usize,
    },
    /// The constraint could not be compiled or applied.
    #[error("output constraint error: {0}")]
    Constraint(String),
    /// Any other failure of the backend, with the error it came from.
    #[error("{0}")]
    Backend(BackendError),
}

impl LmError {
    /// Whether trying the same request again may succeed (a transient backend failure such as
    /// an unreachable server, a timeout, HTTP 429 or 5xx). Everything else is fatal.
    pub fn is_transient(&self) -> bool {
        matches!(self, LmError::Backend(e) if e.is_transient())
    }
}

/// A backend failure: the error it came from, kept so that a caller can inspect it
/// ([`BackendError::downcast_ref`]), and whether trying again may help.
///
/// It displays as the original error. Like `std::io::Error` wrapping a custom error, its
/// [`source`](std::error::Error::source) is the original error's source, not the original
/// error itself, so an error chain does not print the same message twice.
#[derive(Debug)]
pub struct BackendError {
    error: Box<dyn std::error::Error + Send + Sync>,
    transient: bool,
}

impl BackendError {
    /// A fatal failure: trying the same request again will fail the same way.
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            error: error.into(),
            transient: false,
        }
    }

    /// A transient failure: the same request may succeed later.
    pub fn transient(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            error: error.into(),
            transient: true,
        }
    }

    /// Whether trying again may help.
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The original error.
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.error.as_ref()
    }

    /// The original error as a `T`, when it is one.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref::<T>()
    }
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl From<String> for BackendError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for BackendError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// A cooperative cancel flag, checked between tokens and between agent steps.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A fresh, un-cancelled token.
    pub fn new() -> Self {
        Self::default()
    }
    /// Request cancellation.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Clear a cancellation (interactive use: the next turn starts un-cancelled).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A chat model that generates with streaming.
pub trait LanguageModel {
    /// Generate a reply; `on_text` receives each new piece of valid UTF-8 as it is produced.
    fn generate(
        &mut self,
        req: &GenRequest,
        on_text: &mut dyn FnMut(&str),
        cancel: &CancelToken,
    ) -> Result<GenOutput, LmError>;

    /// [`generate`](Self::generate) that also reports the log-probability of each generated
    /// token and its `top_logprobs` most likely alternatives. `on_text` receives each piece of
    /// text with the log-probabilities of the tokens that produced it (tokens held back and then
    /// cut as part of a stop string are left out); the returned list is all of them in order.
    /// Backends that cannot compute them (the default) refuse with [`LmError::Backend`].
    fn generate_logprobs(
        &mut self,
        req: &GenRequest,
        top_logprobs: usize,
        on_text: &mut dyn FnMut(&str, &[TokenLogprob]),
        cancel: &CancelToken,
    ) -> Result<(GenOutput, Vec<TokenLogprob>), LmError> {
        let _ = (req, top_logprobs, on_text, cancel);
        Err(LmError::Backend(BackendError::new(format!(
            "the model {} does not report log-probabilities; leave `logprobs` out",
            self.name()
        ))))
    }

    /// The context length in tokens.
    fn context_length(&self) -> usize;

    /// A short name for logs and reports.
    fn name(&self) -> String;
}
