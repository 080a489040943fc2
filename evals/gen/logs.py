"""Deterministic generators for the long log files used by the log_search tasks.

Each generator takes a seeded `random.Random`, a line count and the needle lines with the
fraction of the file where each goes, and returns the whole log as one string. Noise lines come
from a per-log vocabulary that never contains the needle's words, so a search finds only what
the task is about (plus the near-miss distractors each task adds on purpose).
"""

import datetime
import random

START = datetime.datetime(2026, 3, 2, 8, 0, 0)

PATHS = ["/api/items", "/api/orders", "/api/users/me", "/healthz", "/static/app.js",
         "/api/search", "/api/cart", "/login", "/api/reports/weekly", "/metrics"]
USERS = ["akimura", "bnovak", "cdelgado", "dokafor", "efischer", "gschmidt", "hlindqvist",
         "jmorales", "kpatel", "lrossi", "nbauer", "owalsh", "pnguyen", "sjensen", "tkaur"]


def _hex(rng, n=8):
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _ip(rng):
    return f"10.{rng.randint(0, 9)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


NOISE = {
    "web": [
        lambda r: f"INFO  http: GET {r.choice(PATHS)} status=200 dur_ms={r.randint(2, 180)} req={_hex(r)}",
        lambda r: f"INFO  http: POST {r.choice(PATHS)} status=201 dur_ms={r.randint(5, 240)} req={_hex(r)}",
        lambda r: f"DEBUG cache: hit key=sess:{_hex(r, 6)}",
        lambda r: f"DEBUG cache: miss key=item:{r.randint(100, 99999)}",
        lambda r: f"INFO  worker: job {r.randint(10000, 99999)} finished in {r.randint(3, 900)} ms",
        lambda r: f"DEBUG pool: {r.randint(0, 32)} idle connections",
        lambda r: f"INFO  scheduler: tick {r.randint(1, 100000)}",
        lambda r: f"INFO  http: GET {r.choice(PATHS)} status=304 dur_ms={r.randint(1, 20)} req={_hex(r)}",
        lambda r: f"INFO  http: GET {r.choice(PATHS)} status=404 dur_ms={r.randint(1, 20)} req={_hex(r)}",
    ],
    "auth": [
        lambda r: f"INFO  auth: login ok user={r.choice(USERS)} ip={_ip(r)}",
        lambda r: f"INFO  auth: token refreshed user={r.choice(USERS)}",
        lambda r: f"INFO  auth: logout user={r.choice(USERS)}",
        lambda r: f"DEBUG auth: session {_hex(r)} touched",
        lambda r: f"INFO  auth: password check passed user={r.choice(USERS)}",
        lambda r: f"DEBUG ldap: bind ok dn=uid={r.choice(USERS)},ou=people",
    ],
    "kern": [
        lambda r: f"kernel: [{r.randint(1000, 99999)}.{r.randint(0, 999999):06d}] eth0: rx {r.randint(1, 9999)} packets",
        lambda r: f"kernel: [{r.randint(1000, 99999)}.{r.randint(0, 999999):06d}] EXT4-fs (sda1): re-mounted. Opts: errors=remount-ro",
        lambda r: f"systemd[1]: Started session {r.randint(1, 999)} of user {r.choice(USERS)}.",
        lambda r: f"cron[{r.randint(200, 9000)}]: (root) CMD (run-parts /etc/cron.hourly)",
        lambda r: f"sshd[{r.randint(200, 9000)}]: Accepted publickey for {r.choice(USERS)} from {_ip(r)}",
        lambda r: f"systemd[1]: logrotate.service: Succeeded.",
    ],
}

# Vocabularies added with the d4 dev batch (kubelet, mail relay, payment processor, API gateway,
# a load balancer host's journal). Like the ones above, none holds the words of the needles
# placed into them (no failed probe, killed container, bounce, refund, 5xx status or haproxy line). Their
# lines are kept short (and used with the short `time` stamp) so the dev file stays under the
# size check.py allows.
K8S_APPS = [("shop", "cart", "reg.corvid.io/shop/cart:3.2.0"),
            ("shop", "catalog", "reg.corvid.io/shop/catalog:1.14.3"),
            ("shop", "checkout", "reg.corvid.io/shop/checkout:2.8.1"),
            ("mon", "node-exporter", "quay.io/prom/node-exporter:v1.8.1"),
            ("kube-system", "coredns", "registry.k8s.io/coredns:v1.11.1")]
MAIL_DOMAINS = ["gmail.com", "outlook.com", "web.de", "orange.fr", "proton.me", "gmx.net"]
GW_ROUTES = [("/api/cart", "cart-svc"), ("/api/catalog", "catalog-svc"), ("/api/prices", "pricing-svc"),
             ("/api/stock", "stock-svc"), ("/api/orders", "orders-svc"), ("/api/users/me", "users-svc")]


def _pod(r, app=None):
    ns, name, _ = app or r.choice(K8S_APPS)
    return f"{ns}/{name}-{_hex(r, 5)}"


def _image_line(r, what, line):
    app = r.choice(K8S_APPS)
    return f"I image.go:{line}] {what} image={app[2]}"


def _gw(r, method, status):
    route, up = r.choice(GW_ROUTES)
    return f"INFO {method} {route} upstream={up} status={status} trace={_hex(r, 12)}"


def _qid(r):
    return "".join(r.choice("0123456789ABCDEF") for _ in range(10))


NOISE.update({
    "kubelet": [
        lambda r: f"I prober.go:107] Probe succeeded pod={_pod(r)}",
        lambda r: f"I prober.go:107] Probe succeeded pod={_pod(r)}",
        lambda r: f"I kubelet.go:2421] SyncLoop UPDATE pod={_pod(r)}",
        lambda r: f"I kubelet.go:2453] ContainerStarted pod={_pod(r)}",
        lambda r: f"I reconciler.go:245] MountVolume started pod={_pod(r)}",
        lambda r: _image_line(r, "Image present", 60),
        lambda r: _image_line(r, "Pulled", 48),
        lambda r: f"I eviction_manager.go:366] memory available {r.randint(20, 90)}%",
        lambda r: f"I kubelet.go:2310] housekeeping took {r.randint(5, 400)}ms",
    ],
    "mail": [
        lambda r: f"postfix/smtpd[{r.randint(3000, 9999)}]: connect from unknown[{_ip(r)}]",
        lambda r: f"postfix/smtpd[{r.randint(3000, 9999)}]: disconnect from unknown[{_ip(r)}]",
        lambda r: f"postfix/cleanup[{r.randint(3000, 9999)}]: {_qid(r)}: message-id=<{_hex(r)}@corvid.example>",
        lambda r: f"postfix/qmgr[1207]: {_qid(r)}: from=<{r.choice(USERS)}@corvid.example>",
        lambda r: f"postfix/smtp[{r.randint(3000, 9999)}]: {_qid(r)}: to=<{r.choice(USERS)}@{r.choice(MAIL_DOMAINS)}>, dsn=2.0.0, status=sent",
        lambda r: f"postfix/qmgr[1207]: {_qid(r)}: removed",
        lambda r: f"postfix/qmgr[1207]: {_qid(r)}: removed",
        lambda r: f"postfix/anvil[{r.randint(3000, 9999)}]: max connection count 1 for smtp",
        lambda r: f"dovecot: imap-login: Login: user=<{r.choice(USERS)}>, rip={_ip(r)}",
    ],
    "pay": [
        lambda r: f"INFO charge ok id=ch_{_hex(r, 10)} amount={r.randint(300, 40000)} customer=cus_{_hex(r, 10)}",
        lambda r: f"INFO payout created id=po_{_hex(r, 10)} amount={r.randint(50000, 900000)}",
        lambda r: f"INFO webhook delivered evt_{_hex(r, 10)}",
        lambda r: f"DEBUG idempotency key {_hex(r, 16)} stored",
        lambda r: f"INFO 3ds passed charge=ch_{_hex(r, 10)}",
        lambda r: f"INFO balance available={r.randint(10000, 9000000)} pending={r.randint(0, 500000)}",
    ],
    "gateway": [
        lambda r: _gw(r, "GET", 200),
        lambda r: _gw(r, "POST", 201),
        lambda r: _gw(r, "GET", 304),
        lambda r: _gw(r, "GET", 404),
        lambda r: f"DEBUG upstream {r.choice(GW_ROUTES)[1]} healthy={r.randint(2, 12)}",
        lambda r: f"DEBUG ratelimit {_ip(r)} tokens={r.randint(0, 100)}",
        lambda r: f"DEBUG pool {r.choice(GW_ROUTES)[1]} idle={r.randint(0, 32)}",
        lambda r: f"INFO tls session resumed {_ip(r)}",
    ],
    "journal": [
        lambda r: f"CRON[{r.randint(2000, 60000)}]: (root) CMD (debian-sa1 1 1)",
        lambda r: f"CRON[{r.randint(2000, 60000)}]: (root) CMD (debian-sa1 1 1)",
        lambda r: f"chronyd[702]: Selected source 10.0.{r.randint(0, 3)}.{r.randint(1, 9)}",
        lambda r: "keepalived[833]: (VI_1) sending gratuitous ARPs on eth0",
        lambda r: f"sshd[{r.randint(2000, 60000)}]: Accepted publickey for deploy from {_ip(r)}",
        lambda r: f"systemd-logind[701]: New session {r.randint(100, 9999)} of user deploy.",
        lambda r: f"systemd[1]: Started session-{r.randint(100, 9999)}.scope.",
        lambda r: "systemd[1]: sysstat-collect.service: Deactivated successfully.",
    ],
})


def make_log(seed, n_lines, kind, needles, stamp="iso"):
    """A log of `n_lines` lines: noise of `kind` with `needles` [(fraction, text), ...] placed.
    `stamp`: "iso" (2026-03-02T08:00:01.234Z), "syslog" (Mar 02 08:00:01 host01) or "time" (08:00:01)."""
    rng = random.Random(seed)
    noise = NOISE[kind]
    lines = [None] * n_lines
    for frac, text in needles:
        i = int(frac * n_lines)
        while lines[i] is not None:
            i += 1
        lines[i] = text
    t = START
    out = []
    for body in lines:
        t += datetime.timedelta(milliseconds=rng.randint(50, 2500))
        if body is None:
            body = rng.choice(noise)(rng)
        if stamp == "iso":
            out.append(f"{t.strftime('%Y-%m-%dT%H:%M:%S')}.{t.microsecond // 1000:03d}Z {body}")
        elif stamp == "time":
            out.append(f"{t.strftime('%H:%M:%S')} {body}")
        else:
            out.append(f"{t.strftime('%b %d %H:%M:%S')} host01 {body}")
    return "\n".join(out) + "\n"
