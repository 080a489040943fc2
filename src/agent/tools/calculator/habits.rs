//! A small model's habits read as arithmetic: thousands separators, units after numbers, "x"
//! for times and a percent sign that ends a number.

use super::{lex, Number, Tok};

/// Names the parser knows without a call (constants).
const CONSTANTS: &[&str] = &["pi", "e"];
/// Function names.
const FUNCTIONS: &[&str] = &[
    "sqrt", "abs", "round", "floor", "ceil", "ln", "log10", "log2", "exp", "sin", "cos", "tan",
    "min", "max", "pow", "log", "trunc", "int", "sum", "mean", "avg", "average", "median", "days",
    "date",
];

pub(super) fn known(name: &str) -> bool {
    CONSTANTS.contains(&name) || FUNCTIONS.contains(&name)
}

/// "3,960" as one number, when no function call could use the comma as an argument separator:
/// a number of one to three digits followed by groups of exactly three digits.
pub(super) fn merge_thousands(toks: Vec<Tok>, expr: &str) -> Vec<Tok> {
    let calls = toks
        .windows(2)
        .any(|w| matches!((&w[0], &w[1]), (Tok::Ident(_), Tok::LParen)));
    if calls || !expr.contains(',') {
        return toks;
    }
    // Re-lex the groups from the text: the lexer has already turned "960" into Int(960), which
    // loses leading zeros ("1,050" would become 1 and 50).
    let groups: Vec<&str> = expr
        .split(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .filter(|g| g.contains(','))
        .collect();
    let well_formed = |g: &str| {
        let int = g.split('.').next().unwrap_or("");
        let mut parts = int.split(',');
        let head = parts.next().unwrap_or("");
        (1..=3).contains(&head.len()) && parts.all(|p| p.len() == 3)
    };
    if groups.is_empty() || !groups.iter().all(|g| well_formed(g)) {
        return toks;
    }
    match lex(&expr.replace(',', "")) {
        Ok(t) => t,
        Err(_) => toks,
    }
}

/// Read a small model's habits as arithmetic: units after numbers ("375 g / 6 people",
/// "48 MB/s") are dropped and named, "x" between numbers multiplies, and a percent sign that
/// ends a number ("17.5% of 3960", "15%") divides by 100. Returns the tokens and the names
/// dropped.
pub(super) fn tidy(toks: Vec<Tok>) -> (Vec<Tok>, Vec<String>) {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    let mut dropped: Vec<String> = Vec::new();
    let mut i = 0;
    let ends_value = |t: Option<&Tok>| matches!(t, Some(Tok::Num(_)) | Some(Tok::RParen));
    while i < toks.len() {
        let next = toks.get(i + 1);
        match &toks[i] {
            // "3 x 4": multiplication.
            Tok::Ident(name)
                if name == "x" && ends_value(out.last()) && !matches!(next, Some(Tok::LParen)) =>
            {
                out.push(Tok::Op('*'));
            }
            // "17.5% of 3960" and "15%" (followed by nothing a modulo could take).
            Tok::Op('%')
                if ends_value(out.last())
                    && !matches!(next, Some(Tok::Num(_)) | Some(Tok::LParen))
                    && !matches!(next, Some(Tok::Ident(n)) if known(n)) =>
            {
                out.push(Tok::Op('/'));
                out.push(Tok::Num(Number::Int(100)));
                if let Some(Tok::Ident(n)) = next {
                    if n == "of" {
                        out.push(Tok::Op('*'));
                        i += 1;
                    }
                }
            }
            // A unit after a value, and the "/s" of a rate unit after it.
            Tok::Ident(name)
                if !known(name) && !matches!(next, Some(Tok::LParen)) && ends_value(out.last()) =>
            {
                let mut unit = name.clone();
                while let (Some(Tok::Op('/')), Some(Tok::Ident(per))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    if known(per) || matches!(toks.get(i + 3), Some(Tok::LParen)) {
                        break;
                    }
                    unit.push('/');
                    unit.push_str(per);
                    i += 2;
                }
                dropped.push(unit);
            }
            t => out.push(t.clone()),
        }
        i += 1;
    }
    (out, dropped)
}

#[cfg(test)]
mod tests {
    use super::super::tests::ev;
    use super::super::{evaluate_noting, Calculator};
    use crate::agent::tools::{Tool, ToolContext};

    #[test]
    fn units_percent_and_thousands_separators_read_as_arithmetic() {
        assert_eq!(ev("375 g / 6 people * 22"), "1375");
        assert_eq!(ev("2400 MB / 48 MB/s"), "50");
        assert_eq!(ev("17.5% of 3960"), "693");
        assert_eq!(ev("15%"), "0.15");
        assert_eq!(
            ev("10 % 3"),
            "1",
            "a percent sign between numbers is still modulo"
        );
        assert_eq!(ev("3,960 * 2"), "7920");
        assert_eq!(ev("1,050 + 1"), "1051", "leading zeros of a group are kept");
        assert_eq!(
            ev("max(1,050)"),
            "50",
            "inside a call the comma separates arguments"
        );
        assert_eq!(ev("12 x 4"), "48");
        assert_eq!(ev("2pi"), ev("2 * pi"));
        assert!(
            ev("flour / 6").starts_with("ERR unknown name"),
            "a name with no number before it is still an error"
        );
        let (n, units) = evaluate_noting("375 g / 6 people").expect("evaluates");
        assert_eq!(n.to_string(), "62.5");
        assert_eq!(units, vec!["g", "people"]);
        let call = |expr: &str| {
            Calculator
                .call(
                    serde_json::json!({ "expression": expr }),
                    &ToolContext {
                        workspace: None,
                        blob_dir: std::path::PathBuf::from("/nonexistent"),
                        cancel: crate::lm::CancelToken::new(),
                        task: None,
                    },
                )
                .expect("runs")
        };
        // A word that is no unit: every unit is dropped and named.
        assert_eq!(
            call("375 g / 6 people * 22"),
            "1375 (units ignored: g, people)"
        );
        // Units the calculator knows are kept through the arithmetic.
        assert_eq!(call("48 MB/s * 50 s"), "2400 MB");
    }
}
