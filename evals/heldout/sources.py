"""Held-out tasks: questions about source code and about build and test output (by hand)."""

from common import all_of, any_of, has, no, num, rx, task


def code():
    """Which file defines what, counts of comments or functions, constants, routes, targets."""
    return [
        task("cd-defining-file", "code",
             "Which file defines reconcile_ledger?",
             all_of(has("billing/ledger.py"), no("nightly"), no("test_ledger")),
             {"billing/ledger.py": '"""Ledger helpers."""\nfrom decimal import Decimal\n\n\n'
                                   "def reconcile_ledger(entries, statement):\n"
                                   '    """Match ledger entries to a bank statement."""\n'
                                   "    matched = []\n    for e in entries:\n"
                                   "        if e.amount in statement:\n            matched.append(e)\n"
                                   "    return matched\n",
              "billing/fetch.py": "def load_statement():\n    return []\n",
              "jobs/nightly.py": "from billing.ledger import reconcile_ledger\n"
                                 "from billing.fetch import load_statement\n\n\n"
                                 "def run(entries):\n    # reconcile_ledger is the slow part\n"
                                 "    return reconcile_ledger(entries, load_statement())\n",
              "tests/test_ledger.py": "from billing.ledger import reconcile_ledger\n\n\n"
                                      "def test_empty():\n    assert reconcile_ledger([], []) == []\n"},
             ok=["billing/ledger.py"], bad=["jobs/nightly.py", "tests/test_ledger.py"]),
        task("cd-todo-count", "code",
             "Count the TODO comments in the src folder (docs don't count).",
             all_of(num(4), no("5"), no("7")),
             {"src/app.js": "// TODO: remove once the v2 API ships\nexport function start() {\n"
                            "  // TODO(hana): read the port from config\n  return listen(3000);\n}\n",
              "src/db.js": "// Connection helpers\nexport function connect(url) {\n"
                           "  // TODO handle reconnects\n  return open(url);\n}\n",
              "src/util/strings.js": "export const BADGE = \"TODO list\";\n"
                                     "// TODO: unicode-aware trim\n"
                                     "export function trim(s) { return s.trim(); }\n",
              "docs/roadmap.md": "# Roadmap\n\n- TODO: write the migration guide\n- TODO: screenshots\n"},
             ok=["4", "There are 4 TODO comments under src/."], bad=["5", "7 TODOs"], steps=10),
        task("cd-rust-backoff-const", "code",
             "what's MAX_RETRY_BACKOFF_MS set to in the uploader code?",
             all_of(any_of(num(32000), has("32_000"), rx(r"(?i)\b32\s*(s|sec|seconds)\b")), no("250"),
                    no("50 ms")),
             {"uploader/src/limits.rs": "//! Retry and timeout limits for the uploader.\n\n"
                                        "/// First retry delay.\npub const INITIAL_BACKOFF_MS: u64 = 250;\n"
                                        "/// Ceiling on the retry delay.\n"
                                        "pub const MAX_RETRY_BACKOFF_MS: u64 = 32_000;\n"
                                        "/// Ceiling used by the test harness.\n#[cfg(test)]\n"
                                        "pub const TEST_MAX_RETRY_BACKOFF_MS: u64 = 50;\n"
                                        "/// Give up after this many attempts.\n"
                                        "pub const MAX_ATTEMPTS: u32 = 8;\n",
              "uploader/src/lib.rs": "pub mod limits;\npub mod send;\n",
              "uploader/src/send.rs": "use crate::limits::MAX_RETRY_BACKOFF_MS;\n\n"
                                      "pub fn cap(ms: u64) -> u64 {\n    ms.min(MAX_RETRY_BACKOFF_MS)\n}\n"},
             ok=["32000", "32_000 ms (32 seconds)"], bad=["250", "50 ms"]),
        task("cd-go-healthz-handler", "code",
             "which Go function handles the /healthz route?",
             all_of(has("handleLiveness"), no("handleReadiness")),
             {"server/routes.go": "package server\n\nimport \"net/http\"\n\n"
                                  "func Routes(mux *http.ServeMux) {\n"
                                  "\tmux.HandleFunc(\"/readyz\", handleReadiness)\n"
                                  "\tmux.HandleFunc(\"/healthz\", handleLiveness)\n"
                                  "\tmux.HandleFunc(\"/metrics\", serveMetrics)\n}\n",
              "server/health.go": "package server\n\nimport \"net/http\"\n\n"
                                  "func handleLiveness(w http.ResponseWriter, r *http.Request) {\n"
                                  "\tw.WriteHeader(http.StatusOK)\n}\n\n"
                                  "func handleReadiness(w http.ResponseWriter, r *http.Request) {\n"
                                  "\tif !ready() {\n\t\tw.WriteHeader(http.StatusServiceUnavailable)\n"
                                  "\t\treturn\n\t}\n\tw.WriteHeader(http.StatusOK)\n}\n"},
             ok=["handleLiveness", "handleLiveness in server/health.go"], bad=["handleReadiness"]),
        task("cd-js-default-port", "code",
             "If PORT isn't set, what port does server.js listen on?",
             all_of(num(4173), no("5055")),
             {"server.js": "const express = require(\"express\");\nconst app = express();\n"
                           "const port = Number(process.env.PORT) || 4173;\n\n"
                           "app.get(\"/\", (req, res) => res.send(\"ok\"));\napp.listen(port);\n",
              "test/server.test.js": "process.env.PORT = \"5055\";\nrequire(\"../server\");\n"},
             ok=["4173", "It falls back to port 4173."], bad=["5055", "3000"], steps=6),
        task("cd-py-direct-parent", "code",
             "What's the direct parent class of InvoiceExporter, not counting CsvMixin?",
             all_of(has("ReportSink"), no("BaseExporter")),
             {"exporters/invoice.py": "from .base import ReportSink\nfrom .mixins import CsvMixin\n\n\n"
                                      "class InvoiceExporter(CsvMixin, ReportSink):\n"
                                      "    suffix = \".csv\"\n",
              "exporters/base.py": "class BaseExporter:\n    suffix = \"\"\n\n\n"
                                   "class ReportSink(BaseExporter):\n"
                                   "    def write(self, rows):\n        raise NotImplementedError\n",
              "exporters/mixins.py": "class CsvMixin:\n    delimiter = \",\"\n"},
             ok=["ReportSink"], bad=["BaseExporter", "CsvMixin"]),
        task("cd-py-function-count", "code",
             "How many functions does helpers.py define?",
             all_of(num(6), no("7")),
             {"helpers.py": "import re\n\n\ndef slugify(s):\n    return re.sub(r\"[^a-z0-9]+\", \"-\", s.lower())\n\n\n"
                            "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n\n\n"
                            "def clamp(x, lo, hi):\n    return max(lo, min(hi, x))\n\n\n"
                            "# def old_slugify(s):\n#     return s.replace(\" \", \"-\")\n\n\n"
                            "def first(xs, default=None):\n    return xs[0] if xs else default\n\n\n"
                            "def flatten(xss):\n    return [x for xs in xss for x in xs]\n\n\n"
                            "def is_blank(s):\n    return not s or not s.strip()\n"},
             ok=["6", "helpers.py defines 6 functions."], bad=["7"], steps=6),
        task("cd-ts-session-ttl", "code",
             "What's the session TTL in the auth code, in seconds?",
             all_of(num(7200), no("3600"), no("45")),
             {"auth/session.ts": "// Sessions live two hours.\nexport const SESSION_TTL = 7200; // seconds\n\n"
                                 "export function expiresAt(now: number): number {\n"
                                 "  return now + SESSION_TTL;\n}\n",
              "auth/session.test.ts": "const SESSION_TTL = 45;\n\ntest(\"expires\", () => {\n"
                                      "  expect(SESSION_TTL).toBeLessThan(60);\n});\n",
              "config/defaults.ts": "export const COOKIE_TTL = 3600;\n"},
             ok=["7200", "7200 seconds (two hours)"], bad=["3600", "45"]),
        task("cd-legacy-caller", "code",
             "Which module still calls the deprecated fetch_legacy()? I mean the caller, not where it's defined.",
             all_of(has("monthly"), no("weekly")),
             {"api/client.py": "import warnings\n\n\ndef fetch_legacy(url):\n"
                               "    warnings.warn(\"use fetch\", DeprecationWarning)\n    return fetch(url)\n\n\n"
                               "def fetch(url):\n    return {\"url\": url}\n",
              "reports/monthly.py": "from api.client import fetch_legacy\n\n\n"
                                    "def build():\n    return fetch_legacy(\"/reports/monthly\")\n",
              "reports/weekly.py": "from api.client import fetch\n\n\n"
                                   "def build():\n    return fetch(\"/reports/weekly\")\n"},
             ok=["reports/monthly.py"], bad=["reports/weekly.py", "api/client.py"]),
        task("cd-make-release-prereqs", "code",
             "What does `make release` depend on directly?",
             all_of(has("test"), has("sign"), no("clean")),
             {"Makefile": ".PHONY: build test sign release clean\n\nbuild:\n\tcargo build --release\n\n"
                          "test:\n\tcargo test\n\nsign: build\n\t./scripts/sign.sh target/release/tool\n\n"
                          "release: test sign\n\t./scripts/publish.sh\n\nclean:\n\trm -rf target\n"},
             ok=["test and sign", "release: test sign"], bad=["build", "clean"], steps=6),
    ]


CARGO_TEST = """   Compiling quill v0.4.2 (/home/ci/quill)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 14.02s
     Running unittests src/lib.rs (target/debug/deps/quill-3f2a9c)

running 9 tests
test lexer::tests::empty_input ... ok
test lexer::tests::unicode_idents ... ok
test parser::tests::nested_blocks ... ok
test parser::tests::rejects_tab_indent ... FAILED
test parser::tests::trailing_comma ... ok
test render::tests::escapes_html ... ok
test render::tests::keeps_whitespace ... ok
test render::tests::wraps_long_lines ... ignored
test span::tests::merge ... ok

failures:

---- parser::tests::rejects_tab_indent stdout ----
thread 'parser::tests::rejects_tab_indent' panicked at src/parser.rs:212:9:
assertion `left == right` failed
  left: Ok(Block { .. })
 right: Err(TabIndent)

failures:
    parser::tests::rejects_tab_indent

test result: FAILED. 7 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.03s

error: test failed, to rerun pass `--lib`
"""

CARGO_WARNINGS = """   Compiling tidewater v1.3.0 (/src/tidewater)
warning: unused import: `std::fmt`
 --> src/lib.rs:3:5
warning: variable does not need to be mutable
 --> src/flow.rs:41:13
warning: unused variable: `depth`
 --> src/flow.rs:88:9
warning: field `created` is never read
 --> src/model.rs:17:5
warning: `tidewater` (lib) generated 4 warnings (run `cargo fix --lib -p tidewater` to apply 2 suggestions)
   Compiling tidewater-cli v1.3.0 (/src/tidewater/cli)
warning: unused import: `std::io::Write`
 --> cli/src/main.rs:2:5
warning: `tidewater-cli` (bin "tw") generated 1 warning
    Finished `release` profile [optimized] target(s) in 1m 07s
"""

NPM_BUILD = """
> web@3.2.0 build
> tsc -p . && vite build

src/api/orders.ts(41,7): error TS2322: Type 'string' is not assignable to type 'number'.
src/components/Cart.tsx(88,19): error TS2339: Property 'totl' does not exist on type 'CartState'.
src/components/Cart.tsx(102,5): error TS7006: Parameter 'item' implicitly has an 'any' type.

Found 3 errors in 2 files.

Errors  Files
     1  src/api/orders.ts:41
     2  src/components/Cart.tsx:88
npm ERR! Lifecycle script `build` failed with error:
npm ERR! Error: command failed
"""

MAKE_LOG = """make -j4 all
cc -O2 -Wall -c src/main.c -o obj/main.o
cc -O2 -Wall -c src/ring.c -o obj/ring.o
cc -O2 -Wall -c src/codec.c -o obj/codec.o
src/codec.c: In function 'decode_frame':
src/codec.c:131:17: error: 'FRAME_MAX' undeclared (first use in this function)
  131 |     if (len > FRAME_MAX) {
      |               ^~~~~~~~~
src/codec.c:131:17: note: each undeclared identifier is reported only once for each function it appears in
src/ring.c:58:9: warning: unused variable 'tail' [-Wunused-variable]
   58 |     int tail = r->tail;
      |         ^~~~
make: *** [Makefile:23: obj/codec.o] Error 1
make: *** Waiting for unfinished jobs....
"""

PYTEST_SUMMARY = """============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.2.1, pluggy-1.5.0
rootdir: /ci/harbor
collected 139 items

tests/test_api.py ........s.......                                       [ 11%]
tests/test_models.py ...........................s..........              [ 39%]
tests/test_rates.py ......F.......s.....                                 [ 53%]
tests/test_sync.py .............F.....ss.........                        [ 74%]
tests/test_views.py ..................................s                 [100%]

=========================== short test summary info ============================
FAILED tests/test_rates.py::test_weekend_surcharge - assert 112.5 == 110.0
FAILED tests/test_sync.py::test_conflict_resolution - KeyError: 'etag'
============== 2 failed, 131 passed, 6 skipped in 48.17s ===============
"""

PYTEST_ASSERT = """============================= test session starts ==============================
collected 58 items

tests/test_billing.py ....F.....F..                                      [ 22%]
tests/test_refunds.py .............................................      [100%]

=================================== FAILURES ===================================
____________________________ test_invoice_line_count ___________________________

    def test_invoice_line_count():
>       assert len(build_invoice(ORDER).lines) == 40
E       assert 41 == 40

tests/test_billing.py:52: AssertionError
_____________________________ test_refund_rounding _____________________________

    def test_refund_rounding():
>       assert refund(Decimal("19.99"), pct=15) == Decimal("3.00")
E       AssertionError: assert Decimal('2.99') == Decimal('3.00')

tests/test_billing.py:88: AssertionError
=========================== short test summary info ============================
FAILED tests/test_billing.py::test_invoice_line_count - assert 41 == 40
FAILED tests/test_billing.py::test_refund_rounding - AssertionError: assert Decimal('2.99') == Decimal('3.00')
========================= 2 failed, 56 passed in 3.02s =========================
"""

JEST = """ PASS  src/utils/format.test.ts
 PASS  src/hooks/useCart.test.ts
 FAIL  src/pages/Checkout.test.tsx
  ● Checkout › shows the total with tax
 PASS  src/api/client.test.ts
 PASS  src/components/Header.test.tsx
 FAIL  src/pages/Orders.test.tsx
  ● Orders › paginates
  ● Orders › empty state
 PASS  src/components/Footer.test.tsx
 PASS  src/utils/dates.test.ts
 PASS  src/utils/money.test.ts
 PASS  src/hooks/useAuth.test.ts
 PASS  src/api/errors.test.ts

Test Suites: 2 failed, 9 passed, 11 total
Tests:       3 failed, 84 passed, 87 total
Snapshots:   0 total
Time:        9.114 s
"""

CARGO_CHECK = """    Checking lanternfish v0.7.0 (/w/lanternfish)
error[E0502]: cannot borrow `self.slots` as mutable because it is also borrowed as immutable
  --> src/cache.rs:88:13
   |
86 |         let first = self.slots.first();
   |                     ---------- immutable borrow occurs here
87 |         if let Some(f) = first {
88 |             self.slots.push(f.clone());
   |             ^^^^^^^^^^^^^^^^^^^^^^^^^^ mutable borrow occurs here

error[E0308]: mismatched types
  --> src/index.rs:19:24
   |
19 |         let n: usize = self.count;
   |                -----   ^^^^^^^^^^ expected `usize`, found `u32`

Some errors have detailed explanations: E0308, E0502.
error: could not compile `lanternfish` (lib) due to 2 previous errors
"""

RELEASE_BUILD = """$ cargo build
   Compiling mothlight v0.2.0 (/w/mothlight)
    Finished `dev` profile [unoptimized + debuginfo] target(s) in 41.88s
$ cargo build --release
   Compiling mothlight v0.2.0 (/w/mothlight)
    Finished `release` profile [optimized] target(s) in 3m 12s
$ ls -la target/release/mothlight
-rwxr-xr-x 1 ci ci 8412312 Nov 19 10:02 target/release/mothlight
"""

PYTEST_DURATIONS = """============================= slowest 5 durations ==============================
4.21s call     tests/test_sync.py::test_full_resync
2.87s setup    tests/test_api.py::test_bulk_import
1.02s call     tests/test_api.py::test_bulk_import
0.64s call     tests/test_views.py::test_dashboard
0.31s teardown tests/test_sync.py::test_full_resync
======================== 212 passed in 17.45s ==========================
"""


def build_log():
    """cargo, npm, make, pytest and jest output: which test failed, counts, the first error."""
    return [
        task("bl-cargo-failed-test", "build_log",
             "Which test failed in cargo-test.log?",
             all_of(has("rejects_tab_indent"), no("wraps_long_lines")),
             {"cargo-test.log": CARGO_TEST},
             ok=["parser::tests::rejects_tab_indent"], bad=["render::tests::wraps_long_lines"], steps=6),
        task("bl-cargo-lib-warnings", "build_log",
             "How many warnings did the tidewater library itself produce? see build.log",
             all_of(num(4), no("5 warnings"), no("five")),
             {"build.log": CARGO_WARNINGS},
             ok=["4", "The tidewater lib generated 4 warnings."], bad=["5 warnings", "1"], steps=6),
        task("bl-npm-first-error", "build_log",
             "what's the first error in npm-build.log? give me the file and the error code",
             all_of(has("TS2322"), has("orders.ts"), no("TS2339")),
             {"npm-build.log": NPM_BUILD},
             ok=["src/api/orders.ts, TS2322"], bad=["src/components/Cart.tsx, TS2339"], steps=6),
        task("bl-make-broken-file", "build_log",
             "The build is broken, see make.log. Which source file and which line?",
             all_of(has("codec.c"), num(131), no("ring.c")),
             {"make.log": MAKE_LOG},
             ok=["src/codec.c line 131"], bad=["src/ring.c line 58", "Makefile line 23"], steps=6),
        task("bl-pytest-skipped", "build_log",
             "How many tests got skipped in pytest.log?",
             all_of(num(6), no("131"), no("2 skipped")),
             {"pytest.log": PYTEST_SUMMARY},
             ok=["6", "6 tests were skipped."], bad=["2 skipped", "131"], steps=6),
        task("bl-pytest-refund-values", "build_log",
             "In pytest-ci.log, test_refund_rounding failed - what value did it expect and what did it actually get?",
             all_of(has("2.99"), has("3.00"), no("41")),
             {"pytest-ci.log": PYTEST_ASSERT},
             ok=["Expected 3.00, got 2.99."], bad=["Expected 40, got 41."], steps=6),
        task("bl-jest-failed-suites", "build_log",
             "how many test suites failed in jest.log",
             all_of(num(2), no("3"), no("9 failed")),
             {"jest.log": JEST},
             ok=["2", "2 suites failed: Checkout and Orders (11 in all)."], bad=["3", "9 failed"], steps=6),
        task("bl-cargo-first-error", "build_log",
             "First compiler error in cargo-check.log: which error code, and in which file?",
             all_of(has("E0502"), has("cache.rs"), no("E0308")),
             {"cargo-check.log": CARGO_CHECK},
             ok=["E0502 in src/cache.rs:88"], bad=["E0308 in src/index.rs"], steps=6),
        task("bl-release-build-time", "build_log",
             "How long did the release build take, according to release-build.log?",
             all_of(rx(r"(?i)3\s*m(in(ute)?s?)?,?\s*(and\s*)?12\s*s|\b192\s*s"), no("41.88")),
             {"release-build.log": RELEASE_BUILD},
             ok=["3m 12s", "3 minutes 12 seconds", "192 s"], bad=["41.88s"], steps=6),
        task("bl-pytest-slowest-call", "build_log",
             "Which single test call was the slowest in durations.txt?",
             all_of(has("test_full_resync"), no("bulk_import")),
             {"durations.txt": PYTEST_DURATIONS},
             ok=["tests/test_sync.py::test_full_resync (4.21s)"], bad=["tests/test_api.py::test_bulk_import"],
             steps=6),
    ]
