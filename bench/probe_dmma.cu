// Probe (session 5, docs/moe.md "Gate and place"): DMMA.16x8x16 throughput per SM, with and without
// F2F conversions in the loop. Build: make build/bench/probe_dmma; run on one GPU.
#include <cstdio>
#include <cstdint>
__device__ __forceinline__ void dmma(double *d, const double *a, const double *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
template <int CONV>
__global__ void k(double *out, int iters, long long *cyc, float seed) {
  double acc[8][4] = {};
  double a[8], b[4];
  float f[12];
  for (int i = 0; i < 12; i++) f[i] = seed * (threadIdx.x + i);
  for (int i = 0; i < 8; i++) a[i] = f[i];
  for (int i = 0; i < 4; i++) b[i] = f[8 + i];
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; it++) {
    if (CONV) {
#pragma unroll
      for (int i = 0; i < 8; i++) { f[i] += 1.0f; a[i] = (double)f[i]; }
#pragma unroll
      for (int i = 0; i < 4; i++) { f[8 + i] += 1.0f; b[i] = (double)f[8 + i]; }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) dmma(acc[j], a, b);
  }
  __syncthreads();
  long long t1 = clock64();
  double s = 0;
  for (int j = 0; j < 8; j++) for (int v = 0; v < 4; v++) s += acc[j][v];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}
int main() {
  double *out; long long *cyc; cudaMalloc(&out, 1 << 24); cudaMalloc(&cyc, 8192);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int iters = 4096;
  for (int conv = 0; conv < 2; conv++)
    for (int threads : {128, 256, 384}) {
      for (int blocks : {1, sms}) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        auto launch = [&]() { if (conv) k<1><<<blocks, threads>>>(out, iters, cyc, 1e-3f); else k<0><<<blocks, threads>>>(out, iters, cyc, 1e-3f); };
        launch(); cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        long long c; cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
        double dmmas_per_sm = (double)iters * 8 * (threads / 32);
        double flops = dmmas_per_sm * blocks * 16 * 8 * 16 * 2;
        printf("conv=%d threads=%d blocks=%d: %.2f clk per DMMA per SM, %.1f TFLOP/s fp64 (%.3f ms)\n", conv, threads, blocks,
               c / dmmas_per_sm, flops / ms / 1e9, ms);
      }
    }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
