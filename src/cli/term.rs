//! Text for the terminal: what tools, files, the model and transcripts wrote is shown with its
//! control characters escaped, so bytes a workspace file or a model put there cannot move the
//! cursor, clear a line, set the clipboard (OSC 52) or fake a line boyd prints (such as the one
//! that says how to approve an action).
//!
//! Escaped: the C0 controls but `\n` and `\t` (ESC, CR, backspace, BEL, …) and DEL as `\x1b`,
//! and the C1 controls U+0080–U+009F (U+009B is a one-character CSI on some terminals) as
//! `\u{9b}`. With its ESC or CSI escaped, an escape sequence is plain text. Everything else,
//! other UTF-8 included, is unchanged. `--json` output is not passed through here: JSON escaping
//! keeps its strings byte-exact for the program that reads them.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is shown escaped.
fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f' | '\u{80}'..='\u{9f}')
}

/// `s` with every control character but `\n` and `\t` shown escaped (C0 and DEL as `\x1b`,
/// C1 as `\u{9b}`); borrowed when there is none.
pub(crate) fn safe(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if !is_control(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::safe;

    /// Whether a terminal would read a control character in `s` (other than a line end or tab).
    fn has_control(s: &str) -> bool {
        s.chars().any(|c| {
            (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
        })
    }

    #[test]
    fn escape_sequences_are_shown_escaped() {
        let cases = [
            ("ESC alone", "a\x1bb", "a\\x1bb"),
            (
                "OSC 52 ended by BEL",
                "\x1b]52;c;ZXZpbA==\x07",
                "\\x1b]52;c;ZXZpbA==\\x07",
            ),
            (
                "OSC 52 ended by ST",
                "\x1b]52;c;ZXZpbA==\x1b\\",
                "\\x1b]52;c;ZXZpbA==\\x1b\\",
            ),
            (
                "CSI cursor up, erase line",
                "x\x1b[1A\x1b[2K",
                "x\\x1b[1A\\x1b[2K",
            ),
            ("carriage return", "safe\rfake", "safe\\x0dfake"),
            (
                "backspace",
                "rm -rf\x08\x08\x08\x08\x08\x08ls",
                "rm -rf\\x08\\x08\\x08\\x08\\x08\\x08ls",
            ),
            ("C1 CSI", "\u{9b}1A\u{9b}2K", "\\u{9b}1A\\u{9b}2K"),
            ("C1 bounds", "\u{80}\u{9f}", "\\u{80}\\u{9f}"),
            ("DEL and NUL", "\x7f\0", "\\x7f\\x00"),
        ];
        for (name, raw, shown) in cases {
            let out = safe(raw);
            assert_eq!(out, shown, "{name}");
            assert!(!has_control(&out), "{name}: {out:?}");
        }
    }

    #[test]
    fn plain_text_lines_tabs_and_utf8_are_untouched() {
        for s in [
            "",
            "plain ascii",
            "line one\nline two\tcolumn",
            "naïve café — 日本語 🦀 \u{a0}\u{a1}",
            "a backslash \\x1b stays as typed",
        ] {
            assert!(
                matches!(safe(s), std::borrow::Cow::Borrowed(t) if t == s),
                "{s:?}"
            );
        }
    }
}
