#!/usr/bin/env bash
# Side-by-side speed of boyd and llama.cpp on the same GGUF, machine and thread count.
#
#   benches/compare/llama-cpp.sh [MODEL.gguf] [REPS]
#
# Installs llama-cpp-python (which builds llama.cpp from source for this CPU, a few minutes
# the first time) into target/compare/venv, builds boyd in release, then runs the tests
# interleaved — llama.cpp, boyd, llama.cpp, boyd, ... — each repetition a fresh process, and
# prints the medians and the boyd / llama.cpp ratio per test. Not part of CI.
#
# Environment: TESTS (default pp512,tg128,tg128@d2048), THREADS (default: all cores), VENV (where
# llama-cpp-python lives, default target/compare/venv), CMAKE_ARGS (llama.cpp's build flags for a
# fresh VENV; default: native, or AVX-512 without AMX on an AMX CPU), BOYD_KERNELS (boyd's kernel
# set). To compare the AVX2 instruction set alone on an AVX-512 host:
#   VENV=target/compare/venv-avx2 CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
#     -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" BOYD_KERNELS=avx2 benches/compare/llama-cpp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

home="${BOYD_HOME:-$HOME/.cache/boyd}"
model="${1:-$home/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf}"
reps="${2:-3}"
tests="${TESTS:-pp512,tg128,tg128@d2048}"
threads="${THREADS:-$(nproc)}"
venv="${VENV:-target/compare/venv}"

if [ ! -f "$model" ]; then
    echo "error: no model file at $model; fetch it with: cargo run --release -- models pull smollm2-135m-instruct" >&2
    exit 2
fi
if ! "$venv/bin/python" -c "import llama_cpp" 2>/dev/null; then
    echo "installing llama-cpp-python into $venv (builds llama.cpp; several minutes)..." >&2
    python3 -m venv "$venv"
    cmake_args="-DGGML_NATIVE=ON"
    if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
        # On an AMX Xeon the -march=native build of llama-cpp-python 0.3.36 crashes (SIGSEGV in
        # llama_decode on the first batch, both catalog models): build for AVX-512 without AMX.
        cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON"
        echo "AMX CPU: building llama.cpp without AMX ($cmake_args)" >&2
    fi
    CMAKE_ARGS="${CMAKE_ARGS:-$cmake_args}" "$venv/bin/pip" install --quiet --no-cache-dir llama-cpp-python
fi
cargo build --release --quiet
out=target/compare/run-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

for r in $(seq 1 "$reps"); do
    echo "repetition $r/$reps" >&2
    "$venv/bin/python" benches/compare/llama_cpp_bench.py "$model" "$threads" "$tests" > "$out/llama-$r.json"
    RAYON_NUM_THREADS="$threads" target/release/boyd bench -m "$model" --impl boyd --json \
        --no-warmup -r 1 -t "$tests" > "$out/boyd-$r.json"
done

python3 - "$out" "$reps" "$tests" "$threads" "$model" <<'PY'
import json, statistics, sys, platform
out, reps, tests, threads, model = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","), sys.argv[4], sys.argv[5]
llama = {t: [] for t in tests}
boyd = {t: [] for t in tests}
build = None
for r in range(1, reps + 1):
    for t, v in json.load(open(f"{out}/llama-{r}.json")).items():
        llama[t].append(v)
    for rec in json.load(open(f"{out}/boyd-{r}.json")):
        boyd[rec["test"].replace(" ", "")].extend(rec["samples_tps"])
        build = rec["build"]
print(f"model {model}")
print(f"threads {threads} · boyd engine {build['engine']} (kernels {build['kernels']}) · CPU flags {','.join(build['simd'])}")
print(f"medians of {reps} interleaved repetitions (tokens/s)")
print()
print(f"| test | llama.cpp | boyd | boyd / llama.cpp |")
print(f"|---|---:|---:|---:|")
summary = {}
for t in tests:
    a, b = statistics.median(llama[t]), statistics.median(boyd[t])
    summary[t] = {"llama_cpp": llama[t], "boyd": boyd[t], "ratio": b / a}
    print(f"| {t} | {a:.1f} | {b:.1f} | {b / a:.2f}x |")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(f"\nraw samples: {out}/summary.json")
PY
