//! The `calculator` tool: an arithmetic expression evaluator.
//!
//! A recursive-descent parser over `+ - * / % ^` (also `**`, `×`, `÷`), parentheses, unary minus,
//! decimals and scientific notation, the constants `pi` and `e`, and functions (`sqrt`, `abs`,
//! `round`, `floor`, `ceil`, `ln`, `log10`, `log2`, `exp`, `sin`, `cos`, `tan`, `min`, `max`,
//! `pow`). Integers stay exact (`i128`) as long as every operation on them is exact —
//! `1234 * 5678` is `7006652`, `2^100` is exact — and fall back to `f64` otherwise. Precedence:
//! `^` binds tighter than unary minus (`-2^2 = -4`) and is right-associative.

use std::collections::HashMap;

use serde::Deserialize;

use super::{parse_args, PromptHint, Tool, ToolContext, ToolError, Verification};

/// The characters an expression may hold in the action schema: digits, letters (functions,
/// units the evaluator drops), spaces and the operators the lexer reads; no `=`.
pub const EXPRESSION_PATTERN: &str = r"^[0-9A-Za-z .,_+*/^%()\[\]-]+$";

/// The calculator tool's name.
pub const CALCULATOR: &str = "calculator";

/// The calculator tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Calculator;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    expression: String,
}

/// What the calculator shows for `expression`: the value with its unit or date when the
/// units matter, else the number (and the units it dropped).
pub fn output(expression: &str) -> Result<String, ToolError> {
    let failed = |e: CalcError| ToolError::invalid(format!("cannot evaluate {expression:?}: {e}."));
    if let Some(r) = units::evaluate(expression) {
        return r.map_err(failed);
    }
    evaluate_noting(expression)
        .map(|(n, units)| {
            if units.is_empty() {
                n.to_string()
            } else {
                format!("{n} (units ignored: {})", units.join(", "))
            }
        })
        .map_err(failed)
}

impl Tool for Calculator {
    fn name(&self) -> &str {
        CALCULATOR
    }
    fn description(&self) -> &str {
        "Evaluate an arithmetic expression exactly. Operators: + - * / % ^ and parentheses; functions: sqrt(x) abs(x) round(x) floor(x) ceil(x) ln(x) log10(x) exp(x) min(a, b) max(a, b) pow(a, b). Numbers may carry units (km, mi, m/s, km/h, mph, s, min, h, days, kg, lb, GB, GiB, MB/s, Mbit/s, W, kWh); end with in <unit> to convert. Dates are written YYYY-MM-DD: date - date gives days, date + <n> days gives a date, weekday(date) its weekday. All arithmetic goes through it, even a sum of two numbers read from files: write the numbers, not words."
    }
    fn args_schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            // Only what the lexer reads: a small model otherwise writes the result into the
            // expression ("48 MB/s / 2.4 GB = 20.0 seconds") and repeats the failing call.
            "properties": {"expression": {"type": "string", "maxLength": 120, "pattern": EXPRESSION_PATTERN, "description": "the expression, using only numbers, operators and functions"}},
            "required": ["expression"],
            "additionalProperties": false
        })
    }
    fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> Result<String, ToolError> {
        let a: Args = parse_args(args)?;
        output(&a.expression)
    }
    /// The output is a finite number (with its unit, when it has one) or a date.
    fn verify(&self, _args: &serde_json::Value, output: &str, _ctx: &ToolContext) -> Verification {
        let t = output.trim();
        let plain = t.split(" (units ignored: ").next().unwrap_or(t);
        if units::is_result(t) || plain.parse::<f64>().is_ok_and(f64::is_finite) {
            Verification::Holds
        } else {
            Verification::Broken(format!("calculator output {t:?} is not a finite number"))
        }
    }
    fn prompt_hint(&self) -> PromptHint {
        PromptHint {
            rule: Some("- ALL arithmetic goes through the calculator tool, even simple sums.\n"),
            examples: Some(CALCULATOR_EXAMPLES),
        }
    }
}

/// The calculator's worked examples for the Decide prompt (neutral placeholders: a concrete
/// value would be copied into answers).
const CALCULATOR_EXAMPLES: &str = "Example 1:\nWorld model:\nObjective: <a question that needs arithmetic>\nActions so far: none\n\
{\"candidates\": [{\"thought\": \"Compute it with the calculator.\", \"tool\": \"calculator\", \"args\": {\"expression\": \"<the arithmetic, with the numbers from the task>\"}}]}\n\
Example 2:\nWorld model:\nObjective: <the same question>\nActions so far:\n- calculator {\"expression\":\"<the arithmetic>\"} -> verified: <result>\n\
{\"candidates\": [{\"thought\": \"The calculator returned the result.\", \"tool\": \"final_answer\", \"args\": {\"answer\": \"<result>\"}}]}\n";

/// A calculator value: exact integer or float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// Exact integer.
    Int(i128),
    /// Floating point.
    Float(f64),
}

impl Number {
    /// As f64.
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Number::Int(i) => write!(f, "{i}"),
            Number::Float(x) => {
                if x == x.trunc() && x.abs() < 1e15 {
                    write!(f, "{}", x as i64)
                } else if x.abs() >= 1e15 || x.abs() < 1e-6 {
                    write!(f, "{x:e}")
                } else {
                    // 12 significant digits, trailing zeros trimmed.
                    let digits = 12 - (x.abs().log10().floor() as i32 + 1);
                    let digits = digits.clamp(0, 15) as usize;
                    let s = format!("{x:.digits$}");
                    let s = if s.contains('.') {
                        s.trim_end_matches('0').trim_end_matches('.').to_string()
                    } else {
                        s
                    };
                    f.write_str(&s)
                }
            }
        }
    }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalcError {
    /// Empty input.
    #[error("the expression is empty")]
    Empty,
    /// Input too long.
    #[error("the expression is longer than {max} characters")]
    TooLong {
        /// Limit.
        max: usize,
    },
    /// An unexpected character.
    #[error("unexpected character {ch:?} at position {pos}")]
    BadChar {
        /// The character.
        ch: char,
        /// Character position.
        pos: usize,
    },
    /// Bad number literal.
    #[error("bad number {text:?}")]
    BadNumber {
        /// The literal.
        text: String,
    },
    /// Syntax error.
    #[error("{0}")]
    Syntax(String),
    /// Unknown function or constant.
    #[error("unknown name {0:?} (functions: sqrt abs round floor ceil ln log10 log2 exp sin cos tan min max pow sum mean median days date; constants: pi e)")]
    UnknownName(String),
    /// Wrong argument count.
    #[error("{name} takes {expected} argument(s), got {got}")]
    Arity {
        /// Function.
        name: String,
        /// Expected count (text).
        expected: &'static str,
        /// Given.
        got: usize,
    },
    /// Division or modulo by zero.
    #[error("division by zero")]
    DivZero,
    /// Result not finite or outside a function's domain.
    #[error("{0}")]
    Domain(String),
    /// Too deeply nested.
    #[error("the expression is nested too deeply")]
    TooDeep,
    /// A quoted date that is not a calendar date written `YYYY-MM-DD`.
    #[error("bad date {0:?}: write a date as \"YYYY-MM-DD\" (a real calendar day)")]
    BadDate(String),
}

mod dates;
mod habits;
pub mod lines;
mod stats;
pub mod units;

const MAX_LEN: usize = 2000;
/// The operator token of floor division (`//`).
const FLOOR_DIV: char = '\\';
const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Number),
    Ident(String),
    Op(char),
    LParen,
    RParen,
    Comma,
    /// A quoted string: a date (`"2024-03-01"`), worth its day number.
    Str(String),
}

fn lex(s: &str) -> Result<Vec<Tok>, CalcError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
                {
                    i += 1;
                }
                // exponent
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        while j < chars.len() && chars[j].is_ascii_digit() {
                            j += 1;
                        }
                        i = j;
                    }
                }
                let text: String = chars[start..i].iter().filter(|c| **c != '_').collect();
                out.push(Tok::Num(parse_number(&text)?));
            }
            'a'..='z' | 'A'..='Z' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                out.push(Tok::Ident(
                    chars[start..i]
                        .iter()
                        .collect::<String>()
                        .to_ascii_lowercase(),
                ));
            }
            '*' if i + 1 < chars.len() && chars[i + 1] == '*' => {
                out.push(Tok::Op('^'));
                i += 2;
            }
            // Floor division, as Python writes it.
            '/' if i + 1 < chars.len() && chars[i + 1] == '/' => {
                out.push(Tok::Op(FLOOR_DIV));
                i += 2;
            }
            '+' | '-' | '*' | '/' | '%' | '^' => {
                out.push(Tok::Op(c));
                i += 1;
            }
            '×' | '·' => {
                out.push(Tok::Op('*'));
                i += 1;
            }
            '÷' => {
                out.push(Tok::Op('/'));
                i += 1;
            }
            '−' => {
                out.push(Tok::Op('-'));
                i += 1;
            }
            '(' | '[' => {
                out.push(Tok::LParen);
                i += 1;
            }
            ')' | ']' => {
                out.push(Tok::RParen);
                i += 1;
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1;
            }
            '"' | '\'' => {
                let end = chars[i + 1..].iter().position(|x| *x == c).ok_or_else(|| {
                    CalcError::Syntax(format!("the quote at position {i} is not closed"))
                })?;
                out.push(Tok::Str(chars[i + 1..i + 1 + end].iter().collect()));
                i += end + 2;
            }
            other => return Err(CalcError::BadChar { ch: other, pos: i }),
        }
    }
    Ok(out)
}

fn parse_number(text: &str) -> Result<Number, CalcError> {
    let bad = || CalcError::BadNumber { text: text.into() };
    if text.is_empty() || text == "." || text.matches('.').count() > 1 {
        return Err(bad());
    }
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(i) = text.parse::<i128>() {
            return Ok(Number::Int(i));
        }
    }
    text.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .map(Number::Float)
        .ok_or_else(bad)
}

struct Parser<'v> {
    toks: Vec<Tok>,
    pos: usize,
    depth: usize,
    /// Names bound by a program (see [`evaluate_with`]); empty for the calculator tool.
    vars: Option<&'v HashMap<String, Number>>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn enter(&mut self) -> Result<(), CalcError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(CalcError::TooDeep)
        } else {
            Ok(())
        }
    }

    // expr := term (('+'|'-') term)*
    fn expr(&mut self) -> Result<Number, CalcError> {
        self.enter()?;
        let mut acc = self.term()?;
        while let Some(Tok::Op(op @ ('+' | '-'))) = self.peek().cloned() {
            self.pos += 1;
            let rhs = self.term()?;
            acc = binop(op, acc, rhs)?;
        }
        self.depth -= 1;
        Ok(acc)
    }

    // term := unary (('*'|'/'|'%') unary | implicit-mult)*
    fn term(&mut self) -> Result<Number, CalcError> {
        let mut acc = self.unary()?;
        loop {
            match self.peek().cloned() {
                Some(Tok::Op(op @ ('*' | '/' | '%' | FLOOR_DIV))) => {
                    self.pos += 1;
                    let rhs = self.unary()?;
                    acc = binop(op, acc, rhs)?;
                }
                // "2(3+4)" and "2pi": implicit multiplication.
                Some(Tok::LParen) | Some(Tok::Ident(_)) => {
                    let rhs = self.unary()?;
                    acc = binop('*', acc, rhs)?;
                }
                _ => break,
            }
        }
        Ok(acc)
    }

    // unary := ('-'|'+') unary | power
    fn unary(&mut self) -> Result<Number, CalcError> {
        match self.peek() {
            Some(Tok::Op('-')) => {
                self.pos += 1;
                self.enter()?;
                let v = self.unary()?;
                self.depth -= 1;
                negate(v)
            }
            Some(Tok::Op('+')) => {
                self.pos += 1;
                self.enter()?;
                let v = self.unary();
                self.depth -= 1;
                v
            }
            _ => self.power(),
        }
    }

    // power := atom ('^' unary)?   (right-associative; exponent may be negative)
    fn power(&mut self) -> Result<Number, CalcError> {
        let base = self.atom()?;
        if let Some(Tok::Op('^')) = self.peek() {
            self.pos += 1;
            self.enter()?;
            let exp = self.unary()?;
            self.depth -= 1;
            return pow(base, exp);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Number, CalcError> {
        match self.next() {
            Some(Tok::Num(n)) => Ok(n),
            Some(Tok::LParen) => {
                let v = self.expr()?;
                match self.next() {
                    Some(Tok::RParen) => Ok(v),
                    _ => Err(CalcError::Syntax("missing closing parenthesis".into())),
                }
            }
            Some(Tok::Ident(name)) => {
                if let Some(Tok::LParen) = self.peek() {
                    self.pos += 1;
                    let mut args = Vec::new();
                    if let Some(Tok::RParen) = self.peek() {
                        self.pos += 1;
                    } else {
                        loop {
                            args.push(self.expr()?);
                            match self.next() {
                                Some(Tok::Comma) => continue,
                                Some(Tok::RParen) => break,
                                _ => {
                                    return Err(CalcError::Syntax(format!(
                                        "expected ',' or ')' in the arguments of {name}"
                                    )))
                                }
                            }
                        }
                    }
                    call(&name, &args)
                } else {
                    if let Some(v) = self.vars.and_then(|vars| vars.get(&name)) {
                        return Ok(*v);
                    }
                    match name.as_str() {
                        "pi" => Ok(Number::Float(std::f64::consts::PI)),
                        "e" => Ok(Number::Float(std::f64::consts::E)),
                        _ => Err(CalcError::UnknownName(name)),
                    }
                }
            }
            Some(Tok::Str(text)) => dates::day_number(&text).map(Number::Int),
            Some(Tok::RParen) => Err(CalcError::Syntax("unexpected ')'".into())),
            Some(Tok::Comma) => Err(CalcError::Syntax("unexpected ','".into())),
            Some(Tok::Op(op)) => Err(CalcError::Syntax(format!("unexpected operator '{op}'"))),
            None => Err(CalcError::Syntax("the expression ends too early".into())),
        }
    }
}

fn float(x: f64) -> Result<Number, CalcError> {
    if x.is_finite() {
        Ok(Number::Float(x))
    } else {
        Err(CalcError::Domain(
            "the result is not a finite number".into(),
        ))
    }
}

fn negate(v: Number) -> Result<Number, CalcError> {
    match v {
        Number::Int(i) => Ok(i
            .checked_neg()
            .map(Number::Int)
            .unwrap_or(Number::Float(-(i as f64)))),
        Number::Float(f) => float(-f),
    }
}

fn binop(op: char, a: Number, b: Number) -> Result<Number, CalcError> {
    use Number::Int;
    match (a, b) {
        (Int(x), Int(y)) => {
            let exact = match op {
                '+' => x.checked_add(y),
                '-' => x.checked_sub(y),
                '*' => x.checked_mul(y),
                '/' => {
                    if y == 0 {
                        return Err(CalcError::DivZero);
                    }
                    if x % y == 0 {
                        x.checked_div(y)
                    } else {
                        None
                    }
                }
                '%' => {
                    if y == 0 {
                        return Err(CalcError::DivZero);
                    }
                    x.checked_rem(y)
                }
                FLOOR_DIV => {
                    if y == 0 {
                        return Err(CalcError::DivZero);
                    }
                    x.checked_div_euclid(y).map(|q| {
                        if y < 0 && x.rem_euclid(y) != 0 {
                            q - 1
                        } else {
                            q
                        }
                    })
                }
                _ => None,
            };
            match exact {
                Some(v) => Ok(Int(v)),
                None => binop_f(op, x as f64, y as f64),
            }
        }
        _ => binop_f(op, a.as_f64(), b.as_f64()),
    }
}

fn binop_f(op: char, x: f64, y: f64) -> Result<Number, CalcError> {
    match op {
        '+' => float(x + y),
        '-' => float(x - y),
        '*' => float(x * y),
        '/' if y == 0.0 => Err(CalcError::DivZero),
        '/' => float(x / y),
        '%' if y == 0.0 => Err(CalcError::DivZero),
        '%' => float(x % y),
        FLOOR_DIV if y == 0.0 => Err(CalcError::DivZero),
        FLOOR_DIV => float((x / y).floor()),
        _ => Err(CalcError::Syntax(format!("unknown operator '{op}'"))),
    }
}

fn pow(base: Number, exp: Number) -> Result<Number, CalcError> {
    if let (Number::Int(b), Number::Int(e)) = (base, exp) {
        if (0..=u32::MAX as i128).contains(&e) {
            if let Some(v) = b.checked_pow(e as u32) {
                return Ok(Number::Int(v));
            }
        }
    }
    let (b, e) = (base.as_f64(), exp.as_f64());
    if b == 0.0 && e < 0.0 {
        return Err(CalcError::DivZero);
    }
    if b < 0.0 && e.fract() != 0.0 {
        return Err(CalcError::Domain(
            "a negative number to a fractional power is not a real number".into(),
        ));
    }
    float(b.powf(e))
}

fn call(name: &str, args: &[Number]) -> Result<Number, CalcError> {
    let one = |args: &[Number]| -> Result<f64, CalcError> {
        if args.len() == 1 {
            Ok(args[0].as_f64())
        } else {
            Err(CalcError::Arity {
                name: name.into(),
                expected: "1",
                got: args.len(),
            })
        }
    };
    match name {
        "sqrt" => {
            let x = one(args)?;
            if x < 0.0 {
                return Err(CalcError::Domain("sqrt of a negative number".into()));
            }
            // Exact integer square roots stay integers.
            if let Number::Int(i) = args[0] {
                let r = (i as f64).sqrt().round() as i128;
                if r.checked_mul(r) == Some(i) {
                    return Ok(Number::Int(r));
                }
            }
            float(x.sqrt())
        }
        "abs" => {
            one(args)?;
            match args[0] {
                Number::Int(i) => Ok(i
                    .checked_abs()
                    .map(Number::Int)
                    .unwrap_or(Number::Float((i as f64).abs()))),
                Number::Float(f) => float(f.abs()),
            }
        }
        "round" | "floor" | "ceil" | "trunc" | "int" => {
            if args.len() == 2 && name == "round" {
                let digits = args[1].as_f64();
                if digits.fract() != 0.0 || !(0.0..=15.0).contains(&digits) {
                    return Err(CalcError::Domain(
                        "round(x, n) needs n between 0 and 15".into(),
                    ));
                }
                let m = 10f64.powi(digits as i32);
                return float((args[0].as_f64() * m).round() / m);
            }
            let x = one(args)?;
            if let Number::Int(i) = args[0] {
                return Ok(Number::Int(i));
            }
            let r = match name {
                "round" => x.round(),
                "floor" => x.floor(),
                "ceil" => x.ceil(),
                _ => x.trunc(),
            };
            if r.abs() < 1e30 {
                Ok(Number::Int(r as i128))
            } else {
                float(r)
            }
        }
        "ln" | "log" => {
            let x = one(args)?;
            if x <= 0.0 {
                return Err(CalcError::Domain(format!("{name} of a number <= 0")));
            }
            float(x.ln())
        }
        "log10" | "log2" => {
            let x = one(args)?;
            if x <= 0.0 {
                return Err(CalcError::Domain(format!("{name} of a number <= 0")));
            }
            float(if name == "log10" { x.log10() } else { x.log2() })
        }
        "exp" => float(one(args)?.exp()),
        "sin" => float(one(args)?.sin()),
        "cos" => float(one(args)?.cos()),
        "tan" => float(one(args)?.tan()),
        "pow" => {
            if args.len() != 2 {
                return Err(CalcError::Arity {
                    name: name.into(),
                    expected: "2",
                    got: args.len(),
                });
            }
            pow(args[0], args[1])
        }
        "min" | "max" => {
            let first = *args.first().ok_or(CalcError::Arity {
                name: name.into(),
                expected: "at least 1",
                got: 0,
            })?;
            Ok(args.iter().skip(1).fold(first, |acc, &x| {
                let better = if name == "min" {
                    x.as_f64() < acc.as_f64()
                } else {
                    x.as_f64() > acc.as_f64()
                };
                if better {
                    x
                } else {
                    acc
                }
            }))
        }
        "sum" | "mean" | "avg" | "average" | "median" => stats::many(name, args),
        "days" | "date" => dates::call(name, args),
        _ => Err(CalcError::UnknownName(name.into())),
    }
}

/// Evaluate an expression.
pub fn evaluate(expr: &str) -> Result<Number, CalcError> {
    evaluate_noting(expr).map(|(n, _)| n)
}

/// [`evaluate`], also returning the units it dropped (see [`tidy`]) so the caller can say so.
pub fn evaluate_noting(expr: &str) -> Result<(Number, Vec<String>), CalcError> {
    if expr.chars().count() > MAX_LEN {
        return Err(CalcError::TooLong { max: MAX_LEN });
    }
    // Tolerate a trailing "=" and thousands separators written as "1,234" only when no function
    // call uses commas: keep it simple and strip a trailing '='.
    let expr = expr.trim().trim_end_matches('=').trim();
    if expr.is_empty() {
        return Err(CalcError::Empty);
    }
    let toks = lex(expr)?;
    let (toks, dropped) = habits::tidy(habits::merge_thousands(toks, expr));
    parse_all(toks, None).map(|v| (v, dropped))
}

/// Evaluate `expr` with the names in `vars` bound (a program's variables, lower case). Unlike
/// [`evaluate`], an unknown word is an error, not a unit to drop, and `1,234` is not read as a
/// thousands-separated number.
pub fn evaluate_with(expr: &str, vars: &HashMap<String, Number>) -> Result<Number, CalcError> {
    if expr.chars().count() > MAX_LEN {
        return Err(CalcError::TooLong { max: MAX_LEN });
    }
    let expr = expr.trim();
    if expr.is_empty() {
        return Err(CalcError::Empty);
    }
    parse_all(lex(expr)?, Some(vars))
}

/// Parse and evaluate a whole token list.
fn parse_all(toks: Vec<Tok>, vars: Option<&HashMap<String, Number>>) -> Result<Number, CalcError> {
    let mut p = Parser {
        toks,
        pos: 0,
        depth: 0,
        vars,
    };
    let v = p.expr()?;
    if p.pos < p.toks.len() {
        return Err(CalcError::Syntax(format!(
            "unexpected {} after a complete expression",
            match &p.toks[p.pos] {
                Tok::RParen => "')'".to_string(),
                Tok::Comma => "','".to_string(),
                t => format!("{t:?}"),
            }
        )));
    }
    Ok(v)
}

#[cfg(test)]
mod tests;
