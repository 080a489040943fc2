#!/usr/bin/env bash
# Compile boyd with `--features cuda` on a machine without a GPU and without a CUDA install.
#
#   scripts/check-cuda.sh            # install the CUDA compiler + headers, cargo check --features cuda
#   scripts/check-cuda.sh --build    # also: cargo build --release --features cuda, strip, and
#                                    # target/cuda-check/gpu-bundle/ (binary + CUDA run-time libs +
#                                    # scripts/gpu-validate.sh) ready to copy to a GPU machine
#
# The CUDA compiler comes from Python wheels installed with pip into target/cuda-toolchain/ (git
# ignores target/). The CUDA 12 `-cu12` nvcc wheels ship only ptxas, not nvcc, so this uses the
# CUDA 13 wheels, which install one complete tree (nvcc, cicc, headers, libraries) under
# nvidia/cu13/. cudarc (candle's CUDA binding) supports CUDA 13.0–13.4; 13.0 is pinned because it
# asks the least of the GPU machine's driver (r580 or newer for CUDA 13.0).
#
# Environment:
#   CUDA_COMPUTE_CAP        GPU architecture to compile candle's kernels for (default 90: H100/H200)
#   BOYD_CUDA_TOOLCHAIN     where to install the wheels (default target/cuda-toolchain)
#   BOYD_CUDA_JOBS          nvcc processes in parallel (default: all CPUs)
#   CARGO_TARGET_DIR        default target/cuda-check, so this never fights the main build
#   PYTHON                  Python with pip (default python3)
#   BOYD_GPU_TARGET_CPU     CPU the --build binary is compiled for (default x86-64-v3: AVX2, FMA)
# A CUDA toolkit that is already installed is used instead when CUDA_ROOT (or CUDA_HOME) points
# at it, in which case nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT_DIR=$PWD

BUILD=0
for arg in "$@"; do
    case "$arg" in
        --build) BUILD=1 ;;
        -h | --help)
            sed -n '2,24p' "$0"
            exit 0
            ;;
        *)
            echo "check-cuda.sh: unknown argument $arg (use --build or nothing)" >&2
            exit 2
            ;;
    esac
done

# One CUDA release, every wheel from it. Compile set: enough for `cargo check` (which runs
# candle-kernels' build script, i.e. nvcc). Link set: the libraries the final binary links
# against (cudarc's `dynamic-linking`: cuBLAS, cuBLASLt, cuRAND, NVRTC; cudart from candle-kernels).
CUDA_RELEASE=13.0
COMPILE_WHEELS=(
    "nvidia-cuda-nvcc==13.0.88"
    "nvidia-cuda-crt==13.0.88"
    "nvidia-nvvm==13.0.88"
    "nvidia-cuda-runtime==13.0.96"
    "nvidia-cuda-cccl==13.0.85"
)
LINK_WHEELS=(
    "nvidia-cuda-nvrtc==13.0.88"
    "nvidia-curand==10.4.0.35"
    "nvidia-cublas==13.0.2.14"
)
# Unversioned names the linker needs (`-lcudart` finds libcudart.so, the wheels ship libcudart.so.13).
LINK_LIBS=(cudart cublas cublasLt curand nvrtc)

PYTHON=${PYTHON:-python3}
TOOLCHAIN=${BOYD_CUDA_TOOLCHAIN:-$ROOT_DIR/target/cuda-toolchain}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT_DIR/target/cuda-check}
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
export CUDAFORGE_THREADS=${BOYD_CUDA_JOBS:-$(nproc)}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
GPU_TARGET_CPU=${BOYD_GPU_TARGET_CPU:-x86-64-v3}

t_start=$(date +%s)
stamp() { echo "== [$(($(date +%s) - t_start)) s] $*"; }

# Each set goes into its own --target folder: pip replaces a --target folder's top-level package
# (nvidia/) wholesale, so two installs into one folder would leave only the second.
pip_install() { # set-name wheels...
    local name=$1
    shift
    local stamp_file="$TOOLCHAIN/$name/.installed"
    local want="$*"
    if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$want" ]]; then
        stamp "CUDA $CUDA_RELEASE $name wheels already in $TOOLCHAIN"
        return
    fi
    stamp "pip: installing CUDA $CUDA_RELEASE $name wheels into $TOOLCHAIN"
    if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
        echo "check-cuda.sh: $PYTHON has no pip; install Python 3 with pip, or set PYTHON" >&2
        exit 1
    fi
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --upgrade \
        --target "$TOOLCHAIN/$name" "$@"
    echo "$want" >"$stamp_file"
}

# The driver library (libcuda.so.1) comes with the NVIDIA driver, never with the toolkit wheels.
# Linking needs a libcuda.so that defines every driver entry point cudarc references; this writes
# a stub with no-op bodies and soname libcuda.so.1, like the toolkit's own lib/stubs/libcuda.so.
# At run time the loader finds the real driver's libcuda.so.1 instead.
make_driver_stub() {
    local dir=$1 sys
    local out="$dir/libcuda.so"
    [[ -f "$out" ]] && return
    sys=$(cargo metadata --format-version 1 --locked --features cuda 2>/dev/null |
        "$PYTHON" -c 'import json,sys; m=json.load(sys.stdin); print(next(p["manifest_path"] for p in m["packages"] if p["name"]=="cudarc"))')
    sys="$(dirname "$sys")/src/driver/sys/mod.rs"
    if [[ ! -f "$sys" ]]; then
        echo "check-cuda.sh: cannot find cudarc's driver bindings ($sys); run cargo fetch first" >&2
        exit 1
    fi
    grep -oE '^\s+fn cu[A-Za-z0-9_]+\(' "$sys" | sed -E 's/^\s+fn (cu[A-Za-z0-9_]+)\(/\1/' | sort -u |
        awk '{ printf "int %s(void) { return 999; }\n", $1 }' >"$dir/libcuda-stub.c"
    cc -shared -fPIC -O0 -Wl,-soname,libcuda.so.1 -o "$out" "$dir/libcuda-stub.c"
}

if [[ -n "${CUDA_ROOT:-${CUDA_HOME:-}}" && -x "${CUDA_ROOT:-${CUDA_HOME:-}}/bin/nvcc" ]]; then
    CUDA_DIR=${CUDA_ROOT:-$CUDA_HOME}
    LIB_DIRS=("$CUDA_DIR/lib64" "$CUDA_DIR/lib")
    stamp "using the CUDA toolkit in $CUDA_DIR"
else
    mkdir -p "$TOOLCHAIN"
    pip_install compile "${COMPILE_WHEELS[@]}"
    CUDA_DIR="$TOOLCHAIN/compile/nvidia/cu13"
    # nvcc.profile looks for headers under targets/x86_64-linux/include; cudaforge for lib64.
    mkdir -p "$CUDA_DIR/targets"
    ln -sfn .. "$CUDA_DIR/targets/x86_64-linux"
    ln -sfn lib "$CUDA_DIR/lib64"
    LIB_DIRS=("$CUDA_DIR/lib")
    if [[ $BUILD == 1 ]]; then
        pip_install link "${LINK_WHEELS[@]}"
        LIB_DIRS+=("$TOOLCHAIN/link/nvidia/cu13/lib")
        # ld/: the unversioned names the linker asks for, and the driver stub.
        mkdir -p "$TOOLCHAIN/ld"
        for l in "${LINK_LIBS[@]}"; do
            real=""
            for d in "${LIB_DIRS[@]}"; do
                for f in "$d/lib$l.so."*; do
                    [[ -z "$real" && "$f" =~ lib$l\.so\.[0-9]+$ ]] && real=$f
                done
            done
            if [[ -z "$real" ]]; then
                echo "check-cuda.sh: lib$l.so.N is in none of ${LIB_DIRS[*]}; delete $TOOLCHAIN and run again" >&2
                exit 1
            fi
            ln -sfn "$real" "$TOOLCHAIN/ld/lib$l.so"
        done
        make_driver_stub "$TOOLCHAIN/ld"
        export LIBRARY_PATH="$TOOLCHAIN/ld${LIBRARY_PATH:+:$LIBRARY_PATH}"
    fi
fi

export CUDA_ROOT=$CUDA_DIR CUDA_HOME=$CUDA_DIR CUDA_PATH=$CUDA_DIR
export PATH="$CUDA_DIR/bin:$PATH"
LD_LIBRARY_PATH="$(
    IFS=:
    echo "${LIB_DIRS[*]}"
)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
nvcc --version | tail -2
stamp "toolchain ready (compute capability $CUDA_COMPUTE_CAP, $CUDAFORGE_THREADS nvcc jobs)"

stamp "cargo check --features cuda (CARGO_TARGET_DIR=$CARGO_TARGET_DIR)"
cargo check --locked --features cuda --lib --bins
stamp "cargo check --features cuda passed"

if [[ $BUILD == 1 ]]; then
    # The repo's .cargo/config.toml builds for this CPU (target-cpu=native); the bundle runs on
    # another machine, so it is built for x86-64-v3 (AVX2 + FMA: every H100/H200 host has it).
    stamp "cargo build --release --features cuda (target-cpu=$GPU_TARGET_CPU)"
    RUSTFLAGS="-C target-cpu=$GPU_TARGET_CPU" cargo build --locked --release --features cuda --bin boyd
    bundle="$CARGO_TARGET_DIR/gpu-bundle"
    rm -rf "$bundle"
    mkdir -p "$bundle/lib"
    strip -o "$bundle/boyd" "$CARGO_TARGET_DIR/release/boyd"
    cp scripts/gpu-validate.sh "$bundle/"
    cp tests/data/english.txt "$bundle/"
    # The CUDA run-time libraries the binary needs (see `ldd boyd`), so the GPU machine needs
    # only the NVIDIA driver. libnvrtc-builtins is loaded by NVRTC itself.
    for d in "${LIB_DIRS[@]}"; do
        for f in "$d"/lib{cudart,cublas,cublasLt,curand,nvrtc}.so.[0-9]* "$d"/libnvrtc-builtins.so.*; do
            [[ -e "$f" ]] || continue
            case "$f" in *.alt.*) continue ;; esac
            cp -L "$f" "$bundle/lib/"
        done
    done
    echo "CUDA $CUDA_RELEASE (wheels), compute capability $CUDA_COMPUTE_CAP, target-cpu $GPU_TARGET_CPU, built $(date -u +%FT%TZ) from $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >"$bundle/BUILD-INFO"
    stamp "bundle ready: $bundle ($(du -sh "$bundle" | cut -f1)); copy it to the GPU machine and run ./gpu-validate.sh there"
fi
stamp "done"
