#!/usr/bin/env python3
"""llama.cpp's perplexity on the very windows and token ids `boyd perplexity` used.

    boyd perplexity TEXT --json --ctx 512 --tokens-out tokens.json -m MODEL > boyd.json
    python benches/compare/perplexity.py MODEL.gguf tokens.json boyd.json [--kv f16] [--threads N]

Reads boyd's record (ctx, stride, bos) and the token ids, rebuilds the same windows (see
src/measure/perplexity.rs: windows of ctx positions with the BOS in front when boyd used one,
`stride` text tokens apart, each token after the first scored exactly once), evaluates each
window from an empty cache with llama-cpp-python (`logits_all=True`), and prints both
perplexities and their ratio as one JSON object. `--kv` sets llama.cpp's K and V cache type
(f32, f16, q8_0; q8_0 V needs flash attention, which is then switched on). A quantized llama.cpp
cache is Hadamard-rotated unless LLAMA_ATTN_ROT_DISABLE=1 (llama.cpp since April 2026); the
record says which, and boyd's `q8_0` record says whether boyd shifted and rotated its keys
(BOYD_KV_KEY_SHIFT / BOYD_KV_ROTATE, read here from the environment). Not part of CI:
`benches/compare/perplexity.sh` runs it for both catalog models.
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
from llama_cpp import Llama

GGML_TYPES = {"f32": 0, "f16": 1, "q8_0": 8}


def windows(n, length, stride):
    """The same windows as boyd's `measure::perplexity::windows`."""
    out, scored_to, begin = [], 1, 0
    while True:
        end = min(begin + length, n)
        out.append((begin, end, max(scored_to, begin + 1)))
        scored_to = end
        if end == n:
            return out
        begin += stride


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokens")
    ap.add_argument("boyd_json")
    ap.add_argument("--kv", default="f16", choices=sorted(GGML_TYPES))
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    tokens = json.load(open(args.tokens))
    boyd = json.load(open(args.boyd_json))
    ctx, stride, bos = boyd["ctx"], boyd["stride"], boyd["bos"]
    off = 1 if bos is not None else 0
    kw = dict(
        model_path=args.model,
        n_ctx=ctx,
        n_batch=ctx,
        n_ubatch=ctx,
        logits_all=True,
        verbose=False,
        type_k=GGML_TYPES[args.kv],
        type_v=GGML_TYPES[args.kv],
    )
    if args.threads:
        kw["n_threads"] = args.threads
        kw["n_threads_batch"] = args.threads
    if args.kv == "q8_0":
        kw["flash_attn"] = True
    llm = Llama(**kw)
    nlls = []
    t0 = time.time()
    ws = windows(len(tokens), ctx - off, stride)
    for i, (begin, end, score_from) in enumerate(ws):
        seq = ([bos] if bos is not None else []) + tokens[begin:end]
        llm.reset()
        llm.eval(seq)
        first_row = score_from - begin + off - 1
        rows = np.asarray(llm.scores[first_row : len(seq) - 1], dtype=np.float64)
        targets = np.asarray(seq[first_row + 1 :])
        m = rows.max(axis=1, keepdims=True)
        lse = np.log(np.exp(rows - m).sum(axis=1)) + m[:, 0]
        nlls.extend((lse - rows[np.arange(len(targets)), targets]).tolist())
        print(f"\rwindow {i + 1}/{len(ws)}", end="", file=sys.stderr)
    print(file=sys.stderr)
    nll = float(np.mean(nlls))
    stderr = float(np.std(nlls) / math.sqrt(len(nlls)))
    ppl = math.exp(nll)
    print(
        json.dumps(
            {
                "model": args.model,
                "ctx": ctx,
                "stride": stride,
                "scored": len(nlls),
                "boyd_scored": boyd["scored"],
                "llama_cpp_kv": args.kv,
                "boyd_kv": boyd.get("kv_dtype"),
                "boyd_engine": boyd.get("engine"),
                "llama_cpp_kv_rotation": args.kv == "q8_0"
                and os.environ.get("LLAMA_ATTN_ROT_DISABLE", "0") in ("", "0"),
                "boyd_kv_key_shift": args.kv == "q8_0"
                and os.environ.get("BOYD_KV_KEY_SHIFT") != "0",
                "boyd_kv_rotation": args.kv == "q8_0" and os.environ.get("BOYD_KV_ROTATE") != "0",
                "llama_cpp_perplexity": ppl,
                "llama_cpp_nll_stderr": stderr,
                "llama_cpp_seconds": time.time() - t0,
                "boyd_perplexity": boyd["perplexity"],
                "ratio": boyd["perplexity"] / ppl,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
