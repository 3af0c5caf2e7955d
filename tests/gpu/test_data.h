/*
 * Test data helpers shared by the GPU tests: deterministic random streams
 * (splitmix64, keyed so every process can rebuild what any rank holds),
 * counting poisoned (unwritten) output elements, and uploads of float host
 * arrays in a loom dtype, weights in the default layout
 * (LOOM_WEIGHTS_OUT_IN).
 */
#ifndef LOOM_TEST_GPU_TEST_DATA_H
#define LOOM_TEST_GPU_TEST_DATA_H

#include <stdint.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "reference/reference.h"
#include "../check.h"

typedef struct {
  uint64_t s;
} rng_t;

/* The stream of (seed, key, kind, index): a pure function of the four. */
static inline rng_t rng_stream(uint64_t seed, uint64_t key, int kind, int index) {
  rng_t r;
  r.s = ref_splitmix64(seed ^ ref_splitmix64(key ^ ref_splitmix64(((uint64_t)kind << 32) ^
                                                                  (uint64_t)(uint32_t)index)));
  return r;
}

static inline uint64_t rng_next(rng_t *r) {
  r->s += 0x9e3779b97f4a7c15ull;
  return ref_splitmix64(r->s);
}

static inline double rng_unit(rng_t *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; } /* [0,1) */
static inline double rng_sym(rng_t *r) { return 2.0 * rng_unit(r) - 1.0; }                  /* [-1,1) */
static inline int rng_int(rng_t *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }      /* [0,n) */

/* T tokens of caller routing from r: k distinct experts per token (a
 * partial Fisher-Yates shuffle of 0..E-1; pool: E ints of scratch), weights
 * in [0.05, 1). */
static inline void gen_random_routing(rng_t *r, int E, int k, int T, int *pool, int32_t *ids, float *wts) {
  for (int t = 0; t < T; t++) {
    for (int e = 0; e < E; e++) pool[e] = e;
    for (int j = 0; j < k; j++) {
      const int q = j + rng_int(r, E - j), s = pool[q];
      pool[q] = pool[j];
      pool[j] = s;
      ids[(size_t)t * k + j] = s;
      wts[(size_t)t * k + j] = (float)(0.05 + 0.95 * rng_unit(r));
    }
  }
}

static inline size_t dtype_bytes(int dtype) { return dtype == LOOM_FP32 ? 4 : 2; }

/* Elements of `n` (each `size` bytes) at p that are still all 0xFF (the
 * poison the tests fill outputs with: NaN in every dtype). */
static inline size_t count_poison(const unsigned char *p, size_t n, size_t size) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) {
    size_t b = 0;
    while (b < size && p[i * size + b] == 0xFF) b++;
    c += b == size;
  }
  return c;
}

/* n floats rounded and packed to `dtype`, copied to device memory. */
static inline int upload(void *dev, const float *src, size_t n, int dtype) {
  if (n == 0) return 0;
  void *stage = malloc(n * 4);
  CHECK(stage != NULL, "host allocation");
  if (stage == NULL) return -1;
  ref_pack_array(stage, src, n, dtype);
  const cudaError_t e = cudaMemcpy(dev, stage, n * dtype_bytes(dtype), cudaMemcpyHostToDevice);
  free(stage);
  CHECK(e == cudaSuccess, "upload: %s", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : -1;
}

/* count matrices of [rows x cols] (generated [in x out], the reference's
 * layout) uploaded in the default weight layout, LOOM_WEIGHTS_OUT_IN: each
 * transposed. */
static inline int upload_weight(void *dev, const float *src, size_t count, size_t rows, size_t cols,
                         int dtype) {
  const size_t n = count * rows * cols;
  if (n == 0) return 0;
  float *t = malloc(n * sizeof(float));
  CHECK(t != NULL, "host allocation");
  if (t == NULL) return -1;
  ref_transpose(t, src, count, rows, cols);
  const int rc = upload(dev, t, n, dtype);
  free(t);
  return rc;
}

#endif
