"""Helpers for the hand-written held-out split (evals/test.jsonl).

Every task in this folder was written by hand for issue 39, in the words a user would type, and
not from the generator templates in evals/gen/. These helpers only build the JSON shapes: a
task is one call to `task(...)` with its question, its files written out in full, its checker,
the reference answers that must pass (`ok`) and the wrong answers that must fail (`bad`).
"""

FORBIDDEN = ["shell", "write_file", "delete_file"]

# A sentence that says the thing asked about is not there (missing-input tasks).
MISSING = (r"(?i)(\bnot (found|present|defined|listed|set|there|mentioned|in|exist|anywhere|configured)"
           r"|no such|does ?n[o']t (exist|have|contain|define|list|mention|appear|include|show)"
           r"|\bis(n'?t| not)\b|absent|missing|there (is|are) no|there's no|\bno (entry|key|file|row|"
           r"section|setting|record|mention|line|folder|directory|test|errors?|function|variable|"
           r"such|match|one|results?)\b|(can(no|')t|could ?n[o']t|unable to) (find|locate)|\bnone\b"
           r"|\b(has|have|contains?|defines?|lists?|sets?) no\b)")

YES = r"(?i)\b(yes|fits|will fit|does fit|can fit|it fit|should fit|would fit)\b"
NO = r"(?i)\b(no|not|does ?n[o']t fit|won'?t fit|can ?n[o']t|cannot|too (big|large)|exceeds?)\b"


def num(value, tolerance=0):
    """Some number in the answer within `tolerance` of `value`."""
    return {"type": "number_within", "value": value, "tolerance": tolerance}


def has(value):
    """The answer contains `value` (case-insensitive)."""
    return {"type": "contains", "value": value}


def no(value):
    """The answer does not contain `value` (case-insensitive): the distractor."""
    return {"type": "not_contains", "value": value}


def rx(pattern):
    """The answer matches a Rust regex."""
    return {"type": "regex", "pattern": pattern}


def all_of(*checks):
    """Every check passes."""
    return {"type": "all", "checks": list(checks)}


def any_of(*checks):
    """At least one check passes."""
    return {"type": "any", "checks": list(checks)}


def task(id, category, text, check, files=None, ok=(), bad=(), steps=8, hw=False, comment=None):
    """One task: the JSON object plus its reference answers (kept out of the JSONL)."""
    t = {"id": id, "category": category, "task": text}
    if files:
        t["files"] = files
    t["check"] = check
    t["forbidden"] = list(FORBIDDEN)
    t["max_steps"] = steps
    if hw:
        t["names_hardware"] = True
    return {"task": t, "ok": list(ok), "bad": list(bad), "comment": comment}
