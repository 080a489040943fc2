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

/// The phrases `text` puts between a pair of quotes (`'hex bolt M8'`, `"x"`, `` `y` ``), trimmed,
/// of 1 to 60 characters. A single quote opens only after a non-letter and closes only before
/// one: the apostrophes of "What's" and "It's" are not a pair of quotes.
pub fn quoted_phrases<'a>(text: &'a str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut keep = |inner: &'a str| {
        let inner = inner.trim();
        if !inner.is_empty() && inner.chars().count() <= 60 {
            out.push(inner);
        }
    };
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut open: Option<usize> = None;
    for (at, _) in text.match_indices('\'') {
        let before = text[..at].chars().next_back();
        let after = text[at + 1..].chars().next();
        match open {
            Some(start) if !word(after) => {
                keep(&text[start + 1..at]);
                open = None;
            }
            None if !word(before) => open = Some(at),
            _ => {}
        }
    }
    for q in ['"', '`'] {
        let parts: Vec<&str> = text.split(q).collect();
        // Odd-numbered parts sit between a pair of quotes.
        for inner in parts
            .iter()
            .skip(1)
            .step_by(2)
            .take(parts.len().saturating_sub(1) / 2)
        {
            keep(inner);
        }
    }
    out
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

/// The numbers `text` states as quantities: `1,284` (thousands separators), `17.5`, `48` in
/// `48 MB/s`. A number glued to letters before it or joined by `_`, `-` or `.` to a word
/// (`H200`, `rtx-4090`, `llama-3.1-8b`, `Q4_K_M`) names a thing, not a quantity, and is left
/// out; so is one glued to letters after it (`8k`, `70b`) unless `units` (an expression's
/// `375g`).
pub fn quantities(text: &str, units: bool) -> Vec<f64> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let glued_before = i > 0
            && (chars[i - 1].is_alphanumeric()
                || chars[i - 1] == '_'
                || (matches!(chars[i - 1], '-' | '.') && i > 1 && chars[i - 2].is_alphanumeric()));
        let mut digits = String::new();
        while i < chars.len() {
            let c = chars[i];
            let next_digit = chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if c.is_ascii_digit() || (c == '.' && next_digit && !digits.contains('.')) {
                digits.push(c);
            } else if c == ','
                && chars.len() >= i + 4
                && chars[i + 1..i + 4].iter().all(char::is_ascii_digit)
                && chars.get(i + 4).is_none_or(|c| !c.is_ascii_digit())
                && !digits.contains('.')
            {
                // A thousands separator: skip the comma.
            } else {
                break;
            }
            i += 1;
        }
        let glued_after = chars.get(i).is_some_and(|c| c.is_alphabetic() || *c == '_');
        if glued_before || (glued_after && !units) {
            continue;
        }
        if let Ok(v) = digits.parse::<f64>() {
            out.push(v);
        }
    }
    out.extend(number_words(text));
    out
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

/// The counts `text` writes as words ("four GPUs", "twelve racks"): two to twelve. "One" is
/// left out: it is more often a pronoun ("one of the files") than a quantity.
pub fn number_words(text: &str) -> Vec<f64> {
    const NAMES: [&str; 11] = [
        "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    ];
    words(text)
        .iter()
        .filter_map(|w| NAMES.iter().position(|n| n == w))
        .map(|i| (i + 2) as f64)
        .collect()
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
    fn apostrophes_in_words_are_not_quotes() {
        let task = "What's the health check timeout for the worker service? It's in deploy.json.";
        assert!(
            quoted_phrases(task).is_empty(),
            "{:?}",
            quoted_phrases(task)
        );
        assert_eq!(
            quoted_phrases("Which rows of parts.csv say 'hex bolt M8'? Don't guess."),
            ["hex bolt M8"]
        );
        assert_eq!(
            quoted_phrases("the users' 'admin' role and \"x\" and `y`"),
            ["admin", "x", "y"]
        );
    }

    #[test]
    fn counts_written_as_words_are_quantities() {
        assert_eq!(
            quantities("four GPUs of 16 GiB each", false),
            vec![16.0, 4.0]
        );
        assert_eq!(number_words("one of the twelve racks"), vec![12.0]);
    }

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

    #[test]
    fn quantities_are_numbers_not_names() {
        assert_eq!(
            quantities(
                "A warehouse ships 1,284 crates a day, 6 days a week, for 13 weeks.",
                false
            ),
            vec![1284.0, 6.0, 13.0]
        );
        assert_eq!(
            quantities(
                "Does llama-3.1-8b at Q4_K_M with 8k context fit on an rtx-4090 or H200?",
                false
            ),
            Vec::<f64>::new()
        );
        assert_eq!(
            quantities("2.4 GB at 48 MB/s, 17.5% of it", false),
            vec![2.4, 48.0, 17.5]
        );
        assert_eq!(quantities("375g * 22 / 6", true), vec![375.0, 22.0, 6.0]);
        assert_eq!(quantities("375g * 22 / 6", false), vec![22.0, 6.0]);
        assert_eq!(quantities("1,2345 and 3.", false), vec![1.0, 2345.0, 3.0]);
    }
}
