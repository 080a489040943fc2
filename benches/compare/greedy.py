#!/usr/bin/env python3
"""llama.cpp's greedy continuations of five fixed prompts, for boyd's decoder to equal.

    python benches/compare/greedy.py MODEL.gguf OUT.json [--tokens 64] [--threads N]

Tokenizes each prompt the way llama.cpp tokenizes a prompt (BOS as the model asks, special
tokens parsed), evaluates it with llama-cpp-python, then takes the argmax `--tokens` times,
feeding each choice back, and writes the prompt ids, the chosen ids and, per step, the margin
between the best and the second-best logit (a margin near zero is a tie that float rounding may
break either way). The fifth prompt is a long excerpt of tests/data/english.txt, so a model with
sliding-window layers attends past its window there. `tests/it/gemma3.rs` holds boyd's greedy
tokens to the pinned file (tests/data/gemma3-270m.greedy.json). Not part of CI; uses the venv of
benches/compare/llama-cpp.sh.
"""
import argparse
import hashlib
import json
import os

import numpy as np
import llama_cpp
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))


def prompts():
    english = open(os.path.join(HERE, "..", "..", "tests", "data", "english.txt")).read()
    return [
        "The capital of France is",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "Once upon a time, in a small village by the sea, there lived",
        "<start_of_turn>user\nWhat are the three primary colors?<end_of_turn>\n<start_of_turn>model\n",
        english[:3000],
    ]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    kw = dict(model_path=args.model, n_ctx=1024, n_batch=1024, n_ubatch=1024, verbose=False)
    if args.threads:
        kw["n_threads"] = args.threads
        kw["n_threads_batch"] = args.threads
    llm = Llama(**kw)
    cases = []
    for text in prompts():
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        llm.reset()
        llm.eval(ids)
        out, margins = [], []
        for _ in range(args.tokens):
            # The last evaluated row, read from llama.cpp's context directly.
            ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)
            top2 = np.partition(logits, -2)[-2:]
            tok = int(np.argmax(logits))
            out.append(tok)
            margins.append(float(abs(top2[1] - top2[0])))
            llm.eval([tok])
        cases.append({"text": text, "prompt_ids": ids, "greedy_ids": out, "margins": margins})
    record = {
        "model_sha256": sha256(args.model),
        "tokens": args.tokens,
        "llama_cpp_python": llama_cpp.__version__,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
