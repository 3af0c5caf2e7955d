// Probe (session 5, docs/moe.md "Gate and place"): DMMA.16x8x16 throughput per SM, with and without
// F2F conversions in the loop. Build: make build/bench/probe_dmma; run on one GPU.
// Session 31 added the gate's ratio, 48 conversions per 8 DMMAs of bf16 words (conv=2: shift +
// F2F.F64.F32 as vec8::get does; conv=3: the double's high word built with integer ops, exact for
// normal numbers, low word 0).
#include <cstdio>
#include <cstdint>
__device__ __forceinline__ void dmma(double *d, const double *a, const double *b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}
/* bf16 bits in the low (HI = 0) or high half of w -> double, as the gate converts (vec8::get) */
template <int HI> __device__ __forceinline__ double bf16_f2f(uint32_t w) {
  return (double)__uint_as_float(HI ? w & 0xffff0000u : w << 16);
}
/* the same for a normal bf16 (exponent field not 0 or 255): sign, exponent + 896, mantissa << 13 */
template <int HI> __device__ __forceinline__ double bf16_int(uint32_t w) {
  const uint32_t v = HI ? w >> 16 : w & 0xffffu;
  const uint32_t hi = ((v & 0x7fffu) << 13) + 0x38000000u + ((v & 0x8000u) << 16);
  return __hiloint2double((int)hi, 0);
}
/* element i & 1 of word x as conv 2 (F2F) or 3 (integer ops) builds it */
template <int CONV> __device__ __forceinline__ double conv48(uint32_t x, int hi) {
  if (CONV == 2) return hi ? bf16_f2f<1>(x) : bf16_f2f<0>(x);
  return hi ? bf16_int<1>(x) : bf16_int<0>(x);
}
/* every kernel's end: the block's cycles since t0, the sums kept live */
__device__ __forceinline__ void probe_end(const double (&acc)[8][4], double *out, long long *cyc, long long t0) {
  __syncthreads();
  long long t1 = clock64();
  double s = 0;
  for (int j = 0; j < 8; j++) for (int v = 0; v < 4; v++) s += acc[j][v];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}
template <int CONV>
__global__ void k48(double *out, int iters, long long *cyc, uint32_t seed) {
  double acc[8][4] = {};
  uint32_t w[24];
  for (int i = 0; i < 24; i++) w[i] = 0x3f803f80u + seed * (threadIdx.x + 7 * i);
  __syncthreads();
  long long t0 = clock64();
  for (int it = 0; it < iters; it++) {
    double a[4][8], b[4][4];
#pragma unroll
    for (int i = 0; i < 24; i++) w[i] += 0x00010001u;
#pragma unroll
    for (int s = 0; s < 4; s++) {
#pragma unroll
      for (int i = 0; i < 8; i++) {
        a[s][i] = conv48<CONV>(w[(8 * s + i) / 2], i & 1);
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        b[s][i] = conv48<CONV>(w[16 + (4 * s + i) / 2], i & 1);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) dmma(acc[j], a[j & 3], b[(j >> 1) & 3]);
  }
  probe_end(acc, out, cyc, t0);
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
  probe_end(acc, out, cyc, t0);
}
int main() {
  double *out; long long *cyc; cudaMalloc(&out, 1 << 24); cudaMalloc(&cyc, 8192);
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int iters = 4096;
  for (int conv = 0; conv < 4; conv++)
    for (int threads : {128, 256, 384}) {
      for (int blocks : {1, sms}) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        auto launch = [&]() {
          if (conv == 3) k48<3><<<blocks, threads>>>(out, iters, cyc, 3u);
          else if (conv == 2) k48<2><<<blocks, threads>>>(out, iters, cyc, 3u);
          else if (conv) k<1><<<blocks, threads>>>(out, iters, cyc, 1e-3f);
          else k<0><<<blocks, threads>>>(out, iters, cyc, 1e-3f);
        };
        launch();
        const cudaError_t le = cudaGetLastError(); /* conv 2, 3 at 384 threads: too many registers */
        if (le != cudaSuccess) {
          printf("conv=%d threads=%d blocks=%d: not launched (%s)\n", conv, threads, blocks, cudaGetErrorString(le));
          continue;
        }
        cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
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
