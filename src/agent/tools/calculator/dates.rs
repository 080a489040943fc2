//! Dates in expressions: a quoted `"YYYY-MM-DD"` is worth its day number (days since
//! 1970-01-01), so `days("2024-03-01", "2024-02-01")` and `"2024-03-01" - "2024-02-01"` are
//! both 29.

use super::{binop, CalcError, Number};

/// Whether `year` is a leap year in the Gregorian calendar.
fn leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` (1-12) of `year`.
fn month_days(year: i64, month: i64) -> i64 {
    match month {
        2 if leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the civil date `y-m-d` (proleptic Gregorian; negative before).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The day number of `text`: `YYYY-MM-DD` (or with `/`), a time after `T` or a space ignored.
pub(super) fn day_number(text: &str) -> Result<i128, CalcError> {
    let bad = || CalcError::BadDate(text.to_string());
    let t = text.trim();
    let date = t.split(['T', ' ']).next().unwrap_or(t);
    let parts: Vec<&str> = date.split(['-', '/']).collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    let num = |s: &str, len: std::ops::RangeInclusive<usize>| -> Result<i64, CalcError> {
        if !len.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (y, m, d) = (num(y, 4..=4)?, num(m, 1..=2)?, num(d, 1..=2)?);
    if !(1..=12).contains(&m) || d < 1 || d > month_days(y, m) {
        return Err(bad());
    }
    Ok(i128::from(days_from_civil(y, m, d)))
}

/// `days(a, b)`: the days from date `b` to date `a` (`a - b`); `date(a)`: the day number of `a`.
pub(super) fn call(name: &str, args: &[Number]) -> Result<Number, CalcError> {
    let want = if name == "days" { 2 } else { 1 };
    if args.len() != want {
        return Err(CalcError::Arity {
            name: name.into(),
            expected: if want == 2 { "2" } else { "1" },
            got: args.len(),
        });
    }
    if name == "days" {
        binop('-', args[0], args[1])
    } else {
        Ok(args[0])
    }
}

#[cfg(test)]
mod tests {
    use super::super::{evaluate, evaluate_with, CalcError, Number};
    use super::*;

    #[test]
    fn day_numbers_follow_the_calendar() {
        assert_eq!(day_number("1970-01-01"), Ok(0));
        assert_eq!(day_number("2000-03-01"), Ok(11_017));
        assert_eq!(day_number("2024/02/29"), Ok(19_782));
        assert_eq!(day_number("2024-02-29T10:00:00Z"), Ok(19_782));
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-04-31",
            "March 1",
            "24-03-01",
            "",
        ] {
            assert_eq!(
                day_number(bad),
                Err(CalcError::BadDate(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn date_differences_are_days() {
        let vars = std::collections::HashMap::new();
        let ev = |s: &str| evaluate_with(s, &vars);
        assert_eq!(
            ev(r#"days("2024-03-01", "2024-02-01")"#),
            Ok(Number::Int(29))
        );
        assert_eq!(
            ev(r#"days("2023-03-01", "2023-02-01")"#),
            Ok(Number::Int(28))
        );
        assert_eq!(
            ev(r#"days('2024-01-01', '2025-01-01')"#),
            Ok(Number::Int(-366))
        );
        assert_eq!(ev(r#""2024-12-25" - "2024-12-01""#), Ok(Number::Int(24)));
        assert_eq!(
            ev(r#"days("2024-02-30", "2024-02-01")"#),
            Err(CalcError::BadDate("2024-02-30".into()))
        );
        assert!(matches!(
            ev(r#"days("2024-02-01")"#),
            Err(CalcError::Arity { .. })
        ));
        assert!(matches!(
            ev(r#"days("2024-02-01)"#),
            Err(CalcError::Syntax(_))
        ));
        // The calculator tool's reading: the same.
        assert_eq!(
            evaluate(r#"days("2024-03-01", "2024-02-01")"#),
            Ok(Number::Int(29))
        );
    }
}
