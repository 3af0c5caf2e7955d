// Probe (session 13, docs/tile.md "v7"): how fast can one block per SM stream
// the small-M weights (8 experts x 2048 x 2048 bf16 = 64 MB, nn.Linear layout,
// each block one 128-row n-tile: 128 rows x 4 KB, rows 4 KB apart), by path:
//   tma      one thread issues 2D TMA boxes of 128 rows x 128 B (the engine's B
//            box, 128-byte swizzle) into an 8-stage ring of 16 KB; one warp
//            only waits and frees stages (no math): the engine's producer alone
//   ldg      256 threads, 16-byte ld.global.nc of the same rows, 8 stages of the
//            tile's 128 x 128 B in flight per thread group (no shared memory)
//   tma+A    tma plus, per stage, the small-M engine's A box (64 rows x 128 B of the
//            block's expert's 64 x 2048 activations, L2-resident after the first
//            block): a 24 KB stage as in hop_small
//            (also with 4, 6, 7 of the 8 stages in use: bytes in flight per SM)
//   contig   256 threads, 16-byte loads of a contiguous 512 KB slab per block
// Grid: 128 blocks (the small-M task count) or 132 (every SM; tma/ldg take
// n-tiles 0..127 only, so 132 is just contig over 132 equal slabs).
// Build: make build/bench/probe_stream; run: build/bench/probe_stream
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "../src/device/tile/hopper_host.cuh"

#define ROWS (8 * 2048)
#define KB 2048                  /* elements per row */
#define ROW_BYTES (KB * 2)
#define TILE_ROWS 128
#define STAGES 8
#define NKB (ROW_BYTES / 128)    /* 32 k-blocks of 128 bytes */

__global__ void __launch_bounds__(128, 1) k_tma(const __grid_constant__ CUtensorMap map,
                                                const __grid_constant__ CUtensorMap amap, int with_a, int nst,
                                                unsigned *sink) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  uint8_t *ring = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  __shared__ uint64_t full[STAGES], empty[STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      ptx_mbar_init(&full[s], 1);
      ptx_mbar_init(&empty[s], 1);
    }
    ptx_fence_mbar_init();
  }
  __syncthreads();
  const int row0 = blockIdx.x * TILE_ROWS;
  if (threadIdx.x == 0) { /* producer */
    uint32_t stage = 0, phase = 0;
    for (int kb = 0; kb < NKB; kb++) {
      hop_mbar_wait(&empty[stage], phase ^ 1);
      ptx_mbar_arrive_expect_tx(&full[stage], TILE_ROWS * 128 + (with_a ? 64 * 128 : 0));
      if (with_a) /* expert e = row0 / 2048: its 64 activation rows */
        ptx_tma_load_2d(ring + STAGES * TILE_ROWS * 128 + stage * 64 * 128, &amap, &full[stage], kb * 64,
                        (row0 / 2048) * 64);
      ptx_tma_load_2d(ring + stage * TILE_ROWS * 128, &map, &full[stage], kb * 64, row0);
      if (++stage == (uint32_t)nst) { stage = 0; phase ^= 1; }
    }
  } else if (threadIdx.x == 32) { /* consumer: wait, touch one word, free */
    uint32_t stage = 0, phase = 0, acc = 0;
    for (int kb = 0; kb < NKB; kb++) {
      hop_mbar_wait(&full[stage], phase);
      acc += *(volatile uint32_t *)(ring + stage * TILE_ROWS * 128);
      ptx_mbar_arrive(&empty[stage]);
      if (++stage == (uint32_t)nst) { stage = 0; phase ^= 1; }
    }
    if (acc == 0x12345678u) *sink = acc;
  }
}

__global__ void __launch_bounds__(256, 1) k_ldg(const uint4 *w, unsigned *sink) {
  /* per k-block the tile is 128 rows x 8 chunks = 1024 chunks: 4 per thread;
   * 8 k-blocks per round = 32 independent 16-byte loads per thread */
  const int row0 = blockIdx.x * TILE_ROWS;
  uint32_t acc = 0;
  for (int kb0 = 0; kb0 < NKB; kb0 += STAGES) {
    uint4 v[STAGES * 4];
#pragma unroll
    for (int s = 0; s < STAGES; s++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int c = threadIdx.x + 256 * j, r = c >> 3, ch = c & 7;
        v[s * 4 + j] = __ldg(w + ((size_t)(row0 + r) * ROW_BYTES + (kb0 + s) * 128) / 16 + ch);
      }
#pragma unroll
    for (int i = 0; i < STAGES * 4; i++) acc ^= v[i].x ^ v[i].w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void __launch_bounds__(256, 1) k_contig(const uint4 *w, size_t chunks_per_block, size_t total,
                                                   unsigned *sink) {
  const uint4 *p = w + blockIdx.x * chunks_per_block;
  if (blockIdx.x * chunks_per_block + chunks_per_block > total) chunks_per_block = total - blockIdx.x * chunks_per_block;
  uint32_t acc = 0;
  for (size_t base = 0; base < chunks_per_block; base += 256 * 16) {
    uint4 v[16];
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const size_t c = base + threadIdx.x + 256 * j;
      v[j] = c < chunks_per_block ? __ldg(p + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < 16; j++) acc ^= v[j].x ^ v[j].w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

int main() {
  const size_t bytes = (size_t)ROWS * ROW_BYTES;
  void *w, *flush, *x;
  unsigned *sink;
  cudaMalloc(&w, bytes);
  cudaMalloc(&flush, 128u << 20);
  cudaMalloc(&sink, 4);
  cudaMemset(w, 1, bytes);
  cudaMalloc(&x, (size_t)8 * 64 * ROW_BYTES); /* 8 experts x 64 rows of activations */
  cudaMemset(x, 1, (size_t)8 * 64 * ROW_BYTES);
  CUtensorMap map;
  if (hop_make_map(&map, HOP_BF16, w, ROWS, KB, KB, 64, TILE_ROWS) != cudaSuccess) {
    printf("map failed\n");
    return 1;
  }
  CUtensorMap amap;
  if (hop_make_map(&amap, HOP_BF16, x, 8 * 64, KB, KB, 64, 64) != cudaSuccess) {
    printf("map failed\n");
    return 1;
  }
  const int smem = STAGES * (TILE_ROWS + 64) * 128 + 1024;
  cudaFuncSetAttribute(k_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const char *names[] = {"tma 128 blocks", "ldg 128 blocks", "contig 128 blocks", "contig 132 blocks",
                         "tma+A 128 blocks", "tma+A, 4 stages", "tma+A, 6 stages", "tma+A, 7 stages"};
  for (int rep = 0; rep < 2; rep++)
    for (int m = 0; m < 8; m++) {
      const int n = 20;
      for (int it = -1; it < 1; it++) { /* one warm-up round, one timed */
        cudaMemset(flush, it & 0xff, 128u << 20); /* 2.5 x L2 */
        cudaDeviceSynchronize();
        cudaEventRecord(e0);
        for (int r = 0; r < n; r++) {
          if (m == 0) k_tma<<<128, 128, smem>>>(map, amap, 0, STAGES, sink);
          if (m == 4) k_tma<<<128, 128, smem>>>(map, amap, 1, STAGES, sink);
          if (m >= 5) k_tma<<<128, 128, smem>>>(map, amap, 1, m == 5 ? 4 : m == 6 ? 6 : 7, sink);
          if (m == 1) k_ldg<<<128, 256>>>((const uint4 *)w, sink);
          if (m == 2) k_contig<<<128, 256>>>((const uint4 *)w, bytes / 16 / 128, bytes / 16, sink);
          if (m == 3) k_contig<<<132, 256>>>((const uint4 *)w, (bytes / 16 + 131) / 132, bytes / 16, sink);
        }
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      cudaError_t e = cudaGetLastError();
      printf("%-20s %8.2f us per launch  %7.0f GB/s  (%s)\n", names[m], ms * 1000 / n, bytes / (ms / n) * 1e-6,
             cudaGetErrorString(e));
    }
  return 0;
}
