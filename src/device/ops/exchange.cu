/*
 * Exchange: ring and all-to-all byte movement as one persistent kernel,
 * built only from the transport primitives. It is the transport's test bed
 * and `loom info`'s bandwidth probe.
 *
 * Work: the message to each destination is cut into chunks. Send phase: a
 * block puts one chunk into the destination's window and signals its slot.
 * Receive phase: a block waits for one (source, chunk) slot, then copies the
 * chunk from its own window into recvbuf. The kernel's end gives every rank
 * a completion credit (transport.cuh). A send first waits for the
 * destination's credit of the previous call (loom_wait_peer_ready), which
 * never depends on this call, so that wait can only fail on a dead or
 * out-of-step peer.
 */
#include <cuda_runtime.h>

#include "../runtime/transport.cuh"
#include "ops.h"

/* Resource decisions for the exchange kernel, in one place. */
struct exchange_cfg {
  /* Measured on 4xH200 (GPU0 -> GPU1 SM stores, 256 MiB): 1 or 2 blocks per
   * SM reach 347 GB/s whatever the thread count (256..1024) or unroll (4, 8);
   * 4 blocks of 256 or 512 threads per SM reach 368-370 GB/s. */
  static constexpr int threads = 256;
  static constexpr int blocks_per_sm = 4;    /* all resident: cooperative launch */
  static constexpr size_t min_chunk = 64u << 10; /* below this, signal cost shows */
};
static_assert(exchange_cfg::threads % 32 == 0, "whole warps");
static_assert(exchange_cfg::min_chunk % 16 == 0, "chunks keep 16-byte alignment");

__global__ void __launch_bounds__(exchange_cfg::threads, exchange_cfg::blocks_per_sm)
    exchange_kernel(loom_dev_comm c, loom_exchange_args a, size_t chunk, int nchunks) {
  const uint64_t epoch = loom_kernel_begin(c);
  if (loom_block_aborted(c)) { /* a peer failed since our last call */
    loom_kernel_end(c, epoch);
    return;
  }
  const int n = c.nranks, r = c.rank;
  const int ndst = a.ring ? 1 : n;
  const int nsrc = loom_exchange_sources(a.ring, n);
  const size_t stride = loom_exchange_stride(a.bytes_per_peer);
  const size_t base = c.data_offset; /* one buffer: ops.h */

  /* send: destinations staggered by rank so all links start busy */
  for (int item = blockIdx.x; item < ndst * nchunks; item += gridDim.x) {
    const int d = item / nchunks, ch = item - d * nchunks;
    const int peer = a.ring ? (r + 1) % n : (r + d) % n;
    const size_t off = (size_t)ch * chunk;
    const size_t len = min(chunk, a.bytes_per_peer - off);
    const char *src = (const char *)a.send + (a.ring ? 0 : (size_t)peer * a.bytes_per_peer) + off;
    char *dst = loom_peer_ptr(c, peer, base + (a.ring ? 0 : (size_t)r) * stride + off);
    if (!loom_block_wait_peer_ready(c, peer, epoch)) break;
    loom_put_rows(dst, len, src, len, len, 1, threadIdx.x, blockDim.x);
    __syncthreads();
    if (threadIdx.x == 0 && !a.suppress_signals) loom_signal(c, peer, ch, epoch);
  }

  /* receive */
  for (int item = blockIdx.x; item < nsrc * nchunks; item += gridDim.x) {
    const int s = item / nchunks, ch = item - s * nchunks;
    const int src_rank = a.ring ? (r - 1 + n) % n : (r - s + n) % n;
    if (!loom_block_wait(c, src_rank, ch, epoch)) break;
    const size_t off = (size_t)ch * chunk;
    const size_t len = min(chunk, a.bytes_per_peer - off);
    const char *win = loom_local_ptr(c, base + (a.ring ? 0 : (size_t)src_rank) * stride + off);
    char *dst = (char *)a.recv + (a.ring ? 0 : (size_t)src_rank * a.bytes_per_peer) + off;
    loom_copy_in_rows(dst, len, win, len, len, 1, threadIdx.x, blockDim.x);
  }
  loom_kernel_end(c, epoch); /* also returns the buffers: credits */
}

/* Persistent grid (blocks_per_sm on each of the communicator's SMs: all of
 * the device's, or a loopback rank's share), launched cooperatively so
 * that every block is resident: a waiting block must never keep a
 * peer-awaited block out. */
static cudaError_t persistent_grid(const loom_dev_comm *c, const void *kernel, int threads,
                                   int *grid) {
  int per_sm;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
  if (e != cudaSuccess) return e;
  if (per_sm < exchange_cfg::blocks_per_sm) return cudaErrorCooperativeLaunchTooLarge;
  *grid = c->sms * exchange_cfg::blocks_per_sm;
  return cudaSuccess;
}

extern "C" cudaError_t loom_launch_exchange(const loom_dev_comm *c,
                                            const loom_exchange_args *a,
                                            cudaStream_t stream) {
  int grid;
  cudaError_t e = persistent_grid(c, (const void *)exchange_kernel, exchange_cfg::threads, &grid);
  if (e != cudaSuccess) return e;
  /* Aim for about one chunk per block over all destinations, never below
   * min_chunk and never more chunks than signal slots. */
  const int ndst = a->ring ? 1 : c->nranks;
  const int per_dst = grid / ndst > 0 ? grid / ndst : 1;
  size_t chunk = (a->bytes_per_peer + per_dst - 1) / per_dst;
  if (chunk < exchange_cfg::min_chunk) chunk = exchange_cfg::min_chunk;
  const int data_slots = c->slots - 2; /* the last two: credits and call tags */
  const size_t by_slots = (a->bytes_per_peer + data_slots - 1) / data_slots;
  if (chunk < by_slots) chunk = by_slots;
  chunk = (chunk + 15) / 16 * 16;
  const int nchunks = (int)((a->bytes_per_peer + chunk - 1) / chunk);

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(exchange_cfg::threads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, exchange_kernel, *c, *a, chunk, nchunks);
}

__global__ void __launch_bounds__(exchange_cfg::threads, exchange_cfg::blocks_per_sm)
    put_bench_kernel(loom_dev_comm c, int peer, const char *src, size_t bytes) {
  const size_t nvec = bytes / 16;
  const size_t per_block = (nvec + gridDim.x - 1) / gridDim.x;
  const size_t v0 = min(nvec, per_block * blockIdx.x);
  const size_t v1 = min(nvec, v0 + per_block);
  char *dst = loom_peer_ptr(c, peer, c.data_offset);
  loom_put_rows(dst + v0 * 16, 0, src + v0 * 16, 0, (v1 - v0) * 16, 1, threadIdx.x,
                blockDim.x);
}

extern "C" cudaError_t loom_launch_put_bench(const loom_dev_comm *c, int peer,
                                             const void *src, size_t bytes,
                                             cudaStream_t stream) {
  int grid;
  cudaError_t e = persistent_grid(c, (const void *)put_bench_kernel, exchange_cfg::threads, &grid);
  if (e != cudaSuccess) return e;
  put_bench_kernel<<<grid, exchange_cfg::threads, 0, stream>>>(*c, peer, (const char *)src,
                                                                bytes);
  return cudaGetLastError();
}
