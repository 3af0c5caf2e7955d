/* Routing, permutation, activation and combine kernels of the baseline. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "loom.h"
#include "kernels.h"
#include "../device/ops/topk.cuh"

struct baseline_cfg {
  static constexpr int threads = 256;
  static constexpr int warps = threads / 32;
};

static __device__ __forceinline__ float load_elem(const void *p, size_t i, int dtype) {
  if (dtype == LOOM_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  if (dtype == LOOM_FP16) return __half2float(((const __half *)p)[i]);
  return ((const float *)p)[i];
}

static __device__ __forceinline__ void store_elem(void *p, size_t i, int dtype, float v) {
  if (dtype == LOOM_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
  else if (dtype == LOOM_FP16) ((__half *)p)[i] = __float2half_rn(v);
  else ((float *)p)[i] = v;
}

/* One warp per token: k passes of a warp arg-max in the gate's order
 * (src/device/ops/topk.cuh: NaN lowest, ties to the lower index, so the k
 * ids are always distinct), fp32 softmax (accurate expf) as a framework
 * would do it; a token with a non-finite logit gets NaN weights. */
__global__ void route_kernel(const float *logits, int T, int E, int K, int normalize, int32_t *ids,
                             float *wts, int32_t *counts) {
  const int lane = threadIdx.x & 31;
  const int t = blockIdx.x * baseline_cfg::warps + (threadIdx.x >> 5);
  if (t >= T) return;
  const float *lg = logits + (size_t)t * E;
  float m = -INFINITY;
  int bad = 0;
  for (int e = lane; e < E; e += 32) {
    m = fmaxf(m, lg[e]);
    bad |= !isfinite(lg[e]);
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  bad = __any_sync(0xffffffffu, bad);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(lg[e] - m);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  float sel = 0.f, my_p = 0.f;
  int my_id = 0;
  uint32_t taken = 0; /* bit q: expert lane + 32q already chosen (E <= 1024) */
  for (int j = 0; j < K; j++) {
    float best = 0.f;
    int besti = E;
    for (int e = lane, q = 0; e < E; e += 32, q++) {
      const float v = lg[e];
      if (!(taken >> q & 1u) && topk_above(v, e, best, besti, E)) { best = v; besti = e; }
    }
    besti = topk_warp_pick(&best, besti, E); /* < E: K <= E leaves one untaken */
    if ((besti & 31) == lane) taken |= 1u << (besti >> 5);
    const float pj = expf(best - m) / sum;
    sel += pj;
    if (lane == j) { my_id = besti; my_p = pj; }
  }
  if (lane < K) {
    ids[(size_t)t * K + lane] = my_id;
    wts[(size_t)t * K + lane] = bad ? __int_as_float(0x7fc00000) : normalize ? my_p / sel : my_p;
    atomicAdd(&counts[my_id], 1);
  }
}

extern "C" cudaError_t baseline_route(const float *logits, int T, int E, int K, int normalize,
                                      int32_t *ids, float *wts, int32_t *counts, cudaStream_t s) {
  if (T == 0) return cudaSuccess;
  const int blocks = (T + baseline_cfg::warps - 1) / baseline_cfg::warps;
  route_kernel<<<blocks, baseline_cfg::threads, 0, s>>>(logits, T, E, K, normalize, ids, wts, counts);
  return cudaGetLastError();
}

/* One block: cursor = exclusive prefix of counts (E is small). */
__global__ void scan_kernel(const int32_t *counts, int E, int32_t *cursor) {
  if (threadIdx.x == 0) {
    int run = 0;
    for (int e = 0; e < E; e++) {
      cursor[e] = run;
      run += counts[e];
    }
  }
}

/* One warp per (t, j): claim a row of the expert's group, copy x[t] there. */
__global__ void permute_kernel(const char *x, int TK, int K, size_t row_bytes, const int32_t *ids,
                               int32_t *cursor, int32_t *row_of, char *send) {
  const int lane = threadIdx.x & 31;
  const int i = blockIdx.x * baseline_cfg::warps + (threadIdx.x >> 5);
  if (i >= TK) return;
  int row = 0;
  if (lane == 0) {
    row = atomicAdd(&cursor[ids[i]], 1);
    row_of[i] = row;
  }
  row = __shfl_sync(0xffffffffu, row, 0);
  const int4 *src = (const int4 *)(x + (size_t)(i / K) * row_bytes);
  int4 *dst = (int4 *)(send + (size_t)row * row_bytes);
  for (size_t v = lane; v < row_bytes / 16; v += 32) dst[v] = src[v];
}

extern "C" cudaError_t baseline_permute(const void *x, int T, int K, int E, size_t row_bytes,
                                        const int32_t *ids, const int32_t *counts,
                                        int32_t *cursor, int32_t *row_of, void *send,
                                        cudaStream_t s) {
  scan_kernel<<<1, 32, 0, s>>>(counts, E, cursor);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || T == 0) return e;
  const int TK = T * K;
  permute_kernel<<<(TK + baseline_cfg::warps - 1) / baseline_cfg::warps, baseline_cfg::threads, 0,
                   s>>>((const char *)x, TK, K, row_bytes, ids, cursor, row_of, (char *)send);
  return cudaGetLastError();
}

__global__ void activate_kernel(const void *pre, int pre_dtype, void *h, int64_t rows, int F,
                                int act, int gated, int dtype, const void *bias) {
  const int64_t n = rows * F;
  const int ld = gated ? 2 * F : F;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / F;
    const int c = (int)(i - r * F);
    const float v = load_elem(pre, (size_t)(r * ld + c), pre_dtype) +
                    (bias != NULL ? load_elem(bias, (size_t)c, dtype) : 0.f);
    float out;
    if (act < 0) {
      out = v;
    } else if (gated) {
      out = v / (1.f + __expf(-v)) * load_elem(pre, (size_t)(r * ld + F + c), pre_dtype);
    } else if (act == LOOM_ACT_RELU) {
      out = v > 0.f ? v : 0.f;
    } else if (act == LOOM_ACT_GELU) {
      out = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    } else {
      out = v / (1.f + __expf(-v));
    }
    store_elem(h, (size_t)i, dtype, out);
  }
}

extern "C" cudaError_t baseline_activate(const void *pre, int pre_dtype, void *h, int64_t rows,
                                         int F, int act, int gated, int dtype, const void *bias,
                                         cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const int64_t n = rows * F;
  const int blocks = (int)((n + baseline_cfg::threads - 1) / baseline_cfg::threads < 65536
                               ? (n + baseline_cfg::threads - 1) / baseline_cfg::threads
                               : 65536);
  activate_kernel<<<blocks, baseline_cfg::threads, 0, s>>>(pre, pre_dtype, h, rows, F, act, gated,
                                                             dtype, bias);
  return cudaGetLastError();
}

__global__ void combine_kernel(const void *ret, const int32_t *row_of, const float *wts, int T,
                               int K, int H, int dtype, void *y) {
  const int64_t n = (int64_t)T * H;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t t = i / H;
    const int c = (int)(i - t * H);
    float acc = 0.f;
    for (int j = 0; j < K; j++)
      acc += wts[t * K + j] * load_elem(ret, (size_t)row_of[t * K + j] * H + c, dtype);
    store_elem(y, (size_t)i, dtype, acc);
  }
}

extern "C" cudaError_t baseline_combine(const void *ret, const int32_t *row_of, const float *wts,
                                        int T, int K, int H, int dtype, void *y, cudaStream_t s) {
  if (T == 0) return cudaSuccess;
  const int64_t n = (int64_t)T * H;
  const int64_t want = (n + baseline_cfg::threads - 1) / baseline_cfg::threads;
  combine_kernel<<<(int)(want < 65536 ? want : 65536), baseline_cfg::threads, 0, s>>>(
      ret, row_of, wts, T, K, H, dtype, y);
  return cudaGetLastError();
}
