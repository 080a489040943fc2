#!/usr/bin/env python3
"""llama.cpp's greedy continuations of fixed prompts, for boyd's decoder to equal.

    python benches/compare/greedy.py MODEL.gguf OUT.json [--tokens 64] [--threads N]

Tokenizes each prompt the way llama.cpp tokenizes a prompt (BOS as the model asks, special
tokens parsed) and takes the argmax `--tokens` times, feeding each choice back, in two of
llama.cpp's own evaluation modes:

- `batch`: the prompt evaluated in one batch (n_batch = n_ubatch = 1024), as `llama-cli` and
  `llama-server` evaluate a prompt;
- `single`: the prompt fed one token at a time (n_batch = 1), as every later token is.

The two modes run different kernels over the prompt (batched matrix products against
matrix-vector products), so their logits differ in the last bits, and where the best two
logits are nearly tied llama.cpp picks different tokens in the two modes. A prompt whose two
continuations are equal for all `--tokens` steps is `stable`: llama.cpp's greedy answer there
does not depend on how it evaluates, so another implementation can be held to it token for
token. The candidates are tried in the order listed and are not chosen by anything boyd does.

Written per case: the prompt ids, each mode's chosen ids, the batch mode's margin between the
best and second-best logit at each step, its best 16 ids and their logits at each step, the
single mode's logits at those ids when it reads the batch mode's tokens (teacher forcing: how
far llama.cpp's two modes lie apart), and `stable`. `tests/it/gemma3.rs` holds boyd's greedy
tokens to the stable cases and bounds where it may part from the batch mode elsewhere
(tests/data/gemma3-270m.greedy.json). Not part of CI; uses the venv of
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
    turn = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
    return [
        "The capital of France is",
        "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
        "Once upon a time, in a small village by the sea, there lived",
        turn.format("What are the three primary colors?"),
        # Longer than the 512-token sliding window, so the local layers drop early tokens.
        english[:3000],
        "Water boils at a temperature of",
        "import json\n\ndef load_config(path):\n",
        turn.format("Name three planets of the solar system."),
        "In 1969, the first people to walk on the Moon",
        turn.format("Write one sentence about the sea."),
        "The quick brown fox jumps over the lazy dog. The quick brown fox",
        "Dear Sir or Madam,\n\nI am writing to",
    ]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


TOP = 16


def last_logits(llm):
    # The last evaluated row, read from llama.cpp's context directly.
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float64)


def greedy(llm, ids, tokens):
    """The argmax `tokens` times from the prompt `ids`, the top-two margin at each step, and
    the ids and logits of the best `TOP` tokens at each step."""
    llm.reset()
    llm.eval(ids)
    out, margins, tops = [], [], []
    for _ in range(tokens):
        logits = last_logits(llm)
        top = np.argsort(-logits)[:TOP]
        tok = int(top[0])
        out.append(tok)
        margins.append(float(logits[top[0]] - logits[top[1]]))
        tops.append([[int(t), round(float(logits[t]), 4)] for t in top])
        llm.eval([tok])
    return out, margins, tops


def forced(llm, ids, want, tops):
    """Teacher forcing: after the prompt `ids`, feed `want` token by token and read the logits
    of the ids in `tops` (another mode's best tokens) at each step."""
    llm.reset()
    llm.eval(ids)
    rows = []
    for tok, top in zip(want, tops):
        logits = last_logits(llm)
        rows.append([round(float(logits[t]), 4) for t, _ in top])
        llm.eval([tok])
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    modes = {"batch": 1024, "single": 1}
    runs = {}
    for mode, batch in modes.items():
        kw = dict(model_path=args.model, n_ctx=1024, n_batch=batch, n_ubatch=batch, verbose=False)
        if args.threads:
            kw["n_threads"] = args.threads
            kw["n_threads_batch"] = args.threads
        llm = Llama(**kw)
        runs[mode] = []
        for k, text in enumerate(prompts()):
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
            run = greedy(llm, ids, args.tokens)
            if mode == "single":
                # The single mode read along the batch mode's tokens, at its best ids.
                _, batch_ids, _, batch_tops = runs["batch"][k]
                run = (*run, forced(llm, ids, batch_ids, batch_tops))
            runs[mode].append((ids, *run))
        del llm
    cases = []
    for k, text in enumerate(prompts()):
        ids, batch_ids, margins, tops = runs["batch"][k]
        _, single_ids, _, _, single_forced = runs["single"][k]
        assert runs["single"][k][0] == ids
        cases.append(
            {
                "text": text,
                "prompt_ids": ids,
                "greedy_ids": batch_ids,
                "single_ids": single_ids,
                "margins": margins,
                "stable": batch_ids == single_ids,
                "top": tops,
                "single_forced_logits": single_forced,
            }
        )
    record = {
        "model_sha256": sha256(args.model),
        "tokens": args.tokens,
        "llama_cpp_python": llama_cpp.__version__,
        "modes": modes,
        "cases": cases,
    }
    with open(args.out, "w") as f:
        # One line per case: the per-step tables would take tens of thousands of lines.
        f.write("{\n")
        for key, value in record.items():
            if key != "cases":
                f.write(f" {json.dumps(key)}: {json.dumps(value)},\n")
        f.write(' "cases": [\n')
        rows = (json.dumps(c, separators=(",", ":"), ensure_ascii=False) for c in cases)
        f.write(",\n".join("  " + r for r in rows))
        f.write("\n ]\n}\n")
    stable = sum(c["stable"] for c in cases)
    print(f"{stable} of {len(cases)} prompts have the same greedy continuation in both modes")


if __name__ == "__main__":
    main()
