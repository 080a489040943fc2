// Memory-bandwidth probe kernels for boyd on Apple GPUs (compiled at run time from this source by
// src/hw/metal.rs; the source is embedded in the binary with include_str!).
//
// The same design as kernels/cuda/bandwidth.cu: 16-byte accesses (uint4), consecutive threads on
// consecutive words (coalesced), a grid-stride loop so the host picks a grid that fills the GPU
// independently of the buffer size, and four loads in flight per thread in the read and copy
// loops. Sizes are in 16-byte words; a buffer of up to 64 GiB fits a 32-bit word count.

#include <metal_stdlib>
using namespace metal;

#define UNROLL 4u

// Read `n` words of `src`; write the XOR of everything read to `sink` only when it equals
// `magic`, which the host picks so that it never does: every load is live, nothing is written.
kernel void boyd_bw_read(device const uint4 *src [[buffer(0)]],
                         constant uint &n [[buffer(1)]],
                         constant uint &magic [[buffer(2)]],
                         device uint4 *sink [[buffer(3)]],
                         uint gid [[thread_position_in_grid]],
                         uint grid [[threads_per_grid]],
                         uint group [[threadgroup_position_in_grid]]) {
    uint4 acc = uint4(0u);
    uint i = gid;
    for (; i + (UNROLL - 1u) * grid < n; i += UNROLL * grid) {
        const uint4 v0 = src[i];
        const uint4 v1 = src[i + grid];
        const uint4 v2 = src[i + 2u * grid];
        const uint4 v3 = src[i + 3u * grid];
        acc ^= v0 ^ v1 ^ v2 ^ v3;
    }
    for (; i < n; i += grid) {
        acc ^= src[i];
    }
    if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == magic) {
        sink[group] = acc;
    }
}

// Write `value` to all `n` words of `dst`.
kernel void boyd_bw_write(device uint4 *dst [[buffer(0)]],
                          constant uint &n [[buffer(1)]],
                          constant uint &value [[buffer(2)]],
                          uint gid [[thread_position_in_grid]],
                          uint grid [[threads_per_grid]]) {
    const uint4 w = uint4(value);
    for (uint i = gid; i < n; i += grid) {
        dst[i] = w;
    }
}

// Copy `n` words from `src` to `dst` (distinct buffers).
kernel void boyd_bw_copy(device const uint4 *src [[buffer(0)]],
                         device uint4 *dst [[buffer(1)]],
                         constant uint &n [[buffer(2)]],
                         uint gid [[thread_position_in_grid]],
                         uint grid [[threads_per_grid]]) {
    uint i = gid;
    for (; i + (UNROLL - 1u) * grid < n; i += UNROLL * grid) {
        const uint4 v0 = src[i];
        const uint4 v1 = src[i + grid];
        const uint4 v2 = src[i + 2u * grid];
        const uint4 v3 = src[i + 3u * grid];
        dst[i] = v0;
        dst[i + grid] = v1;
        dst[i + 2u * grid] = v2;
        dst[i + 3u * grid] = v3;
    }
    for (; i < n; i += grid) {
        dst[i] = src[i];
    }
}
