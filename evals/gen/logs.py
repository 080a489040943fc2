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


def make_log(seed, n_lines, kind, needles, stamp="iso"):
    """A log of `n_lines` lines: noise of `kind` with `needles` [(fraction, text), ...] placed."""
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
        else:
            out.append(f"{t.strftime('%b %d %H:%M:%S')} host01 {body}")
    return "\n".join(out) + "\n"
