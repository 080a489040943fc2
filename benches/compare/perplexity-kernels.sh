#!/usr/bin/env bash
# boyd's perplexity for every CPU kernel set × KV type on one model (no llama.cpp run: compare
# with the llama.cpp column of benches/compare/perplexity.sh on the same text and ctx).
#
#   benches/compare/perplexity-kernels.sh MODEL.gguf [CTX] [kernel sets] [KV types] [LIMIT]
#
# Kernel sets and KV types are comma-separated (default scalar,avx2,vnni and f32,f16,q8_0; a set
# this CPU lacks is refused by `--kernels`). LIMIT (default: all) keeps only the first LIMIT
# tokens of tests/data/english.txt. Runs `target/release/boyd` under `nice -n 19`; prints one
# markdown row per run and keeps the JSON records in target/compare/ppl-kernels-*.
set -euo pipefail
cd "$(dirname "$0")/../.."

model="${1:?usage: $0 MODEL.gguf [CTX] [kernel sets] [KV types] [LIMIT]}"
ctx="${2:-512}"
sets="${3:-scalar,avx2,vnni}"
kvs="${4:-f32,f16,q8_0}"
limit="${5:-}"
text=tests/data/english.txt
out=target/compare/ppl-kernels-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "| kernels | KV | perplexity | ± | scored tokens |"
echo "|---|---|---:|---:|---:|"
for k in ${sets//,/ }; do
    for kv in ${kvs//,/ }; do
        rec="$out/$(basename "$model" .gguf)-$k-$kv.json"
        nice -n 19 target/release/boyd perplexity "$text" -m "$model" --ctx "$ctx" \
            --kernels "$k" --kv-dtype "$kv" ${limit:+--limit "$limit"} --json > "$rec" 2> "$rec.log"
        python3 - "$rec" "$k" "$kv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} ({r['engine']}) | {sys.argv[3]} | {r['perplexity']:.4f} | "
      f"{r['perplexity'] * r['nll_stderr']:.4f} | {r['scored']} |")
PY
    done
done
echo "raw records: $out"
