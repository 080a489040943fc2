#!/usr/bin/env bash
# Phi-3 in boyd against llama.cpp on a synthetic phi3 file (no download): greedy continuations
# of both boyd engines and the chat prompt's token ids, compared with llama-cpp-python's.
#
#   VENV=target/compare/venv benches/compare/phi3-llama-cpp.sh
#
# VENV must hold llama-cpp-python (benches/compare/llama-cpp.sh installs it). Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${VENV:-target/compare/venv}"
out=target/compare/phi3
mkdir -p "$out"
BOYD_PHI3_OUT="$out" cargo test --release --locked --test it phi3_write_llama_cpp_comparison \
    -- --ignored --quiet >/dev/null
"$venv/bin/python" - "$out" <<'PY'
import json, sys
import numpy as np
from llama_cpp import Llama
out = sys.argv[1]
b = json.load(open(f"{out}/boyd.json"))
llm = Llama(model_path=f"{out}/phi3-synth.gguf", n_ctx=512, n_threads=2, logits_all=True, verbose=False)
llm.eval(b["prompt"])
gen = []
for _ in range(len(b["candle"])):
    t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    gen.append(t)
    llm.eval([t])
ids = llm.tokenize(b["chat_text"].encode(), add_bos=False, special=True)
for eng in ("candle", "native"):
    same = sum(1 for x, y in zip(b[eng], gen) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(b[eng], gen)) if x != y), None)
    print(f"greedy {eng} vs llama.cpp: {same}/{len(gen)} equal, first difference at {first}")
print("chat ids equal:", ids == b["chat_ids"])
if ids != b["chat_ids"]:
    print("llama.cpp:", ids)
    print("boyd:     ", b["chat_ids"])
PY
