/* The collective GEMMs the bulk-synchronous way: NCCL + cuBLAS, what
 * `loom ag-gemm`, `loom gemm-rs` and `loom gemm-ar` compare loom's fused
 * kernels with (baseline.h). The three share one state, one create and
 * destroy, and one GEMM call; each has its own forward. */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "baseline.h"
#include "blas_check.h"
#include "kernels.h"
#include "../host/internal.h"

/* Which operator a baseline was made for: its forward takes no other. */
enum { COLL_AG, COLL_RS, COLL_AR };

struct loom_coll_baseline {
  int op;             /* COLL_* */
  ncclComm_t nccl;    /* borrowed */
  int nranks;
  loom_dtype_t dtype;
  int64_t max_m, dim; /* the largest m of a forward; k (AG) or n (RS, AR) */
  void *buf;          /* AG: the gathered A [nranks max_m x k]; RS: the partial
                         C [max_m x n]; AR: none (it reduces in C) */
  cublasHandle_t blas;
};

static cudaDataType_t cuda_type(int dtype) {
  return dtype == LOOM_BF16 ? CUDA_R_16BF : dtype == LOOM_FP16 ? CUDA_R_16F : CUDA_R_32F;
}
static ncclDataType_t nccl_type(int dtype) {
  return dtype == LOOM_BF16 ? ncclBfloat16 : dtype == LOOM_FP16 ? ncclFloat16 : ncclFloat32;
}

static loom_result_t coll_destroy(struct loom_coll_baseline *b) {
  if (b == NULL) return LOOM_SUCCESS;
  if (b->blas) cublasDestroy(b->blas);
  if (b->buf) cudaFree(b->buf);
  free(b);
  return LOOM_SUCCESS;
}

static loom_result_t coll_create(const char *fn, int op, ncclComm_t nccl, loom_dtype_t dtype,
                                 int64_t max_m, int64_t dim, struct loom_coll_baseline **out) {
  loom_clear_error();
  LOOM_ARG(out != NULL && nccl != NULL && max_m >= 1 && dim >= 1, fn, "bad arguments");
  *out = NULL;
  size_t es = 0;
  loom_result_t res = loom_dtype_size(dtype, &es);
  if (res != LOOM_SUCCESS) return res;
  struct loom_coll_baseline *b = calloc(1, sizeof *b);
  LOOM_ARG(b != NULL, fn, "out of host memory");
  b->op = op;
  b->nccl = nccl;
  b->dtype = dtype;
  b->max_m = max_m;
  b->dim = dim;
  NCCL_CHECK(ncclCommCount(nccl, &b->nranks));
  const size_t buf_rows = op == COLL_AG ? (size_t)b->nranks * (size_t)max_m
                          : op == COLL_RS ? (size_t)max_m
                                          : 0;
  if (buf_rows > 0) CUDA_CHECK(cudaMalloc(&b->buf, buf_rows * (size_t)dim * es));
  BLAS_CHECK(cublasCreate(&b->blas));
  *out = b;
  return LOOM_SUCCESS;
fail:
  coll_destroy(b);
  return res;
}

/* b was made for op, and a's dtype and m (1..max_m) are ones it takes. */
static int coll_takes(const struct loom_coll_baseline *b, int op, const loom_gemm_args_t *a) {
  return b != NULL && a != NULL && b->op == op && a->dtype == b->dtype && a->m >= 1 &&
         a->m <= b->max_m;
}

/* Row-major C [M x n] = A [M x k] B^T, B [n x k] (the nn.Linear layout),
 * on `stream`, fp32 accumulation (TF32 tensor cores for fp32), C in the
 * dtype. Column-major, the same bytes are C^T = (B^T)' (A^T)'. */
static cublasStatus_t gemm_nt(const struct loom_coll_baseline *b, int M, int n, int k,
                              const void *A, const void *B, void *C, cudaStream_t stream) {
  const float one = 1.f, zero = 0.f;
  const cudaDataType_t t = cuda_type((int)b->dtype);
  const cublasStatus_t s = cublasSetStream(b->blas, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, M, k, &one, B, t, k, A, t, k, &zero, C,
                      t, n,
                      b->dtype == LOOM_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
}

/* ---- all-gather + GEMM ------------------------------------------------------ */

loom_result_t loom_ag_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t k, loom_ag_baseline_t *out) {
  return coll_create("loom_ag_baseline_create", COLL_AG, nccl, dtype, max_m, k, out);
}

loom_result_t loom_ag_baseline_forward(loom_ag_baseline_t b, const loom_gemm_args_t *a,
                                       cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_ag_baseline_forward";
  LOOM_ARG(coll_takes(b, COLL_AG, a) && a->k == b->dim && a->n >= 1, fn,
           "not an all-gather baseline, or arguments that do not match it (dtype, m <= max_m, k)");
  loom_result_t res = LOOM_SUCCESS;
  const void *bias = loom_gemm_args_bias(a); /* added in the activation pass */
  const int dt = (int)b->dtype, M = (int)(b->nranks * a->m), n = (int)a->n;
  NCCL_CHECK(ncclAllGather(a->a, b->buf, (size_t)a->m * (size_t)a->k, nccl_type(dt), b->nccl,
                           stream));
  BLAS_CHECK(gemm_nt(b, M, n, (int)a->k, b->buf, a->b, a->c, stream));
  if (a->activation != LOOM_UNSET || bias != NULL)
    CUDA_CHECK(baseline_activate(a->c, dt, a->c, M, n, a->activation, 0, dt, bias, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_ag_baseline_destroy(loom_ag_baseline_t b) { return coll_destroy(b); }

/* ---- GEMM + reduce-scatter -------------------------------------------------- */

loom_result_t loom_rs_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t n, loom_rs_baseline_t *out) {
  return coll_create("loom_rs_baseline_create", COLL_RS, nccl, dtype, max_m, n, out);
}

loom_result_t loom_rs_baseline_forward(loom_rs_baseline_t b, const loom_gemm_args_t *a,
                                       cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_rs_baseline_forward";
  LOOM_ARG(coll_takes(b, COLL_RS, a) && a->n == b->dim && a->m % b->nranks == 0, fn,
           "not a reduce-scatter baseline, or arguments that do not match it (dtype, m <= max_m, "
           "n, m %% nranks)");
  loom_result_t res = LOOM_SUCCESS;
  const void *bias = loom_gemm_args_bias(a);
  const int dt = (int)b->dtype, n = (int)a->n, mo = (int)(a->m / b->nranks);
  BLAS_CHECK(gemm_nt(b, (int)a->m, n, (int)a->k, a->a, a->b, b->buf, stream));
  NCCL_CHECK(ncclReduceScatter(b->buf, a->c, (size_t)mo * (size_t)n, nccl_type(dt), ncclSum,
                               b->nccl, stream));
  if (a->activation != LOOM_UNSET || bias != NULL)
    CUDA_CHECK(baseline_activate(a->c, dt, a->c, mo, n, a->activation, 0, dt, bias, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_rs_baseline_destroy(loom_rs_baseline_t b) { return coll_destroy(b); }

/* ---- GEMM + all-reduce ------------------------------------------------------ */

loom_result_t loom_ar_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t n, loom_ar_baseline_t *out) {
  return coll_create("loom_ar_baseline_create", COLL_AR, nccl, dtype, max_m, n, out);
}

loom_result_t loom_ar_baseline_forward(loom_ar_baseline_t b, const loom_gemm_args_t *a,
                                       cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_ar_baseline_forward";
  LOOM_ARG(coll_takes(b, COLL_AR, a) && a->n == b->dim, fn,
           "not an all-reduce baseline, or arguments that do not match it (dtype, m <= max_m, n)");
  loom_result_t res = LOOM_SUCCESS;
  const void *bias = loom_gemm_args_bias(a);
  const int dt = (int)b->dtype, M = (int)a->m, n = (int)a->n;
  BLAS_CHECK(gemm_nt(b, M, n, (int)a->k, a->a, a->b, a->c, stream));
  NCCL_CHECK(ncclAllReduce(a->c, a->c, (size_t)M * (size_t)n, nccl_type(dt), ncclSum, b->nccl,
                           stream));
  if (a->activation != LOOM_UNSET || bias != NULL)
    CUDA_CHECK(baseline_activate(a->c, dt, a->c, M, n, a->activation, 0, dt, bias, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_ar_baseline_destroy(loom_ar_baseline_t b) { return coll_destroy(b); }
