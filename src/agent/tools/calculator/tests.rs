use super::*;

/// The calculator's text for `s`, or "ERR " and the error.
pub(super) fn ev(s: &str) -> String {
    match evaluate(s) {
        Ok(n) => n.to_string(),
        Err(e) => format!("ERR {e}"),
    }
}

#[test]
fn exact_integers_and_precedence() {
    assert_eq!(ev("1234 * 5678"), "7006652");
    assert_eq!(ev("2 + 3 * 4"), "14");
    assert_eq!(ev("(2 + 3) * 4"), "20");
    assert_eq!(ev("2^10"), "1024");
    assert_eq!(ev("2^3^2"), "512");
    assert_eq!(ev("-2^2"), "-4");
    assert_eq!(ev("(-2)^2"), "4");
    assert_eq!(ev("2^100"), "1267650600228229401496703205376");
    assert_eq!(ev("17 % 5"), "2");
    assert_eq!(ev("10 / 4"), "2.5");
    assert_eq!(ev("10 / 5"), "2");
    assert_eq!(ev("--3"), "3");
    assert_eq!(ev("2 ** 8"), "256");
    assert_eq!(ev("3 × 4 ÷ 2"), "6");
    assert_eq!(ev("2(3+4)"), "14");
}

#[test]
fn floats_and_functions() {
    assert_eq!(ev("0.1 + 0.2"), "0.3");
    assert_eq!(ev("sqrt(144)"), "12");
    assert_eq!(ev("sqrt(2)"), "1.41421356237");
    assert_eq!(ev("abs(-7)"), "7");
    assert_eq!(ev("round(2.5)"), "3");
    assert_eq!(ev("round(3.14159, 2)"), "3.14");
    assert_eq!(ev("max(3, 9, 4)"), "9");
    assert_eq!(ev("min(3, -9, 4)"), "-9");
    assert_eq!(ev("pow(3, 4)"), "81");
    assert_eq!(ev("1.5e3"), "1500");
    assert_eq!(ev("floor(-2.5)"), "-3");
}

#[test]
fn errors_are_typed_not_panics() {
    assert_eq!(evaluate("1/0"), Err(CalcError::DivZero));
    assert_eq!(evaluate("5 % 0"), Err(CalcError::DivZero));
    assert_eq!(evaluate(""), Err(CalcError::Empty));
    assert!(matches!(evaluate("2 +"), Err(CalcError::Syntax(_))));
    assert!(matches!(evaluate("(1"), Err(CalcError::Syntax(_))));
    assert!(matches!(evaluate("1)"), Err(CalcError::Syntax(_))));
    assert!(matches!(evaluate("foo(1)"), Err(CalcError::UnknownName(_))));
    assert!(matches!(evaluate("sqrt(-1)"), Err(CalcError::Domain(_))));
    assert!(matches!(evaluate("1 $ 2"), Err(CalcError::BadChar { .. })));
    assert!(matches!(
        evaluate("1.2.3"),
        Err(CalcError::BadNumber { .. })
    ));
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert_eq!(evaluate(&deep), Err(CalcError::TooDeep));
    let deep_neg = "-".repeat(1000) + "1";
    assert_eq!(evaluate(&deep_neg), Err(CalcError::TooDeep));
}

#[test]
fn integer_overflow_falls_back_to_float() {
    let big = "170141183460469231731687303715884105727 + 1";
    assert!(matches!(evaluate(big), Ok(Number::Float(_))));
    assert!(matches!(evaluate("10^400"), Err(CalcError::Domain(_))));
}
