//! The pre-tokenizer families of byte-level BPE vocabularies and their regexes (llama.cpp's
//! per-`tokenizer.ggml.pre` lists).

/// The pre-tokenizer family, from `tokenizer.ggml.pre` (names as llama.cpp reads them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PreTokenizerKind {
    /// `default` (or the key absent).
    Default,
    /// `gpt-2`, `phi-2`, `mpt`, `olmo`, `jais`, `roberta-bpe`, the `jina-*` family.
    Gpt2,
    /// `llama3`, `llama-v3`, `llama-bpe`, `falcon3`: whole words in the vocabulary skip merges.
    Llama3,
    /// `dbrx`, `smaug-bpe`: the Llama 3 pattern with merges always applied.
    Dbrx,
    /// `smollm`, `starcoder`, `refact`, `command-r`, `codeshell`, `exaone`, `minerva-7b`:
    /// every digit alone, then the GPT-2 pattern.
    StarCoder,
    /// `qwen2`, `stablelm2`, `megrez`: like Llama 3 with single digits.
    Qwen2,
    /// `falcon`.
    Falcon,
    /// `bloom`, `poro-chat`, `gpt3-finnish`.
    Bloom,
    /// `chatglm-bpe`.
    ChatGlm4,
    /// `viking`.
    Viking,
    /// `deepseek-coder`.
    DeepSeekCoder,
    /// `tekken` (Mistral Nemo): whole words in the vocabulary skip merges.
    Tekken,
}

const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
const LLAMA3_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_PATTERN: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const BLOOM_PATTERN: &str = r" ?[^(\s|.,!?…。，、।۔،)]+";
const TEKKEN_PATTERN: &str = r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+";

impl PreTokenizerKind {
    /// Every `tokenizer.ggml.pre` value this build understands.
    pub const KNOWN: &'static [&'static str] = &[
        "default",
        "gpt-2",
        "phi-2",
        "mpt",
        "olmo",
        "jais",
        "roberta-bpe",
        "jina-es",
        "jina-de",
        "jina-v1-en",
        "jina-v2-es",
        "jina-v2-de",
        "jina-v2-code",
        "gigachat",
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "dbrx",
        "smaug-bpe",
        "smollm",
        "starcoder",
        "refact",
        "command-r",
        "codeshell",
        "exaone",
        "minerva-7b",
        "qwen2",
        "stablelm2",
        "megrez",
        "falcon",
        "bloom",
        "poro-chat",
        "gpt3-finnish",
        "chatglm-bpe",
        "viking",
        "deepseek-coder",
        "tekken",
    ];

    /// The kind for a `tokenizer.ggml.pre` value.
    pub fn from_gguf(name: &str) -> Option<Self> {
        Some(match name {
            "default" => Self::Default,
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jais" | "roberta-bpe" | "jina-es" | "jina-de"
            | "jina-v1-en" | "jina-v2-es" | "jina-v2-de" | "jina-v2-code" | "gigachat" => {
                Self::Gpt2
            }
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" => Self::Llama3,
            "dbrx" | "smaug-bpe" => Self::Dbrx,
            "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone"
            | "minerva-7b" => Self::StarCoder,
            "qwen2" | "stablelm2" | "megrez" => Self::Qwen2,
            "falcon" => Self::Falcon,
            "bloom" | "poro-chat" | "gpt3-finnish" => Self::Bloom,
            "chatglm-bpe" => Self::ChatGlm4,
            "viking" => Self::Viking,
            "deepseek-coder" => Self::DeepSeekCoder,
            "tekken" => Self::Tekken,
            _ => return None,
        })
    }

    /// The regexes applied in sequence; each splits every piece so far, keeping matches and
    /// the text between them as separate pieces.
    pub fn patterns(self) -> &'static [&'static str] {
        match self {
            Self::Default => &[
                r"[\p{P}\$\+<=>\^~\|]+",
                GPT2_PATTERN,
                r"\p{N}+",
                r"[0-9][0-9][0-9]",
            ],
            Self::Gpt2 => &[GPT2_PATTERN],
            Self::Llama3 | Self::Dbrx | Self::ChatGlm4 => &[LLAMA3_PATTERN],
            Self::StarCoder => &[r"\p{N}", GPT2_PATTERN],
            Self::Qwen2 => &[QWEN2_PATTERN],
            Self::Falcon => &[r"[\p{P}\$\+<=>\^~\|`]+", GPT2_PATTERN, r"[0-9][0-9][0-9]"],
            Self::Bloom => &[BLOOM_PATTERN],
            Self::Viking => &[BLOOM_PATTERN, r"\p{N}"],
            Self::DeepSeekCoder => &[
                r"[\r\n]",
                r"\s?\p{L}+",
                r"\s?\p{P}+",
                r"[一-龥ࠀ-一가-퟿]+",
                r"\p{N}",
            ],
            Self::Tekken => &[TEKKEN_PATTERN],
        }
    }

    /// Whether a whole pre-token found in the vocabulary is emitted without merging.
    pub fn ignore_merges(self) -> bool {
        matches!(self, Self::Llama3 | Self::Tekken)
    }

    /// llama.cpp's `add_bos` default when `tokenizer.ggml.add_bos_token` is absent.
    pub(super) fn default_add_bos(self) -> bool {
        matches!(self, Self::Llama3 | Self::Tekken)
    }
}
