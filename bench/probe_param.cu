// Probe (session 31): what a chain of dependent reads of a group table costs
// where the Hopper engine keeps it. The collective GEMMs put their group table
// in the kernel's __grid_constant__ parameter and the engine reads it through
// a generic pointer (hop_group_table: &p masked by maps_const), and the
// producer's first-task decode took 1.2-1.9 us (bench/RESULTS.md session 29
// (f), session 30 (f)), level when the parameter's lines were touched first.
// One thread walks a chain of N dependent 4-byte reads (each read gives the
// next entry's index), clock64 before and after, in each of these places:
//   generic    the parameter through a generic pointer whose provenance the
//              compiler cannot see (as hop_param_base does)
//   param      the parameter indexed directly (p.tab[i]: ld.param / LDC)
//   global     the same table copied to global memory (ld.global, generic)
//   shared     the table copied into shared memory by the block first
// Each walk runs twice in a row ("cold", then "warm": the same lines again).
// Build: make build/bench/probe_param; run: build/bench/probe_param
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_runtime.h>

#define ENTRIES 64 /* 64 x 64-byte entries: a 4 KB parameter */
#define CHAIN 8

struct entry {
  int next;
  int pad[15];
};
struct table_param {
  entry tab[ENTRIES];
  int use_mask; /* 1: base masked as hop_param_base does */
};

static __device__ __forceinline__ const entry *opaque_base(const table_param &p) {
  return (const entry *)((uintptr_t)&p.tab[0] & (uintptr_t)0 - (uintptr_t)(p.use_mask != 0));
}

template <int WHERE>
__global__ void __launch_bounds__(128, 1) k_chain(const __grid_constant__ table_param p, const entry *g,
                                                  long long *out, int start) {
  __shared__ entry s[ENTRIES];
  if (WHERE == 3) {
    for (int i = threadIdx.x; i < ENTRIES; i += blockDim.x) s[i] = g[i];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  const entry *base = WHERE == 0 ? opaque_base(p) : WHERE == 2 ? g : s;
  for (int pass = 0; pass < 2; pass++) {
    asm volatile("" ::: "memory"); /* no load of pass 0 reused in pass 1 */
    int i = start;
    const long long t0 = clock64();
    for (int c = 0; c < CHAIN; c++) {
      if (WHERE == 1) i = p.tab[i].next;
      else i = base[i].next; /* a plain load, as the engine's */
    }
    const long long t1 = clock64();
    out[2 * blockIdx.x + pass] = (t1 - t0) * 1000 + (i & 1); /* keep i live */
  }
}

int main() {
  table_param p;
  for (int i = 0; i < ENTRIES; i++) {
    p.tab[i].next = (i * 37 + 11) % ENTRIES;
    for (int j = 0; j < 15; j++) p.tab[i].pad[j] = j;
  }
  p.use_mask = 1;
  entry *g;
  long long *out;
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaMalloc(&g, sizeof(p.tab));
  cudaMemcpy(g, p.tab, sizeof(p.tab), cudaMemcpyHostToDevice);
  cudaMalloc(&out, sizeof(long long) * 2 * sms);
  const char *names[4] = {"generic", "param", "global", "shared"};
  std::vector<long long> h(2 * sms);
  printf("chain of %d dependent reads, one thread per block, %d blocks; cycles per read, median (min / max) over blocks\n",
         CHAIN, sms);
  for (int rep = 0; rep < 3; rep++)
    for (int w = 0; w < 4; w++) {
      switch (w) {
      case 0: k_chain<0><<<sms, 128>>>(p, g, out, 5); break;
      case 1: k_chain<1><<<sms, 128>>>(p, g, out, 5); break;
      case 2: k_chain<2><<<sms, 128>>>(p, g, out, 5); break;
      default: k_chain<3><<<sms, 128>>>(p, g, out, 5); break;
      }
      if (cudaDeviceSynchronize() != cudaSuccess) {
        printf("launch failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
      }
      cudaMemcpy(h.data(), out, sizeof(long long) * 2 * sms, cudaMemcpyDeviceToHost);
      for (int pass = 0; pass < 2; pass++) {
        std::vector<double> v;
        for (int b = 0; b < sms; b++) v.push_back((double)(h[2 * b + pass] / 1000) / CHAIN);
        std::sort(v.begin(), v.end());
        printf("rep %d %-8s %s %7.1f (%6.1f / %7.1f)\n", rep, names[w], pass ? "warm" : "cold", v[v.size() / 2],
               v.front(), v.back());
      }
    }
  return 0;
}
