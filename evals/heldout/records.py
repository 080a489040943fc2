"""Held-out tasks: lookups in structured files and aggregations over tables (written by hand)."""

from common import all_of, any_of, has, no, num, rx, task


def structured():
    """One value from JSON, YAML, TOML, INI or .env: nested keys, arrays, near-miss keys."""
    return [
        task("st-json-primary-pool", "structured",
             "In service.json, how big can the primary database's connection pool get?",
             all_of(num(40), no("16"), no("64")),
             {"service.json": """{
  "name": "ledgerd",
  "database": {
    "primary": {"host": "pg-main.internal", "port": 5432,
                "pool": {"min": 5, "max": 40, "idle_timeout_s": 300}},
    "replica": {"host": "pg-ro.internal", "port": 5433,
                "pool": {"min": 2, "max": 16, "idle_timeout_s": 120}}
  },
  "cache": {"pool": {"max": 64}}
}
"""},
             ok=["40", "The primary pool can grow to 40 connections."], bad=["16", "64 connections"], steps=6),
        task("st-yaml-proxy-tag", "structured",
             "what image tag is the proxy sidecar running? it's in k8s/deployment.yaml",
             all_of(has("v1.29.3"), no("2.14")),
             {"k8s/deployment.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: orbit-api
spec:
  replicas: 3
  template:
    spec:
      initContainers:
        - name: migrate
          image: registry.local/orbit-migrate:2.14.0
      containers:
        - name: api
          image: registry.local/orbit-api:2.14.1
          ports:
            - containerPort: 8080
        - name: proxy
          image: envoyproxy/envoy:v1.29.3
          ports:
            - containerPort: 9901
"""},
             ok=["v1.29.3", "envoyproxy/envoy:v1.29.3"], bad=["2.14.1", "registry.local/orbit-api:2.14.1"], steps=6),
        task("st-toml-release-lto", "structured",
             "Which LTO mode does the release profile use? It's set in toolchain/profiles.toml",
             all_of(has("thin"), no("fat")),
             {"toolchain/profiles.toml": """[profile.dev]
opt-level = 0
lto = false
debug = true

[profile.release]
opt-level = 3
lto = "thin"
codegen-units = 4

[profile.bench]
inherits = "release"
lto = "fat"
codegen-units = 1
"""},
             ok=["thin", "lto = \"thin\""], bad=["fat"], steps=6),
        task("st-ini-mysqld-conns", "structured",
             "my.cnf - how many connections does the main mysqld section allow at most?",
             all_of(num(275), no("90")),
             {"my.cnf": """[client]
port = 3306
socket = /var/run/mysqld/mysqld.sock

[mysqld]
port = 3306
max_connections = 275
innodb_buffer_pool_size = 6G

[mysqld_replica]
max_connections = 90
read_only = 1
"""},
             ok=["275", "max_connections = 275"], bad=["90"], steps=6),
        task("st-env-mail-port", "structured",
             "What port does the app use to talk to the mail server, according to .env?",
             all_of(num(2525), no("6380"), no("8000"), no("9464")),
             {".env": """APP_ENV=production
APP_PORT=8000
REDIS_URL=redis://cache:6380/0
SMTP_HOST=smtp.postbox.example
SMTP_PORT=2525
SMTP_USER=notifier
METRICS_PORT=9464
"""},
             ok=["2525", "SMTP_PORT=2525"], bad=["8000", "6380"], steps=6),
        task("st-json-region-nodes", "structured",
             "how many nodes do we run in us-east? see fleet.json",
             all_of(num(12), no("9"), no("32")),
             {"fleet.json": """{"fleet": {"regions": [
  {"name": "eu-west", "nodes": 7, "tier": "standard"},
  {"name": "us-east", "nodes": 12, "tier": "premium"},
  {"name": "ap-south", "nodes": 4, "tier": "standard"},
  {"name": "us-west", "nodes": 9, "tier": "premium"}
]}}
"""},
             ok=["12", "us-east runs 12 nodes."], bad=["9", "32 nodes"], steps=6),
        task("st-yaml-memory-limit", "structured",
             "What memory limit is set for the main container in the chart's values file?",
             all_of(has("768Mi"), no("256"), no("2Gi")),
             {"chart/values.yaml": """replicaCount: 2
image:
  repository: ghcr.io/acme/ingest
  tag: "5.2.0"
resources:
  requests:
    cpu: 250m
    memory: 256Mi
  limits:
    cpu: "1"
    memory: 768Mi
worker:
  resources:
    limits:
      memory: 2Gi
""", "chart/Chart.yaml": "apiVersion: v2\nname: ingest\nversion: 0.3.1\n"},
             ok=["768Mi"], bad=["256Mi", "2Gi"], steps=8),
        task("st-toml-first-mirror", "structured",
             "Which package mirror gets tried first? Lowest priority number wins (mirrors.toml).",
             all_of(has("saltmarsh"), no("fjordline"), no("lowland")),
             {"mirrors.toml": """[[mirror]]
name = "fjordline"
url = "https://fjordline.pkgs.example/simple"
priority = 2

[[mirror]]
name = "saltmarsh"
url = "https://saltmarsh.pkgs.example/simple"
priority = 1

[[mirror]]
name = "lowland"
url = "https://lowland.pkgs.example/simple"
priority = 3
"""},
             ok=["saltmarsh", "The saltmarsh mirror (priority 1)."], bad=["fjordline", "lowland"], steps=6),
        task("st-json-flag-off", "structured",
             "is one-click checkout switched on right now? flags are in flags.json",
             all_of(rx(r"(?i)\b(no|false|disabled|off|not)\b"), no("yes")),
             {"flags.json": """{"flags": {
  "dark_mode": {"enabled": true, "rollout_percent": 100},
  "one_click_checkout": {"enabled": false, "rollout_percent": 60},
  "gift_cards": {"enabled": true, "rollout_percent": 25}
}}
"""},
             ok=["No, it is disabled (enabled: false).", "false"], bad=["Yes, it is enabled.", "yes"], steps=6),
        task("st-yaml-ci-pythons", "structured",
             "How many Python versions does our CI test against?",
             all_of(num(4), no("8"), no("2 versions")),
             {".github/workflows/ci.yml": """name: ci
on: [push, pull_request]
jobs:
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      matrix:
        os: [ubuntu-24.04, macos-14]
        python: ["3.10", "3.11", "3.12", "3.13"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python }}
      - run: pip install -e .[test]
      - run: pytest -q
""", "pyproject.toml": "[project]\nname = \"tidepool\"\nrequires-python = \">=3.10\"\n"},
             ok=["4", "Four: 3.10, 3.11, 3.12 and 3.13 (4 versions)."], bad=["8 jobs", "2 versions"], steps=8),
        task("st-ini-flake8-length", "structured",
             "whats the max line length flake8 enforces in this repo",
             all_of(num(100), no("79"), no("88")),
             {"setup.cfg": """[metadata]
name = tidepool
version = 0.9.2

[flake8]
max-line-length = 100
extend-ignore = E203

[pycodestyle]
max-line-length = 79

[isort]
profile = black
line_length = 88
"""},
             ok=["100", "flake8 allows 100 characters."], bad=["79", "88"], steps=6),
        task("st-env-db-host", "structured",
             "Which host and port does the orders database URL in .env point at?",
             all_of(has("pg-orders.internal"), num(6432), no("legacy")),
             {".env": """# old cluster, decommissioned in March
# DATABASE_URL=postgres://app:app@pg-legacy.internal:5432/orders
DATABASE_URL=postgres://app:${DB_PASSWORD}@pg-orders.internal:6432/orders
DB_POOL=12
"""},
             ok=["pg-orders.internal:6432", "Host pg-orders.internal, port 6432."],
             bad=["pg-legacy.internal:5432", "pg-orders.internal:5432"], steps=6),
    ]


def aggregate():
    """Sums, means, extremes and counts over CSV, TSV and JSON records, with a filter."""
    return [
        task("ag-csv-north-total", "aggregate",
             "What did the North region sell in total? Data is in sales_q3.csv",
             all_of(num(14715), no("31975"), no("31,975")),
             {"sales_q3.csv": """region,rep,month,amount
North,Ines Duarte,Jul,4200
South,Tomasz Wrona,Jul,3900
North,Kofi Mensah,Aug,5150
East,Ines Duarte,Aug,2800
North,Ines Duarte,Sep,3375
South,Tomasz Wrona,Sep,4460
North,Kofi Mensah,Sep,1990
West,Hana Sato,Sep,6100
"""},
             ok=["14715", "North sold 14,715 in total."], bad=["31975", "4200"]),
        task("ag-csv-search-latency", "aggregate",
             "Average response time of the /search requests in latency.csv, errors included? in ms",
             all_of(num(298, 0.5), no("203"), no("135")),
             {"latency.csv": """endpoint,status,ms
/search,200,120
/login,200,45
/search,200,180
/search,500,950
/cart,200,60
/search,200,150
/login,401,30
/search,200,90
"""},
             ok=["298 ms", "298"], bad=["203.125", "135 ms"]),
        task("ag-csv-top-customer", "aggregate",
             "Who's our biggest customer by lifetime spend? (customers.csv)",
             all_of(has("Nakamura"), no("Lindqvist"), no("Okafor")),
             {"customers.csv": """id,name,city,lifetime_spend
101,"Okafor, Chidi","Lagos, NG",18250.50
102,Marta Lindqvist,"Uppsala, SE",22410.00
103,"Ruiz, Ana Belén","Sevilla, ES",9870.25
104,"Nakamura, Ren","Osaka, JP",23105.75
105,Piotr Zielinski,"Gdansk, PL",21990.00
"""},
             ok=["Nakamura, Ren", "Ren Nakamura (23,105.75)"], bad=["Marta Lindqvist", "Okafor"]),
        task("ag-tsv-open-p1", "aggregate",
             "How many P1 tickets are still open in tickets.tsv?",
             all_of(any_of(num(3), rx(r"(?i)\bthree\b")), no("4"), no("5")),
             {"tickets.tsv": "id\ttitle\tstatus\tpriority\n"
                             "T-601\tLogin loop on Safari\topen\tP1\n"
                             "T-602\tTypo in footer\topen\tP3\n"
                             "T-603\tExport times out\tclosed\tP1\n"
                             "T-606\tWebhook retries forever\topen\tP1\n"
                             "T-607\tDark mode contrast\tin_progress\tP2\n"
                             "T-608\tInvoice PDF blank\topen\tP1\n"
                             "T-609\tCSV import drops rows\tclosed\tP2\n"
                             "T-610\tSMS codes arrive late\topen\tP2\n"},
             ok=["3", "Three: T-601, T-606 and T-608."], bad=["4", "5 open tickets"]),
        task("ag-csv-warehouses", "aggregate",
             "how many different warehouses ship stuff in shipments.csv",
             all_of(any_of(num(4), rx(r"(?i)\bfour\b")), no("7")),
             {"shipments.csv": """shipment,warehouse,carrier,kg
SHP-A,Rotterdam,DHL,120
SHP-B,Hamburg,DPD,80
SHP-C,Rotterdam,UPS,45
SHP-D,Antwerp,DHL,300
SHP-E,Hamburg,DHL,60
SHP-F,Le Havre,GLS,210
SHP-G,Antwerp,DPD,85
"""},
             ok=["4", "Four: Rotterdam, Hamburg, Antwerp and Le Havre."], bad=["7", "3"]),
        task("ag-csv-cheapest-sso", "aggregate",
             "Which is the cheapest plan that comes with SSO, and what does it cost a month?",
             all_of(has("Scale"), num(99), no("Starter"), no("Business")),
             {"plans.csv": """plan,monthly_usd,seats,sso
Starter,19,5,no
Team,49,20,no
Business,129,50,yes
Scale,99,100,yes
Enterprise,399,unlimited,yes
"""},
             ok=["Scale, $99 a month", "Scale at 99 USD/month"], bad=["Starter, $19", "Business, $129"]),
        task("ag-csv-paid-march", "aggregate",
             "invoices.csv: what's the total of the invoices that were paid in March 2026?",
             all_of(num(6765.75, 0.01), no("7745"), no("7,745"), no("13385"), no("13,385")),
             {"invoices.csv": """invoice,client,date,amount,status
INV-2041,Halvorsen AS,2026-03-02,"1,250.00",paid
INV-2042,Brightwater Ltd,2026-03-09,"3,400.50",paid
INV-2043,Halvorsen AS,2026-03-15,980.00,overdue
INV-2044,Castellan SpA,2026-03-21,"2,115.25",paid
INV-2045,Brightwater Ltd,2026-04-01,"1,600.00",paid
INV-2046,Castellan SpA,2026-02-27,"5,020.00",paid
"""},
             ok=["6,765.75", "6765.75"], bad=["7,745.75", "13385.75", "1250"]),
        task("ag-tsv-course-mean", "aggregate",
             "avg score in Organic Chemistry? grades are in grades.tsv",
             all_of(num(79.5, 0.05), no("81.3"), no("81.29")),
             {"grades.tsv": "student\tcourse\tscore\n"
                            "amira\tOrganic Chemistry\t78\n"
                            "bao\tOrganic Chemistry\t91\n"
                            "amira\tLinear Algebra\t85\n"
                            "chidi\tOrganic Chemistry\t66\n"
                            "dana\tLinear Algebra\t72\n"
                            "bao\tLinear Algebra\t94\n"
                            "elin\tOrganic Chemistry\t83\n"},
             ok=["79.5", "The Organic Chemistry average is 79.5."], bad=["81.29", "81.3"]),
        task("ag-csv-hot-readings", "aggregate",
             "How many of the readings in readings.csv were above 30 °C?",
             all_of(num(5), no("6")),
             {"readings.csv": """day,station,temp_c
Jul 1,airport,29.5
Jul 1,harbour,31.2
Jul 2,airport,33.0
Jul 2,harbour,30.0
Jul 3,airport,35.4
Jul 3,harbour,28.9
Jul 4,airport,30.1
Jul 4,harbour,32.7
"""},
             ok=["5", "5 readings were above 30 °C."], bad=["6", "8"]),
        task("ag-csv-nightly-peak", "aggregate",
             "Which nightly job uses the most memory, and how much? (jobs.csv)",
             all_of(has("reindex"), num(2790), no("5120"), no("backup")),
             {"jobs.csv": """job,kind,peak_mem_mb
etl-orders,nightly,2310
etl-users,nightly,1875
thumbs,hourly,3920
reindex,nightly,2790
backup,weekly,5120
sync-crm,hourly,980
"""},
             ok=["reindex, 2790 MB", "reindex peaks at 2,790 MB"], bad=["backup, 5120 MB", "thumbs, 3920 MB"]),
        task("ag-json-sku-units", "aggregate",
             "How many units of BX-220 were ordered in total? orders are in orders.json",
             all_of(num(22), no("27"), no("32")),
             {"orders.json": """[
  {"order": "A-1001", "sku": "BX-220", "qty": 3},
  {"order": "A-1002", "sku": "BX-221", "qty": 10},
  {"order": "A-1003", "sku": "BX-220", "qty": 7},
  {"order": "A-1004", "sku": "CT-090", "qty": 2},
  {"order": "A-1005", "sku": "BX-220", "qty": 12},
  {"order": "A-1006", "sku": "BX-2200", "qty": 5}
]
"""},
             ok=["22", "22 units of BX-220."], bad=["27", "32 units"]),
    ]
