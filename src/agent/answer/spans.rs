//! The answer held to the tool outputs: a Lark grammar (llguidance's dialect) whose sentences
//! are the words, numbers and paths of the text the answer step is shown, joined by spaces or
//! commas. A model held to it can pick the wrong value but cannot write one no output (or the
//! task) holds: no invented figure, file or name.

/// Most distinct pieces in a grammar; past it, the first ones in reading order are kept.
pub const MAX_PIECES: usize = 4000;

/// Longest piece kept, in characters (a longer run is a blob, not a value).
const MAX_PIECE_CHARS: usize = 80;

/// Answers to a yes/no question, which no output need hold.
const LEADS: &[&str] = &["Yes", "No", "yes", "no"];

/// Characters a piece is also offered without, at either end: punctuation of the sentence or
/// listing around a value ("24,", "(db.pool_size)", "`parse_header`").
const EDGE: &[char] = &[
    ',', '.', ';', ':', '!', '?', '(', ')', '[', ']', '{', '}', '"', '\'', '`', '<', '>',
];

/// The pieces of `text`: each whitespace-separated run as written, and without the punctuation
/// at its ends, in reading order, each once.
pub fn pieces(text: &str) -> Vec<String> {
    let mut out: Vec<String> = LEADS.iter().map(|s| s.to_string()).collect();
    let mut seen: std::collections::HashSet<String> = out.iter().cloned().collect();
    for raw in text.split_whitespace() {
        for p in [raw, raw.trim_matches(EDGE), raw.trim_end_matches(EDGE)] {
            if out.len() >= MAX_PIECES {
                return out;
            }
            if !p.is_empty() && p.chars().count() <= MAX_PIECE_CHARS && seen.insert(p.to_string()) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// A Lark string literal of `s`.
fn literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The grammar of an answer made of `text`'s pieces: one or more, separated by a space or
/// a comma and a space.
pub fn grammar(text: &str) -> String {
    let alts: Vec<String> = pieces(text).iter().map(|p| literal(p)).collect();
    format!(
        "start: PIECE (SEP PIECE)*\nSEP: \" \" | \", \"\nPIECE: {}\n",
        alts.join(" | ")
    )
}

/// Whether `answer` is a sentence of [`grammar`]`(text)`: every piece of it one of `text`'s.
pub fn holds_to(answer: &str, text: &str) -> bool {
    let allowed: std::collections::HashSet<String> = pieces(text).into_iter().collect();
    answer
        .split(' ')
        .map(|w| w.strip_suffix(',').unwrap_or(w))
        .all(|w| allowed.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_the_runs_with_and_without_their_punctuation() {
        let p = pieces("pool_size: 24,\nsee (config.json) \"quoted\"");
        for want in [
            "pool_size:",
            "pool_size",
            "24,",
            "24",
            "config.json",
            "quoted",
            "Yes",
        ] {
            assert!(p.iter().any(|x| x == want), "{want} missing from {p:?}");
        }
        assert_eq!(p.iter().filter(|x| *x == "24").count(), 1);
    }

    #[test]
    fn the_grammar_escapes_quotes_and_backslashes() {
        let g = grammar(r#"path C:\temp "x""#);
        assert!(g.contains(r#""C:\\temp""#), "{g}");
        assert!(g.contains(r#""\"x\"""#), "{g}");
        assert!(g.starts_with("start: PIECE (SEP PIECE)*"));
    }

    #[test]
    fn an_answer_of_the_outputs_words_holds_and_an_invented_one_does_not() {
        let text = "max_connections = 24\nfile: config.json";
        assert!(holds_to("24", text));
        assert!(holds_to("max_connections, 24", text));
        assert!(holds_to("No", text));
        assert!(!holds_to("18", text));
        assert!(!holds_to("24 connections", text));
    }
}
