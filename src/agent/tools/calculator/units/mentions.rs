//! What a text mentions that the calculator reads: calendar dates and amounts with units (what
//! the calculation request offers its kinds by).

use super::table::UNITS;
use super::{lex, unit, written_dates, Tok};
use crate::units::civil_from_days;

/// What a text mentions that this module reads: a calendar date (`2026-10-17`, `17 October
/// 2026`) and an amount with a unit (`48 GiB`, `3.2GB`, `95 kph`). Characters the lexer does
/// not read are blanks here, and a line it cannot read (`Python 3.12.3`) is skipped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mentions {
    /// The calendar dates, written `YYYY-MM-DD`, each once, in order.
    pub dates: Vec<String>,
    /// How many amounts with a unit (a number followed by one) it states.
    pub amounts: usize,
}

/// What `text` mentions (see [`Mentions`]).
pub fn mentions(text: &str) -> Mentions {
    let mut m = Mentions::default();
    for line in text.lines() {
        let readable: String = line
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || "().,+-*/^%".contains(c) {
                    c
                } else {
                    ' '
                }
            })
            .collect();
        let Ok(toks) = lex(&readable) else {
            continue;
        };
        let toks = written_dates(toks);
        for t in &toks {
            if let Tok::Date(day) = t {
                let (y, mo, d) = civil_from_days(*day);
                let iso = format!("{y:04}-{mo:02}-{d:02}");
                if !m.dates.contains(&iso) {
                    m.dates.push(iso);
                }
            }
        }
        m.amounts += toks
            .windows(2)
            .filter(|p| matches!((&p[0], &p[1]), (Tok::Num(_), Tok::Word(w)) if unit(w).is_some()))
            .count();
    }
    m
}

/// The units a conversion may name: each unit as it is shown (`GiB`, `km/h`), then the short
/// names people also write (`kph`, `mbps`, `hr`), then `m/s`.
pub fn unit_choices() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = UNITS.iter().map(|u| u.show).collect();
    for u in UNITS {
        for n in u.names {
            if n.len() <= 4 && !out.iter().any(|o| o.eq_ignore_ascii_case(n)) {
                out.push(n);
            }
        }
    }
    out.push("m/s");
    out
}
