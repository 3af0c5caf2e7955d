/* The bulk-synchronous MoE baseline: cuBLAS + NCCL, host in the loop. */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "baseline.h"
#include "blas_check.h"
#include "kernels.h"
#include "../host/internal.h"

struct loom_baseline {
  ncclComm_t nccl;
  int rank, R, device;
  int H, F, E, K, El, Tmax, act, dtype, math, normalize, gated;
  int b_nk;                 /* weights OUT_IN: every B operand is [n x k] */
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
  int32_t *h_counts, *h_recv; /* [E] each, pinned: rows per (peer, local expert) */
  int64_t *tok_off, *exp_off; /* [E] row offsets of each (peer, local expert)
                                 segment: token side (send, ret; grouped by
                                 global expert) and expert side (recv, out;
                                 grouped by local expert, then source) */
  int64_t bytes_remote;       /* last forward: bytes sent to other ranks */
  /* grouped mode (LOOM_BASELINE_GEMM=grouped): one cublasGemmGroupedBatchedEx
   * per GEMM instead of a loop over experts; pointer arrays staged through
   * pinned memory */
  int grouped;
  const void **h_ptr, **d_ptr; /* [6 * El]: A, B, C of GEMM0 then GEMM1 */
};

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
  if (b->h_ptr != NULL) cudaFreeHost((void *)b->h_ptr);
  if (b->d_ptr != NULL) cudaFree((void *)b->d_ptr);
  free(b->tok_off);
  free(b->exp_off);
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
  b->b_nk = loom_moe_weight_layout(config) == LOOM_WEIGHTS_OUT_IN;
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
  b->tok_off = (int64_t *)malloc((size_t)b->E * sizeof(int64_t));
  b->exp_off = (int64_t *)malloc((size_t)b->E * sizeof(int64_t));
  if (b->tok_off == NULL || b->exp_off == NULL) {
    res = loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
    goto fail;
  }
  const char *mode = getenv("LOOM_BASELINE_GEMM");
  b->grouped = mode != NULL && strcmp(mode, "grouped") == 0;
  if (b->grouped) {
    CUDA_CHECK(cudaHostAlloc((void **)&b->h_ptr, (size_t)6 * b->El * sizeof(void *), 0));
    CUDA_CHECK(cudaMalloc((void **)&b->d_ptr, (size_t)6 * b->El * sizeof(void *)));
  }
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

/* Row-major C[m x n] = A[m x k] * W with cuBLAS (column-major): the same
 * bytes are C^T = W^T * A^T. W is a weight matrix in the layer's layout:
 * B [k x n] row-major (IN_OUT), which column-major reads as W^T [n x k]
 * (CUBLAS_OP_N, ld n), or B [n x k] row-major (OUT_IN), read as W [k x n]
 * and transposed (CUBLAS_OP_T, ld k). C is fp32 or the layer's dtype.
 * tf32: let fp32 inputs run on TF32 tensor cores (the experts under
 * LOOM_MATH_TF32; never the router, whose top-k TF32 error would flip). */
static cublasStatus_t gemm_rm(const struct loom_baseline *b, int m, int n, int k, const void *A,
                              const void *B, void *C, cudaDataType_t ctype, int tf32) {
  const float one = 1.f, zero = 0.f;
  const cublasComputeType_t ct = tf32 && b->dtype == LOOM_FP32 && b->math == LOOM_MATH_TF32
                                     ? CUBLAS_COMPUTE_32F_FAST_TF32
                                     : CUBLAS_COMPUTE_32F;
  return cublasGemmEx(b->blas, b->b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B,
                      cuda_type(b->dtype), b->b_nk ? k : n, A, cuda_type(b->dtype), k, &zero, C,
                      ctype, n, ct, CUBLAS_GEMM_DEFAULT);
}

/* All-to-all-v of rows in (peer, local expert) segments: segment
 * i = d * El + le has from_cnt[i] rows at row from_off[i] of `from`, sent to
 * rank d, and to_cnt[i] rows arriving from rank d at row to_off[i] of `to`.
 * Grouped NCCL send/recv on stream s. The dispatch runs it token side ->
 * expert side, the return expert side -> token side. */
static loom_result_t exchange(const struct loom_baseline *b, const void *from,
                              const int64_t *from_off, const int32_t *from_cnt, void *to,
                              const int64_t *to_off, const int32_t *to_cnt, cudaStream_t s) {
  loom_result_t res = LOOM_SUCCESS;
  const ncclDataType_t nt = nccl_type(b->dtype);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < b->R * b->El; i++) {
    const int d = i / b->El;
    if (from_cnt[i] > 0)
      NCCL_CHECK(ncclSend((const char *)from + from_off[i] * b->row_bytes,
                          (size_t)from_cnt[i] * b->H, nt, d, b->nccl, s));
    if (to_cnt[i] > 0)
      NCCL_CHECK(ncclRecv((char *)to + to_off[i] * b->row_bytes, (size_t)to_cnt[i] * b->H, nt, d,
                          b->nccl, s));
  }
  NCCL_CHECK(ncclGroupEnd());
  return LOOM_SUCCESS;
fail:
  ncclGroupEnd();
  return res;
}

/* GEMM0's output type: fp32, except in grouped mode with 16-bit inputs,
 * which cublasGemmGroupedBatchedEx only runs with C in the input type
 * (CUBLAS_STATUS_NOT_SUPPORTED otherwise, seen on H200 with CUDA 13.0):
 * there the pre-activation is rounded to dtype first. */
static int pre_dtype(const struct loom_baseline *b) {
  return b->grouped && b->dtype != LOOM_FP32 ? b->dtype : LOOM_FP32;
}

/* One expert GEMM (0: recv -> pre, 1: h -> out) for every local expert with
 * rows, rows[le] starting at row first[le] of the expert side. */
static loom_result_t expert_gemms(struct loom_baseline *b, int which, const int64_t *first,
                                  const int64_t *rows, cudaStream_t s) {
  loom_result_t res = LOOM_SUCCESS;
  const int H = b->H, F = b->F, fw = b->gated ? 2 * F : F;
  const int n = which == 0 ? fw : H, k = which == 0 ? H : F;
  const size_t a_row = which == 0 ? b->row_bytes : (size_t)F * b->es;
  const size_t c_row = which == 0 ? (size_t)fw * (pre_dtype(b) == LOOM_FP32 ? 4 : 2) : b->row_bytes;
  const char *A = which == 0 ? (const char *)b->recv : (const char *)b->h;
  const char *B = which == 0 ? (const char *)b->w1 : (const char *)b->w2;
  char *C = which == 0 ? (char *)b->pre : (char *)b->out;
  const cudaDataType_t ct = which == 0 ? cuda_type(pre_dtype(b)) : cuda_type(b->dtype);
  if (!b->grouped) {
    for (int le = 0; le < b->El; le++)
      if (rows[le] > 0)
        BLAS_CHECK(gemm_rm(b, (int)rows[le], n, k, A + first[le] * a_row,
                           B + (size_t)le * k * n * b->es, C + first[le] * c_row, ct, 1));
    return LOOM_SUCCESS;
  }
  /* grouped: one group per expert with rows (each group one problem) */
  enum { MAXG = 1024 };
  int m_a[MAXG], n_a[MAXG], k_a[MAXG], lda[MAXG], ldb[MAXG], ldc[MAXG], size[MAXG];
  float alpha[MAXG], beta[MAXG];
  cublasOperation_t op_w[MAXG], op_a[MAXG];
  const void **hp = b->h_ptr + (size_t)which * 3 * b->El;
  const void **dp = b->d_ptr + (size_t)which * 3 * b->El;
  int g = 0;
  for (int le = 0; le < b->El && le < MAXG; le++) {
    if (rows[le] == 0) continue;
    /* column-major view: C^T[n x rows] = W^T[n x k] * A^T[k x rows], W^T
     * as in gemm_rm */
    m_a[g] = n;
    n_a[g] = (int)rows[le];
    k_a[g] = k;
    lda[g] = b->b_nk ? k : n;
    ldb[g] = k;
    ldc[g] = n;
    size[g] = 1;
    alpha[g] = 1.f;
    beta[g] = 0.f;
    op_w[g] = b->b_nk ? CUBLAS_OP_T : CUBLAS_OP_N;
    op_a[g] = CUBLAS_OP_N;
    hp[g] = B + (size_t)le * k * n * b->es;
    hp[b->El + g] = A + first[le] * a_row;
    hp[2 * b->El + g] = C + first[le] * c_row;
    g++;
  }
  if (g == 0) return LOOM_SUCCESS;
  /* the host array is rewritten only after the next forward's
   * synchronisation, which orders it after this copy */
  CUDA_CHECK(cudaMemcpyAsync((void *)dp, (const void *)hp, (size_t)3 * b->El * sizeof(void *),
                             cudaMemcpyHostToDevice, s));
  const cublasComputeType_t cpt = b->dtype == LOOM_FP32 && b->math == LOOM_MATH_TF32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
  BLAS_CHECK(cublasGemmGroupedBatchedEx(
      b->blas, op_w, op_a, m_a, n_a, k_a, alpha, (const void *const *)dp, cuda_type(b->dtype), lda,
      (const void *const *)(dp + b->El), cuda_type(b->dtype), ldb, beta,
      (void *const *)(dp + 2 * b->El), ct, ldc, g, size, cpt));
  return LOOM_SUCCESS;
fail:
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
  const int T = (int)num_tokens, E = b->E, K = b->K, El = b->El, R = b->R, F = b->F;
  CUDA_CHECK(cudaSetDevice(b->device));
  BLAS_CHECK(cublasSetStream(b->blas, s));

  /* gate and routing */
  CUDA_CHECK(cudaMemsetAsync(b->counts, 0, (size_t)E * sizeof(int32_t), s));
  if (T > 0) BLAS_CHECK(gemm_rm(b, T, E, b->H, x, b->wg, b->logits, CUDA_R_32F, 0));
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
  /* segment offsets: token side in global expert order (= the permutation's
   * groups), expert side by local expert then source, so each expert's rows
   * are contiguous and its GEMM is one call */
  int64_t first[LOOM_MOE_MAX_EXPERTS], rows[LOOM_MOE_MAX_EXPERTS], off = 0, remote = 0;
  for (int e = 0; e < E; e++) {
    b->tok_off[e] = off;
    off += b->h_counts[e];
  }
  off = 0;
  for (int le = 0; le < El; le++) {
    first[le] = off;
    for (int src = 0; src < R; src++) {
      b->exp_off[src * El + le] = off;
      off += b->h_recv[src * El + le];
      if (src != b->rank)
        remote += (int64_t)b->h_counts[src * El + le] + b->h_recv[src * El + le];
    }
    rows[le] = off - first[le];
  }
  b->bytes_remote = remote * (int64_t)b->row_bytes;
  /* dispatch, experts (GEMM0, activation over all rows, GEMM1), return */
  LOOM_CHECK(exchange(b, b->send, b->tok_off, b->h_counts, b->recv, b->exp_off, b->h_recv, s));
  LOOM_CHECK(expert_gemms(b, 0, first, rows, s));
  CUDA_CHECK(baseline_activate(b->pre, pre_dtype(b), b->h, off, F, b->act, b->gated, b->dtype, NULL, s));
  LOOM_CHECK(expert_gemms(b, 1, first, rows, s));
  LOOM_CHECK(exchange(b, b->out, b->exp_off, b->h_recv, b->ret, b->tok_off, b->h_counts, s));
  CUDA_CHECK(baseline_combine(b->ret, b->row_of, b->wts, T, K, b->H, b->dtype, y, s));
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

int64_t loom_baseline_bytes_remote(loom_baseline_t b) { return b == NULL ? 0 : b->bytes_remote; }

loom_result_t loom_baseline_destroy(loom_baseline_t b) {
  loom_clear_error();
  if (b == NULL) return LOOM_SUCCESS;
  cudaSetDevice(b->device);
  cudaDeviceSynchronize();
  release(b);
  return LOOM_SUCCESS;
}
