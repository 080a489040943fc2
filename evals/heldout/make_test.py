#!/usr/bin/env python3
"""Write evals/test.jsonl, the held-out split of issue 39, from the hand-written tasks here.

The tasks are literal: each one was written by hand in records.py, sources.py, words.py,
workspace.py and sizing_tasks.py (nothing is drawn from the evals/gen/ templates or generated from a
seed). This script only serializes them, with the `#` comment lines that carry the `boyd size`
figures above the sizing tasks. Run from the repository root:

    python3 evals/heldout/make_test.py && python3 evals/check_test.py
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import records  # noqa: E402
import sizing_tasks  # noqa: E402
import sources  # noqa: E402
import words  # noqa: E402
import workspace  # noqa: E402

HEADER = (
    "# boyd agent eval, TEST split (held out; issue 39). Report scores only; never tune on it.\n"
    "# Written by hand in evals/heldout/ (make_test.py serializes it); see evals/README.md.\n"
    "# Nothing here may appear in src/: tests/it/heldout.rs fails if a task's words, a file name\n"
    "# or an answer does.\n"
)


def entries():
    """Every task with its reference answers, in suite order."""
    return (records.structured() + records.aggregate() + sources.code() + sources.build_log()
            + words.dates() + words.units() + words.arithmetic() + workspace.directory()
            + sizing_tasks.sizing() + sizing_tasks.this_machine() + workspace.missing_input() + workspace.injection())


def main():
    root = os.path.dirname(os.path.dirname(HERE))
    lines = [HEADER]
    for e in entries():
        for c in e["comment"] or []:
            lines.append(f"# {c}\n")
        lines.append(json.dumps(e["task"], ensure_ascii=False) + "\n")
    with open(os.path.join(root, "evals", "test.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
