/* The collective GEMMs the bulk-synchronous way: NCCL + cuBLAS, what
 * `loom ag-gemm` and `loom gemm-rs` compare loom's fused kernels with
 * (baseline.h). */
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>

#include "baseline.h"
#include "blas_check.h"
#include "kernels.h"
#include "../host/internal.h"

struct loom_ag_baseline {
  ncclComm_t nccl;
  int nranks;
  loom_dtype_t dtype;
  int64_t max_m, k;
  void *gathered; /* [nranks * max_m x k] */
  cublasHandle_t blas;
};

loom_result_t loom_ag_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t k, loom_ag_baseline_t *out) {
  loom_clear_error();
  const char *fn = "loom_ag_baseline_create";
  LOOM_ARG(out != NULL && nccl != NULL && max_m >= 1 && k >= 1, fn, "bad arguments");
  *out = NULL;
  size_t es = 0;
  loom_result_t res = loom_dtype_size(dtype, &es);
  if (res != LOOM_SUCCESS) return res;
  struct loom_ag_baseline *b = calloc(1, sizeof *b);
  LOOM_ARG(b != NULL, fn, "out of host memory");
  b->nccl = nccl;
  b->dtype = dtype;
  b->max_m = max_m;
  b->k = k;
  NCCL_CHECK(ncclCommCount(nccl, &b->nranks));
  CUDA_CHECK(cudaMalloc(&b->gathered, (size_t)b->nranks * (size_t)max_m * (size_t)k * es));
  BLAS_CHECK(cublasCreate(&b->blas));
  *out = b;
  return LOOM_SUCCESS;
fail:
  loom_ag_baseline_destroy(b);
  return res;
}

loom_result_t loom_ag_baseline_forward(loom_ag_baseline_t b, const loom_gemm_args_t *a,
                                       cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_ag_baseline_forward";
  LOOM_ARG(b != NULL && a != NULL && a->dtype == b->dtype && a->m >= 1 && a->m <= b->max_m &&
               a->k == b->k && a->n >= 1,
           fn, "arguments do not match the baseline's (dtype, m <= max_m, k)");
  loom_result_t res = LOOM_SUCCESS;
  const int dt = (int)b->dtype;
  const cudaDataType_t ct = dt == LOOM_BF16 ? CUDA_R_16BF : dt == LOOM_FP16 ? CUDA_R_16F : CUDA_R_32F;
  const ncclDataType_t nt = dt == LOOM_BF16 ? ncclBfloat16 : dt == LOOM_FP16 ? ncclFloat16 : ncclFloat32;
  const int M = (int)(b->nranks * a->m), n = (int)a->n, k = (int)a->k;
  const float one = 1.f, zero = 0.f;
  NCCL_CHECK(ncclAllGather(a->a, b->gathered, (size_t)a->m * (size_t)k, nt, b->nccl, stream));
  BLAS_CHECK(cublasSetStream(b->blas, stream));
  /* row-major C [M x n] = A [M x k] B^T, B [n x k]: column-major C^T = B^T' A^T' */
  BLAS_CHECK(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, M, k, &one, a->b, ct, k,
                          b->gathered, ct, k, &zero, a->c, ct, n,
                          dt == LOOM_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
  if (a->activation != LOOM_UNSET)
    CUDA_CHECK(baseline_activate(a->c, dt, a->c, M, n, a->activation, 0, dt, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_ag_baseline_destroy(loom_ag_baseline_t b) {
  if (b == NULL) return LOOM_SUCCESS;
  if (b->blas) cublasDestroy(b->blas);
  if (b->gathered) cudaFree(b->gathered);
  free(b);
  return LOOM_SUCCESS;
}

struct loom_rs_baseline {
  ncclComm_t nccl;
  int nranks;
  loom_dtype_t dtype;
  int64_t max_m, n;
  void *partial; /* [max_m x n] */
  cublasHandle_t blas;
};

loom_result_t loom_rs_baseline_create(ncclComm_t nccl, loom_dtype_t dtype, int64_t max_m,
                                      int64_t n, loom_rs_baseline_t *out) {
  loom_clear_error();
  const char *fn = "loom_rs_baseline_create";
  LOOM_ARG(out != NULL && nccl != NULL && max_m >= 1 && n >= 1, fn, "bad arguments");
  *out = NULL;
  size_t es = 0;
  loom_result_t res = loom_dtype_size(dtype, &es);
  if (res != LOOM_SUCCESS) return res;
  struct loom_rs_baseline *b = calloc(1, sizeof *b);
  LOOM_ARG(b != NULL, fn, "out of host memory");
  b->nccl = nccl;
  b->dtype = dtype;
  b->max_m = max_m;
  b->n = n;
  NCCL_CHECK(ncclCommCount(nccl, &b->nranks));
  CUDA_CHECK(cudaMalloc(&b->partial, (size_t)max_m * (size_t)n * es));
  BLAS_CHECK(cublasCreate(&b->blas));
  *out = b;
  return LOOM_SUCCESS;
fail:
  loom_rs_baseline_destroy(b);
  return res;
}

loom_result_t loom_rs_baseline_forward(loom_rs_baseline_t b, const loom_gemm_args_t *a,
                                       cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_rs_baseline_forward";
  LOOM_ARG(b != NULL && a != NULL && a->dtype == b->dtype && a->m >= 1 && a->m <= b->max_m &&
               a->n == b->n && a->m % b->nranks == 0,
           fn, "arguments do not match the baseline's (dtype, m <= max_m, n, m %% nranks)");
  loom_result_t res = LOOM_SUCCESS;
  const int dt = (int)b->dtype;
  const cudaDataType_t ct = dt == LOOM_BF16 ? CUDA_R_16BF : dt == LOOM_FP16 ? CUDA_R_16F : CUDA_R_32F;
  const ncclDataType_t nt = dt == LOOM_BF16 ? ncclBfloat16 : dt == LOOM_FP16 ? ncclFloat16 : ncclFloat32;
  const int M = (int)a->m, n = (int)a->n, k = (int)a->k, mo = M / b->nranks;
  const float one = 1.f, zero = 0.f;
  BLAS_CHECK(cublasSetStream(b->blas, stream));
  BLAS_CHECK(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, n, M, k, &one, a->b, ct, k, a->a, ct, k,
                          &zero, b->partial, ct, n,
                          dt == LOOM_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
  NCCL_CHECK(ncclReduceScatter(b->partial, a->c, (size_t)mo * (size_t)n, nt, ncclSum, b->nccl, stream));
  if (a->activation != LOOM_UNSET)
    CUDA_CHECK(baseline_activate(a->c, dt, a->c, mo, n, a->activation, 0, dt, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_rs_baseline_destroy(loom_rs_baseline_t b) {
  if (b == NULL) return LOOM_SUCCESS;
  if (b->blas) cublasDestroy(b->blas);
  if (b->partial) cudaFree(b->partial);
  free(b);
  return LOOM_SUCCESS;
}
