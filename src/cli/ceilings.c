/*
 * The ceilings of the bound (harness.h), measured here unless given by
 * flags: cuBLAS GEMM at 8192^3 in --dtype (TF32 for fp32) on GPU 0; every
 * GPU sending to every other at once, egress per GPU, the faster of the
 * copy engines (cudaMemcpyPeerAsync, a stream per pair) and ncclAlltoAll;
 * a device-to-device copy on GPU 0 (read + write bytes). The bound takes
 * the fastest seen, so it is never loose on purpose.
 */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "harness.h"

#define PEAK_N 8192              /* the GEMM ceiling's M = N = K */
#define HBM_BYTES (1ull << 30)   /* the HBM ceiling's copy */
#define LINK_BYTES (256ull << 20) /* the NVLink ceiling's copy per peer */
#define CEILING_REPS 5

/* cuBLAS at PEAK_N^3 in --dtype on GPU 0: best of CEILING_REPS. */
static int measure_gemm(cli_bench *b) {
  const size_t n = PEAK_N, bytes = n * n * b->es;
  const cudaDataType_t t = b->dtype == LOOM_BF16 ? CUDA_R_16BF
                           : b->dtype == LOOM_FP16 ? CUDA_R_16F
                                                   : CUDA_R_32F;
  const cublasComputeType_t ct =
      b->dtype == LOOM_FP32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  void *A = NULL, *B = NULL, *C = NULL;
  cublasHandle_t h = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  const float one = 1.f, zero = 0.f;
  int rc = -1;
  double best = 1e30;
  if (cudaSetDevice(0) || cudaMalloc(&A, bytes) || cudaMalloc(&B, bytes) || cudaMalloc(&C, bytes) ||
      cudaMemset(A, 0, bytes) || cudaMemset(B, 0, bytes) || cudaEventCreate(&e0) ||
      cudaEventCreate(&e1) || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    goto out;
  for (int r = -2; r < CEILING_REPS; r++) { /* two untimed */
    float ms = 0;
    if (cudaEventRecord(e0, 0) ||
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, PEAK_N, PEAK_N, PEAK_N, &one, A, t, PEAK_N, B, t,
                     PEAK_N, &zero, C, t, PEAK_N, ct, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS ||
        cudaEventRecord(e1, 0) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1))
      goto out;
    if (r >= 0 && ms < best) best = ms;
  }
  b->ceil.peak_tflops = 2.0 * n * n * n / (best * 1e-3) / 1e12;
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: measuring the GEMM ceiling failed\n", b->who);
  if (h) cublasDestroy(h);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return rc;
}

/* A device-to-device copy of HBM_BYTES on GPU 0: (read + write) / time. */
static int measure_hbm(cli_bench *b) {
  void *src = NULL, *dst = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  int rc = -1;
  double best = 1e30;
  if (cudaSetDevice(0) || cudaMalloc(&src, HBM_BYTES) || cudaMalloc(&dst, HBM_BYTES) ||
      cudaMemset(src, 1, HBM_BYTES) || cudaEventCreate(&e0) || cudaEventCreate(&e1))
    goto out;
  for (int r = -1; r < CEILING_REPS; r++) {
    float ms = 0;
    if (cudaEventRecord(e0, 0) || cudaMemcpyAsync(dst, src, HBM_BYTES, cudaMemcpyDeviceToDevice, 0) ||
        cudaEventRecord(e1, 0) || cudaEventSynchronize(e1) || cudaEventElapsedTime(&ms, e0, e1))
      goto out;
    if (r >= 0 && ms < best) best = ms;
  }
  b->ceil.hbm_gbps = 2.0 * HBM_BYTES / (best * 1e-3) / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: measuring the HBM ceiling failed\n", b->who);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaFree(src);
  cudaFree(dst);
  return rc;
}

/* Every GPU copies LINK_BYTES to every other GPU at once (copy engines, a
 * stream per pair, peer access on): egress per GPU = (n-1) * LINK_BYTES
 * over the wall time of the slowest, best of CEILING_REPS. */
static int measure_nvlink(cli_bench *b) {
  const int n = b->ngpu;
  void *src[CLI_MAX_GPUS] = {0}, *dst[CLI_MAX_GPUS] = {0};
  cudaStream_t st[CLI_MAX_GPUS][CLI_MAX_GPUS];
  memset(st, 0, sizeof st);
  int rc = -1;
  double best = 1e30;
  for (int d = 0; d < n; d++) {
    if (cudaSetDevice(d) || cudaMalloc(&src[d], LINK_BYTES) ||
        cudaMalloc(&dst[d], LINK_BYTES * (size_t)(n - 1)) || cudaMemset(src[d], 1, LINK_BYTES))
      goto out;
    for (int p = 0; p < n; p++) {
      if (p == d) continue;
      int can = 0;
      if (cudaDeviceCanAccessPeer(&can, d, p) || !can) {
        fprintf(stderr, "%s: GPU %d cannot access GPU %d\n", b->who, d, p);
        goto out;
      }
      const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) goto out;
      (void)cudaGetLastError();
      if (cudaStreamCreateWithFlags(&st[d][p], cudaStreamNonBlocking)) goto out;
    }
  }
  for (int r = -1; r < CEILING_REPS; r++) {
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t0 = cli_now_s();
    for (int d = 0; d < n; d++) {
      if (cudaSetDevice(d)) goto out;
      for (int p = 0; p < n; p++) {
        if (p == d) continue;
        const int slot = d < p ? d : d - 1; /* d's slot in p's receive buffer */
        if (cudaMemcpyPeerAsync((char *)dst[p] + (size_t)slot * LINK_BYTES, p, src[d], d,
                                LINK_BYTES, st[d][p]))
          goto out;
      }
    }
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t = cli_now_s() - t0;
    if (r >= 0 && t < best) best = t;
  }
  b->ceil.nvlink_gbps = (double)(n - 1) * LINK_BYTES / best / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: measuring the NVLink ceiling failed\n", b->who);
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    for (int p = 0; p < n; p++)
      if (st[d][p]) cudaStreamDestroy(st[d][p]);
    cudaFree(src[d]);
    cudaFree(dst[d]);
  }
  return rc;
}

/* ncclAlltoAll of LINK_BYTES per peer on every GPU at once (one thread,
 * grouped): egress per GPU = (n-1) * LINK_BYTES over the wall time, best of
 * CEILING_REPS. NVLink through NCCL's own kernels, for comparison with the
 * copy engines. */
static int measure_nvlink_nccl(cli_bench *b, double *gbps) {
  const int n = b->ngpu;
  void *src[CLI_MAX_GPUS] = {0}, *dst[CLI_MAX_GPUS] = {0};
  ncclComm_t nc[CLI_MAX_GPUS];
  int rc = -1;
  double best = 1e30;
  for (int d = 0; d < n; d++)
    if (loom_comm_nccl(b->comms[d], &nc[d]) != LOOM_SUCCESS || cudaSetDevice(d) ||
        cudaMalloc(&src[d], LINK_BYTES * (size_t)n) || cudaMalloc(&dst[d], LINK_BYTES * (size_t)n) ||
        cudaMemset(src[d], 1, LINK_BYTES * (size_t)n))
      goto out;
  for (int r = -1; r < CEILING_REPS; r++) {
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaDeviceSynchronize()) goto out;
    const double t0 = cli_now_s();
    if (ncclGroupStart() != ncclSuccess) goto out;
    int bad = 0;
    for (int d = 0; d < n; d++)
      bad |= ncclAlltoAll(src[d], dst[d], LINK_BYTES, ncclUint8, nc[d], b->g[d].stream) != ncclSuccess;
    if ((ncclGroupEnd() != ncclSuccess) | bad) goto out;
    for (int d = 0; d < n; d++)
      if (cudaSetDevice(d) || cudaStreamSynchronize(b->g[d].stream)) goto out;
    const double t = cli_now_s() - t0;
    if (r >= 0 && t < best) best = t;
  }
  *gbps = (double)(n - 1) * LINK_BYTES / best / 1e9;
  rc = 0;
out:
  if (rc) fprintf(stderr, "%s: measuring NVLink with ncclAlltoAll failed\n", b->who);
  for (int d = 0; d < n; d++) {
    cudaSetDevice(d);
    cudaFree(src[d]);
    cudaFree(dst[d]);
  }
  return rc;
}

int cli_measure_ceilings(cli_bench *b) {
  const cli_options *o = b->o;
  b->ceil.peak_tflops = o->peak_tflops;
  b->ceil.nvlink_gbps = o->nvlink_gbps;
  b->ceil.hbm_gbps = o->hbm_gbps;
  b->ceil.peak_src = o->peak_tflops > 0 ? "given" : "measured";
  b->ceil.nvlink_src = o->nvlink_gbps > 0 ? "given" : b->ngpu > 1 ? "measured" : "unused (1 GPU)";
  b->ceil.hbm_src = o->hbm_gbps > 0 ? "given" : "measured";
  if (o->peak_tflops <= 0 && measure_gemm(b) != 0) return -1;
  if (o->hbm_gbps <= 0 && measure_hbm(b) != 0) return -1;
  char how[160] = "";
  if (o->nvlink_gbps <= 0 && b->ngpu > 1) {
    double ce = 0, nccl = 0;
    if (measure_nvlink(b) != 0) return -1;
    ce = b->ceil.nvlink_gbps;
    if (measure_nvlink_nccl(b, &nccl) != 0) return -1;
    b->ceil.nvlink_gbps = ce > nccl ? ce : nccl; /* a bound takes the fastest seen */
    snprintf(how, sizeof how,
             ", every GPU sending to every other at once: copy engines %.1f, ncclAlltoAll %.1f",
             ce, nccl);
  }
  printf("ceilings: GEMM %.1f TFLOP/s (%s%s), NVLink %.1f GB/s egress per GPU (%s%s), "
         "HBM %.1f GB/s (%s%s)\n",
         b->ceil.peak_tflops, b->ceil.peak_src,
         o->peak_tflops > 0 ? "" : ", cuBLAS 8192^3 on GPU 0",
         b->ceil.nvlink_gbps, b->ceil.nvlink_src, how, b->ceil.hbm_gbps, b->ceil.hbm_src,
         o->hbm_gbps > 0 ? "" : ", 1 GiB device copy on GPU 0");
  fflush(stdout);
  return 0;
}
