#!/usr/bin/env python3
"""Interleaved A/B of boyd builds or settings with the native engine's per-op profile.

    benches/compare/ab-profile.py MODEL ROUNDS TEST LABEL=BINARY[:VAR=VALUE...] ...

Each round runs every arm once, in order, as `BINARY bench -m MODEL -t TEST --no-warmup -r 1
--impl boyd` with BOYD_PROFILE=1 and the arm's environment variables; prints the median ms per
profiled operation and the median tokens/s of each arm as a markdown table, and writes the raw
samples to target/compare/ab-MODEL-TEST.json. Example (prefetch build against HEAD, unpinned):

    benches/compare/ab-profile.py qwen2.5-coder-0.5b-instruct 7 tg128 \\
        before=/tmp/boyd-old after=target/release/boyd:BOYD_PIN=0
"""
import json, os, re, statistics, subprocess, sys

model, rounds, test = sys.argv[1], int(sys.argv[2]), sys.argv[3]
arms = []
for a in sys.argv[4:]:
    label, rest = a.split("=", 1)
    parts = rest.split(":")
    env = dict(os.environ); env["BOYD_PROFILE"] = "1"
    for kv in parts[1:]:
        k, v = kv.split("=", 1); env[k] = v
    arms.append((label, parts[0], env))
res = {l: {"tps": [], "ops": {}} for l, _, _ in arms}
for r in range(rounds):
    for label, binary, env in arms:
        p = subprocess.run([binary, "bench", "-m", model, "-t", test, "--no-warmup", "-r", "1", "--impl", "boyd"], env=env, capture_output=True, text=True)
        out = p.stdout + p.stderr
        m = re.search(r"\| boyd \| \S+ \| ([\d.]+)", out)
        if not m:
            sys.exit(f"{label}: no boyd row in the output of {binary}:\n{out[-2000:]}")
        res[label]["tps"].append(float(m.group(1)))
        for line in out.splitlines():
            mm = re.match(r"\s{2}(\S.*?)\s{2,}([\d.]+) ms\s+([\d.]+) %", line)
            if mm:
                res[label]["ops"].setdefault(mm.group(1), []).append(float(mm.group(2)))
print(f"{model} {test}, {rounds} interleaved rounds, medians")
labels = [l for l, _, _ in arms]
print("| op (ms per run) | " + " | ".join(labels) + " |")
print("|---|" + "---:|" * len(labels))
for op in res[labels[0]]["ops"]:
    print(f"| {op} | " + " | ".join(f"{statistics.median(res[l]['ops'].get(op,[0])):.1f}" for l in labels) + " |")
print("| **tok/s** | " + " | ".join(f"**{statistics.median(res[l]['tps']):.1f}**" for l in labels) + " |")
os.makedirs("target/compare", exist_ok=True)
json.dump(res, open(f"target/compare/ab-{os.path.basename(model)}-{test}.json", "w"))
