// Probe (session 37, docs/moe_v2.md "Session 37"): how fast a block runs
// straight-line code it has not run before, and whether code a launch ran
// is still cached in the SM for the next launch. Session 36's ncu sampling
// found the MoE kernel's head (code every block runs once) stalled on "no
// instruction" 45-84% of the time, at ~40 ns a 128-byte line; this probe
// measures that rate on plain code, away from the MoE kernel.
//
// Kernel body<N>: N x 8 FFMA on 8 independent accumulators, unrolled (16
// bytes an instruction: N x 128 bytes of straight-line code), timed inside
// the kernel (globaltimer at the body's start and end, thread 0 of every
// block; "span" = max over blocks of end - start). A hot baseline runs a
// 1 KB loop the same number of instructions.
// Sequences, each after an evicting kernel of 256 KB of other code:
//   cold, then the same kernel again (warm?), and a third time;
//   cold, then a different 256 KB kernel, then again (evicted?).
// Grids: 1 block of 32 threads, 132 x 32, 132 x 384.
// Build: make build/bench/probe_icache; run: build/bench/probe_icache
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));           \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

static __device__ __forceinline__ uint64_t gtimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// N groups of 8 FFMAs, fully unrolled (by recursion: #pragma unroll stops
// at ~4096 instructions); SALT makes each instantiation's constants distinct.
template <int N> struct rep {
  static __device__ __forceinline__ void go(float *a, float b, const float *c) {
    rep<N / 2>::go(a, b, c);
    rep<N - N / 2>::go(a, b, c);
  }
};
template <> struct rep<1> {
  static __device__ __forceinline__ void go(float *a, float b, const float *c) {
#pragma unroll
    for (int i = 0; i < 8; i++) a[i] = fmaf(a[i], b, c[i]);
  }
};
template <> struct rep<0> {
  static __device__ __forceinline__ void go(float *, float, const float *) {}
};

template <int N, int SALT>
__global__ void body(float *out, uint64_t *ts, float b) {
  float a[8], c[8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    a[i] = threadIdx.x + i;
    c[i] = (i + SALT) * 0.5f;
  }
  const uint64_t t0 = gtimer();
  rep<N>::go(a, b, c);
  const uint64_t t1 = gtimer();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++) s += a[i];
  if (s == 12345.f) out[threadIdx.x] = s; /* keeps the chains */
  if (threadIdx.x == 0) {
    ts[2 * blockIdx.x] = t0;
    ts[2 * blockIdx.x + 1] = t1;
  }
}

// The same instruction count from a small loop (hot after its first pass):
// n / 8 passes of 64 FFMAs = n groups of 8.
__global__ void hot(float *out, uint64_t *ts, float b, int n) {
  float a[8];
#pragma unroll
  for (int i = 0; i < 8; i++) a[i] = threadIdx.x + i;
  const uint64_t t0 = gtimer();
  for (int g = 0; g < n; g += 8)
#pragma unroll
    for (int u = 0; u < 8; u++)
#pragma unroll
      for (int i = 0; i < 8; i++) a[i] = fmaf(a[i], b, (float)(u * 8 + i) * 0.5f);
  const uint64_t t1 = gtimer();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; i++) s += a[i];
  if (s == 12345.f) out[threadIdx.x] = s;
  if (threadIdx.x == 0) {
    ts[2 * blockIdx.x] = t0;
    ts[2 * blockIdx.x + 1] = t1;
  }
}

typedef void (*kfn)(float *, uint64_t *, float);
struct kern {
  const char *name;
  kfn f;
  int groups;
};

static double span_us(uint64_t *ts_d, int blocks) {
  std::vector<uint64_t> h(2 * blocks);
  cudaMemcpy(h.data(), ts_d, 16 * blocks, cudaMemcpyDeviceToHost);
  uint64_t m = 0;
  for (int b = 0; b < blocks; b++) m = std::max(m, h[2 * b + 1] - h[2 * b]);
  return m / 1e3;
}

static double run(kfn f, int blocks, int threads, float *out, uint64_t *ts) {
  f<<<blocks, threads>>>(out, ts, 1.0001f);
  cudaDeviceSynchronize();
  return span_us(ts, blocks);
}

int main() {
  float *out;
  uint64_t *ts;
  CK(cudaMalloc(&out, 4096 * 4));
  CK(cudaMalloc(&ts, 16 * 1024));
  const kern ks[] = {
      {"16KB", body<128, 1>, 128},   {"32KB", body<256, 2>, 256},   {"64KB", body<512, 3>, 512},
      {"96KB", body<768, 4>, 768},   {"128KB", body<1024, 5>, 1024}, {"192KB", body<1536, 6>, 1536},
      {"256KB", body<2048, 7>, 2048},
  };
  kfn evict = body<2048, 8>, other = body<2048, 9>;
  const int grids[3][2] = {{1, 32}, {132, 32}, {132, 384}};
  for (auto &g : grids) {
    const int B = g[0], Tn = g[1];
    printf("grid %d x %d\n", B, Tn);
    printf("  %-6s %8s %8s %8s   %8s %8s   %8s  %s\n", "code", "cold", "again", "third", "cold", "after-o",
           "hot", "ns/line cold/again/hot");
    for (const kern &k : ks) {
      run(evict, B, Tn, out, ts);
      const double c1 = run(k.f, B, Tn, out, ts);
      const double c2 = run(k.f, B, Tn, out, ts);
      const double c3 = run(k.f, B, Tn, out, ts);
      run(evict, B, Tn, out, ts);
      const double d1 = run(k.f, B, Tn, out, ts);
      run(other, B, Tn, out, ts);
      const double d2 = run(k.f, B, Tn, out, ts);
      hot<<<B, Tn>>>(out, ts, 1.0001f, k.groups); /* (session 37's call 2 passed 8 x this: 8x the FFMAs) */
      CK(cudaDeviceSynchronize());
      const double h = span_us(ts, B);
      const double lines = k.groups * 8.0 * 16 / 128;
      printf("  %-6s %8.2f %8.2f %8.2f   %8.2f %8.2f   %8.2f  %.1f / %.1f / %.1f\n", k.name, c1, c2, c3, d1, d2, h,
             1e3 * c1 / lines, 1e3 * c2 / lines, 1e3 * h / lines);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
