//! The words of a question: what the answer step scores lines by, what a typed search query
//! may be made of, and how plain-word search matches a word to its inflections.

/// Words that say nothing about what is asked (question words, articles, "file", "value").
pub const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "by",
    "do",
    "does",
    "for",
    "from",
    "give",
    "how",
    "in",
    "is",
    "it",
    "its",
    "many",
    "much",
    "of",
    "on",
    "or",
    "that",
    "the",
    "this",
    "to",
    "what",
    "which",
    "who",
    "with",
    "according",
    "file",
    "value",
    "say",
    "says",
    "was",
    "were",
    "when",
    "where",
    "there",
    "one",
];

/// Lower-case words of `text`, identifiers split at `_` and punctuation.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The question's content words (two letters or more, no stopwords), sorted, each once.
pub fn keywords(task: &str) -> Vec<String> {
    let mut k: Vec<String> = words(task)
        .into_iter()
        .filter(|w| w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .collect();
    k.sort();
    k.dedup();
    k
}

/// The part of a lower-case word that its inflections share: a plural `s`/`es`, `ed` or `ing`
/// taken off words long enough to keep a stem of four letters ("timeouts" → "timeout",
/// "filled" → "fill", "removed" → "remov"). Matching the stem as a substring finds "timeout",
/// "timeouts" and "timed-out"'s neighbours alike.
pub fn stem(word: &str) -> &str {
    for suffix in ["ing", "ies", "es", "ed", "s"] {
        if let Some(s) = word.strip_suffix(suffix) {
            if s.chars().count() >= 4 && !word.ends_with("ss") {
                return s;
            }
        }
    }
    word
}

/// The context lengths `text` states, in tokens, each once in order: "an 8192-token context",
/// "8k context", "a 128k context window", "65,536 tokens of context", "a context of 32,768
/// tokens", "ctx=2048"; `k` is 1024 tokens, `m` 1024². A number that only reads as a context
/// ("at 8k", "with 16384 tokens") counts when none is stated outright; "30 tokens per second"
/// never does. A 0.5B model passed 137,400 tokens for "an 8192-token context", 4090 for "a 4k
/// context" (the GPU's name) and 16000 for "16K tokens".
pub fn stated_contexts(text: &str) -> Vec<u64> {
    use std::sync::OnceLock;
    static NUMBER: OnceLock<regex::Regex> = OnceLock::new();
    let number = NUMBER.get_or_init(|| {
        regex::Regex::new(r"(?i)(\d{1,3}(?:,\d{3})+|\d+)(k|m)?").expect("a valid pattern")
    });
    let lower = text.to_lowercase();
    let (mut outright, mut likely) = (Vec::new(), Vec::new());
    for m in number.captures_iter(&lower) {
        let whole = m.get(0).expect("the match");
        let before = &lower[..whole.start()];
        let after = &lower[whole.end()..];
        // Part of a name or version ("rtx-4090", "llama-3.1-8b", "Q4_K_M", "$2k").
        let glued_before = before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '$'))
            || (before.ends_with('-')
                && before[..before.len() - 1]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric));
        let glued_after = after.chars().next().is_some_and(|c| {
            c.is_alphanumeric()
                || c == '_'
                || (c == '.' && after[1..].starts_with(|d: char| d.is_ascii_digit()))
        });
        if glued_before || glued_after {
            continue;
        }
        let Ok(n) = m[1].replace(',', "").parse::<u64>() else {
            continue;
        };
        let scale = match m.get(2).map(|s| s.as_str()) {
            Some("k") => 1 << 10,
            Some("m") => 1 << 20,
            _ => 1,
        };
        let tokens = n.saturating_mul(scale);
        if !(64..=1 << 24).contains(&tokens) {
            continue;
        }
        let next: Vec<&str> = after
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .take(3)
            .collect();
        let prev: Vec<&str> = before
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .rev()
            .take(3)
            .collect();
        let is_context = |w: &&str| matches!(*w, "context" | "ctx" | "window");
        let is_tokens = |w: &&str| matches!(*w, "token" | "tokens" | "tok");
        let per_second = next
            .iter()
            .find(|w| !is_tokens(w))
            .is_some_and(|w| matches!(*w, "per" | "a" | "s" | "each" | "second" | "sec"))
            || after.trim_start().starts_with("tok/s")
            || after.trim_start().starts_with("tokens/s");
        if per_second {
            continue;
        }
        // "8192-token context", "16k tokens of context", "8k ctx"; "context of 32,768",
        // "ctx=2048", "context length 16384".
        let context_after = next
            .iter()
            .find(|w| !is_tokens(w) && **w != "of")
            .is_some_and(is_context);
        let context_before = prev
            .iter()
            .find(|w| !matches!(**w, "of" | "is" | "length" | "size" | "to" | "at"))
            .is_some_and(is_context);
        let list = if context_after || context_before {
            &mut outright
        } else if scale > 1 || next.first().is_some_and(is_tokens) {
            &mut likely
        } else {
            continue;
        };
        if !list.contains(&tokens) {
            list.push(tokens);
        }
    }
    if outright.is_empty() {
        likely
    } else {
        outright
    }
}

/// The numbers written in `text`, as values: `1,284` (thousands separators), `-3`, `17.5`,
/// `2e6`. The one reader of numbers in text the agent has (the answer step's check and the
/// eval's checkers).
pub fn numbers_in(text: &str) -> Vec<f64> {
    figures_in(text).into_iter().map(|(_, v)| v).collect()
}

/// The numbers written in `text`, each as written and as a value (the reader of
/// [`numbers_in`]).
pub fn figures_in(text: &str) -> Vec<(&str, f64)> {
    use std::sync::OnceLock;
    static RE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| {
            regex::Regex::new(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
                .ok()
        })
        .as_ref()
    else {
        return Vec::new();
    };
    re.find_iter(text)
        .filter_map(|m| {
            let v = m.as_str().replace(',', "").parse::<f64>().ok()?;
            Some((m.as_str(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn keywords_drop_question_words_and_repeat_once() {
        assert_eq!(
            keywords("Which port does the metrics server listen on, per the metrics section?"),
            vec!["listen", "metrics", "per", "port", "section", "server"]
        );
    }

    #[test]
    fn stems_keep_four_letters_and_leave_short_or_double_s_words() {
        assert_eq!(stem("timeouts"), "timeout");
        assert_eq!(stem("filled"), "fill");
        assert_eq!(stem("restarting"), "restart");
        assert_eq!(stem("bus"), "bus");
        assert_eq!(stem("address"), "address");
        assert_eq!(stem("used"), "used");
    }

    #[test]
    fn contexts_are_read_as_people_write_them() {
        let cases: &[(&str, &[u64])] = &[
            ("Does Llama-3-70B at Q4_K_M with 8k context fit on an RTX 4090?", &[8192]),
            ("Does llama-3.1-70b at Q4_K_M with an 8192-token context fit on an rtx-4090?", &[8192]),
            ("gemma-3-12b at Q4_K_M with a 128k context window on an RTX 4090", &[131072]),
            ("Can llama-3.1-70b (Q4_K_M) run with 65,536 tokens of context on an h100-sxm?", &[65536]),
            ("How many GB with a context of 32,768 tokens on an rtx-5060-ti?", &[32768]),
            ("llama-3.1-8b, Q8_0, 16K tokens of context, m2-pro preset", &[16384]),
            ("With a 4k context, how fast would mistral-7b decode on an rtx-3090?", &[4096]),
            ("Using ctx=2048, what is the total memory of qwen2.5-14b on an a100-40?", &[2048]),
            ("context length 16384 on an m3-max", &[16384]),
            ("Does it fit at 8k and at 32k?", &[8192, 32768]),
            ("Will it fit with 16384 tokens on an rtx-3090?", &[16384]),
            ("a 1M-token context", &[1 << 20]),
            // Not contexts: names, versions, speeds, prices, the context's absence.
            ("What is the largest context length (in tokens) llama-3.1-8b can use on an rtx-4090?", &[]),
            ("How fast, at 30 tokens per second, is qwen2.5-7b on the m4-max?", &[]),
            ("It decodes 45 tokens/s on an rtx-4090 with 24 GB.", &[]),
            ("A $2k budget for qwen2.5-32b at Q4_K_M", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(stated_contexts(text), *want, "{text}");
        }
        // A context stated outright wins over a number that only might be one.
        assert_eq!(
            stated_contexts("Generate 512 tokens with an 8k context."),
            vec![8192]
        );
    }
}
