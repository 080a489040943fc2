#!/usr/bin/env python3
"""One repetition of llama-bench's tests (ppN, tgN, tgN@dD) through llama-cpp-python.

Prints one JSON object: {"test": tokens_per_second, ...}. Random token ids with a fixed seed,
the same thread count for prompt and generation, logits of the last token only, as
`boyd bench` does. Used by llama-cpp.sh; not part of CI.
"""
import json
import random
import sys
import time

import llama_cpp


def parse(test):
    kind, _, rest = test.partition("@d")
    depth = int(rest) if rest else 0
    return kind[:2], int(kind[2:]), depth


def main():
    model, threads, tests = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    ctx = max(parse(t)[1] + parse(t)[2] for t in tests) + 16
    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=ctx,
        n_batch=512,
        n_ubatch=512,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=False,
        verbose=False,
    )
    vocab = llm.n_vocab()
    rng = random.Random(1)
    out = {}
    for test in tests:
        kind, n, depth = parse(test)
        llm.reset()
        llm._ctx.kv_cache_clear()
        if depth:
            llm.eval([rng.randrange(vocab) for _ in range(depth)])
        if kind == "pp":
            toks = [rng.randrange(vocab) for _ in range(n)]
            t0 = time.perf_counter()
            llm.eval(toks)
            dt = time.perf_counter() - t0
        else:
            t0 = time.perf_counter()
            for _ in range(n):
                llm.eval([rng.randrange(vocab)])
            dt = time.perf_counter() - t0
        out[test] = n / dt
    print(json.dumps(out))


if __name__ == "__main__":
    main()
