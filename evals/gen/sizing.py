"""Sizing tasks: questions the `size_model` tool answers, with expectations from `boyd size`.

RECORDED holds what `boyd size MODEL --quant Q --ctx C --hw HW --json` printed when the suites
were written (commit noted in the README). Memory checks allow 8 %; speed checks allow 35 %
because the decode-speed model is being refitted. `python3 evals/gen/sizing.py` re-runs the
binary and prints the current values next to the recorded ones, so a drift is visible.
"""

import json
import os
import subprocess
import sys

# task id -> values recorded from `boyd size --json` (written by `sizing.py --record`):
#   total_gb: memory.total in decimal GB; fits: bool; max_ctx: largest context that fits
#   (0 when none); decode_tps / decode_empty_tps: predicted decode tokens/s at the context and
#   at an empty context; binary: which build printed them.
RECORDED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sizing_recorded.json")

QUERIES = {
    "sz-70b-on-4090": ("llama-3.1-70b", "Q4_K_M", 8192, "rtx-4090"),
    "sz-qwen14b-memory": ("qwen2.5-14b", "Q4_K_M", 4096, "rtx-4090"),
    "sz-mistral-m1pro": ("mistral-7b", "Q8_0", 32768, "m1-pro"),
    "sz-llama8b-3090-speed": ("llama-3.1-8b", "Q4_K_M", 8192, "rtx-3090"),
    "sz-qwen32b-on-4090": ("qwen2.5-32b", "Q4_K_M", 16384, "rtx-4090"),
    "sz-gemma27b-memory": ("gemma-3-27b", "Q4_K_M", 8192, "a100-80"),
    "sz-70b-on-m3max": ("llama-3.1-70b", "Q4_K_M", 8192, "m3-max"),
    "sz-llama8b-4090-maxctx": ("llama-3.1-8b", "Q4_K_M", 8192, "rtx-4090"),
    "sz-qwen7b-m4max-speed": ("qwen2.5-7b", "Q4_K_M", 8192, "m4-max"),
    # Dev batch d5: the context stated in other words ("128k", "65,536 tokens", "16K tokens of
    # context", "ctx=2048"), at values where another context gives another answer.
    "d5-sz-gemma12b-4090-128k": ("gemma-3-12b", "Q4_K_M", 131072, "rtx-4090"),
    "d5-sz-70b-h100-64k": ("llama-3.1-70b", "Q4_K_M", 65536, "h100-sxm"),
    "d5-sz-qwen7b-5060ti-32k": ("qwen2.5-7b", "Q4_K_M", 32768, "rtx-5060-ti"),
    "d5-sz-llama8b-m2pro-16k": ("llama-3.1-8b", "Q8_0", 16384, "m2-pro"),
    "d5-sz-mistral-3090-4k": ("mistral-7b", "Q4_K_M", 4096, "rtx-3090"),
    "d5-sz-qwen14b-a100-2k": ("qwen2.5-14b", "Q4_K_M", 2048, "a100-40"),
}

NO = r"(?i)\b(no|not|does ?n[o']t fit|won'?t fit|can ?n[o']t|cannot|too (big|large))\b"
YES = r"(?i)\b(yes|fits|will fit|does fit|can fit|it fit)\b"


def measure(binary, model, quant, ctx, hw):
    out = subprocess.run([binary, "size", model, "--quant", quant, "--ctx", str(ctx), "--hw", hw,
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def memory_check(recorded, key, frac):
    """The task's total memory within `frac`, as decimal GB or as GiB (the tool prints both)."""
    from make_suites import any_of, num  # noqa: late import, no cycle at load

    gb = recorded[key]["total_gb"]
    gib = gb * 1e9 / 2**30
    return any_of(num(round(gb, 2), round(gb * frac, 2)), num(round(gib, 2), round(gib * frac, 2)))


def recorded_comment(recorded, key, what):
    """The suite comment above a sizing task: the `boyd size` query and what it printed."""
    q = QUERIES[key]
    v = recorded[key]
    return (f"boyd size {q[0]} --quant {q[1]} --ctx {q[2]} --hw {q[3]}: total {v['total_gb']:.2f} GB, "
            f"fits={v['fits']}, max ctx {v['max_ctx']}, decode {v['decode_tps']:.1f} tok/s at ctx, "
            f"{v['decode_empty_tps']:.1f} empty ({what})")


def sizing_tasks(task):
    from make_suites import all_of, any_of, num, regex, not_contains  # noqa: late import, no cycle at load

    recorded = load_recorded()

    def r(key):
        return recorded[key]

    def mem(key, frac=0.08):
        return memory_check(recorded, key, frac)

    def speed(key):
        # At the asked context or at an empty one: the tool may quote either.
        a, b = r(key)["decode_tps"], r(key)["decode_empty_tps"]
        return any_of(num(round(a, 1), round(a * 0.35, 1)), num(round(b, 1), round(b * 0.35, 1)))

    no = all_of(regex(NO), not_contains("yes"))
    yes = all_of(regex(YES), not_contains("not fit"), not_contains("n't fit"))

    def c(key, what):
        return recorded_comment(recorded, key, what)

    dev = [
        task("sz-70b-on-4090", "sizing",
             "Does llama-3.1-70b at Q4_K_M with an 8192-token context fit on an rtx-4090, and about how many GB does it need?",
             all_of(no, mem("sz-70b-on-4090")), max_steps=6, comment=c("sz-70b-on-4090", "fits: no")),
        task("sz-qwen14b-memory", "sizing",
             "How much memory, in GB, does qwen2.5-14b need at Q4_K_M with a 4096-token context on an rtx-4090?",
             mem("sz-qwen14b-memory"), max_steps=6, comment=c("sz-qwen14b-memory", "memory")),
        task("sz-mistral-m1pro", "sizing",
             "Will mistral-7b quantized to Q8_0 run with a 32768-token context on the m1-pro hardware preset? Answer yes or no.",
             yes if r("sz-mistral-m1pro")["fits"] else no, max_steps=6,
             comment=c("sz-mistral-m1pro", "fits")),
        task("sz-llama8b-3090-speed", "sizing",
             "Roughly how many tokens per second would llama-3.1-8b at Q4_K_M decode on an rtx-3090 with an 8192-token context?",
             speed("sz-llama8b-3090-speed"), max_steps=6,
             comment=c("sz-llama8b-3090-speed", "speed, +-35 %: the speed model is being refitted")),
    ]
    test = [
        task("sz-qwen32b-on-4090", "sizing",
             "Can qwen2.5-32b at Q4_K_M with a 16384-token context fit in an rtx-4090's memory? Answer yes or no.",
             yes if r("sz-qwen32b-on-4090")["fits"] else no, max_steps=6,
             comment=c("sz-qwen32b-on-4090", "fits")),
        task("sz-gemma27b-memory", "sizing",
             "How many GB of memory does gemma-3-27b take at Q4_K_M with an 8192-token context on an a100-80?",
             mem("sz-gemma27b-memory"), max_steps=6, comment=c("sz-gemma27b-memory", "memory")),
        task("sz-70b-on-m3max", "sizing",
             "Does llama-3.1-70b at Q4_K_M with an 8192-token context fit on the m3-max hardware preset? Answer yes or no.",
             yes if r("sz-70b-on-m3max")["fits"] else no, max_steps=6,
             comment=c("sz-70b-on-m3max", "fits")),
        task("sz-llama8b-4090-maxctx", "sizing",
             "What is the largest context length (in tokens) that llama-3.1-8b at Q4_K_M can use on an rtx-4090?",
             num(r("sz-llama8b-4090-maxctx")["max_ctx"], round(r("sz-llama8b-4090-maxctx")["max_ctx"] * 0.1)),
             max_steps=6, comment=c("sz-llama8b-4090-maxctx", "max ctx, +-10 %")),
        task("sz-qwen7b-m4max-speed", "sizing",
             "About how fast, in tokens per second, would qwen2.5-7b at Q4_K_M decode on the m4-max preset with an 8192-token context?",
             speed("sz-qwen7b-m4max-speed"), max_steps=6,
             comment=c("sz-qwen7b-m4max-speed", "speed, +-35 %: the speed model is being refitted")),
    ]
    return dev, test


def sizing_dev_extra5(task):
    """Dev-only sizing tasks (ids `d5-sz-`) that state the context in the words people use:
    "128k", "65,536 tokens", "16K tokens of context", "ctx=2048", "a 4k context". The test split
    states every context as "an N-token context"; these were written after a test run showed
    the model passing a context the question did not state, to tune the fix on dev."""
    from make_suites import all_of, num, regex, not_contains  # noqa: late import

    recorded = load_recorded()

    def r(key):
        return recorded[key]

    def mem(key, frac=0.06):
        return memory_check(recorded, key, frac)

    def speed(key, frac=0.15):
        # Tighter than the test split's 35 %: at 8192 tokens (the default) the speed is 22 %
        # lower, and a wrong context should not pass.
        a = r(key)["decode_tps"]
        return num(round(a, 1), round(a * frac, 1))

    no = all_of(regex(NO), not_contains("yes"))
    yes = all_of(regex(YES), not_contains("not fit"), not_contains("n't fit"))

    def fit(key):
        return yes if r(key)["fits"] else no

    def c(key, what):
        return recorded_comment(recorded, key, what)

    return [
        task("d5-sz-gemma12b-4090-128k", "sizing",
             "I'd like to run gemma-3-12b at Q4_K_M with a 128k context window on an RTX 4090. Will it fit? Answer yes or no.",
             fit("d5-sz-gemma12b-4090-128k"), max_steps=6,
             comment=c("d5-sz-gemma12b-4090-128k", "fits; at 8k it would")),
        task("d5-sz-70b-h100-64k", "sizing",
             "Can llama-3.1-70b (Q4_K_M) run with 65,536 tokens of context on an h100-sxm? Yes or no.",
             fit("d5-sz-70b-h100-64k"), max_steps=6,
             comment=c("d5-sz-70b-h100-64k", "fits; at 8k it would")),
        task("d5-sz-qwen7b-5060ti-32k", "sizing",
             "How many GB does qwen2.5-7b at Q4_K_M need with a context of 32,768 tokens on an rtx-5060-ti?",
             mem("d5-sz-qwen7b-5060ti-32k"), max_steps=6,
             comment=c("d5-sz-qwen7b-5060ti-32k", "memory, +-6 %")),
        task("d5-sz-llama8b-m2pro-16k", "sizing",
             "llama-3.1-8b, Q8_0, 16K tokens of context, m2-pro preset: how much memory does it need in total?",
             mem("d5-sz-llama8b-m2pro-16k", 0.03), max_steps=6,
             comment=c("d5-sz-llama8b-m2pro-16k", "memory, +-3 %")),
        task("d5-sz-mistral-3090-4k", "sizing",
             "With a 4k context, roughly how fast would mistral-7b at Q4_K_M decode on an rtx-3090, in tokens per second?",
             speed("d5-sz-mistral-3090-4k"), max_steps=6,
             comment=c("d5-sz-mistral-3090-4k", "speed at 4096 tokens, +-15 %")),
        task("d5-sz-qwen14b-a100-2k", "sizing",
             "Using ctx=2048, what is the total memory of qwen2.5-14b at Q4_K_M on an a100-40, in GB?",
             mem("d5-sz-qwen14b-a100-2k", 0.03), max_steps=6,
             comment=c("d5-sz-qwen14b-a100-2k", "memory, +-3 %")),
    ]


def load_recorded():
    with open(RECORDED_PATH, encoding="utf-8") as f:
        return json.load(f)


def summarize(est):
    mc = est.get("max_ctx")
    return {
        "total_gb": est["memory"]["total"] / 1e9,
        "fits": bool(est["fits"]),
        "max_ctx": int(mc["ctx"]) if mc else 0,
        "decode_tps": est["speed"]["decode_at_ctx"],
        "decode_empty_tps": est["speed"]["decode_empty"],
    }


if __name__ == "__main__":
    # sizing.py [--record | --record-new] [BINARY]: print the current values next to the
    # recorded ones; with --record, overwrite sizing_recorded.json with the current values;
    # with --record-new, add the tasks not recorded yet and keep the others as they are.
    args = [a for a in sys.argv[1:] if a not in ("--record", "--record-new")]
    binary = args[0] if args else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "release", "boyd")
    try:
        old = load_recorded()
    except FileNotFoundError:
        old = {}
    now = {}
    for key, q in QUERIES.items():
        now[key] = summarize(measure(binary, *q))
        print(f"{key:<24} recorded {json.dumps(old.get(key))}\n{'':<24} now      {json.dumps(now[key])}")
    if "--record-new" in sys.argv:
        now = {**now, **old}
    if "--record" in sys.argv or "--record-new" in sys.argv:
        with open(RECORDED_PATH, "w", encoding="utf-8") as f:
            json.dump(now, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {RECORDED_PATH}")
