// Probe (session 31): can a block push rows to a peer GPU with TMA bulk
// stores (cp.async.bulk.global.shared::cta) instead of its threads' stores,
// and how fast? docs/moe_v2.md: GEMM1's rows stored straight over NVLink
// stall the consumer warps ~4 us a 64 KB tile (~16 GB/s an SM), and a warp
// copying them pushed ~1.3 GB/s. A bulk store is issued by one thread; the
// thread waits only until the TMA unit has read shared memory (.read), not
// for the write to land.
//
// Every block (one per SM, 256 threads) writes `bytes_per_block` of a
// pattern to the destination (GPU 1's memory, peer access on; or GPU 0's
// own), in 64 KB tiles from a 64 KB shared buffer, ITERS times over:
//   threads   every thread stores 16 bytes at a time (st.global), as the
//             GEMM1 epilogue does
//   bulk512   one thread, a 512-byte bulk store per row (a 256-column bf16
//             block of a row), all of a tile's 128 rows issued, then
//             wait_group.read before the buffer is rewritten
//   bulk16k   one thread, 16 KB bulk stores (4 a tile)
//   thread64  every thread's 16-byte stores in the GEMM1 epilogue's pattern:
//             a warp instruction covers 64 bytes of each of 8 rows
// Between tiles a block idles `gap` us (0, 20, 40: a GEMM1 mainloop's
// worth, so the link is not saturated at 40). It reports, per variant: the
// kernel time, GB/s per GPU, and the mean time a tile held the block's
// threads: from its first store (or smem write) until every thread's
// stores were issued (threads) or the TMA unit had read the buffer (bulk,
// wait_group.read), which is what consumer warps would be held for. After
// the timed runs the destination is checked against the pattern.
// Build: make build/bench/probe_bulk_peer; run on a machine with 2 GPUs.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define THREADS 256
#define TILE (64 * 1024)
#define ITERS 8

static __device__ __forceinline__ unsigned long long gtimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int V>
__global__ void __launch_bounds__(THREADS, 1) k_push(char *dst, size_t bytes_per_block, unsigned long long *issue_ns,
                                                   uint32_t salt, unsigned long long gap_ns) {
  extern __shared__ __align__(128) unsigned char buf[];
  const int tid = threadIdx.x;
  char *mine = dst + (size_t)blockIdx.x * bytes_per_block;
  const size_t tiles = bytes_per_block / TILE;
  unsigned long long held = 0; /* gap_ns > 0: the time the threads were held by their tiles' stores */
  for (int it = 0; it < ITERS; it++) {
    for (size_t tl = 0; tl < tiles; tl++) {
      const uint32_t base = (uint32_t)(tl * TILE) ^ salt;
      const unsigned long long ta = gtimer();
      if (V == 0) { /* threads: 16 bytes each, the pattern computed in registers */
        int4 *d = (int4 *)(mine + tl * TILE);
        for (int i = tid; i < TILE / 16; i += THREADS) {
          const uint32_t w = base + 16u * (uint32_t)i;
          d[i] = make_int4((int)w, (int)(w + 4), (int)(w + 8), (int)(w + 12));
        }
      } else if (V == 3) {
        /* threads64: the GEMM1 epilogue's pattern, the tile as 128 rows of
         * 512 bytes, a warp instruction covering 64 bytes of 8 rows (lane l:
         * row 8 k + l / 4, 16 bytes at 16 (l % 4) of the row's 64-byte
         * segment a) */
        const int lane = tid & 31, warp = tid >> 5;
        for (int k = warp; k < 16; k += THREADS / 32) /* 8-row groups */
          for (int a = 0; a < 8; a++) {
            const int row = 8 * k + lane / 4, byte = 64 * a + 16 * (lane % 4);
            const int i = (row * 512 + byte) / 16;
            const uint32_t w = base + 16u * (uint32_t)i;
            ((int4 *)(mine + tl * TILE))[i] = make_int4((int)w, (int)(w + 4), (int)(w + 8), (int)(w + 12));
          }
      } else {
        /* the tile into shared memory (as an epilogue would), then bulk stores */
        for (int i = tid; i < TILE / 16; i += THREADS) {
          const uint32_t w = base + 16u * (uint32_t)i;
          ((int4 *)buf)[i] = make_int4((int)w, (int)(w + 4), (int)(w + 8), (int)(w + 12));
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* generic writes -> async proxy */
        __syncthreads();
        if (tid == 0) {
          const int piece = V == 1 ? 512 : 16384;
          const uint32_t s = (uint32_t)__cvta_generic_to_shared(buf);
          for (int o = 0; o < TILE; o += piece)
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(mine + tl * TILE + o),
                         "r"(s + (uint32_t)o), "r"(piece)
                         : "memory");
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); /* the buffer is free again */
        }
      }
      __syncthreads(); /* every thread's stores issued (threads) / the buffer read (bulk) */
      const unsigned long long tb = gtimer();
      held += tb - ta;
      if (gap_ns) /* a mainloop's worth of nothing before the next tile */
        while (gtimer() - tb < gap_ns) __nanosleep(256);
    }
  }
  if (tid == 0) issue_ns[blockIdx.x] = held;
  if (V != 0 && tid == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); /* writes done */
}

int main() {
  int ndev = 0;
  cudaGetDeviceCount(&ndev);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t per_block = 8 * TILE; /* 512 KB a block */
  const size_t total = per_block * sms;
  char *dst_peer = nullptr, *dst_local = nullptr;
  if (ndev >= 2) {
    int can = 0;
    cudaDeviceCanAccessPeer(&can, 0, 1);
    if (!can) {
      printf("GPU 0 cannot access GPU 1\n");
      return 1;
    }
    cudaSetDevice(1);
    cudaMalloc(&dst_peer, total);
    cudaSetDevice(0);
    cudaDeviceEnablePeerAccess(1, 0);
  }
  cudaSetDevice(0);
  cudaMalloc(&dst_local, total);
  unsigned long long *issue;
  cudaMalloc(&issue, sizeof(unsigned long long) * sms);
  cudaFuncSetAttribute(k_push<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE);
  cudaFuncSetAttribute(k_push<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE);
  const char *names[4] = {"threads", "bulk512", "bulk16k", "thread64"};
  printf("%d blocks x %d threads, %zu KB a block, %d passes; GB/s counts the bytes once a pass\n", sms, THREADS,
         per_block / 1024, ITERS);
  int bad_total = 0;
  for (int g = 0; g < 3; g++)
  for (int where = 0; where < 2; where++) {
    const unsigned long long gap = g == 0 ? 0 : g == 1 ? 20000 : 40000;
    char *dst = where == 0 ? dst_local : dst_peer;
    if (!dst) continue;
    for (int v = 0; v < 4; v++) {
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      const uint32_t salt = 0x5a5a0000u * (uint32_t)(v + 1) + (uint32_t)where;
      auto launch = [&]() {
        if (v == 0) k_push<0><<<sms, THREADS>>>(dst, per_block, issue, salt, gap);
        else if (v == 3) k_push<3><<<sms, THREADS>>>(dst, per_block, issue, salt, gap);
        else if (v == 1) k_push<1><<<sms, THREADS, TILE>>>(dst, per_block, issue, salt, gap);
        else k_push<2><<<sms, THREADS, TILE>>>(dst, per_block, issue, salt, gap);
      };
      launch();
      cudaEventRecord(e0);
      launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) {
        printf("%s %s: %s\n", where ? "peer " : "local", names[v], cudaGetErrorString(err));
        return 1;
      }
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      std::vector<unsigned long long> h(sms);
      cudaMemcpy(h.data(), issue, sizeof(unsigned long long) * sms, cudaMemcpyDeviceToHost);
      double mean = 0;
      for (int b = 0; b < sms; b++) mean += (double)h[b];
      mean /= sms;
      /* check: the last pass wrote the pattern of `salt` */
      std::vector<uint32_t> got(total / 4);
      cudaMemcpy(got.data(), dst, total, cudaMemcpyDefault);
      long bad = 0;
      for (size_t b = 0; b < (size_t)sms; b++)
        for (size_t i = 0; i < per_block / 4; i++) {
          const size_t tl = i * 4 / TILE, in = i * 4 % TILE;
          const uint32_t want = ((uint32_t)(tl * TILE) ^ salt) + (uint32_t)in;
          if (got[b * per_block / 4 + i] != want) bad++;
        }
      bad_total += bad != 0;
      const double bytes = (double)total * ITERS;
      printf("gap %2llu us %s %-8s kernel %8.1f us  %7.1f GB/s  threads held %6.2f us a 64 KB tile  check: %s\n",
             gap / 1000, where ? "peer " : "local", names[v], ms * 1e3, bytes / (ms * 1e-3) / 1e9,
             mean / 1e3 / (double)(per_block / TILE * ITERS), bad ? "MISMATCH" : "ok");
    }
  }
  printf("%s\n", bad_total ? "some checks failed" : "all checks passed");
  return bad_total != 0;
}
