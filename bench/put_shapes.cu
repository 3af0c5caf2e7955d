/*
 * Launch-shape experiment behind exchange_cfg (src/device/ops/exchange.cu):
 * SM-store bandwidth GPU0 -> GPU1 (peer access, the same NVLink path as
 * loom's LSA puts) for threads x blocks-per-SM x unroll, and the copy engine
 * for reference. Needs 2 GPUs. Build: make build/bench/put_shapes
 */
#include <cstdio>
#include <cuda_runtime.h>
template <int UNROLL>
__global__ void put(int4 *d, const int4 *s, size_t nv) {
  size_t per = (nv + gridDim.x - 1) / gridDim.x, v0 = per * blockIdx.x, v1 = min(nv, v0 + per);
  size_t i = v0 + threadIdx.x; const size_t t = blockDim.x;
  for (; i + (UNROLL - 1) * t < v1; i += UNROLL * t) {
    int4 r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) r[u] = s[i + u * t];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) d[i + u * t] = r[u];
  }
  for (; i < v1; i += t) d[i] = s[i];
}
int main() {
  size_t bytes = 256u << 20, nv = bytes / 16;
  int4 *s, *d; cudaSetDevice(1); cudaMalloc(&d, bytes); cudaSetDevice(0); cudaMalloc(&s, bytes);
  cudaMemset(s, 1, bytes); cudaDeviceEnablePeerAccess(1, 0);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  int threads[] = {256, 512, 1024}, bps[] = {1, 2, 4};
  for (int u = 0; u < 2; u++) for (int ti = 0; ti < 3; ti++) for (int bi = 0; bi < 3; bi++) {
    int th = threads[ti], g = 132 * bps[bi]; if (th * bps[bi] > 2048) continue;
    for (int it = 0; it < 23; it++) { if (it == 3) cudaEventRecord(a);
      if (u == 0) put<4><<<g, th>>>(d, s, nv); else put<8><<<g, th>>>(d, s, nv); }
    cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b);
    printf("unroll %d threads %4d blocks/SM %d: %.1f GB/s\n", u ? 8 : 4, th, bps[bi], bytes * 20.0 / (ms * 1e-3) / 1e9);
  }
  cudaMemcpyPeer(d, 1, s, 0, bytes); cudaEventRecord(a);
  for (int it = 0; it < 20; it++) cudaMemcpyPeerAsync(d, 1, s, 0, bytes);
  cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b);
  printf("copy engine: %.1f GB/s (%s)\n", bytes * 20.0 / (ms * 1e-3) / 1e9, cudaGetErrorString(cudaGetLastError()));
}
