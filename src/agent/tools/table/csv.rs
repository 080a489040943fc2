//! The CSV reader: RFC 4180 records with quoted fields (a quoted field may hold the delimiter,
//! `""` for a quote, and line breaks), `\n` or `\r\n` line ends, any one-character delimiter
//! (`,` for CSV, a tab for TSV). Blank lines are skipped; a byte-order mark is dropped.

/// Why a CSV text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// A quoted field that never closes.
    #[error("the quoted field that starts on line {line} is never closed (a missing '\"')")]
    Unclosed {
        /// 1-based line where the quoted field starts.
        line: usize,
    },
    /// Text right after a closing quote.
    #[error(
        "line {line}: text after a closing quote; write a quote inside a quoted field as \"\""
    )]
    AfterQuote {
        /// 1-based line.
        line: usize,
    },
}

/// The rows of `text`, each a list of fields, split on `delim`.
pub fn rows(text: &str, delim: char) -> Result<Vec<Vec<String>>, CsvError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut row: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    // Whether the current field was quoted (its closing quote seen) and whether the row has
    // any content yet (a blank line is no row).
    let mut quoted = false;
    let mut started = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if field.is_empty() && !quoted => {
                let start = line;
                loop {
                    match chars.next() {
                        None => return Err(CsvError::Unclosed { line: start }),
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(x) => {
                            if x == '\n' {
                                line += 1;
                            }
                            field.push(x);
                        }
                    }
                }
                quoted = true;
                started = true;
            }
            c if c == delim => {
                row.push(std::mem::take(&mut field));
                quoted = false;
                started = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                if started || !field.is_empty() {
                    row.push(std::mem::take(&mut field));
                    out.push(std::mem::take(&mut row));
                }
                quoted = false;
                started = false;
                line += 1;
            }
            _ if quoted => {
                if !c.is_whitespace() {
                    return Err(CsvError::AfterQuote { line });
                }
            }
            c => {
                field.push(c);
                started = true;
            }
        }
    }
    if started || !field.is_empty() {
        row.push(field);
        out.push(row);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(text: &str) -> Vec<Vec<String>> {
        rows(text, ',').expect("reads")
    }

    #[test]
    fn quoted_fields_hold_delimiters_quotes_and_line_breaks() {
        let got = r(
            "name,note,amount\r\n\"Smith, Ann\",\"said \"\"hi\"\"\",3\n\nBob,\"two\nlines\",4\n",
        );
        assert_eq!(
            got,
            vec![
                vec!["name", "note", "amount"],
                vec!["Smith, Ann", "said \"hi\"", "3"],
                vec!["Bob", "two\nlines", "4"],
            ]
        );
        assert_eq!(r("a,,c"), vec![vec!["a", "", "c"]]);
        assert_eq!(r("\u{feff}x,y\n1,2"), vec![vec!["x", "y"], vec!["1", "2"]]);
        assert_eq!(r("a,\"\"\n"), vec![vec!["a", ""]]);
        assert_eq!(
            rows("a\tb c\n1\t2", '\t'),
            Ok(vec![
                vec!["a".to_string(), "b c".into()],
                vec!["1".into(), "2".into()]
            ])
        );
    }

    #[test]
    fn malformed_quotes_are_errors_with_their_line() {
        assert_eq!(
            rows("a,b\n1,\"open\n2,3\n", ','),
            Err(CsvError::Unclosed { line: 2 })
        );
        assert_eq!(
            rows("a,b\n\"x\"y,2\n", ','),
            Err(CsvError::AfterQuote { line: 2 })
        );
    }
}
