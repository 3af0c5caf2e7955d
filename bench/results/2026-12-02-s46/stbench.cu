// Store microbenchmark: a 128 x 256 bf16 tile (64 KB) per block per iteration,
// stored the way moe_hop_store does (16 B a lane, 8 rows x 64 B a warp store)
// or through shared memory + one 512 B bulk copy a row. Times per block, in
// SM clocks: issue done, (bulk) reads done, writes done. D: clocks of idle
// spin before each tile (the mainloop during which earlier stores drain).
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cuda_runtime.h>
#define PITCH 4096
__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void spin(long long d) { long long t = clock64(); while (clock64() - t < d) {} }
__global__ void k_direct(char *buf, int iters, long long D, long long *out, int pat) {
  const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, wg = tid >> 7;
  const int rb = wg * 64 + warp * 16 + (lane >> 2), q = lane & 3;
  long long s1 = 0, s2 = 0;
  for (int it = 0; it < iters; it++) {
    const long long tile = blockIdx.x + (long long)it * gridDim.x;
    char *base = buf + (tile / 8) * 128 * PITCH + (tile % 8) * 512;
    spin(D);
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int a = 0; a < 8; a++) {
        uint4 v = make_uint4(tid, a, h, it);
        const int j = 8 * h + a; /* this lane's j-th 16 B of the warp's 16 rows x 512 B */
        int row, byte;
        if (pat == 0) { row = rb + 8 * h; byte = (32 * a + 8 * q) * 2; }                 /* 8 rows x 64 B */
        else if (pat == 1) { row = wg * 64 + warp * 16 + 4 * (j >> 2) + (lane >> 3); byte = 128 * (j & 3) + 16 * (lane & 7); } /* 4 rows x 128 B */
        else if (pat == 2) { row = wg * 64 + warp * 16 + j; byte = 16 * lane; }             /* 1 row x 512 B */
        else { row = rb + 8 * h; byte = (32 * a + 8 * q) * 2; }
        uint4 *d = (uint4 *)(base + (size_t)row * PITCH + byte);
        if (pat == 3) __stcs(d, v); else *d = v;
      }
    __syncthreads();
    const long long t1 = clock64();
    __threadfence();
    __syncthreads();
    const long long t2 = clock64();
    s1 += t1 - t0; s2 += t2 - t0;
  }
  if (tid == 0) { out[blockIdx.x * 4] = s1 / iters; out[blockIdx.x * 4 + 1] = s2 / iters; out[blockIdx.x * 4 + 2] = 0; }
}
__global__ void k_bulk(char *buf, int iters, long long D, long long *out) {
  extern __shared__ __align__(128) unsigned char sm[];
  const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, wg = tid >> 7;
  const int rb = wg * 64 + warp * 16 + (lane >> 2), q = lane & 3;
  long long s1 = 0, s2 = 0, s3 = 0;
  for (int it = 0; it < iters; it++) {
    const long long tile = blockIdx.x + (long long)it * gridDim.x;
    char *base = buf + (tile / 8) * 128 * PITCH + (tile % 8) * 512;
    spin(D);
    __syncthreads();
    const long long t0 = clock64();
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int a = 0; a < 8; a++) {
        uint4 v = make_uint4(tid, a, h, it);
        *(uint4 *)(sm + (rb + 8 * h) * 512 + (((32 * a + 8 * q) * 2) ^ (((rb + 8 * h) & 7) << 4))) = v;
      }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (lane < 16) {
      const int row = wg * 64 + warp * 16 + lane;
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(base + (size_t)row * PITCH),
                   "r"(sa(sm + row * 512)), "r"(512) : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    __syncthreads();
    const long long t1 = clock64();
    if (lane < 16) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    __syncthreads();
    const long long t2 = clock64();
    if (lane < 16) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    __syncthreads();
    const long long t3 = clock64();
    s1 += t1 - t0; s2 += t2 - t0; s3 += t3 - t0;
  }
  if (tid == 0) { out[blockIdx.x * 4] = s1 / iters; out[blockIdx.x * 4 + 1] = s3 / iters; out[blockIdx.x * 4 + 2] = s2 / iters; }
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  const int iters = 32;
  size_t bytes = (size_t)sms * iters * 65536 + (1 << 20);
  char *buf; cudaMalloc(&buf, bytes); cudaMemset(buf, 0, bytes);
  long long *out; cudaMallocManaged(&out, sms * 4 * sizeof(long long));
  cudaFuncSetAttribute(k_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
  printf("SMs %d, clock attr %d kHz\n", sms, clk);
  for (int mode = 0; mode < 5; mode++)
    for (int nb : {1, sms})
      for (long long D : {0LL, 30000LL}) {
        cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
        for (int rep = 0; rep < 2; rep++) {
          cudaEventRecord(e0);
          if (mode < 4) k_direct<<<nb, 256>>>(buf, iters, D, out, mode);
          else k_bulk<<<nb, 256, 65536>>>(buf, iters, D, out);
          cudaEventRecord(e1);
          cudaError_t err = cudaDeviceSynchronize();
          if (err != cudaSuccess) { printf("error %s\n", cudaGetErrorString(err)); return 1; }
        }
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        double a = 0, b = 0, c = 0; long long mx = 0;
        for (int i = 0; i < nb; i++) { a += out[i * 4]; b += out[i * 4 + 1]; c += out[i * 4 + 2]; if (out[i*4] > mx) mx = out[i*4]; }
        static const char *nm[] = {"8x64B", "4x128B", "1x512B", "8x64cs", "bulk"};
        printf("%-7s blocks %3d D %5lld: issue %7.0f clk (max %6lld), reads %7.0f, done %7.0f; kernel %.3f ms, %.1f GB/s\n",
               nm[mode], nb, D, a / nb, mx, c / nb, b / nb, ms, (double)nb * iters * 65536 / ms / 1e6);
      }
  return 0;
}
