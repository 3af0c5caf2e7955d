/* The bulk-synchronous MoE baseline: cuBLAS + NCCL, host in the loop. */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "baseline.h"
#include "kernels.h"
#include "../host/internal.h"

struct loom_baseline {
  ncclComm_t nccl;
  int rank, R, device;
  int H, F, E, K, El, Tmax, act, dtype, math, normalize, gated;
  size_t es, row_bytes;
  int64_t recv_max;         /* rows: R * Tmax * min(K, El) */
  cublasHandle_t blas;
  const void *wg, *w1, *w2;
  /* device */
  float *logits;            /* [Tmax][E] */
  int32_t *ids, *row_of;    /* [Tmax*K] */
  float *wts;               /* [Tmax*K] */
  int32_t *counts, *cursor; /* [E] this rank's rows per expert; scratch */
  int32_t *recv_counts;     /* [R][El] rows per (source, local expert) */
  void *send, *ret;         /* [Tmax*K][H] grouped by expert id */
  void *recv, *out;         /* [recv_max][H] grouped by (source, local expert) */
  float *pre;               /* [recv_max][F or 2F] GEMM0 output, fp32 */
  void *h;                  /* [recv_max][F] after the activation */
  /* host */
  int32_t *h_counts, *h_recv; /* [E] each */
};

#define BLAS_CHECK(call)                                                       \
  do {                                                                         \
    cublasStatus_t s_ = (call);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      res = loom_set_error(LOOM_CUDA_ERROR, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, \
                           #call, (int)s_);                                    \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

static cudaDataType_t cuda_type(int dtype) {
  return dtype == LOOM_BF16 ? CUDA_R_16BF : dtype == LOOM_FP16 ? CUDA_R_16F : CUDA_R_32F;
}
static ncclDataType_t nccl_type(int dtype) {
  return dtype == LOOM_BF16 ? ncclBfloat16 : dtype == LOOM_FP16 ? ncclFloat16 : ncclFloat32;
}

static void release(struct loom_baseline *b) {
  void *dev[] = {b->logits, b->ids, b->row_of, b->wts, b->counts, b->cursor, b->recv_counts,
                 b->send, b->ret, b->recv, b->out, b->pre, b->h};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i] != NULL) cudaFree(dev[i]);
  if (b->h_counts != NULL) cudaFreeHost(b->h_counts);
  if (b->h_recv != NULL) cudaFreeHost(b->h_recv);
  if (b->blas != NULL) cublasDestroy(b->blas);
  free(b);
}

loom_result_t loom_baseline_create(ncclComm_t nccl, const loom_moe_config_t *config,
                                   loom_baseline_t *out) {
  loom_clear_error();
  const char *fn = "loom_baseline_create";
  LOOM_ARG(out != NULL, fn, "out is NULL");
  *out = NULL;
  LOOM_ARG(nccl != NULL, fn, "nccl is NULL");
  int R = 0;
  size_t ws;
  loom_result_t res = LOOM_SUCCESS;
  if (ncclCommCount(nccl, &R) != ncclSuccess)
    return loom_set_error(LOOM_NCCL_ERROR, "%s: ncclCommCount failed", fn);
  /* the fused layer's validation is the contract for both */
  res = loom_moe_workspace_bytes(config, R, &ws, NULL);
  if (res != LOOM_SUCCESS) {
    char why[768];
    loom_copy_error(why, sizeof why);
    return loom_set_error(res, "%s: %s", fn, why);
  }
  LOOM_ARG(config->capacity_factor <= 0.0, fn,
           "capacity_factor %g: the baseline is dropless only", config->capacity_factor);
  struct loom_baseline *b = (struct loom_baseline *)calloc(1, sizeof *b);
  if (b == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
  b->nccl = nccl;
  b->R = R;
  ncclCommUserRank(nccl, &b->rank);
  ncclCommCuDevice(nccl, &b->device);
  b->H = (int)config->hidden;
  b->F = (int)config->ffn;
  b->E = (int)config->num_experts;
  b->K = (int)config->top_k;
  b->El = b->E / R;
  b->Tmax = (int)config->max_tokens_per_rank;
  b->act = config->activation == LOOM_UNSET ? LOOM_ACT_SILU : config->activation;
  b->dtype = config->dtype == LOOM_UNSET ? LOOM_BF16 : config->dtype;
  b->math = config->fp32_math == LOOM_UNSET ? LOOM_MATH_TF32 : config->fp32_math;
  b->normalize = config->normalize_top_k == LOOM_UNSET ? 1 : config->normalize_top_k;
  b->gated = b->act == LOOM_ACT_SWIGLU;
  loom_dtype_size((loom_dtype_t)b->dtype, &b->es);
  b->row_bytes = (size_t)b->H * b->es;
  b->recv_max = (int64_t)R * b->Tmax * (b->K < b->El ? b->K : b->El);
  const size_t tk = (size_t)b->Tmax * b->K, fw = (size_t)b->F * (b->gated ? 2 : 1);
  CUDA_CHECK(cudaSetDevice(b->device));
  BLAS_CHECK(cublasCreate(&b->blas));
  CUDA_CHECK(cudaMalloc((void **)&b->logits, (size_t)b->Tmax * b->E * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&b->ids, tk * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc((void **)&b->row_of, tk * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc((void **)&b->wts, tk * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&b->counts, (size_t)b->E * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc((void **)&b->cursor, (size_t)b->E * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc((void **)&b->recv_counts, (size_t)b->E * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&b->send, tk * b->row_bytes));
  CUDA_CHECK(cudaMalloc(&b->ret, tk * b->row_bytes));
  CUDA_CHECK(cudaMalloc(&b->recv, (size_t)b->recv_max * b->row_bytes));
  CUDA_CHECK(cudaMalloc(&b->out, (size_t)b->recv_max * b->row_bytes));
  CUDA_CHECK(cudaMalloc((void **)&b->pre, (size_t)b->recv_max * fw * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&b->h, (size_t)b->recv_max * b->F * b->es));
  CUDA_CHECK(cudaHostAlloc((void **)&b->h_counts, (size_t)b->E * sizeof(int32_t), 0));
  CUDA_CHECK(cudaHostAlloc((void **)&b->h_recv, (size_t)b->E * sizeof(int32_t), 0));
  *out = b;
  return LOOM_SUCCESS;
fail:
  release(b);
  return res;
}

loom_result_t loom_baseline_set_weights(loom_baseline_t b, const void *gate_w, const void *w1,
                                        const void *w2) {
  loom_clear_error();
  const char *fn = "loom_baseline_set_weights";
  LOOM_ARG(b != NULL, fn, "baseline is NULL");
  LOOM_ARG(gate_w != NULL && w1 != NULL && w2 != NULL, fn, "gate_w, w1 and w2 must be set");
  b->wg = gate_w;
  b->w1 = w1;
  b->w2 = w2;
  return LOOM_SUCCESS;
}

/* Row-major C[m x n] = A[m x k] * B[k x n] with cuBLAS (column-major): the
 * same bytes are C^T = B^T * A^T. C is fp32 or the layer's dtype. tf32:
 * let fp32 inputs run on TF32 tensor cores (the experts under
 * LOOM_MATH_TF32; never the router, whose top-k TF32 error would flip). */
static cublasStatus_t gemm_rm(const struct loom_baseline *b, int m, int n, int k, const void *A,
                              const void *B, void *C, cudaDataType_t ctype, int tf32) {
  const float one = 1.f, zero = 0.f;
  const cublasComputeType_t ct = tf32 && b->dtype == LOOM_FP32 && b->math == LOOM_MATH_TF32
                                     ? CUBLAS_COMPUTE_32F_FAST_TF32
                                     : CUBLAS_COMPUTE_32F;
  return cublasGemmEx(b->blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, cuda_type(b->dtype), n, A,
                      cuda_type(b->dtype), k, &zero, C, ctype, n, ct, CUBLAS_GEMM_DEFAULT);
}

/* All-to-all-v of rows: rows [send_off[d], send_off[d+1]) of `send` go to
 * rank d, rows from rank d land at [recv_off[d], recv_off[d+1]) of `recv`;
 * grouped NCCL send/recv, on stream s. */
static loom_result_t alltoallv(const struct loom_baseline *b, const void *send,
                               const int64_t *send_off, void *recv, const int64_t *recv_off,
                               cudaStream_t s) {
  loom_result_t res = LOOM_SUCCESS;
  const ncclDataType_t nt = nccl_type(b->dtype);
  NCCL_CHECK(ncclGroupStart());
  for (int d = 0; d < b->R; d++) {
    const int64_t sn = send_off[d + 1] - send_off[d], rn = recv_off[d + 1] - recv_off[d];
    if (sn > 0)
      NCCL_CHECK(ncclSend((const char *)send + send_off[d] * b->row_bytes, (size_t)sn * b->H, nt,
                          d, b->nccl, s));
    if (rn > 0)
      NCCL_CHECK(ncclRecv((char *)recv + recv_off[d] * b->row_bytes, (size_t)rn * b->H, nt, d,
                          b->nccl, s));
  }
  NCCL_CHECK(ncclGroupEnd());
  return LOOM_SUCCESS;
fail:
  ncclGroupEnd();
  return res;
}

loom_result_t loom_baseline_forward(loom_baseline_t b, const void *x, int64_t num_tokens, void *y,
                                    int32_t *ids_out, float *wts_out, cudaStream_t s) {
  loom_clear_error();
  const char *fn = "loom_baseline_forward";
  LOOM_ARG(b != NULL, fn, "baseline is NULL");
  LOOM_ARG(b->wg != NULL, fn, "weights not set");
  LOOM_ARG(num_tokens >= 0 && num_tokens <= b->Tmax, fn, "num_tokens (%lld) must be in [0, %d]",
           (long long)num_tokens, b->Tmax);
  LOOM_ARG(num_tokens == 0 || (x != NULL && y != NULL), fn, "x and y must be set");
  LOOM_ARG((ids_out == NULL) == (wts_out == NULL), fn, "ids_out and wts_out: both or neither");
  loom_result_t res = LOOM_SUCCESS;
  const int T = (int)num_tokens, E = b->E, K = b->K, El = b->El, R = b->R, H = b->H, F = b->F;
  const int fw = b->gated ? 2 * F : F;
  CUDA_CHECK(cudaSetDevice(b->device));
  BLAS_CHECK(cublasSetStream(b->blas, s));

  /* gate and routing */
  CUDA_CHECK(cudaMemsetAsync(b->counts, 0, (size_t)E * sizeof(int32_t), s));
  if (T > 0) BLAS_CHECK(gemm_rm(b, T, E, H, x, b->wg, b->logits, CUDA_R_32F, 0));
  CUDA_CHECK(baseline_route(b->logits, T, E, K, b->normalize, b->ids, b->wts, b->counts, s));
  CUDA_CHECK(baseline_permute(x, T, K, E, b->row_bytes, b->ids, b->counts, b->cursor, b->row_of,
                              b->send, s));
  /* row counts: every rank learns what it will receive; the host needs
   * them to size the all-to-all-v (the synchronisation the fused kernel
   * avoids) */
  NCCL_CHECK(ncclAlltoAll(b->counts, b->recv_counts, (size_t)El, ncclInt32, b->nccl, s));
  CUDA_CHECK(cudaMemcpyAsync(b->h_counts, b->counts, (size_t)E * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaMemcpyAsync(b->h_recv, b->recv_counts, (size_t)E * sizeof(int32_t),
                             cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  int64_t send_off[LOOM_MOE_MAX_RANKS + 1], recv_off[LOOM_MOE_MAX_RANKS + 1];
  send_off[0] = recv_off[0] = 0;
  for (int d = 0; d < R; d++) {
    int64_t sr = 0, rr = 0;
    for (int le = 0; le < El; le++) {
      sr += b->h_counts[d * El + le];
      rr += b->h_recv[d * El + le];
    }
    send_off[d + 1] = send_off[d] + sr;
    recv_off[d + 1] = recv_off[d] + rr;
  }
  /* dispatch */
  LOOM_CHECK(alltoallv(b, b->send, send_off, b->recv, recv_off, s));
  /* experts: GEMM0 per (source, local expert) segment, one activation pass,
   * GEMM1 per segment */
  int64_t row = 0;
  for (int src = 0; src < R; src++)
    for (int le = 0; le < El; le++) {
      const int rows = b->h_recv[src * El + le];
      if (rows > 0)
        BLAS_CHECK(gemm_rm(b, rows, fw, H, (const char *)b->recv + row * b->row_bytes,
                           (const char *)b->w1 + (size_t)le * H * fw * b->es,
                           b->pre + row * fw, CUDA_R_32F, 1));
      row += rows;
    }
  CUDA_CHECK(baseline_activate(b->pre, b->h, row, F, b->act, b->gated, b->dtype, s));
  row = 0;
  for (int src = 0; src < R; src++)
    for (int le = 0; le < El; le++) {
      const int rows = b->h_recv[src * El + le];
      if (rows > 0)
        BLAS_CHECK(gemm_rm(b, rows, H, F, (const char *)b->h + (size_t)row * F * b->es,
                           (const char *)b->w2 + (size_t)le * F * H * b->es,
                           (char *)b->out + row * b->row_bytes, cuda_type(b->dtype), 1));
      row += rows;
    }
  /* return and combine: the same exchange with the roles swapped */
  LOOM_CHECK(alltoallv(b, b->out, recv_off, b->ret, send_off, s));
  CUDA_CHECK(baseline_combine(b->ret, b->row_of, b->wts, T, K, H, b->dtype, y, s));
  if (ids_out != NULL && T > 0) {
    CUDA_CHECK(cudaMemcpyAsync(ids_out, b->ids, (size_t)T * K * sizeof(int32_t),
                               cudaMemcpyDeviceToDevice, s));
    CUDA_CHECK(cudaMemcpyAsync(wts_out, b->wts, (size_t)T * K * sizeof(float),
                               cudaMemcpyDeviceToDevice, s));
  }
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_baseline_destroy(loom_baseline_t b) {
  loom_clear_error();
  if (b == NULL) return LOOM_SUCCESS;
  cudaSetDevice(b->device);
  cudaDeviceSynchronize();
  release(b);
  return LOOM_SUCCESS;
}
