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
}
