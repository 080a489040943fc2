#!/usr/bin/env python3
"""Re-run the `boyd size` command of every sizing comment in evals/test.jsonl and print what it
says now under what was recorded, so a change of the sizing model shows which tasks moved.

Usage (from the repository root, after `cargo build --release`):
    python3 evals/heldout/sizing_now.py [path/to/boyd]
"""

import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def now(binary, args):
    out = subprocess.run([binary, *args, "--json"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    m, s = d["memory"], d["speed"]
    gib = 2**30
    return (f"weights {m['weights'] / gib:.2f} GiB, KV {m['kv_cache'] / gib:.2f} GiB, total "
            f"{m['total'] / gib:.2f} GiB ({m['total'] / 1e9:.2f} GB), fits={d['fits']}, max ctx "
            f"{(d.get('max_ctx') or {}).get('ctx', 0)}, decode {s['decode_empty']:.2f} tok/s empty, "
            f"{s['decode_at_ctx']:.2f} at ctx")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "release", "boyd")
    for line in open(os.path.join(ROOT, "evals", "test.jsonl"), encoding="utf-8"):
        if not line.startswith("# boyd size "):
            continue
        cmd = line[2:].split(":", 1)[0]
        if "--hw this" in cmd:
            continue
        print(line.rstrip())
        print("  now:", now(binary, shlex.split(cmd)[1:]))


if __name__ == "__main__":
    main()
