//! One line of a short program, as the `compute` tool and the worked-answer step
//! (`agent::program`) both read it: `name = expr` binds a name, `print(expr)` and a bare
//! expression give a value, `x += 3` is `x = x + (3)`, `name: float = 3` is `name = 3`, and
//! `x = a + b = 23` offers each part after the name in turn (a model often writes its own result
//! after the expression). Comments, imports and lines that open a block are nothing.

/// What one line of a program says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Nothing to evaluate: blank, a comment, an import, a block opener or a comparison.
    Skip,
    /// A statement: the name it binds (lower case), if any, and the expressions it offers, in
    /// the order written (the first that evaluates is the value).
    Statement {
        /// The bound name (lower case); `None` for a value line.
        bind: Option<String>,
        /// The expressions, tidied ([`tidy`]).
        exprs: Vec<String>,
    },
}

/// Whether `s` is a name a program may bind (`flour_per_person`).
pub fn is_name(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One expression of a line: `math.` dropped, a trailing unit or symbol ("100 m²") cut.
pub fn tidy(expr: &str) -> String {
    let e = expr.trim().replace("math.", "");
    let e = e.trim_end_matches(|c: char| {
        !(c.is_ascii_alphanumeric() || matches!(c, ')' | '_' | '"' | '\''))
    });
    e.to_string()
}

/// The last argument of a call's argument list at the top level (commas inside parentheses
/// or quotes belong to inner calls and dates): `"total:", f(a, b)` gives `f(a, b)`.
fn last_argument(inner: &str) -> &str {
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, ',') if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    inner[start..].trim()
}

/// Read one line of a program.
pub fn read(raw: &str) -> Line {
    let line = raw.split('#').next().unwrap_or_default().trim();
    if line.is_empty()
        || line.starts_with("import ")
        || line.starts_with("from ")
        || line.ends_with(':')
        || ["==", "<=", ">=", "!="].iter().any(|op| line.contains(op))
    {
        return Line::Skip;
    }
    // `print(x)` is a bare expression; so is `print("total:", x)`'s last argument.
    let line = match line
        .strip_prefix("print(")
        .and_then(|l| l.strip_suffix(')'))
    {
        Some(inner) => last_argument(inner).to_string(),
        None => line.to_string(),
    };
    // `x += 3` is `x = x + (3)`.
    let line = ["+", "-", "*", "/"]
        .iter()
        .find_map(|op| {
            let (name, rhs) = line.split_once(&format!("{op}="))?;
            let name = name.trim();
            is_name(name).then(|| format!("{name} = {name} {op} ({rhs})"))
        })
        .unwrap_or(line);
    let parts: Vec<&str> = line.split('=').collect();
    // `name: float = 3` is `name = 3`.
    let target = parts[0].split(':').next().unwrap_or_default().trim();
    let (bind, exprs) = if parts.len() > 1 && is_name(target) {
        (Some(target.to_ascii_lowercase()), &parts[1..])
    } else {
        (None, &parts[..])
    };
    Line::Statement {
        bind,
        exprs: exprs.iter().map(|e| tidy(e)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(bind: Option<&str>, exprs: &[&str]) -> Line {
        Line::Statement {
            bind: bind.map(str::to_string),
            exprs: exprs.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn lines_bind_names_and_give_values() {
        assert_eq!(
            read("flour_g = 375  # grams"),
            stmt(Some("flour_g"), &["375"])
        );
        assert_eq!(
            read("Total: float = a * 2"),
            stmt(Some("total"), &["a * 2"])
        );
        assert_eq!(read("x += 3"), stmt(Some("x"), &["x + ( 3)"]));
        assert_eq!(read("y = a + b = 23"), stmt(Some("y"), &["a + b", "23"]));
        assert_eq!(read("print(\"total:\", x)"), stmt(None, &["x"]));
        assert_eq!(read("print(max(a, b))"), stmt(None, &["max(a, b)"]));
        assert_eq!(
            read("print(days(\"2024-03-01\", \"2024-02-01\"))"),
            stmt(None, &["days(\"2024-03-01\", \"2024-02-01\")"])
        );
        assert_eq!(read("area = 100 m²"), stmt(Some("area"), &["100 m"]));
        for skip in ["", "# note", "import math", "if x > 3:", "ok = a == b"] {
            assert_eq!(read(skip), Line::Skip, "{skip}");
        }
    }
}
