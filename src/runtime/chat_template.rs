//! Chat templates: the GGUF's `tokenizer.chat_template` (Jinja) rendered with minijinja.
//!
//! Templates are written for Python's Jinja2 as Hugging Face runs it, so the environment here
//! mirrors that one: `trim_blocks` and `lstrip_blocks` on, Python string methods (`.strip()`,
//! `.startswith()`, `.items()` ...) through minijinja-contrib's pycompat, `raise_exception`,
//! `strftime_now`, and the variables `messages`, `add_generation_prompt`, `bos_token`,
//! `eos_token` and `tools`. A model without a template gets ChatML, stated by
//! [`ChatTemplate::is_fallback`], rather than a silent guess per architecture.
//!
//! A template comes from the model file, so it is untrusted code: it runs with a fuel limit
//! ([`TEMPLATE_FUEL`] minijinja instructions, so a loop that never ends stops) and its output is
//! capped at [`TEMPLATE_MAX_OUTPUT`] bytes (so a template cannot print without bound); both
//! errors name the model file when it is known ([`ChatTemplate::set_origin`]). A template can
//! also build a large string in a variable without printing it (doubling it in a loop), which
//! neither limit sees and which would end the process on a failed allocation: the `boyd`
//! binary therefore renders in a child process with a memory limit
//! ([`crate::runtime::template_process`]), so such a template fails the render, not boyd.
//!
//! For KV-cache prefix reuse the agent relies on one property, tested for the real models:
//! with `add_generation_prompt = false`, rendering messages `[m1..mk]` yields a string prefix
//! of rendering `[m1..mk, mk+1]`.

use minijinja::{Environment, Error, ErrorKind};
use serde::{Deserialize, Serialize};

use crate::lm::ChatMessage;
use crate::units::{civil_from_days, MONTH_NAMES, WEEKDAYS_FROM_EPOCH};

/// Why a chat template could not be used.
#[derive(Debug, Clone, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ChatTemplateError {
    /// The template does not parse.
    #[error("the model's chat template does not parse: {detail}")]
    Syntax {
        /// minijinja's message, with line.
        detail: String,
    },
    /// Rendering failed (including the template's own `raise_exception`).
    #[error("rendering the chat template failed: {detail}")]
    Render {
        /// minijinja's message, with line.
        detail: String,
    },
    /// The template ran out of fuel (an endless or very long loop).
    #[error("the chat template of {model} ran more than {fuel} instructions (a loop that does not end?); the model file's template cannot be used: pass another model or fix its tokenizer.chat_template")]
    OutOfFuel {
        /// The model file (or "the model" when unknown).
        model: String,
        /// The limit.
        fuel: u64,
    },
    /// The template printed more than the output cap.
    #[error("the chat template of {model} produced more than {limit} bytes; the model file's template cannot be used: pass another model or fix its tokenizer.chat_template")]
    OutputTooLarge {
        /// The model file (or "the model" when unknown).
        model: String,
        /// The cap.
        limit: usize,
    },
    /// The rendering process ran out of its memory or CPU limit, or was stopped.
    #[error("rendering the chat template of {model} was stopped ({why}); a template that builds huge strings cannot be used: pass another model or fix its tokenizer.chat_template")]
    Resources {
        /// The model file (or "the model" when unknown).
        model: String,
        /// What stopped it, with the limits.
        why: String,
    },
    /// `tokenizer.chat_template` is present but not a string.
    #[error("GGUF metadata key \"tokenizer.chat_template\" is not a string")]
    NotAString,
}

/// ChatML, used when the GGUF has no template.
pub const CHATML_TEMPLATE: &str = "{%- for message in messages %}\
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\
{%- endfor %}\
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

const NAME: &str = "chat";

/// The most minijinja instructions one render may run.
pub const TEMPLATE_FUEL: u64 = 20_000_000;
/// The most bytes one render may produce.
pub const TEMPLATE_MAX_OUTPUT: usize = 16 << 20;

/// A writer that fails once more than `limit` bytes were written.
struct CappedWriter {
    buf: Vec<u8>,
    limit: usize,
    over: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.limit {
            self.over = true;
            return Err(std::io::Error::other("chat template output cap reached"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A compiled chat template.
#[derive(Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    source: String,
    fallback: bool,
    bos: String,
    eos: String,
    origin: Option<String>,
    max_output: usize,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("fallback", &self.fallback)
            .field("source_len", &self.source.len())
            .finish_non_exhaustive()
    }
}

fn detail(e: &Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

fn raise_exception(msg: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

/// `strftime_now(format)` for templates that print today's date (UTC).
fn strftime_now(format: String) -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    strftime(secs, &format)
}

fn strftime(unix_secs: u64, format: &str) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let month_name = MONTH_NAMES[(month - 1) as usize];
    let day_name = WEEKDAYS_FROM_EPOCH[days.rem_euclid(7) as usize];
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year % 100)),
            Some('b') => out.push_str(&month_name[..3]),
            Some('B') => out.push_str(month_name),
            Some('a') => out.push_str(&day_name[..3]),
            Some('A') => out.push_str(day_name),
            Some('H') => out.push_str(&format!("{:02}", rem / 3600)),
            Some('M') => out.push_str(&format!("{:02}", rem / 60 % 60)),
            Some('S') => out.push_str(&format!("{:02}", rem % 60)),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

impl ChatTemplate {
    /// Compile `source`; `bos` and `eos` are the texts of the model's BOS/EOS tokens.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self, ChatTemplateError> {
        Self::build(source, bos, eos, false)
    }

    /// The ChatML fallback.
    pub fn chatml(bos: &str, eos: &str) -> Self {
        match Self::build(CHATML_TEMPLATE, bos, eos, true) {
            Ok(t) => t,
            // CHATML_TEMPLATE is a constant that parses (tested); keep a usable value anyway.
            Err(_) => Self {
                env: Environment::new(),
                source: String::new(),
                fallback: true,
                bos: bos.to_string(),
                eos: eos.to_string(),
                origin: None,
                max_output: TEMPLATE_MAX_OUTPUT,
            },
        }
    }

    fn build(
        source: &str,
        bos: &str,
        eos: &str,
        fallback: bool,
    ) -> Result<Self, ChatTemplateError> {
        let mut env = Environment::new();
        env.set_fuel(Some(TEMPLATE_FUEL));
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(NAME, source.to_string())
            .map_err(|e| ChatTemplateError::Syntax { detail: detail(&e) })?;
        Ok(Self {
            env,
            source: source.to_string(),
            fallback,
            bos: bos.to_string(),
            eos: eos.to_string(),
            origin: None,
            max_output: TEMPLATE_MAX_OUTPUT,
        })
    }

    /// Name the model file the template came from (used in limit errors).
    pub fn set_origin(&mut self, model_file: &str) {
        self.origin = Some(model_file.to_string());
    }

    /// Lower (or raise) the fuel and output limits (tests).
    pub fn set_limits(&mut self, fuel: u64, max_output: usize) {
        self.env.set_fuel(Some(fuel));
        self.max_output = max_output;
    }

    /// The fuel and output limits of one render.
    pub(crate) fn limits(&self) -> (u64, usize) {
        (self.env.fuel().unwrap_or(TEMPLATE_FUEL), self.max_output)
    }

    /// The BOS and EOS texts, and the model file named in errors.
    pub(crate) fn parts(&self) -> (&str, &str, Option<&str>) {
        (&self.bos, &self.eos, self.origin.as_deref())
    }

    /// Rebuild a template from its parts (the rendering process's side).
    pub(crate) fn rebuild(
        source: &str,
        bos: &str,
        eos: &str,
        fallback: bool,
        origin: Option<&str>,
        (fuel, max_output): (u64, usize),
    ) -> Result<Self, ChatTemplateError> {
        let mut t = Self::build(source, bos, eos, fallback)?;
        t.origin = origin.map(str::to_string);
        t.set_limits(fuel, max_output);
        Ok(t)
    }

    pub(crate) fn model_name(&self) -> String {
        self.origin.clone().unwrap_or_else(|| "the model".into())
    }

    /// Whether this is the ChatML fallback (the GGUF had no template).
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }

    /// The Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render `messages`; with `add_generation_prompt` the text ends where the assistant's
    /// reply begins.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, ChatTemplateError> {
        self.render_with_tools(messages, add_generation_prompt, None)
    }

    /// Render with an optional list of tool definitions (JSON schemas, OpenAI style) that
    /// templates such as Qwen2.5's put into the system prompt.
    pub fn render_with_tools(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
    ) -> Result<String, ChatTemplateError> {
        if let Some(helper) = crate::runtime::template_process::helper() {
            return crate::runtime::template_process::render(
                helper,
                self,
                messages,
                add_generation_prompt,
                tools,
            );
        }
        self.render_here(messages, add_generation_prompt, tools)
    }

    /// Render in this process (what [`Self::render_with_tools`] does unless a rendering
    /// process is set, and what that process does).
    pub(crate) fn render_here(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
    ) -> Result<String, ChatTemplateError> {
        let tmpl = self
            .env
            .get_template(NAME)
            .map_err(|e| ChatTemplateError::Render { detail: detail(&e) })?;
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos.as_str(),
            eos_token => self.eos.as_str(),
            tools => tools,
        };
        let mut out = CappedWriter {
            buf: Vec::new(),
            limit: self.max_output,
            over: false,
        };
        match tmpl.render_captured_to(ctx, &mut out) {
            Ok(_) => {}
            Err(_) if out.over => {
                return Err(ChatTemplateError::OutputTooLarge {
                    model: self.model_name(),
                    limit: self.max_output,
                })
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => {
                return Err(ChatTemplateError::OutOfFuel {
                    model: self.model_name(),
                    fuel: self.env.fuel().unwrap_or(TEMPLATE_FUEL),
                })
            }
            Err(e) => {
                let mut d = detail(&e);
                if let Some(o) = &self.origin {
                    d = format!("{d} (template of {o})");
                }
                return Err(ChatTemplateError::Render { detail: d });
            }
        }
        String::from_utf8(out.buf).map_err(|e| ChatTemplateError::Render {
            detail: format!("the output is not UTF-8: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::Role;

    #[test]
    fn chatml_fallback_renders_turns() {
        let t = ChatTemplate::chatml("", "");
        assert!(t.is_fallback());
        let msgs = [
            ChatMessage::new(Role::System, "Be brief."),
            ChatMessage::new(Role::User, "Hi"),
        ];
        let s = t.render(&msgs, true).expect("renders");
        assert_eq!(
            s,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn pycompat_raise_exception_and_bos() {
        let src = "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools') }}{% endif %}{{ m.content.strip() | upper }}{% endfor %}";
        let t = ChatTemplate::new(src, "<s>", "</s>").expect("compiles");
        let ok = t
            .render(&[ChatMessage::new(Role::User, "  hi  ")], false)
            .expect("renders");
        assert_eq!(ok, "<s>HI");
        let err = t
            .render(&[ChatMessage::new(Role::Tool, "x")], false)
            .expect_err("raises");
        assert!(err.to_string().contains("no tools"), "{err}");
    }

    #[test]
    fn a_template_that_loops_or_prints_without_end_is_stopped_and_names_the_model() {
        let msgs = [ChatMessage::new(Role::User, "hi")];
        let hang =
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
        let mut t = ChatTemplate::new(hang, "", "").expect("compiles");
        t.set_origin("evil.gguf");
        let err = t.render(&msgs, true).expect_err("out of fuel");
        assert!(matches!(err, ChatTemplateError::OutOfFuel { .. }), "{err}");
        assert!(err.to_string().contains("evil.gguf"), "{err}");
        let flood = "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}";
        let mut t = ChatTemplate::new(flood, "", "").expect("compiles");
        t.set_origin("evil.gguf");
        let err = t.render(&msgs, true).expect_err("output cap");
        assert!(
            matches!(err, ChatTemplateError::OutputTooLarge { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("evil.gguf"), "{err}");
    }

    #[test]
    fn syntax_error_is_typed() {
        let err = ChatTemplate::new("{% for %}", "", "").expect_err("bad template");
        assert!(matches!(err, ChatTemplateError::Syntax { .. }));
    }

    #[test]
    fn strftime_formats_a_known_date() {
        // 2024-07-26 13:05:09 UTC, a Friday.
        assert_eq!(strftime(1_722_085_509 - 86_400, "%d %b %Y"), "26 Jul 2024");
        assert_eq!(
            strftime(1_722_085_509, "%A %B %d %H:%M:%S %%"),
            "Saturday July 27 13:05:09 %"
        );
    }
}
