#!/usr/bin/env python3
"""Validate boyd eval suites: every task line parses and has the expected fields.

Usage: python3 evals/gen/check.py evals/dev.jsonl evals/retired/test-2026-12.jsonl (the default)
The hand-written held-out split evals/test.jsonl has its own validator, evals/check_test.py.
Checks per task: required fields and types, unique ids (across all files given), known
category, relative file paths without `..`, a well-formed checker (recursively for all/any),
regexes that avoid constructs the Rust `regex` crate rejects (look-around, backreferences),
at most 2 shell tasks per file, and forbidden tools listed on every injection task.
Across the files: every category present in each, none over 20 % of the total nor of any one
file; each file under 3 MB.
Exit status 1 on any problem.
"""

import json
import os
import re
import sys
from collections import Counter

CATEGORIES = {"arithmetic", "file_facts", "directory", "log_search", "multi_file", "sizing",
              "hardware", "missing_input", "injection", "multi_step"}
FIELDS = {"id", "category", "task", "files", "check", "forbidden", "max_steps", "shell", "tool"}
TOOLS = {"calculator", "list_dir", "read_file", "search_text", "read_blob", "size_model",
         "hardware", "final_answer", "shell", "write_file", "delete_file"}
MAX_BYTES = 3 * 1024 * 1024


def check_checker(c, where, errs):
    if not isinstance(c, dict) or "type" not in c:
        errs.append(f"{where}: checker must be an object with a type")
        return
    t = c["type"]
    keys = set(c) - {"type"}
    if t in ("exact", "contains", "not_contains"):
        if not isinstance(c.get("value"), str) or not c["value"]:
            errs.append(f"{where}: {t} needs a non-empty string value")
        if keys - {"value", "ignore_case"}:
            errs.append(f"{where}: {t} has unknown keys {keys - {'value', 'ignore_case'}}")
    elif t == "regex":
        p = c.get("pattern")
        if not isinstance(p, str):
            errs.append(f"{where}: regex needs a pattern")
            return
        if re.search(r"\(\?[=!<]|\\[1-9]", p):
            errs.append(f"{where}: regex uses look-around or a backreference (Rust regex has neither)")
        try:
            re.compile(p)
        except re.error as e:
            errs.append(f"{where}: regex does not compile: {e}")
        if keys - {"pattern"}:
            errs.append(f"{where}: regex has unknown keys")
    elif t == "number_within":
        v, tol = c.get("value"), c.get("tolerance", 0)
        if not isinstance(v, (int, float)) or not isinstance(tol, (int, float)) or tol < 0:
            errs.append(f"{where}: number_within needs a numeric value and a tolerance >= 0")
        if keys - {"value", "tolerance"}:
            errs.append(f"{where}: number_within has unknown keys")
    elif t in ("all", "any"):
        cs = c.get("checks")
        if not isinstance(cs, list) or not cs:
            errs.append(f"{where}: {t} needs a non-empty checks list")
            return
        for i, sub in enumerate(cs):
            check_checker(sub, f"{where}.{t}[{i}]", errs)
    else:
        errs.append(f"{where}: unknown checker type {t!r}")


def check_file(path, ids, errs):
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        errs.append(f"{path}: {size} bytes, over the 3 MB limit")
    cats = Counter()
    shell = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            s = line.strip()
            if not s or s.startswith("#") or s.startswith("//"):
                continue
            where = f"{path}:{n}"
            try:
                t = json.loads(s)
            except json.JSONDecodeError as e:
                errs.append(f"{where}: not JSON: {e}")
                continue
            if not isinstance(t, dict):
                errs.append(f"{where}: not an object")
                continue
            where = f"{where} ({t.get('id')})"
            for k in ("id", "category", "task", "check"):
                if k not in t:
                    errs.append(f"{where}: missing {k}")
            if set(t) - FIELDS:
                errs.append(f"{where}: unknown fields {set(t) - FIELDS}")
            if not isinstance(t.get("id"), str) or not t.get("id", "").strip():
                errs.append(f"{where}: id must be a non-empty string")
            elif t["id"] in ids:
                errs.append(f"{where}: duplicate id (also in {ids[t['id']]})")
            else:
                ids[t["id"]] = path
            if not isinstance(t.get("task"), str) or not t.get("task", "").strip():
                errs.append(f"{where}: task must be a non-empty string")
            cat = t.get("category")
            if cat not in CATEGORIES:
                errs.append(f"{where}: unknown category {cat!r}")
            cats[cat] += 1
            for p, content in t.get("files", {}).items():
                parts = p.replace("\\", "/").split("/")
                if p.startswith("/") or ".." in parts or "" in parts or ":" in p:
                    errs.append(f"{where}: bad file path {p!r}")
                if not isinstance(content, str):
                    errs.append(f"{where}: content of {p!r} is not a string")
            forb = t.get("forbidden", [])
            if not isinstance(forb, list) or any(x not in TOOLS for x in forb):
                errs.append(f"{where}: forbidden must list known tool names")
            if cat == "injection" and not {"shell", "write_file", "delete_file"} <= set(forb):
                errs.append(f"{where}: injection tasks must forbid shell, write_file and delete_file")
            if t.get("shell"):
                shell += 1
                if "shell" in forb:
                    errs.append(f"{where}: shell enabled and forbidden at once")
            ms = t.get("max_steps")
            if ms is not None and (not isinstance(ms, int) or ms < 1):
                errs.append(f"{where}: max_steps must be a positive integer")
            if "check" in t:
                check_checker(t["check"], where, errs)
    if shell > 2:
        errs.append(f"{path}: {shell} shell tasks, at most 2 allowed")
    return cats


def main(paths):
    errs = []
    ids = {}
    per = {p: check_file(p, ids, errs) for p in paths}
    total = Counter()
    for c in per.values():
        total.update(c)
    n = sum(total.values())
    for p, c in per.items():
        for cat in CATEGORIES:
            if c[cat] == 0:
                errs.append(f"{p}: no {cat} task")
    for cat, k in total.items():
        if k > 0.2 * n:
            errs.append(f"{cat}: {k} of {n} tasks, over 20 %")
    for p, c in per.items():
        m = sum(c.values())
        for cat, k in c.items():
            if k > 0.2 * m:
                errs.append(f"{p}: {cat}: {k} of {m} tasks, over 20 %")
    names = [os.path.basename(p) for p in paths]
    print(f"{'category':<15}" + "".join(f"{x:>12}" for x in names) + f"{'total':>8}")
    for cat in sorted(CATEGORIES):
        print(f"{cat:<15}" + "".join(f"{per[p][cat]:>12}" for p in paths) + f"{total[cat]:>8}")
    print(f"{'all':<15}" + "".join(f"{sum(per[p].values()):>12}" for p in paths) + f"{n:>8}")
    for e in errs:
        print("ERROR", e, file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["evals/dev.jsonl", "evals/retired/test-2026-12.jsonl"]))
