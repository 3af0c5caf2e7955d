// Probe (session 5, docs/moe.md "Gate and place"): the MoE gate's fp64 logits loop (bf16, E = 32 per
// pass, H = 2048) as a standalone kernel on every SM, whole and split into loads / MMAs.
// Build: make build/bench/probe_gate; run on one GPU.
#include <cstdio>
#include <cstdint>
#include <cuda_bf16.h>
__device__ __forceinline__ void dmma(double *d, const double *a, const double *b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
__device__ __forceinline__ double getb(uint4 v, int j) {
  const uint32_t w = j < 2 ? v.x : j < 4 ? v.y : j < 6 ? v.z : v.w;
  return (double)__uint_as_float(((w >> (16 * (j & 1))) & 0xffffu) << 16);
}
// MODE 0 full, 1 loads only (no dmma), 2 dmma only (loads once), 3 full with w in smem
template <int MODE>
__global__ void __launch_bounds__(384, 1) gate(const uint16_t *x, const uint16_t *wg, int T, int H, int E, float *lg, long long *cyc) {
  extern __shared__ double red[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int step = nw * 32;
  long long tsum = 0;
  for (int tile = blockIdx.x; tile < T / 32; tile += gridDim.x) {
    long long c0 = clock64();
    const int t0 = tile * 32;
    for (int e0 = 0; e0 < E; e0 += 32) {
      double acc[2][4][4];
      for (int mb = 0; mb < 2; mb++) for (int n = 0; n < 4; n++) for (int v = 0; v < 4; v++) acc[mb][n][v] = 0.0;
      uint4 xa[4], wb[4];
      bool first = true;
      for (int h0 = warp * 32; h0 < H; h0 += step) {
        const int hl = h0 + 8 * tq;
        if (MODE != 2 || first) {
#pragma unroll
          for (int m = 0; m < 4; m++) xa[m] = *(const uint4 *)(x + (size_t)(t0 + 8 * m + g) * H + hl);
#pragma unroll
          for (int n = 0; n < 4; n++) wb[n] = *(const uint4 *)(wg + (size_t)(e0 + 8 * n + g) * H + hl);
          first = false;
        }
        if (MODE == 1) {
          double s = 0;
#pragma unroll
          for (int m = 0; m < 4; m++) s += getb(xa[m], 0) + getb(wb[m], 1);
          acc[0][0][0] += s;
          continue;
        }
#pragma unroll
        for (int s = 0; s < 2; s++) {
          double b[4][4];
#pragma unroll
          for (int n = 0; n < 4; n++)
#pragma unroll
            for (int v = 0; v < 4; v++) b[n][v] = getb(wb[n], 4 * s + v);
#pragma unroll
          for (int mb = 0; mb < 2; mb++) {
            double a[8];
#pragma unroll
            for (int v = 0; v < 8; v++) a[v] = getb(xa[2 * mb + (v & 1)], 4 * s + (v >> 1));
#pragma unroll
            for (int n = 0; n < 4; n++) dmma(acc[mb][n], a, b[n]);
          }
        }
      }
      double *mine = red + warp * 32 * 32;
      for (int mb = 0; mb < 2; mb++) for (int n = 0; n < 4; n++) for (int v = 0; v < 4; v++)
        mine[(16 * mb + g + 8 * (v >> 1)) * 32 + 8 * n + 2 * tq + (v & 1)] = acc[mb][n][v];
      __syncthreads();
      for (int q = threadIdx.x; q < 1024; q += blockDim.x) {
        double v = red[q];
        for (int w = 1; w < nw; w++) v += red[w * 1024 + q];
        lg[(size_t)(t0 + (q >> 5)) * E + e0 + (q & 31)] = (float)v;
      }
      __syncthreads();
    }
    tsum += clock64() - c0;
  }
  if (threadIdx.x == 0) cyc[blockIdx.x] = tsum;
}
int main() {
  const int T = 16384, H = 2048, E = 32;
  uint16_t *x, *w; float *lg; long long *cyc;
  cudaMalloc(&x, (size_t)T * H * 2); cudaMalloc(&w, (size_t)E * H * 2); cudaMalloc(&lg, (size_t)T * E * 4); cudaMalloc(&cyc, 8 * 1024);
  cudaMemset(x, 0x3c, (size_t)T * H * 2); cudaMemset(w, 0x3c, (size_t)E * H * 2);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t smem = 12 * 1024 * 8;
  void (*ks[4])(const uint16_t *, const uint16_t *, int, int, int, float *, long long *) = {gate<0>, gate<1>, gate<2>, gate<0>};
  const char *names[4] = {"full", "loads only", "dmma only", "full, 1 block"};
  for (int i = 0; i < 4; i++) {
    cudaFuncSetAttribute(ks[i], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const int blocks = i == 3 ? 1 : sms;
    const int tt = i == 3 ? 32 * 4 : T;
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    ks[i]<<<blocks, 384, smem>>>(x, w, tt, H, E, lg, cyc);
    cudaEventRecord(e0);
    ks[i]<<<blocks, 384, smem>>>(x, w, tt, H, E, lg, cyc);
    cudaEventRecord(e1); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    long long c; cudaMemcpy(&c, cyc, 8, cudaMemcpyDeviceToHost);
    const int tiles0 = (tt / 32 + blocks - 1) / blocks;
    printf("%-14s: %.1f us total, block 0: %.0f clk per tile (%d tiles) = %.1f us at 1.98 GHz\n", names[i], ms * 1e3, (double)c / tiles0, tiles0, c / tiles0 / 1980.0);
  }
  printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
}
