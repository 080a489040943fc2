#!/usr/bin/env python3
"""Validate the hand-written held-out split, evals/test.jsonl (issue 39).

Usage (from the repository root): python3 evals/check_test.py
Checks:
- every line parses; fields are known; checkers are well formed (the rules of gen/check.py:
  known types, Rust-compatible regexes, numeric tolerances);
- ids are unique within the split and unused by dev.jsonl, dev-words.jsonl, basic.jsonl and the
  retired split; no task text is also a dev or retired task's text;
- at least 12 categories, none over 20 % of the split;
- every task forbids shell, write_file and delete_file, sets max_steps, and its checker holds a
  `not_contains` (the distractor a wrong answer gives); `names_hardware` is `true` when present,
  and set on every sizing task that names hardware (a sizing task without it needs none);
- every sizing task has a `#` comment line above it (the `boyd size` command and its figures);
- the file is what evals/heldout/make_test.py writes (the sources and the JSONL agree), and every
  task's reference answers pass its checker while its listed wrong answers fail (the semantics
  of src/agent/eval.rs: exact trims quotes and a trailing period, contains/not_contains ignore
  case, number_within reads `1,234` as 1234).
Exit status 1 on any problem.
"""

import json
import os
import re
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "evals", "gen"))
sys.path.insert(0, os.path.join(ROOT, "evals", "heldout"))

from check import check_checker  # noqa: E402
import make_test  # noqa: E402

TEST = os.path.join(ROOT, "evals", "test.jsonl")
OTHERS = [os.path.join(ROOT, "evals", p) for p in ("dev.jsonl", "dev-words.jsonl", "basic.jsonl",
                                                  "retired/test-2026-12.jsonl")]
FIELDS = {"id", "category", "task", "files", "check", "forbidden", "max_steps", "shell", "tool",
          "names_hardware"}
MIN_CATEGORIES = 12
MAX_SHARE = 0.20
NUM = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(s):
    return [float(m.group().replace(",", "")) for m in NUM.finditer(s)]


def norm(s):
    while True:
        n = s.strip().strip("\"'`").rstrip(".")
        if n == s:
            return s.lower()
        s = n


def passes(c, a):
    """The checker semantics of src/agent/eval.rs."""
    t = c["type"]
    if t == "exact":
        return norm(a) == norm(c["value"])
    if t == "contains":
        return c["value"].lower() in a.lower()
    if t == "not_contains":
        return c["value"].lower() not in a.lower()
    if t == "regex":
        return re.search(c["pattern"], a) is not None
    if t == "number_within":
        tol = max(c.get("tolerance", 0), 1e-9)
        return any(abs(n - c["value"]) <= tol for n in numbers_in(a))
    if t == "all":
        return all(passes(x, a) for x in c["checks"])
    if t == "any":
        return any(passes(x, a) for x in c["checks"])
    raise ValueError(t)


def types_in(c):
    yield c["type"]
    for sub in c.get("checks", []):
        yield from types_in(sub)


def read(path):
    """(line number, task, comment lines just above it) for every task line of a suite."""
    out, comments = [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if not s:
                comments = []
                continue
            if s.startswith("#") or s.startswith("//"):
                comments.append(s)
                continue
            out.append((n, json.loads(s), comments))
            comments = []
    return out


def main():
    errs = []
    other_ids, other_texts = set(), set()
    for p in OTHERS:
        for _, t, _ in read(p):
            other_ids.add(t["id"])
            other_texts.add(t["task"].strip().lower())
    try:
        tasks = read(TEST)
    except (OSError, json.JSONDecodeError) as e:
        print(f"ERROR {TEST}: {e}", file=sys.stderr)
        return 1
    ids = set()
    cats = Counter()
    for n, t, comments in tasks:
        where = f"{TEST}:{n} ({t.get('id')})"
        for k in ("id", "category", "task", "check", "forbidden", "max_steps"):
            if k not in t:
                errs.append(f"{where}: missing {k}")
        if set(t) - FIELDS:
            errs.append(f"{where}: unknown fields {set(t) - FIELDS}")
        if t.get("id") in ids:
            errs.append(f"{where}: duplicate id")
        if t.get("id") in other_ids:
            errs.append(f"{where}: id also used by dev, basic or the retired split")
        ids.add(t.get("id"))
        if t.get("task", "").strip().lower() in other_texts:
            errs.append(f"{where}: the same task text is in dev, basic or the retired split")
        cats[t.get("category")] += 1
        for p, content in t.get("files", {}).items():
            parts = p.split("/")
            if p.startswith("/") or ".." in parts or "" in parts or "\\" in p or ":" in p:
                errs.append(f"{where}: bad file path {p!r}")
            if not isinstance(content, str):
                errs.append(f"{where}: content of {p!r} is not a string")
        if not {"shell", "write_file", "delete_file"} <= set(t.get("forbidden", [])):
            errs.append(f"{where}: must forbid shell, write_file and delete_file")
        ms = t.get("max_steps")
        if not isinstance(ms, int) or ms < 1:
            errs.append(f"{where}: max_steps must be a positive integer")
        if "names_hardware" in t and t["names_hardware"] is not True:
            errs.append(f"{where}: names_hardware is written only as true")
        if t.get("category") == "sizing" and not comments:
            errs.append(f"{where}: a sizing task needs a `# boyd size ...` comment above it")
        if t.get("category") == "sizing" and any("--hw this" in c for c in comments):
            errs.append(f"{where}: a sizing task is sized on a named device, never `this`")
        if t.get("names_hardware") and t.get("category") != "sizing":
            errs.append(f"{where}: names_hardware outside the sizing category")
        if "check" in t:
            check_checker(t["check"], where, errs)
            if "not_contains" not in set(types_in(t["check"])):
                errs.append(f"{where}: the checker rejects no distractor (no not_contains)")
    total = sum(cats.values())
    if len(cats) < MIN_CATEGORIES:
        errs.append(f"{len(cats)} categories, at least {MIN_CATEGORIES} needed")
    for c, k in cats.items():
        if k > MAX_SHARE * total:
            errs.append(f"category {c}: {k} of {total} tasks, over {MAX_SHARE:.0%}")

    # The sources and the file agree, and the reference answers behave.
    source = make_test.entries()
    by_id = {t["id"]: t for _, t, _ in tasks}
    if [e["task"]["id"] for e in source] != [t["id"] for _, t, _ in tasks]:
        errs.append("evals/test.jsonl is not what evals/heldout/make_test.py writes: run it")
    for e in source:
        t = e["task"]
        if by_id.get(t["id"]) != t:
            errs.append(f"{t['id']}: differs from its source in evals/heldout/: run make_test.py")
        if not e["ok"] or not e["bad"]:
            errs.append(f"{t['id']}: needs reference answers and wrong answers")
        for a in e["ok"]:
            if not passes(t["check"], a):
                errs.append(f"{t['id']}: reference answer {a!r} fails")
        for a in e["bad"]:
            if passes(t["check"], a):
                errs.append(f"{t['id']}: wrong answer {a!r} passes")

    hw = sum(1 for _, t, _ in tasks if t.get("names_hardware"))
    print(f"{'category':<15}{'tasks':>7}{'share':>8}")
    for c, k in sorted(cats.items()):
        print(f"{c:<15}{k:>7}{k / total:>8.1%}")
    print(f"{'all':<15}{total:>7}   ({len(cats)} categories; {hw} name hardware)")
    for e in errs:
        print("ERROR", e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
