#!/usr/bin/env bash
# boyd's ReAct loop through llama.cpp's own llama-server (not boyd's runtime):
#   scripts/remote_react_demo.sh [PYTHON] [TASK]
# PYTHON needs the xllamacpp package (pip install xllamacpp); the model is the agent default
# (Qwen2.5-Coder-0.5B-Instruct Q4_K_M) from boyd's store (`boyd models pull qwen2.5-coder-0.5b-instruct`).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-${BOYD_TEST_PYTHON:-python3}}"
TASK="${2:-What is 1234 * 5678?}"
HOME_DIR="${BOYD_HOME:-$HOME/.cache/boyd}"
MODEL="$HOME_DIR/models/qwen2.5-coder-0.5b-instruct/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
PORT="${PORT:-18089}"
exec 3< <(sleep infinity)
"$PY" scripts/llama_server.py "$MODEL" --port "$PORT" --ctx 4096 <&3 > /tmp/boyd-llama-server.out 2>/tmp/boyd-llama-server.err &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  grep -q listening /tmp/boyd-llama-server.out 2>/dev/null && break
  sleep 1
done
cat /tmp/boyd-llama-server.out
time ./target/release/boyd run --backend openai --base-url "http://127.0.0.1:$PORT" "$TASK"
