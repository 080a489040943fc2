//! The units the calculator reads: names as people write them, size in SI base units (bytes
//! for data) and dimensions, and the unit a result of some dimensions is shown in.

/// Exponents of metre, second, kilogram and byte.
pub(super) type Dims = [i8; 4];

pub(super) const NONE: Dims = [0, 0, 0, 0];
pub(super) const LENGTH: Dims = [1, 0, 0, 0];
pub(super) const TIME: Dims = [0, 1, 0, 0];
pub(super) const MASS: Dims = [0, 0, 1, 0];
pub(super) const DATA: Dims = [0, 0, 0, 1];
pub(super) const SPEED: Dims = [1, -1, 0, 0];
pub(super) const ENERGY: Dims = [2, -2, 1, 0];
pub(super) const POWER: Dims = [2, -3, 1, 0];
pub(super) const VOLUME: Dims = [3, 0, 0, 0];
pub(super) const RATE: Dims = [0, -1, 0, 1];

/// One unit: the names it is written as (lowercase), how it is shown, its size in SI base
/// units (bytes for data), and its dimensions.
pub(super) struct Unit {
    pub(super) names: &'static [&'static str],
    pub(super) show: &'static str,
    pub(super) factor: f64,
    pub(super) dims: Dims,
}

const fn u(names: &'static [&'static str], show: &'static str, factor: f64, dims: Dims) -> Unit {
    Unit {
        names,
        show,
        factor,
        dims,
    }
}

pub(super) const MILE: f64 = 1609.344;
pub(super) const HOUR: f64 = 3600.0;
pub(super) const KIB: f64 = 1024.0;

/// The units. Lowercase names: `MB` and `Mb` are both megabytes (people write `Mbit` or `Mbps`
/// for bits); `min` is minutes.
pub(super) const UNITS: &[Unit] = &[
    u(
        &["m", "meter", "meters", "metre", "metres"],
        "m",
        1.0,
        LENGTH,
    ),
    u(
        &["km", "kilometer", "kilometers", "kilometre", "kilometres"],
        "km",
        1e3,
        LENGTH,
    ),
    u(
        &[
            "cm",
            "centimeter",
            "centimeters",
            "centimetre",
            "centimetres",
        ],
        "cm",
        1e-2,
        LENGTH,
    ),
    u(
        &[
            "mm",
            "millimeter",
            "millimeters",
            "millimetre",
            "millimetres",
        ],
        "mm",
        1e-3,
        LENGTH,
    ),
    u(&["mi", "mile", "miles"], "mi", MILE, LENGTH),
    u(&["ft", "foot", "feet"], "ft", 0.3048, LENGTH),
    u(&["inch", "inches"], "inch", 0.0254, LENGTH),
    u(&["yd", "yard", "yards"], "yd", 0.9144, LENGTH),
    u(&["s", "sec", "secs", "second", "seconds"], "s", 1.0, TIME),
    u(&["ms", "millisecond", "milliseconds"], "ms", 1e-3, TIME),
    u(&["min", "mins", "minute", "minutes"], "min", 60.0, TIME),
    u(&["h", "hr", "hrs", "hour", "hours"], "h", HOUR, TIME),
    u(&["day", "days"], "days", 86_400.0, TIME),
    u(&["week", "weeks", "wk"], "weeks", 604_800.0, TIME),
    u(&["kph", "kmh"], "km/h", 1e3 / HOUR, SPEED),
    u(&["mph"], "mph", MILE / HOUR, SPEED),
    u(&["knot", "knots", "kn"], "knots", 1852.0 / HOUR, SPEED),
    u(&["g", "gram", "grams"], "g", 1e-3, MASS),
    u(
        &["kg", "kilogram", "kilograms", "kilo", "kilos"],
        "kg",
        1.0,
        MASS,
    ),
    u(&["mg", "milligram", "milligrams"], "mg", 1e-6, MASS),
    u(&["lb", "lbs", "pound", "pounds"], "lb", 0.453_592_37, MASS),
    u(&["oz", "ounce", "ounces"], "oz", 0.028_349_523_125, MASS),
    u(&["t", "tonne", "tonnes"], "t", 1e3, MASS),
    u(&["byte", "bytes"], "bytes", 1.0, DATA),
    u(&["kb", "kilobyte", "kilobytes"], "kB", 1e3, DATA),
    u(&["mb", "megabyte", "megabytes"], "MB", 1e6, DATA),
    u(&["gb", "gigabyte", "gigabytes"], "GB", 1e9, DATA),
    u(&["tb", "terabyte", "terabytes"], "TB", 1e12, DATA),
    u(&["pb", "petabyte", "petabytes"], "PB", 1e15, DATA),
    u(&["kib", "kibibyte", "kibibytes"], "KiB", KIB, DATA),
    u(&["mib", "mebibyte", "mebibytes"], "MiB", KIB * KIB, DATA),
    u(
        &["gib", "gibibyte", "gibibytes"],
        "GiB",
        KIB * KIB * KIB,
        DATA,
    ),
    u(
        &["tib", "tebibyte", "tebibytes"],
        "TiB",
        KIB * KIB * KIB * KIB,
        DATA,
    ),
    u(&["bit", "bits"], "bits", 0.125, DATA),
    u(
        &["kbit", "kbits", "kilobit", "kilobits"],
        "kbit",
        125.0,
        DATA,
    ),
    u(
        &["mbit", "mbits", "megabit", "megabits"],
        "Mbit",
        125e3,
        DATA,
    ),
    u(
        &["gbit", "gbits", "gigabit", "gigabits"],
        "Gbit",
        125e6,
        DATA,
    ),
    u(&["kbps"], "kbit/s", 125.0, RATE),
    u(&["mbps"], "Mbit/s", 125e3, RATE),
    u(&["gbps"], "Gbit/s", 125e6, RATE),
    u(&["j", "joule", "joules"], "J", 1.0, ENERGY),
    u(&["kj", "kilojoule", "kilojoules"], "kJ", 1e3, ENERGY),
    u(&["wh"], "Wh", HOUR, ENERGY),
    u(&["kwh"], "kWh", 1e3 * HOUR, ENERGY),
    u(&["mwh"], "MWh", 1e6 * HOUR, ENERGY),
    u(&["cal", "calorie", "calories"], "cal", 4.184, ENERGY),
    u(&["kcal"], "kcal", 4184.0, ENERGY),
    u(&["w", "watt", "watts"], "W", 1.0, POWER),
    u(&["kw", "kilowatt", "kilowatts"], "kW", 1e3, POWER),
    u(
        &["l", "liter", "liters", "litre", "litres"],
        "L",
        1e-3,
        VOLUME,
    ),
    u(
        &[
            "ml",
            "milliliter",
            "milliliters",
            "millilitre",
            "millilitres",
        ],
        "mL",
        1e-6,
        VOLUME,
    ),
    u(
        &["gal", "gallon", "gallons"],
        "gal",
        3.785_411_784e-3,
        VOLUME,
    ),
];

/// How a result of these dimensions is shown when the expression names no target and no unit
/// of the same dimensions: SI, except energy in kWh and data in bytes.
pub(super) const DEFAULTS: &[(Dims, &str)] = &[
    (LENGTH, "m"),
    (TIME, "s"),
    (MASS, "kg"),
    (DATA, "bytes"),
    (SPEED, "m/s"),
    (ENERGY, "kWh"),
    (POWER, "W"),
    (VOLUME, "L"),
    (RATE, "MB/s"),
];
