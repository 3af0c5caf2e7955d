/*
 * How the reduce-scatter / all-reduce kernels' column-chunk task order
 * (LOOM_RS_CHUNKS, docs/collective_gemm.md) changes their time on a
 * LOOPBACK world: R ranks on one GPU, each with 1/R of the SMs, "NVLink"
 * stores and loads going to the same GPU's HBM. Not a multi-GPU number:
 * only what the order does to the exposed reduction tail when the ranks run
 * side by side. No verification (test_collective checks these paths).
 *
 *   chunk_probe R M N K [iters]   M rows (every rank's), N columns, K inner
 *
 * Build: make build/bench/chunk_probe (also part of `make test`).
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "loom.h"

#define MAXR 8
#define CK(x)                                                                              \
  do {                                                                                     \
    if ((x) != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(x));          \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)
#define LK(x)                                                                              \
  do {                                                                                     \
    if ((x) != LOOM_SUCCESS) {                                                             \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, loom_last_error());              \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: chunk_probe R M N K [iters]\n");
    return 2;
  }
  const int R = atoi(argv[1]), iters = argc > 5 ? atoi(argv[5]) : 10;
  const long M = atol(argv[2]), N = atol(argv[3]), K = atol(argv[4]);
  if (R < 2 || R > MAXR || iters < 1) return 2;
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.m = M;
  a.n = N;
  a.k = K;
  size_t rs = 0, ar = 0;
  int srs = 0, sar = 0;
  LK(loom_gemm_rs_workspace_bytes(&a, R, &rs, &srs));
  LK(loom_gemm_ar_workspace_bytes(&a, R, &ar, &sar));
  loom_comm_config_t cfg = LOOM_COMM_CONFIG_INIT;
  cfg.workspace_bytes = (int64_t)(rs > ar ? rs : ar);
  cfg.signal_slots = srs > sar ? srs : sar;
  loom_comm_t comms[MAXR];
  LK(loom_comm_create_loopback(R, &cfg, comms));
  void *A[MAXR], *B[MAXR], *C[MAXR];
  cudaStream_t st[MAXR];
  for (int r = 0; r < R; r++) {
    CK(cudaMalloc(&A[r], (size_t)M * K * 2));
    CK(cudaMalloc(&B[r], (size_t)N * K * 2));
    CK(cudaMalloc(&C[r], (size_t)M * N * 2));
    CK(cudaMemset(A[r], 0x3c, (size_t)M * K * 2)); /* bf16 ~0.0115: finite sums */
    CK(cudaMemset(B[r], 0x3c, (size_t)N * K * 2));
    CK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const char *chunks[] = {"1", "2", "4", "8"};
  printf("loopback R=%d, M=%ld N=%ld K=%ld bf16, %d iters (median of per-iteration times)\n", R, M, N, K,
         iters);
  for (int op = 0; op < 2; op++)
    for (int ci = 0; ci < 4; ci++) {
      setenv("LOOM_RS_CHUNKS", chunks[ci], 1);
      float t[64];
      const int n = iters < 64 ? iters : 64;
      for (int it = -2; it < n; it++) { /* two warm-up rounds */
        CK(cudaDeviceSynchronize());
        CK(cudaEventRecord(e0, 0));
        for (int r = 0; r < R; r++) CK(cudaStreamWaitEvent(st[r], e0, 0));
        for (int r = 0; r < R; r++) {
          a.a = A[r];
          a.b = B[r];
          a.c = C[r];
          LK(op ? loom_gemm_ar(comms[r], &a, st[r]) : loom_gemm_rs(comms[r], &a, st[r]));
        }
        for (int r = 0; r < R; r++) {
          cudaEvent_t d;
          CK(cudaEventCreate(&d));
          CK(cudaEventRecord(d, st[r]));
          CK(cudaStreamWaitEvent(0, d, 0));
          CK(cudaEventDestroy(d));
        }
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        if (it >= 0) CK(cudaEventElapsedTime(&t[it], e0, e1));
      }
      for (int i = 1; i < n; i++) /* insertion sort for the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
          const float s = t[j];
          t[j] = t[j - 1];
          t[j - 1] = s;
        }
      loom_result_t ae = LOOM_SUCCESS;
      LK(loom_comm_get_async_error(comms[0], &ae));
      printf("  %s chunks=%s: median %.1f us (min %.1f, max %.1f)%s\n", op ? "all-reduce    " : "reduce-scatter",
             chunks[ci], 1e3 * t[n / 2], 1e3 * t[0], 1e3 * t[n - 1], ae == LOOM_SUCCESS ? "" : " ASYNC ERROR");
    }
  LK(loom_comm_destroy_all(R, comms));
  return 0;
}
