//! `--backend local|openai`: where the agent's model runs — in this process, or behind an
//! OpenAI-compatible server (vLLM, llama-server, TGI, Ollama, another `boyd serve`).

use std::time::Duration;

use anyhow::Context as _;
use clap::ValueEnum;

use super::GlobalOpts;
use crate::lm::LanguageModel;
use crate::remote::{OpenAiModel, RemoteConfig, Structured};

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum BackendKind {
    /// The in-process runtime (`--model` is a catalog name or a .gguf path).
    #[default]
    Local,
    /// An OpenAI-compatible server at `--base-url` (`--model` is the server's model id).
    Openai,
}

/// How constrained actions reach a remote server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum StructuredArg {
    /// response_format + llama-server json_schema + vLLM guided_json; without them if refused.
    #[default]
    Auto,
    /// OpenAI `response_format: {type: json_schema}` only.
    ResponseFormat,
    /// llama-server's `json_schema` field only.
    LlamaServer,
    /// vLLM's `guided_json` field only.
    Vllm,
    /// No server-side constraint: tolerant parsing with retries.
    None,
}

impl From<StructuredArg> for Structured {
    fn from(s: StructuredArg) -> Self {
        match s {
            StructuredArg::Auto => Structured::Auto,
            StructuredArg::ResponseFormat => Structured::ResponseFormat,
            StructuredArg::LlamaServer => Structured::LlamaServer,
            StructuredArg::Vllm => Structured::Vllm,
            StructuredArg::None => Structured::None,
        }
    }
}

/// Backend options of `boyd run` and `boyd eval`.
#[derive(Debug, Clone, clap::Args)]
pub struct BackendOpts {
    /// Where the model runs: local (in-process) or openai (an OpenAI-compatible server).
    #[arg(long, value_enum, default_value = "local")]
    pub backend: BackendKind,
    /// Base URL of the OpenAI-compatible server (with --backend openai), e.g. http://127.0.0.1:8080.
    #[arg(long, env = "BOYD_BASE_URL")]
    pub base_url: Option<String>,
    /// Environment variable holding the API key (default: OPENAI_API_KEY when it is set;
    /// none sent otherwise).
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// How constrained actions are sent to the server.
    #[arg(long, value_enum, default_value = "auto")]
    pub structured: StructuredArg,
    /// Longest wait for the server between streamed chunks, in seconds.
    #[arg(long, default_value_t = 300.0)]
    pub request_timeout: f64,
    /// Retries of transient server failures (connection, timeout, 429, 5xx), with backoff.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
}

impl BackendOpts {
    /// The remote configuration (with --backend openai).
    pub fn remote_config(&self, g: &GlobalOpts) -> anyhow::Result<RemoteConfig> {
        let Some(url) = &self.base_url else {
            anyhow::bail!("--backend openai needs --base-url URL (e.g. http://127.0.0.1:8080)");
        };
        if !(self.request_timeout.is_finite() && self.request_timeout > 0.0) {
            anyhow::bail!("--request-timeout must be a positive number of seconds");
        }
        let api_key = match &self.api_key_env {
            Some(var) => Some(std::env::var(var).with_context(|| {
                format!("--api-key-env {var}: the environment variable {var} is not set; export it or drop --api-key-env")
            })?),
            None => std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty()),
        };
        let mut c = RemoteConfig::new(url.clone());
        c.api_key = api_key;
        c.model = g.model.clone();
        c.read_timeout = Duration::from_secs_f64(self.request_timeout);
        c.retries = self.retries;
        c.structured = self.structured.into();
        Ok(c)
    }

    /// Connect to the remote server.
    pub fn connect_remote(&self, g: &GlobalOpts) -> anyhow::Result<OpenAiModel> {
        let c = self.remote_config(g)?;
        Ok(OpenAiModel::connect(c)?)
    }

    /// The agent's model on the chosen backend.
    pub fn load_agent_model(&self, g: &GlobalOpts) -> anyhow::Result<Box<dyn LanguageModel>> {
        match self.backend {
            BackendKind::Local => {
                if self.base_url.is_some() && std::env::var_os("BOYD_BASE_URL").is_none() {
                    anyhow::bail!("--base-url needs --backend openai");
                }
                super::run::load_agent_model(g)
            }
            BackendKind::Openai => Ok(Box::new(self.connect_remote(g)?)),
        }
    }
}
