//! The worked answer's program: facts bound to variable names, the request the model answers
//! with a short program, the program run by the calculator's parser with every number's origin
//! checked, and the value formatted as the task asks.

use super::*;

/// The system prompt of the worked-answer request when facts define values.
pub const PROGRAM_SYSTEM_DEFINED: &str =
    "Solve the question with a short Python program. The values under \
Defined are already variables: use their names. Add one variable for any other quantity the \
question states (put its unit in the name), then the steps, ending with answer = ... . Use only \
numbers, variables and + - * / ( ). Reply with the code only.";

/// A value a fact states, bound to a name before the model's program runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    /// The variable's name: the file's stem and the value's key path (`quotas_orchid_storage_gb`).
    pub name: String,
    /// The value.
    pub value: f64,
    /// Where it came from: the fact line.
    pub source: String,
    /// The key it was read under: a value's last key, a record's field name.
    pub key: String,
    /// Whether it is a field of a record (a table's row, an array's object).
    pub in_record: bool,
}

/// `x` as the calculator holds it: a whole number exactly.
pub(super) fn number(x: f64) -> Number {
    if x == x.trunc() && x.abs() < 1e15 {
        Number::Int(x as i128)
    } else {
        Number::Float(x)
    }
}

/// A name made of `parts`: lower case, runs of other characters as one `_`.
pub(super) fn ident(parts: &[&str]) -> String {
    let mut out = String::new();
    for p in parts {
        for c in p.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
        }
        if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        format!("n_{out}")
    } else {
        out
    }
}

/// The number a value starts with ("500", "2.45", "500 (one-off)", "1,200 USD"); `None` when
/// it does not start with one or is a date, a version or an address ("2026-02", "1.2.3").
pub(super) fn leading_number(v: &str) -> Option<f64> {
    let v = v.trim().trim_start_matches('$');
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-'))
        .unwrap_or(v.len());
    let head = &v[..end];
    let rest = &v[end..];
    // "2026-02", "10.0.0.1", "3:00", "10, 20, 30": not one quantity.
    if head.matches('.').count() > 1
        || head[1.min(head.len())..].contains('-')
        || rest.starts_with([':', '/'])
        || head.ends_with(',')
    {
        return None;
    }
    head.replace(',', "")
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
}

/// The values the facts state, as named variables: a `key: value` line's number under the
/// file's stem and the key path (`slo_checkout_p95_ms = 450`), a record's numeric fields under
/// the record's name (`latency_checkout_p95_ms = 372` for `endpoint=checkout, p95 (ms)=372`).
/// The 0.5B model, shown such facts, transcribed whole files into dictionaries and ran out of
/// tokens; given the names, it writes the one line of arithmetic.
pub fn bindings(facts: &[String]) -> Vec<Binding> {
    let mut out: Vec<Binding> = Vec::new();
    let mut push = |name: String, value: f64, source: &str, key: &str, in_record: bool| {
        if name.is_empty() || !is_name(&name) {
            return;
        }
        let mut unique = name.clone();
        let mut n = 2;
        while out.iter().any(|b| b.name == unique) {
            unique = format!("{name}_{n}");
            n += 1;
        }
        out.push(Binding {
            name: unique,
            value,
            source: source.to_string(),
            key: key.to_string(),
            in_record,
        });
    };
    for fact in facts {
        let Some((path, content)) = fact.split_once(": ") else {
            continue;
        };
        if !path.contains('.') && !path.contains('/') {
            continue;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let stem = file.split('.').next().unwrap_or("");
        // `.env` has no stem: its folder names it.
        let stem = if stem.is_empty() {
            path.rsplit('/').nth(1).unwrap_or("env")
        } else {
            stem
        };
        let stem_id = ident(&[stem]);
        let named = |key: &str| -> String {
            let k = ident(&[key]);
            if k == stem_id || k.starts_with(&format!("{stem_id}_")) {
                k
            } else {
                format!("{stem_id}_{k}")
            }
        };
        // A record: "at: a=x, b=1" or "a=x, b=1".
        let pairs = match content.split_once(": ") {
            Some((at, rest)) if rest.contains('=') && !at.contains('=') => rest,
            _ => content,
        };
        let fields: Vec<(&str, &str)> = pairs
            .split(", ")
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.trim(), v.trim()))
            .collect();
        if fields.len() >= 2 && fields.len() == pairs.split(", ").count() {
            let who = fields
                .iter()
                .find(|(_, v)| leading_number(v).is_none())
                .map(|(_, v)| *v)
                .unwrap_or("");
            for (k, v) in &fields {
                if let Some(x) = leading_number(v) {
                    push(named(&format!("{who} {k}")), x, fact, k, true);
                }
            }
            continue;
        }
        // A value under its key path: "tenants.orchid.storage_gb: 500".
        let Some((key, value)) = content
            .split_once(": ")
            .or_else(|| content.split_once(" = "))
        else {
            continue;
        };
        if key.len() > 80 || key.contains(char::is_whitespace) && key.split_whitespace().count() > 4
        {
            continue;
        }
        let Some(x) = leading_number(value) else {
            continue;
        };
        // The container of parallel records ("tenants", "endpoints") says nothing the file's
        // stem and the record's name do not.
        let parts: Vec<&str> = key.split('.').collect();
        let parts = if parts.len() >= 3 {
            &parts[1..]
        } else {
            &parts[..]
        };
        let leaf = parts.last().copied().unwrap_or(key);
        push(named(&parts.join(" ")), x, fact, leaf, false);
    }
    out
}

/// Whether two words name the same thing: equal, a plural ("gpu", "gpus"), or one the other's
/// start when the shorter has four letters or more ("month", "monthly").
pub(super) fn relates(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short == long
        || long.strip_suffix('s') == Some(short)
        || (short.len() >= 4 && long.starts_with(short))
}

/// The bindings a question can use: a record's fields (the record was picked by the name the
/// question gives), and values whose key shares a word with the question; of a file none of
/// whose values does, all of them. Shown `PORT` and `WEB_THREADS` beside `WEB_CONCURRENCY`,
/// the model multiplied every number it was given.
pub(super) fn relevant(task: &str, all: Vec<Binding>) -> Vec<Binding> {
    let keys = keywords(task);
    let file = |b: &Binding| b.source.split_once(": ").map(|x| x.0.to_string());
    // A key's words that are not its file's ("web" of web/.env's WEB_THREADS).
    let named = |b: &Binding| {
        let own = words(&file(b).unwrap_or_default());
        b.in_record
            || words(&b.key)
                .iter()
                .filter(|w| !own.contains(w))
                .any(|w| keys.iter().any(|k| relates(w, k)))
    };
    let files_named: std::collections::HashSet<Option<String>> =
        all.iter().filter(|b| named(b)).map(file).collect();
    all.iter()
        .filter(|b| named(b) || !files_named.contains(&file(b)))
        .cloned()
        .collect()
}

/// The messages of the program request: the values the facts state as defined variables, the
/// other facts as they are, and the question.
pub fn program_messages(task: &str, facts: &[String]) -> Vec<ChatMessage> {
    let defined = relevant(task, bindings(facts));
    let user = if facts.is_empty() {
        task.to_string()
    } else if defined.is_empty() {
        format!("Facts:\n{}\n\nQuestion: {task}", facts.join("\n"))
    } else {
        let mut text = String::from("Defined:\n");
        for b in &defined {
            text.push_str(&format!(
                "{} = {}  # {}\n",
                b.name,
                number(b.value),
                b.source
            ));
        }
        // Values not shown as defined (a setting the question does not name) are left out;
        // other facts (names, dates, prose) are shown as they are.
        let all = bindings(facts);
        let other: Vec<&String> = facts
            .iter()
            .filter(|f| !all.iter().any(|b| &b.source == *f))
            .collect();
        if !other.is_empty() {
            text.push_str("\nOther facts:\n");
            for f in other {
                text.push_str(f);
                text.push('\n');
            }
        }
        format!("{text}\nQuestion: {task}")
    };
    let system = if defined.is_empty() {
        PROGRAM_SYSTEM
    } else {
        PROGRAM_SYSTEM_DEFINED
    };
    vec![
        ChatMessage::new(Role::System, system),
        ChatMessage::new(Role::User, user),
    ]
}

/// Why a program gave no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProgramError {
    /// No line computed a value.
    #[error("the program computes no value")]
    NoResult,
    /// The program uses no number the question or the facts state (only constants): it
    /// computes something the task did not give.
    #[error("the program uses none of the numbers the question and the facts give")]
    NothingGiven,
    /// A number appears that neither the question nor the facts state.
    #[error("line {line}: the number {number} is in neither the question nor the facts")]
    UnknownNumber {
        /// 1-based line of the program.
        line: usize,
        /// The number as written.
        number: String,
    },
}

/// A program's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Worked {
    /// The value.
    pub value: Number,
    /// The bindings in order (`name = value`), for the trace.
    pub steps: Vec<String>,
}

/// Whether `x` is one of `allowed` (or a hundredth or hundredfold of one: "17.5%" is written
/// `0.175`) or a constant.
pub(super) fn known(x: f64, allowed: &[f64]) -> bool {
    CONSTANTS.iter().any(|c| close(*c, x)) || stated(x, allowed)
}

/// Whether `a` and `b` are the same number (up to rounding).
pub(super) fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Whether `x` is one of `allowed`, or a hundredth or hundredfold of one.
pub(super) fn stated(x: f64, allowed: &[f64]) -> bool {
    allowed
        .iter()
        .any(|a| close(*a, x) || close(*a / 100.0, x) || close(*a * 100.0, x))
}

/// The number literals of an expression (not digits inside names like `x2`).
pub(super) fn literals(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push(chars[start..i].iter().filter(|c| **c != '_').collect());
            continue;
        }
        i += 1;
    }
    out
}

/// Run `program` with the numbers `allowed` (those of the question and the facts): the value
/// of `answer` when bound, else of the last `print`/bare expression, else of the last binding.
pub fn run(program: &str, allowed: &[f64]) -> Result<Worked, ProgramError> {
    run_with(program, allowed, &[])
}

/// [`run`] with `defined` bound before the program's first line: a program that uses one of
/// them uses a given number.
pub fn run_with(
    program: &str,
    allowed: &[f64],
    defined: &[Binding],
) -> Result<Worked, ProgramError> {
    let mut vars: HashMap<String, Number> = defined
        .iter()
        .map(|b| (b.name.clone(), number(b.value)))
        .collect();
    let mut steps = Vec::new();
    let mut last_bound: Option<String> = None;
    let mut printed: Option<Number> = None;
    let mut fenced = false;
    // Whether a number the question or the facts give was used.
    let mut given = false;
    for (i, raw) in program.lines().take(MAX_LINES).enumerate() {
        // The body of an `if`/`for`/`def` is indented: only top-level statements are run.
        if raw.starts_with([' ', '\t']) {
            continue;
        }
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.starts_with("```") {
            // The closing fence ends the program; what follows is the model's prose.
            if fenced {
                break;
            }
            fenced = true;
            continue;
        }
        let Line::Statement { bind, exprs } = lines::read(line) else {
            continue;
        };
        // A bare number on its own line is an output the model imagined, not a computation;
        // a quoted text is a label.
        if bind.is_none() && exprs.len() == 1 && exprs[0].parse::<f64>().is_ok()
            || exprs.iter().any(|e| e.contains(['"', '\'']))
        {
            continue;
        }
        for e in exprs {
            let Ok(v) = evaluate_with(&e, &vars) else {
                continue;
            };
            let lits = literals(&e);
            given |= e
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|t| defined.iter().any(|b| b.name == t.to_ascii_lowercase()));
            given |= lits
                .iter()
                .any(|n| n.parse::<f64>().is_ok_and(|x| stated(x, allowed)));
            if let Some(bad) = lits
                .into_iter()
                .find(|n| !n.parse::<f64>().is_ok_and(|x| known(x, allowed)))
            {
                return Err(ProgramError::UnknownNumber {
                    line: i + 1,
                    number: bad,
                });
            }
            match &bind {
                Some(name) => {
                    steps.push(format!("{name} = {e} = {v}"));
                    vars.insert(name.clone(), v);
                    last_bound = Some(name.clone());
                }
                None => {
                    steps.push(format!("{e} = {v}"));
                    printed = Some(v);
                }
            }
            break;
        }
    }
    if !given {
        return Err(ProgramError::NothingGiven);
    }
    let value = vars
        .get("answer")
        .copied()
        .or(printed)
        .or_else(|| last_bound.and_then(|n| vars.get(&n).copied()))
        .ok_or(ProgramError::NoResult)?;
    Ok(Worked { value, steps })
}

/// The numbers stated by the question and the facts.
pub fn allowed_numbers(task: &str, facts: &[String]) -> Vec<f64> {
    let mut out = numbers_in(task);
    out.extend(crate::agent::words::number_words(task));
    for f in facts {
        out.extend(numbers_in(f));
    }
    out
}

/// The value as the answer writes it: an integer when it is one, else up to four decimals (six
/// significant digits below 1). A program that rounds says so itself (`round(x, 2)`).
pub fn format_value(value: Number) -> String {
    let x = match value {
        Number::Int(i) => return i.to_string(),
        Number::Float(x) => x,
    };
    if (x - x.round()).abs() < 1e-9 && x.abs() < 1e15 {
        return format!("{}", x.round() as i64);
    }
    let decimals = if x.abs() >= 1.0 {
        4
    } else {
        (5 - x.abs().log10().floor() as i32).clamp(4, 12) as usize
    };
    let s = format!("{x:.decimals$}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
