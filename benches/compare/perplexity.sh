#!/usr/bin/env bash
# boyd's perplexity against llama.cpp's on the same tokens and windows, per KV type.
#
#   benches/compare/perplexity.sh [MODEL.gguf] [CTX] [KV types, comma-separated]
#
# Uses the venv of llama-cpp.sh (target/compare/venv, or $VENV), builds boyd in release, runs
# `boyd perplexity` on tests/data/english.txt for each KV type, then
# benches/compare/perplexity.py with llama.cpp's cache of the same type, and prints one table.
# Not part of CI. Environment: THREADS (default: all cores), KERNELS (BOYD_KERNELS for boyd).
# q8_0: boyd's default cache shifts and rotates its keys, llama.cpp's only rotates (and boyd's is
# the more accurate); BOYD_KV_KEY_SHIFT=0 holds boyd to llama.cpp's own format, and
# LLAMA_ATTN_ROT_DISABLE=1 with BOYD_KV_KEY_SHIFT=0 BOYD_KV_ROTATE=0 compares plain q8_0 rows.
set -euo pipefail
cd "$(dirname "$0")/../.."

home="${BOYD_HOME:-$HOME/.cache/boyd}"
model="${1:-$home/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf}"
ctx="${2:-512}"
kvs="${3:-f32,f16,q8_0}"
venv="${VENV:-target/compare/venv}"
threads="${THREADS:-$(nproc)}"
text=tests/data/english.txt

if ! "$venv/bin/python" -c "import llama_cpp, numpy" 2>/dev/null; then
    echo "error: no llama-cpp-python in $venv; run benches/compare/llama-cpp.sh once, or set VENV" >&2
    exit 2
fi
cargo build --release --quiet
out=target/compare/ppl-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "| KV | boyd | llama.cpp | boyd / llama.cpp |"
echo "|---|---:|---:|---:|"
for kv in ${kvs//,/ }; do
    BOYD_KERNELS="${KERNELS:-auto}" RAYON_NUM_THREADS="$threads" target/release/boyd perplexity "$text" \
        -m "$model" --ctx "$ctx" --kv-dtype "$kv" --json --tokens-out "$out/tokens.json" > "$out/boyd-$kv.json"
    "$venv/bin/python" benches/compare/perplexity.py "$model" "$out/tokens.json" "$out/boyd-$kv.json" \
        --kv "$kv" --threads "$threads" > "$out/llama-$kv.json"
    python3 - "$out/llama-$kv.json" "$kv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {r['boyd_perplexity']:.4f} | {r['llama_cpp_perplexity']:.4f} | {r['ratio']:.4f} |")
PY
done
echo "raw records: $out"
