/*
 * stream-bandwidth.c: an independent STREAM-like memory bandwidth measurement, used to check
 * `boyd probe` (test-only; see scripts/stream-bandwidth.sh).
 *
 * Kernels, each over arrays far larger than the caches, OpenMP-parallel, first-touched by the
 * thread that later reads them:
 *   read   s += a[i]              (bytes: 8 N)      -- what `boyd probe` measures
 *   copy   c[i] = a[i]            (bytes: 16 N)
 *   triad  a[i] = b[i] + q * c[i] (bytes: 24 N)     -- STREAM's headline figure
 * Each kernel runs NTIMES; the best time is reported (STREAM's convention), with the spread.
 *
 * Usage: stream-bandwidth [MiB per array, default 512] [runs, default 8]
 */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static double now(void) { return omp_get_wtime(); }

static void report(const char *name, double bytes, const double *t, int n) {
    double best = t[0], worst = t[0], sum = 0;
    for (int i = 0; i < n; i++) {
        if (t[i] < best) best = t[i];
        if (t[i] > worst) worst = t[i];
        sum += t[i];
    }
    printf("%-6s best %8.2f GB/s  mean %8.2f GB/s  spread %5.1f %%\n", name, bytes / best / 1e9,
           bytes / (sum / n) / 1e9, (1.0 - best / worst) * 100.0);
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 512;
    int runs = argc > 2 ? atoi(argv[2]) : 8;
    if (mib < 4 || runs < 1) {
        fprintf(stderr, "usage: %s [MiB >= 4] [runs >= 1]\n", argv[0]);
        return 2;
    }
    size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    double *t = malloc((size_t)(runs + 1) * sizeof *t);
    if (!a || !b || !c || !t) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        a[i] = i | 1;
        b[i] = 2;
        c[i] = 3;
    }
    printf("threads %d, %zu MiB per array, %d runs (+1 warm-up)\n", omp_get_max_threads(), mib, runs);

    volatile uint64_t sink = 0;
    for (int r = 0; r <= runs; r++) {
        uint64_t s = 0;
        double t0 = now();
#pragma omp parallel for schedule(static) reduction(+ : s)
        for (size_t i = 0; i < n; i++) s += a[i];
        t[r] = now() - t0;
        sink += s;
    }
    report("read", 8.0 * n, t + 1, runs);

    for (int r = 0; r <= runs; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) c[i] = a[i];
        t[r] = now() - t0;
    }
    report("copy", 16.0 * n, t + 1, runs);

    for (int r = 0; r <= runs; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3 * c[i];
        t[r] = now() - t0;
    }
    report("triad", 24.0 * n, t + 1, runs);
    (void)sink;
    free(a);
    free(b);
    free(c);
    free(t);
    return 0;
}
