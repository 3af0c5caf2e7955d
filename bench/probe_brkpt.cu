// Probe (session 12, hopper.cuh hop_mbar_wait): what `brkpt` does with no debugger attached, against
// __trap(): does the launch fail, how fast, with what error, and is the error sticky.
// Build: make build/bench/probe_brkpt; run: build/bench/probe_brkpt 0 (brkpt) | 1 (trap).
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void k(int *flag, int mode) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    if (mode == 0) asm volatile("brkpt;");
    else __trap();
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(flag, 1);
}
int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  int *f; cudaMalloc(&f, 4); cudaMemset(f, 0, 4);
  auto t0 = std::chrono::steady_clock::now();
  k<<<4, 128>>>(f, mode);
  cudaError_t e = cudaDeviceSynchronize();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  cudaError_t e2 = cudaMemset(f, 0, 4);
  printf("mode %s: sync -> %d (%s) after %.1f ms; next call -> %d (%s)\n", mode ? "trap" : "brkpt", (int)e, cudaGetErrorString(e), ms, (int)e2, cudaGetErrorString(e2));
  return 0;
}
