//! The units and dates module's tests.

use super::*;

fn ev(s: &str) -> String {
    match evaluate(s) {
        Some(Ok(v)) => v,
        Some(Err(e)) => format!("ERR {e}"),
        None => "PLAIN".into(),
    }
}

#[test]
fn conversions_between_units_of_one_kind() {
    assert_eq!(ev("95 km/h in m/s"), "26.388889 m/s");
    assert_eq!(ev("48 GiB in GB"), "51.539608 GB");
    assert_eq!(ev("2 TB to GiB"), "1862.6451 GiB");
    assert_eq!(ev("70 mph in km/h"), "112.65408 km/h");
    assert_eq!(ev("5 kph in m/s"), "1.3888889 m/s");
    assert_eq!(ev("1.5 kWh in J"), "5400000 J");
    assert_eq!(ev("3 ft + 6 inch in cm"), "106.68 cm");
}

#[test]
fn units_carry_through_arithmetic() {
    // Transfer time: bytes over bits per second, shown in seconds with a clock reading.
    assert_eq!(ev("3.2 GB / 40 Mbit/s"), "640 s (10 min 40 s)");
    assert_eq!(ev("3.2 GB / 40 Mbps in min"), "10.666667 min");
    assert_eq!(ev("2.4 GB / 48 MB/s"), "50 s");
    // Energy from power and time, in kWh unless a unit of energy was written.
    assert_eq!(ev("45 W * 8 h * 30"), "10.8 kWh");
    assert_eq!(ev("2 kg + 300 g"), "2.3 kg");
    // A compound unit is read whole, and kept through plain factors.
    assert_eq!(ev("95 km/h / 1000"), "0.095 km/h");
    assert_eq!(ev("120 km per 80 km/h"), "1.5 h");
    assert_eq!(ev("1,284 km / 6 h in km/h"), "214 km/h");
}

#[test]
fn dates_count_days_and_take_days() {
    assert_eq!(ev("2024-03-01 - 2024-02-01"), "29 days");
    assert_eq!(ev("days(2025-01-01, 2024-01-01)"), "366");
    assert_eq!(ev("2026-10-17 + 45 days"), "2026-12-01 (Tuesday)");
    assert_eq!(ev("2026-12-01 - 45"), "2026-10-17 (Saturday)");
    assert_eq!(ev("weekday(2024-02-29)"), "2024-02-29 (Thursday)");
    assert_eq!(ev("weekday(1970-01-01)"), "1970-01-01 (Thursday)");
    assert_eq!(ev("date(2028-03-05) - date(2027-11-20)"), "106 days");
    // Dates written out.
    assert_eq!(ev("17 October 2026 + 45 days"), "2026-12-01 (Tuesday)");
    assert_eq!(ev("weekday(feb 29 2028)"), "2028-02-29 (Tuesday)");
    assert_eq!(ev("March 5th, 2028 - 20 Nov 2027"), "106 days");
    // Not a calendar day: not a date, so "feb" is an unknown word for the plain evaluator.
    assert_eq!(ev("30 feb 2028 + 1 day"), "PLAIN");
    assert_eq!(ev("(2024-03-01 - 2024-02-01) in weeks"), "4.1428571 weeks");
}

#[test]
fn plain_arithmetic_and_unknown_words_are_left_to_the_plain_evaluator() {
    assert_eq!(ev("375 g / 6 people * 22"), "PLAIN");
    assert_eq!(ev("1234 * 5678"), "PLAIN");
    assert_eq!(ev("17.5% of 3960"), "PLAIN");
}

#[test]
fn mismatched_units_and_bad_dates_are_errors_that_say_why() {
    assert!(
        ev("5 kg in m").contains("measure different things"),
        "{}",
        ev("5 kg in m")
    );
    assert!(
        ev("5 kg + 3 m").contains("cannot add"),
        "{}",
        ev("5 kg + 3 m")
    );
    assert!(ev("2024-03-01 * 2 in days").starts_with("ERR"));
    assert!(ev("weekday(5)").starts_with("ERR"));
    // Not a calendar day: not read as a date, and "-" then subtracts plain numbers.
    assert_eq!(
        ev("2023-02-30 in s"),
        "ERR cannot convert a plain number to s: the units measure different things"
    );
}

#[test]
fn results_are_recognised_and_other_text_is_not() {
    for ok in [
        "26.388889 m/s",
        "640 s (10 min 40 s)",
        "2026-12-01 (Tuesday)",
        "10.8 kWh",
        "2 m^2·s^-2",
    ] {
        assert!(is_result(ok), "{ok}");
    }
    for bad in [
        "7 apples",
        "42",
        "2026-12-01",
        "2026-12-01 (Someday)",
        "inf m",
        "m/s",
    ] {
        assert!(!is_result(bad), "{bad}");
    }
}

#[test]
fn civil_dates_round_trip() {
    for (y, m, d) in [(1970, 1, 1), (2000, 2, 29), (2028, 3, 5), (1969, 12, 31)] {
        let n = day_number(&format!("{y:04}-{m:02}-{d:02}")).expect("a calendar day") as i64;
        assert_eq!(civil_from_days(n), (y, m, d));
    }
}

#[test]
fn a_text_mentions_the_dates_and_amounts_the_calculator_reads() {
    let m = mentions("Release 2026-10-01, freeze on 14 September 2026.\nPython 3.12.3 on 2030-01-01\nthe backup is 3.2GB");
    // The line the lexer cannot read (`3.12.3`) is skipped, its date with it.
    assert_eq!(m.dates, ["2026-10-01", "2026-09-14"]);
    assert_eq!(m.amounts, 1);
    let none = mentions("We may ship in the spring; 12 people signed up.");
    assert!(none.dates.is_empty());
    assert_eq!(none.amounts, 0);
    assert_eq!(mentions("3.2GB over a 40 Mbit/s line").amounts, 2);
    assert!(unit_choices().contains(&"GiB") && unit_choices().contains(&"kph"));
}
