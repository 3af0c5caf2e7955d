/* Element-wise and routing kernels of the baseline (kernels.cu). */
#ifndef LOOM_BASELINE_KERNELS_H
#define LOOM_BASELINE_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax over E fp32 logits per token, top-k (ties to the lower index),
 * optional renormalisation; then per-expert counts (counts must be zero). */
cudaError_t baseline_route(const float *logits, int T, int E, int K, int normalize, int32_t *ids,
                           float *wts, int32_t *counts, cudaStream_t s);

/* Exclusive prefix of counts into cursor, then every (t, j) takes the next
 * row of its expert's group: row_of[t*K+j], and x[t] is copied there. */
cudaError_t baseline_permute(const void *x, int T, int K, int E, size_t row_bytes,
                             const int32_t *ids, const int32_t *counts, int32_t *cursor,
                             int32_t *row_of, void *send, cudaStream_t s);

/* h[r][c] = act(pre[r][c] + bias[c]) (or silu(pre[r][c]) * pre[r][F + c]
 * when gated), rounded to dtype; pre is [rows x (gated ? 2F : F)] in
 * pre_dtype (fp32, or the layer's dtype where cuBLAS cannot write fp32);
 * bias: NULL or [F] in dtype; act < 0 (LOOM_UNSET): none. */
cudaError_t baseline_activate(const void *pre, int pre_dtype, void *h, int64_t rows, int F,
                              int act, int gated, int dtype, const void *bias, cudaStream_t s);

/* y[t] = sum_j wts[t][j] * ret[row_of[t][j]] in fp32, ascending j. */
cudaError_t baseline_combine(const void *ret, const int32_t *row_of, const float *wts, int T,
                             int K, int H, int dtype, void *y, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
