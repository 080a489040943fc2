//! `sum`, `mean` and `median` of any count of values.

use super::{binop, CalcError, Number};

/// `sum`, `mean` and `median` of one or more values (integers stay exact where they can).
pub(super) fn many(name: &str, args: &[Number]) -> Result<Number, CalcError> {
    if args.is_empty() {
        return Err(CalcError::Arity {
            name: name.into(),
            expected: "at least 1",
            got: 0,
        });
    }
    let total = args
        .iter()
        .skip(1)
        .try_fold(args[0], |acc, x| binop('+', acc, *x))?;
    let n = Number::Int(args.len() as i128);
    match name {
        "sum" => Ok(total),
        "median" => {
            let mut v = args.to_vec();
            v.sort_by(|a, b| a.as_f64().total_cmp(&b.as_f64()));
            let mid = v.len() / 2;
            if v.len() % 2 == 1 {
                Ok(v[mid])
            } else {
                binop('/', binop('+', v[mid - 1], v[mid])?, Number::Int(2))
            }
        }
        _ => binop('/', total, n),
    }
}
