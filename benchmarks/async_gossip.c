/* Reference loop for dtsim bench: asynchronous pairwise gossip averaging in plain C.
 *
 * The machine's yardstick for dtsim's async gossip engines: n nodes on the
 * complete graph, each waking on its own Poisson clock of rate 1 (simulated as
 * one clock of rate n that picks the node uniformly: the same law), a uniform
 * partner among the other n - 1 nodes, and the pairwise exchange
 * x_i <- (x_i + v_j) / 2, x_j <- (x_j + v_i) / 2 of the values v sent at the
 * wake. With a latency > 0 the exchange is delivered `latency` later through a
 * binary heap of deliveries in flight; due deliveries are applied before each
 * wake, as in dtsim.
 *
 *   cc -O2 -o async_gossip benchmarks/async_gossip.c -lm
 *   ./async_gossip N HORIZON LATENCY SEED
 * prints one JSON line: nodes, horizon, latency, exchanges, seconds (CPU time),
 * exchanges_per_s, checksum (the final mean, a guard against dead-code removal).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t s[4];

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t next_u64(void) { /* xoshiro256** */
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
}

static inline double uniform(void) { return (next_u64() >> 11) * 0x1.0p-53; }

static void seed_all(uint64_t seed) { /* splitmix64 */
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        s[i] = z ^ (z >> 31);
    }
}

typedef struct { double due; int i, j; double vi, vj; } Delivery;

static Delivery *heap;
static size_t heap_n, heap_cap;

static void push(Delivery d) {
    if (heap_n == heap_cap) {
        heap_cap = heap_cap ? 2 * heap_cap : 1024;
        heap = realloc(heap, heap_cap * sizeof *heap);
        if (!heap) { perror("realloc"); exit(1); }
    }
    size_t k = heap_n++;
    while (k > 0) {
        size_t p = (k - 1) / 2;
        if (heap[p].due <= d.due) break;
        heap[k] = heap[p];
        k = p;
    }
    heap[k] = d;
}

static Delivery pop(void) {
    Delivery top = heap[0], last = heap[--heap_n];
    size_t k = 0;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= heap_n) break;
        if (c + 1 < heap_n && heap[c + 1].due < heap[c].due) c++;
        if (last.due <= heap[c].due) break;
        heap[k] = heap[c];
        k = c;
    }
    if (heap_n) heap[k] = last;
    return top;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s N HORIZON LATENCY SEED\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]);
    double horizon = atof(argv[2]), latency = atof(argv[3]);
    seed_all((uint64_t)atoll(argv[4]));
    if (n < 2 || !(horizon > 0) || latency < 0) {
        fprintf(stderr, "need N >= 2, HORIZON > 0, LATENCY >= 0\n");
        return 2;
    }
    double *x = malloc(n * sizeof *x);
    if (!x) { perror("malloc"); return 1; }
    for (long i = 0; i < n; i++) x[i] = uniform();
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    double now = 0.0, rate = (double)n;
    long long exchanges = 0;
    for (;;) {
        now += -log1p(-uniform()) / rate;
        if (now > horizon) break;
        while (heap_n && heap[0].due <= now) {
            Delivery d = pop();
            x[d.i] = (x[d.i] + d.vj) * 0.5;
            x[d.j] = (x[d.j] + d.vi) * 0.5;
            exchanges++;
        }
        long i = (long)(uniform() * n);
        long j = (long)(uniform() * (n - 1));
        j += j >= i;
        if (latency > 0) {
            Delivery d = {now + latency, (int)i, (int)j, x[i], x[j]};
            push(d);
        } else {
            double m = (x[i] + x[j]) * 0.5;
            x[i] = m;
            x[j] = m;
            exchanges++;
        }
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    double sec = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    double sum = 0.0;
    for (long i = 0; i < n; i++) sum += x[i];
    printf("{\"nodes\": %ld, \"horizon\": %g, \"latency\": %g, \"exchanges\": %lld, "
           "\"seconds\": %.6f, \"exchanges_per_s\": %.6g, \"checksum\": %.17g}\n",
           n, horizon, latency, exchanges, sec, sec > 0 ? exchanges / sec : 0.0, sum / n);
    free(x);
    free(heap);
    return 0;
}
