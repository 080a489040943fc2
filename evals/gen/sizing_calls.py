"""Were the sizing tasks answered through `size_model` with the numbers `boyd size` prints?

    python3 evals/gen/sizing_calls.py BOYD_BINARY SUITE.jsonl SINCE_RUN_ID

For every run under $BOYD_HOME/runs (default ~/.cache/boyd/runs) from SINCE_RUN_ID on (a prefix
such as 20261203-1713 works) whose task is a sizing task of SUITE: its `size_model` calls,
whether one of them asks exactly the task's question (model, quant, context, hardware of the
QUERIES table in sizing.py, no other KV type), and whether every number of the final answer
that the task does not state is a figure `boyd size` prints for that question (text or --json,
GB or GiB, at the answer's precision). Prints one line per run and a count.
"""
import json, os, re, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sizing import QUERIES
runs = os.path.join(os.environ.get("BOYD_HOME", os.path.expanduser("~/.cache/boyd")), "runs")
binary, suite, since = sys.argv[1], sys.argv[2], sys.argv[3]
tasks = {}
for l in open(suite):
    if l.startswith("{"):
        t = json.loads(l)
        if t["category"] == "sizing":
            tasks[t["task"]] = t["id"]
total = good = 0
for r in sorted(os.listdir(runs)):
    if r < since:
        continue
    ev = [json.loads(l) for l in open(os.path.join(runs, r, "transcript.jsonl"))]
    if ev[0].get("task") not in tasks:
        continue
    tid = tasks[ev[0]["task"]]
    calls = [e["action"]["args"] for e in ev if e.get("event") == "step"
             and (e.get("action") or {}).get("name") == "size_model"]
    answer = next((e.get("answer") for e in ev if e.get("event") == "end"), "") or ""
    m, q, c, hw = QUERIES[tid]
    text = subprocess.run([binary, "size", m, "--quant", q, "--ctx", str(c), "--hw", hw],
                          capture_output=True, text=True).stdout
    ok_call = any(a.get("model") == m and a.get("hw") == hw and a.get("ctx", 8192) == c
                  and a.get("quant", "Q4_K_M") == q and a.get("kv_type") in (None,) for a in calls)
    nums = re.findall(r"\d+(?:\.\d+)?", answer)
    figs = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)]
    figs += [f * 2**30 / 1e9 for f in figs]  # a GiB figure written in GB
    js = subprocess.run([binary, "size", m, "--quant", q, "--ctx", str(c), "--hw", hw, "--json"],
                        capture_output=True, text=True).stdout
    figs += [float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?", js)]
    figs += [f / 1e9 for f in figs]  # bytes written in GB
    def shown(n):
        d = len(n.split(".")[1]) if "." in n else 0
        return any(abs(round(f, d) - float(n)) < 1e-9 for f in figs)
    missing = [n for n in nums if not shown(n) and n not in ev[0]["task"]]
    from_size = not missing
    total += 1
    good += ok_call and from_size
    print(f"{r} {tid:<26} call matches the question: {ok_call}  answer's numbers all in `boyd size`: {from_size} {missing}  {calls}  | {answer[:90]}")
print(f"{good}/{total} sizing runs asked size_model the task's question and answered with its figures")
