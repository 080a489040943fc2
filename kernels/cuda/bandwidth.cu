// Memory-bandwidth probe kernels for boyd (loaded by src/hw/cuda.rs, compiled to PTX by build.rs
// when the `cuda` feature is on).
//
// Design, the same for the three kernels:
// - every access moves 16 bytes (int4), the widest single load/store a thread can issue;
// - thread t of the grid touches words t, t + G, t + 2G, ... (G = threads in the grid), so a warp
//   always reads 32 consecutive 16-byte words: 512 contiguous bytes, fully coalesced;
// - the loop is grid-stride, so the host picks a grid that fills the device (every SM at its
//   maximum resident threads) independently of the buffer size;
// - the read loop keeps four independent loads in flight per thread before it uses any of them,
//   which is what saturates HBM rather than the latency of one load at a time.
//
// Sizes are in 16-byte words (`n`); the host rounds buffers to whole words.

#include <stdint.h>

#define UNROLL 4

// Fold one word into the accumulator; XOR keeps every loaded bit live without arithmetic cost.
__device__ __forceinline__ void fold(int4 &acc, const int4 v) {
    acc.x ^= v.x;
    acc.y ^= v.y;
    acc.z ^= v.z;
    acc.w ^= v.w;
}

// Read `n` words of `src`. The folded value is stored only when it equals `magic`, which the host
// chooses so that it never does for the data it wrote; the compiler cannot know that, so it must
// perform every load, yet in practice the kernel writes nothing.
extern "C" __global__ void boyd_bw_read(const int4 *__restrict__ src, uint64_t n, int magic,
                                        int4 *__restrict__ sink) {
    const uint64_t grid = (uint64_t)gridDim.x * blockDim.x;
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int4 acc = make_int4(0, 0, 0, 0);
    for (; i + (UNROLL - 1) * grid < n; i += UNROLL * grid) {
        int4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            v[k] = src[i + k * grid];
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            fold(acc, v[k]);
        }
    }
    for (; i < n; i += grid) {
        fold(acc, src[i]);
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == magic) {
        sink[blockIdx.x] = acc;
    }
}

// Write `value` to all `n` words of `dst`.
extern "C" __global__ void boyd_bw_write(int4 *__restrict__ dst, uint64_t n, int value) {
    const uint64_t grid = (uint64_t)gridDim.x * blockDim.x;
    const int4 w = make_int4(value, value, value, value);
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += grid) {
        dst[i] = w;
    }
}

// Copy `n` words from `src` to `dst` (the buffers must not overlap).
extern "C" __global__ void boyd_bw_copy(const int4 *__restrict__ src, int4 *__restrict__ dst,
                                        uint64_t n) {
    const uint64_t grid = (uint64_t)gridDim.x * blockDim.x;
    uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * grid < n; i += UNROLL * grid) {
        int4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            v[k] = src[i + k * grid];
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            dst[i + k * grid] = v[k];
        }
    }
    for (; i < n; i += grid) {
        dst[i] = src[i];
    }
}
