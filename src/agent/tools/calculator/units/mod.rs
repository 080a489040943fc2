//! Quantities with units and calendar dates, as people write them in an expression: `95 km/h in
//! m/s`, `3.2 GB / 40 Mbit/s`, `48 GiB in GB`, `60 W * 8 h * 30 in kWh`, `2028-03-05 -
//! 2027-11-20`, `2026-10-17 + 45 days`, `weekday(2028-02-29)`.
//!
//! The calculator takes this path only when the units matter: a conversion target (`in` or `to`
//! and a unit at the end), a date written `YYYY-MM-DD`, `weekday(…)`, or two different units.
//! An expression with a word this module does not know ("375 g / 6 people") is left to the plain
//! evaluator, which drops units and names them, as before. Every figure here is a conversion
//! factor (SI, IEC binary prefixes, the international mile and pound); temperatures, whose scales
//! are not proportional, are not units here.

use super::dates::day_number;
use super::CalcError;
use crate::units::{civil_from_days, MONTH_NAMES, WEEKDAYS_FROM_EPOCH};

mod mentions;
mod table;
pub use mentions::{mentions, unit_choices, Mentions};
use table::{Dims, Unit, DEFAULTS, NONE, TIME, UNITS};

/// Words that are not units: functions, conversion words, "of" and "x".
const FUNCTIONS: &[&str] = &[
    "sqrt", "abs", "round", "floor", "ceil", "min", "max", "days", "weekday", "date",
];

fn unit(name: &str) -> Option<&'static Unit> {
    UNITS.iter().find(|u| u.names.contains(&name))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    /// A calendar date, as its day number (days since 1970-01-01).
    Date(i64),
    Word(String),
    Op(char),
    Open,
    Close,
    Comma,
}

/// A value: a quantity in SI base units, or a date.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    Q(f64, Dims),
    Date(i64),
}

/// A unit as written: its size in base units, dimensions, and how to show it.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    factor: f64,
    dims: Dims,
    show: String,
}

fn add_dims(a: Dims, b: Dims, sign: i8) -> Dims {
    let mut out = a;
    for (o, x) in out.iter_mut().zip(b) {
        *o += sign * x;
    }
    out
}

/// A date written `YYYY-MM-DD` (or with `/`) at `chars[i..]`: its day number and length.
fn date_at(chars: &[char], i: usize) -> Option<(i64, usize)> {
    let mut end = i;
    while end < chars.len() && (chars[end].is_ascii_digit() || matches!(chars[end], '-' | '/')) {
        end += 1;
    }
    // The longest prefix that is a date: "2028-03-05-2027" stops after the day.
    for len in (8..=10).rev() {
        if i + len > end {
            continue;
        }
        let text: String = chars[i..i + len].iter().collect();
        let parts: Vec<&str> = text.split(['-', '/']).collect();
        if parts.len() == 3
            && parts[0].len() == 4
            && text.matches('-').count() != 1
            && !chars.get(i + len).is_some_and(char::is_ascii_digit)
        {
            if let Ok(d) = day_number(&text) {
                return Some((d as i64, len));
            }
        }
    }
    None
}

/// The month a word names (`October`, `oct`, `Sept`), 1 to 12: a whole name, its first three
/// letters, or `sept`.
fn month(word: &str) -> Option<i64> {
    MONTH_NAMES
        .iter()
        .position(|full| {
            let full = full.to_ascii_lowercase();
            word == full || word == &full[..3] || (word == "sept" && full == "september")
        })
        .map(|i| i as i64 + 1)
}

/// Dates written out (`17 October 2026`, `October 17, 2026`, `feb 29 2028`, `29th Feb 2028`)
/// as date tokens; a word that looks like a month in anything else is left as it is.
fn written_dates(toks: Vec<Tok>) -> Vec<Tok> {
    let day_of = |t: Option<&Tok>| match t {
        Some(Tok::Num(x)) if x.fract() == 0.0 && (1.0..=31.0).contains(x) => Some(*x as i64),
        _ => None,
    };
    let year_of = |t: Option<&Tok>| match t {
        Some(Tok::Num(x)) if x.fract() == 0.0 && (1000.0..=9999.0).contains(x) => Some(*x as i64),
        _ => None,
    };
    let ordinal = |t: Option<&Tok>| matches!(t, Some(Tok::Word(w)) if matches!(w.as_str(), "st" | "nd" | "rd" | "th"));
    let month_of = |t: Option<&Tok>| match t {
        Some(Tok::Word(w)) => month(w),
        _ => None,
    };
    let mut out = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let at = |k: usize| toks.get(i + k);
        let mut found = None;
        // day [th] month [,] year
        if let Some(d) = day_of(at(0)) {
            let mut k = 1 + usize::from(ordinal(at(1)));
            if let Some(m) = month_of(at(k)) {
                k += 1;
                k += usize::from(matches!(at(k), Some(Tok::Comma)));
                if let Some(y) = year_of(at(k)) {
                    found = Some((y, m, d, k + 1));
                }
            }
        }
        // month day [th] [,] year
        if let (None, Some(m)) = (found, month_of(at(0))) {
            if let Some(d) = day_of(at(1)) {
                let mut k = 2 + usize::from(ordinal(at(2)));
                k += usize::from(matches!(at(k), Some(Tok::Comma)));
                if let Some(y) = year_of(at(k)) {
                    found = Some((y, m, d, k + 1));
                }
            }
        }
        if let Some((y, m, d, len)) = found {
            if let Ok(day) = day_number(&format!("{y:04}-{m:02}-{d:02}")) {
                out.push(Tok::Date(day as i64));
                i += len;
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

fn lex(s: &str) -> Result<Vec<Tok>, CalcError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut depth_in_call = 0usize;
    let mut depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            if let Some((day, len)) = date_at(&chars, i) {
                out.push(Tok::Date(day));
                i += len;
                continue;
            }
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            // Thousands groups ("1,284"), outside a call's argument list.
            while depth_in_call == 0
                && chars.get(i) == Some(&',')
                && chars
                    .get(i + 1..i + 4)
                    .is_some_and(|g| g.iter().all(char::is_ascii_digit))
                && !chars.get(i + 4).is_some_and(char::is_ascii_digit)
            {
                i += 4;
            }
            if matches!(chars.get(i), Some('e' | 'E'))
                && chars
                    .get(i + 1)
                    .is_some_and(|c| c.is_ascii_digit() || *c == '-' || *c == '+')
            {
                let mut j = i + 2;
                while j < chars.len() && chars[j].is_ascii_digit() {
                    j += 1;
                }
                if chars[i + 1..j].iter().any(char::is_ascii_digit) {
                    i = j;
                }
            }
            let text: String = chars[start..i]
                .iter()
                .filter(|c| **c != '_' && **c != ',')
                .collect();
            let x: f64 = text
                .parse()
                .map_err(|_| CalcError::BadNumber { text: text.clone() })?;
            out.push(Tok::Num(x));
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let w: String = chars[start..i].iter().collect::<String>().to_lowercase();
            if FUNCTIONS.contains(&w.as_str()) && chars.get(i) == Some(&'(') {
                depth_in_call = depth + 1;
            }
            out.push(Tok::Word(w));
        } else {
            match c {
                '(' => {
                    depth += 1;
                    out.push(Tok::Open);
                }
                ')' => {
                    if depth_in_call == depth {
                        depth_in_call = 0;
                    }
                    depth = depth.saturating_sub(1);
                    out.push(Tok::Close);
                }
                ',' => out.push(Tok::Comma),
                '*' if chars.get(i + 1) == Some(&'*') => {
                    out.push(Tok::Op('^'));
                    i += 1;
                }
                '+' | '-' | '*' | '/' | '^' | '%' => out.push(Tok::Op(c)),
                '×' | '·' => out.push(Tok::Op('*')),
                '÷' => out.push(Tok::Op('/')),
                '−' => out.push(Tok::Op('-')),
                other => return Err(CalcError::BadChar { ch: other, pos: i }),
            }
            i += 1;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    /// The units written after values, in order (shown for a result of their dimensions).
    seen: Vec<Written>,
    /// Whether a date was taken from a date (a span shown in days).
    date_span: bool,
    /// Each single unit the written units are made of (`MB` and `s` of `MB/s`).
    parts: Vec<Written>,
}

fn syntax(msg: impl Into<String>) -> CalcError {
    CalcError::Syntax(msg.into())
}

fn q(v: Val) -> Result<(f64, Dims), CalcError> {
    match v {
        Val::Q(x, d) => Ok((x, d)),
        Val::Date(_) => Err(syntax(
            "a date can only have days added or taken away, or another date taken away",
        )),
    }
}

fn dims_name(d: Dims) -> String {
    if let Some((_, name)) = DEFAULTS.iter().find(|(x, _)| *x == d) {
        return name.to_string();
    }
    if d == NONE {
        return "a plain number".into();
    }
    let names = ["m", "s", "kg", "byte"];
    let parts: Vec<String> = d
        .iter()
        .zip(names)
        .filter(|(e, _)| **e != 0)
        .map(|(e, n)| {
            if *e == 1 {
                n.to_string()
            } else {
                format!("{n}^{e}")
            }
        })
        .collect();
    parts.join("·")
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.pos + k)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn word_is_unit(&self, k: usize) -> bool {
        matches!(self.peek_at(k), Some(Tok::Word(w)) if unit(w).is_some())
    }

    /// A unit written as words joined by `/` and `*` (`km/h`, `Mbit/s`, `kW*h`).
    fn unit_expr(&mut self) -> Option<Written> {
        let Some(Tok::Word(w)) = self.peek().cloned() else {
            return None;
        };
        let first = unit(&w)?;
        self.pos += 1;
        let part = |u: &Unit| Written {
            factor: u.factor,
            dims: u.dims,
            show: u.show.to_string(),
        };
        self.parts.push(part(first));
        let mut out = Written {
            factor: first.factor,
            dims: first.dims,
            show: first.show.to_string(),
        };
        while let Some(Tok::Op(op @ ('/' | '*'))) = self.peek().cloned() {
            if !self.word_is_unit(1) {
                break;
            }
            let Some(Tok::Word(w)) = self.peek_at(1).cloned() else {
                break;
            };
            let Some(next) = unit(&w) else { break };
            self.pos += 2;
            self.parts.push(part(next));
            if op == '/' {
                out.factor /= next.factor;
                out.dims = add_dims(out.dims, next.dims, -1);
            } else {
                out.factor *= next.factor;
                out.dims = add_dims(out.dims, next.dims, 1);
            }
            out.show = format!("{}{op}{}", out.show, next.show);
        }
        Some(out)
    }

    fn top(&mut self) -> Result<(Val, Option<Written>), CalcError> {
        let v = self.sum()?;
        let target = match self.peek() {
            Some(Tok::Word(w)) if matches!(w.as_str(), "in" | "to" | "as" | "into") => {
                self.pos += 1;
                Some(
                    self.unit_expr()
                        .ok_or_else(|| syntax("after `in` or `to` comes a unit, e.g. m/s"))?,
                )
            }
            _ => None,
        };
        if let Some(t) = self.peek() {
            return Err(syntax(format!("unexpected {t:?} after the expression")));
        }
        Ok((v, target))
    }

    fn sum(&mut self) -> Result<Val, CalcError> {
        let mut a = self.product()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let b = self.product()?;
            a = match (a, b, op) {
                (Val::Date(x), Val::Date(y), '-') => {
                    self.date_span = true;
                    Val::Q((x - y) as f64 * 86_400.0, TIME)
                }
                (Val::Date(x), Val::Q(s, d), _) | (Val::Q(s, d), Val::Date(x), '+')
                    if d == TIME =>
                {
                    let days = (s / 86_400.0).round() as i64;
                    Val::Date(if op == '+' { x + days } else { x - days })
                }
                (Val::Date(x), Val::Q(n, d), _) | (Val::Q(n, d), Val::Date(x), '+')
                    if d == NONE && n.fract() == 0.0 =>
                {
                    // A bare whole number added to a date counts days.
                    let days = n as i64;
                    Val::Date(if op == '+' { x + days } else { x - days })
                }
                _ => {
                    let ((x, dx), (y, dy)) = (q(a)?, q(b)?);
                    if dx != dy {
                        return Err(syntax(format!(
                            "cannot {} {} and {}",
                            if op == '+' { "add" } else { "subtract" },
                            dims_name(dx),
                            dims_name(dy)
                        )));
                    }
                    Val::Q(if op == '+' { x + y } else { x - y }, dx)
                }
            };
        }
        Ok(a)
    }

    fn product(&mut self) -> Result<Val, CalcError> {
        let mut a = self.power()?;
        loop {
            let op = match self.peek() {
                Some(Tok::Op(op @ ('*' | '/'))) => *op,
                Some(Tok::Word(w)) if w == "x" || w == "of" => '*',
                Some(Tok::Word(w)) if w == "per" => '/',
                _ => break,
            };
            self.pos += 1;
            let b = self.power()?;
            let ((x, dx), (y, dy)) = (q(a)?, q(b)?);
            a = if op == '*' {
                Val::Q(x * y, add_dims(dx, dy, 1))
            } else {
                if y == 0.0 {
                    return Err(CalcError::DivZero);
                }
                Val::Q(x / y, add_dims(dx, dy, -1))
            };
        }
        Ok(a)
    }

    fn power(&mut self) -> Result<Val, CalcError> {
        let base = self.unary()?;
        if let Some(Tok::Op('^')) = self.peek() {
            self.pos += 1;
            let (e, de) = q(self.unary()?)?;
            let (x, d) = q(base)?;
            if de != NONE || (d != NONE && e.fract() != 0.0) {
                return Err(syntax("a power needs a plain whole exponent"));
            }
            let mut dims = d;
            for v in dims.iter_mut() {
                *v = (*v as f64 * e) as i8;
            }
            return Ok(Val::Q(x.powf(e), dims));
        }
        Ok(base)
    }

    fn unary(&mut self) -> Result<Val, CalcError> {
        if let Some(Tok::Op('-')) = self.peek() {
            self.pos += 1;
            let (x, d) = q(self.unary()?)?;
            return Ok(Val::Q(-x, d));
        }
        if let Some(Tok::Op('+')) = self.peek() {
            self.pos += 1;
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Val, CalcError> {
        let v = self.atom()?;
        let mut v = match v {
            Val::Q(x, d) => match self.unit_expr() {
                Some(w) => {
                    self.seen.push(w.clone());
                    Val::Q(x * w.factor, add_dims(d, w.dims, 1))
                }
                None => Val::Q(x, d),
            },
            date => date,
        };
        // "15%" (not a modulo: nothing that starts a value follows).
        if let Some(Tok::Op('%')) = self.peek() {
            if !matches!(
                self.peek_at(1),
                Some(Tok::Num(_) | Tok::Open | Tok::Date(_))
            ) {
                self.pos += 1;
                let (x, d) = q(v)?;
                v = Val::Q(x / 100.0, d);
            }
        }
        Ok(v)
    }

    fn args(&mut self) -> Result<Vec<Val>, CalcError> {
        if self.next() != Some(Tok::Open) {
            return Err(syntax("a function name is followed by ("));
        }
        let mut out = vec![self.sum()?];
        while let Some(Tok::Comma) = self.peek() {
            self.pos += 1;
            out.push(self.sum()?);
        }
        if self.next() != Some(Tok::Close) {
            return Err(syntax("a ( is not closed"));
        }
        Ok(out)
    }

    fn atom(&mut self) -> Result<Val, CalcError> {
        match self.next() {
            Some(Tok::Num(x)) => Ok(Val::Q(x, NONE)),
            Some(Tok::Date(d)) => Ok(Val::Date(d)),
            Some(Tok::Open) => {
                let v = self.sum()?;
                if self.next() != Some(Tok::Close) {
                    return Err(syntax("a ( is not closed"));
                }
                Ok(v)
            }
            Some(Tok::Word(w)) if FUNCTIONS.contains(&w.as_str()) => {
                let args = self.args()?;
                call(&w, &args)
            }
            Some(Tok::Word(w)) if w == "pi" => Ok(Val::Q(std::f64::consts::PI, NONE)),
            Some(t) => Err(syntax(format!("unexpected {t:?}"))),
            None => Err(syntax("the expression ends too early")),
        }
    }
}

fn call(name: &str, args: &[Val]) -> Result<Val, CalcError> {
    let arity = |n: usize| {
        if args.len() == n {
            Ok(())
        } else {
            Err(CalcError::Arity {
                name: name.into(),
                expected: if n == 1 { "1" } else { "2" },
                got: args.len(),
            })
        }
    };
    match name {
        "weekday" | "date" => {
            arity(1)?;
            match args[0] {
                Val::Date(d) => Ok(Val::Date(d)),
                _ => Err(syntax("weekday takes a date written YYYY-MM-DD")),
            }
        }
        "days" => {
            arity(2)?;
            match (args[0], args[1]) {
                (Val::Date(a), Val::Date(b)) => Ok(Val::Q((a - b) as f64, NONE)),
                _ => Err(syntax("days takes two dates written YYYY-MM-DD")),
            }
        }
        "min" | "max" => {
            if args.is_empty() {
                return Err(syntax(format!("{name} needs values")));
            }
            let mut best = q(args[0])?;
            for a in &args[1..] {
                let (x, d) = q(*a)?;
                if d != best.1 {
                    return Err(syntax(format!("{name} of values with different units")));
                }
                if (name == "min" && x < best.0) || (name == "max" && x > best.0) {
                    best = (x, d);
                }
            }
            Ok(Val::Q(best.0, best.1))
        }
        _ => {
            arity(1)?;
            let (x, d) = q(args[0])?;
            let y = match name {
                "abs" => x.abs(),
                "round" => x.round(),
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                _ => {
                    if d.iter().any(|e| e % 2 != 0) || x < 0.0 {
                        return Err(CalcError::Domain(format!("sqrt of {x}")));
                    }
                    let mut half = d;
                    for e in half.iter_mut() {
                        *e /= 2;
                    }
                    return Ok(Val::Q(x.sqrt(), half));
                }
            };
            Ok(Val::Q(y, d))
        }
    }
}

/// A figure with up to 8 significant digits, trailing zeros trimmed.
fn figure(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    if x.abs() >= 1e15 || x.abs() < 1e-6 {
        return format!("{x:e}");
    }
    let digits = (8 - (x.abs().log10().floor() as i32 + 1)).clamp(0, 15) as usize;
    let s = format!("{x:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A duration in seconds as hours, minutes and seconds, when it is a minute or more.
fn clock(seconds: f64) -> Option<String> {
    if seconds.abs() < 60.0 {
        return None;
    }
    let total = seconds.abs().round() as i64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut parts = Vec::new();
    if h > 0 {
        parts.push(format!("{h} h"));
    }
    if m > 0 {
        parts.push(format!("{m} min"));
    }
    if s > 0 {
        parts.push(format!("{s} s"));
    }
    Some(parts.join(" "))
}

/// Whether this module should evaluate `expr`: it has a conversion target, a date, `weekday`,
/// or two different units, and every word in it is one this module reads.
fn applies(toks: &[Tok]) -> bool {
    let words: Vec<&str> = toks
        .iter()
        .filter_map(|t| match t {
            Tok::Word(w) => Some(w.as_str()),
            _ => None,
        })
        .collect();
    let known = |w: &&str| {
        unit(w).is_some()
            || FUNCTIONS.contains(w)
            || matches!(*w, "in" | "to" | "as" | "into" | "of" | "x" | "per" | "pi")
    };
    if !words.iter().all(known) {
        return false;
    }
    let target = toks.windows(2).any(|p| {
        matches!(&p[0], Tok::Word(w) if matches!(w.as_str(), "in" | "to" | "as" | "into"))
            && matches!(&p[1], Tok::Word(u) if unit(u).is_some())
    });
    let dates = toks.iter().any(|t| matches!(t, Tok::Date(_)));
    let mut units: Vec<&str> = words
        .iter()
        .filter_map(|w| unit(w).map(|u| u.show))
        .collect();
    units.sort_unstable();
    units.dedup();
    target || dates || words.contains(&"weekday") || units.len() >= 2
}

/// Evaluate `expr` with its units and dates, when it is such an expression (see the module
/// docs); `None` leaves it to the plain evaluator. The result is shown in the target unit, or in
/// a unit of the same dimensions the expression wrote, or in the dimensions' usual unit; a date
/// with its weekday.
pub fn evaluate(expr: &str) -> Option<Result<String, CalcError>> {
    let toks = written_dates(lex(expr).ok()?);
    if !applies(&toks) {
        return None;
    }
    let mut p = Parser {
        toks,
        pos: 0,
        seen: Vec::new(),
        date_span: false,
        parts: Vec::new(),
    };
    Some(p.top().and_then(|(v, target)| {
        let mut seen = p.seen.clone();
        seen.extend(p.parts.iter().cloned());
        if p.date_span {
            if let Some(day) = unit("days") {
                seen.push(Written {
                    factor: day.factor,
                    dims: day.dims,
                    show: day.show.to_string(),
                });
            }
        }
        show(v, target, &seen)
    }))
}

/// Whether `output` is a result this module shows: a finite figure and a unit made of the
/// units above (`26.388889 m/s`, `640 s (10 min 40 s)`), or a date with its weekday.
pub fn is_result(output: &str) -> bool {
    let t = output.trim();
    let (head, rest) = t.split_once(' ').unwrap_or((t, ""));
    if head.len() == 10 && day_number(head).is_ok() {
        return rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .is_some_and(|d| WEEKDAYS_FROM_EPOCH.contains(&d));
    }
    if !head.parse::<f64>().is_ok_and(f64::is_finite) {
        return false;
    }
    let unit_text = rest.split(" (").next().unwrap_or(rest);
    !unit_text.is_empty()
        && unit_text.split(['/', '*', '·']).all(|part| {
            let base = part.split('^').next().unwrap_or(part);
            UNITS.iter().any(|u| u.show == base) || matches!(base, "m" | "s" | "kg" | "byte")
        })
}

fn show(v: Val, target: Option<Written>, seen: &[Written]) -> Result<String, CalcError> {
    let (x, dims) = match v {
        Val::Date(d) => {
            if target.is_some() {
                return Err(syntax("a date cannot be converted to a unit"));
            }
            let (y, m, day) = civil_from_days(d);
            let weekday = WEEKDAYS_FROM_EPOCH[d.rem_euclid(7) as usize];
            return Ok(format!("{y:04}-{m:02}-{day:02} ({weekday})"));
        }
        Val::Q(x, d) => (x, d),
    };
    if !x.is_finite() {
        return Err(CalcError::Domain(
            "the result is not a finite number".into(),
        ));
    }
    let unit = match target {
        Some(t) if t.dims != dims => {
            return Err(syntax(format!(
                "cannot convert {} to {}: the units measure different things",
                dims_name(dims),
                t.show
            )))
        }
        Some(t) => Some((t.factor, t.show)),
        None if dims == NONE => None,
        None => seen
            .iter()
            .find(|w| w.dims == dims)
            .map(|w| (w.factor, w.show.clone()))
            .or_else(|| {
                let name = DEFAULTS.iter().find(|(d, _)| *d == dims)?.1;
                let w = UNITS.iter().find(|u| u.show == name).map(|u| u.factor);
                Some((w.unwrap_or(1.0), name.to_string()))
            }),
    };
    let Some((factor, name)) = unit else {
        if dims != NONE {
            return Ok(format!("{} {}", figure(x), dims_name(dims)));
        }
        return Ok(figure(x));
    };
    let shown = x / factor;
    let mut out = format!("{} {name}", figure(shown));
    if dims == TIME && name == "s" {
        if let Some(c) = clock(x) {
            out.push_str(&format!(" ({c})"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
