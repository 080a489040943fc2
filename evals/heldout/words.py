"""Held-out tasks: dates, units and arithmetic asked in words (written by hand)."""

from common import all_of, any_of, has, no, num, rx, task


def dates():
    """Days between dates, a date plus days, weekdays; some with the dates in a file."""
    return [
        task("dt-days-between", "dates",
             "How many days are there between 14 March 2026 and 2 July 2026?",
             all_of(num(110), no("111"), no("109")),
             ok=["110", "110 days"], bad=["111 days", "109"], steps=6),
        task("dt-leap-month", "dates",
             "days from 2024-02-10 to 2024-03-10?",
             all_of(num(29), no("28"), no("31")),
             ok=["29", "29 days (2024 is a leap year)"], bad=["28 days", "31"], steps=6),
        task("dt-freeze-to-release", "dates",
             "How many days do we have between code freeze and the release? Dates are in release.toml",
             all_of(num(42), no("28"), no("14")),
             {"release.toml": "[schedule]\ncode_freeze = 2026-05-18\nrc1 = 2026-06-01\nrelease = 2026-06-29\n\n"
                              "[team]\nrelease_manager = \"Ilse Varga\"\n"},
             ok=["42", "42 days (2026-05-18 to 2026-06-29)"], bad=["28 days", "14"]),
        task("dt-ninety-days-later", "dates",
             "What date is 90 days after 5 November 2025?",
             all_of(any_of(has("2026-02-03"), rx(r"(?i)\bfeb(ruary)?\.?\s+3(rd)?\b"),
                           rx(r"(?i)\b3(rd)?\s+(of\s+)?feb")),
                    no("2026-02-04"), no("february 4"), no("2026-02-02")),
             ok=["2026-02-03", "Tuesday, 3 February 2026", "February 3, 2026"],
             bad=["2026-02-04", "February 4, 2026", "2026-02-02"], steps=6),
        task("dt-full-weeks", "dates",
             "How many full weeks are there between 1 September 2025 and 15 December 2025?",
             all_of(num(15), no("16 weeks"), no("14 weeks")),
             ok=["15", "105 days, so exactly 15 weeks."], bad=["16 weeks", "14 weeks"], steps=6),
        task("dt-leap-weekday", "dates",
             "What day of the week will 29 February 2028 be?",
             all_of(has("Tuesday"), no("Monday"), no("Wednesday")),
             ok=["Tuesday"], bad=["Monday", "Wednesday"], steps=6),
        task("dt-cert-days-left", "dates",
             "Counting from 1 October 2026, how many days until the certificate for api.harborline.net "
             "expires? (certs.json)",
             all_of(num(106), no("60"), no("152")),
             {"certs.json": """[
  {"host": "www.harborline.net", "not_after": "2026-11-30"},
  {"host": "api.harborline.net", "not_after": "2027-01-15"},
  {"host": "mail.harborline.net", "not_after": "2027-03-02"}
]
"""},
             ok=["106", "106 days (it expires on 2027-01-15)"], bad=["60 days", "152"]),
        task("dt-backup-span", "dates",
             "how many days apart are the oldest and the newest backup in backups.csv",
             all_of(num(74), no("17")),
             {"backups.csv": """file,taken,size_mb
db-a.tar.zst,2026-01-28,812
db-b.tar.zst,2026-03-03,830
db-c.tar.zst,2025-12-19,790
db-d.tar.zst,2026-02-14,825
"""},
             ok=["74", "74 days (2025-12-19 to 2026-03-03)"], bad=["17", "34 days"]),
    ]


def units():
    """GiB and GB, speeds, percentages, energy, transfer time; one from a JSON file."""
    return [
        task("un-gib-to-gb", "units",
             "48 GiB is how many GB?",
             all_of(num(51.54, 0.06), no("44.7")),
             ok=["51.54 GB", "about 51.5 GB"], bad=["44.7 GB", "48 GB"], steps=6),
        task("un-kmh-to-ms", "units",
             "Convert 120 km/h into metres per second",
             all_of(num(33.33, 0.04), no("432")),
             ok=["33.33 m/s", "about 33.3 m/s"], bad=["432 m/s", "2 m/s"], steps=6),
        task("un-percent-of", "units",
             "what's 17.5 percent of 2,340",
             all_of(num(409.5, 0.01), no("133.7")),
             ok=["409.5"], bad=["133.71", "40950"], steps=6),
        task("un-download-minutes", "units",
             "How long, in minutes, does a 7 GB download take at 25 MB/s?",
             all_of(num(4.72, 0.12), no("16.8"), no("0.28")),
             ok=["about 4.7 minutes", "4.67 min (280 s)"], bad=["16.8 minutes", "0.28 minutes"], steps=6),
        task("un-mph-to-kmh", "units",
             "60 mph in km/h?",
             all_of(num(96.56, 0.1), no("37.2"), no("37.3")),
             ok=["96.56 km/h", "about 96.6 km/h"], bad=["37.28 km/h"], steps=6),
        task("un-price-increase", "units",
             "A price went from $80 to $92. By what percentage did it go up?",
             all_of(num(15, 0.01), no("13.0"), no("13.04")),
             ok=["15%", "It went up 15 percent."], bad=["13.04%", "12"], steps=6),
        task("un-gb-to-mib", "units",
             "How many MiB is 3.5 GB? (decimal GB)",
             all_of(num(3337.86, 0.6), no("3584"), no("3,584")),
             ok=["3337.86 MiB", "about 3,338 MiB"], bad=["3584 MiB", "3500"], steps=6),
        task("un-heater-kwh", "units",
             "A 1500 W heater runs for 3 hours. How many kWh is that?",
             all_of(num(4.5, 0.001), no("4500")),
             ok=["4.5 kWh"], bad=["4500 kWh", "500"], steps=6),
        task("un-disk-used-gib", "units",
             "How many GiB are in use on /data? disk.json has the raw byte counts.",
             all_of(num(384, 0.5), no("412")),
             {"disk.json": """{"volumes": [
  {"mount": "/", "used_bytes": 21474836480, "size_bytes": 107374182400},
  {"mount": "/data", "used_bytes": 412316860416, "size_bytes": 1099511627776}
]}
"""},
             ok=["384 GiB", "384"], bad=["412.3 GB", "20 GiB"]),
    ]


def arithmetic():
    """Plain arithmetic in words: the agent computes, it does not echo the expression."""
    return [
        task("ar-times-plus", "arithmetic",
             "what is twelve times fourteen, plus nine?",
             all_of(num(177), no("276")),
             ok=["177"], bad=["276", "12 * 14 + 9"], steps=6),
        task("ar-root-times", "arithmetic",
             "Take the square root of 196 and multiply it by 4.",
             all_of(num(56), no("sqrt"), no("784")),
             ok=["56"], bad=["sqrt(196) * 4", "784"], steps=6),
        task("ar-pens-left", "arithmetic",
             "I had 3 boxes with 24 pens each and gave 17 away. How many pens do I have left?",
             all_of(num(55), no("89")),
             ok=["55", "55 pens"], bad=["89", "3 * 24 - 17"], steps=6),
        task("ar-mean-five", "arithmetic",
             "whats the average of 14, 22, 9, 31 and 19",
             all_of(num(19), no("23.75")),
             ok=["19", "The average is 19."], bad=["23.75", "95"], steps=6),
        task("ar-round-fraction", "arithmetic",
             "2 divided by 7, rounded to three decimal places?",
             all_of(num(0.286, 0.0004), no("0.285"), no("3.5")),
             ok=["0.286"], bad=["0.285", "3.5"], steps=6),
        task("ar-split-bill", "arithmetic",
             "Six of us split a $387.60 dinner bill evenly, and we add a 15% tip on the whole bill. "
             "How much does each person pay?",
             all_of(num(74.29, 0.01), no("64.6"), no("445.74")),
             ok=["$74.29 each", "74.29"], bad=["$64.60", "445.74"], steps=6),
        task("ar-power-of-two", "arithmetic",
             "what's 2 to the power of 20",
             all_of(num(1048576), no("40")),
             ok=["1048576", "1,048,576"], bad=["40", "2^20"], steps=6),
        task("ar-median-six", "arithmetic",
             "What's the median of 7, 3, 11, 5, 9 and 2?",
             all_of(num(6), no("6.17"), no("6.2"), no("5.5")),
             ok=["6", "The median is 6 (between 5 and 7)."], bad=["6.17", "5.5"], steps=6),
    ]
