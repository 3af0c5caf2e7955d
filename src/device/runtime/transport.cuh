/*
 * Layer 1: loom's transport primitives, used by every operator kernel.
 *
 *   loom_kernel_begin / loom_kernel_end   the call's epoch, kept on device;
 *                                         completion credits to every rank
 *   loom_peer_ptr / loom_local_ptr        addresses in a rank's window
 *   loom_put_rows                         vectorised row put (block-wide)
 *   loom_copy_in_rows                     read rows a peer put into our window
 *   loom_signal                           release-store the epoch to a peer
 *   loom_wait_signal / loom_block_wait    bounded acquire wait
 *   loom_block_wait_credit                wait until a peer finished call e-d
 *
 * Memory ordering of one message (producer block P, consumer block C):
 *   P: every thread stores its part of the rows (weak stores over NVLink)
 *   P: __syncthreads()                    orders them before thread 0's ...
 *   P: thread 0 st.release.sys flag = epoch
 *   C: thread 0 ld.acquire.sys flag >= epoch (bounded)
 *   C: __syncthreads()                    ... and C's threads after it
 *   C: every thread reads the rows (ld.cg: from L2, never a stale L1 line)
 */
#ifndef LOOM_TRANSPORT_CUH
#define LOOM_TRANSPORT_CUH

#include <stdint.h>

#include <nccl.h>
#include <nccl_device.h>

#include "loom.h"
#include "layout.h"
#include "ptx.cuh"
#include "transport.h"

/* How often (in polls) a spinning wait reads the clock and the abort flag. */
#define LOOM_WAIT_CHECK_EVERY 256u

/* ---- addresses -------------------------------------------------------- */

static __device__ __forceinline__ char *loom_peer_ptr(const loom_dev_comm &c,
                                                      int peer, size_t offset) {
  return (char *)ncclGetLsaPointer(c.window, offset, peer);
}

static __device__ __forceinline__ char *loom_local_ptr(const loom_dev_comm &c,
                                                       size_t offset) {
  return (char *)ncclGetLsaPointer(c.window, offset, c.rank);
}

/* flags[src][slot] in `owner`'s window. */
static __device__ __forceinline__ uint64_t *loom_flag_ptr(const loom_dev_comm &c,
                                                          int owner, int src,
                                                          int slot) {
  size_t off = ((size_t)src * (size_t)c.slots + (size_t)slot) * sizeof(uint64_t);
  return (uint64_t *)loom_peer_ptr(c, owner, off);
}

/* ---- epochs ------------------------------------------------------------ */

/* Epoch of this call: one more than the last completed kernel's. Every
 * block reads the same value because nothing writes ctrl->epoch until the
 * last block of this kernel has finished (loom_kernel_end). */
static __device__ __forceinline__ uint64_t loom_kernel_begin(const loom_dev_comm &c) {
  return ptx_ld_relaxed_gpu_u64(&c.ctrl->epoch) + 1;
}

/* Called once by every block, by all its threads, as its last action. The
 * last block to arrive publishes the epoch for the next call and hands every
 * rank a completion credit for this call (loom_block_wait_credit); it
 * returns 1 to all its threads, other blocks return 0. Its arrival order
 * (fence, then atomic) means every other block's reads and writes are done
 * before the credits are released. */
static __device__ __forceinline__ int loom_kernel_end(const loom_dev_comm &c,
                                                      uint64_t epoch) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    unsigned done = atomicAdd(&c.ctrl->blocks_done, 1u);
    last = done == gridDim.x - 1;
    if (last) {
      c.ctrl->blocks_done = 0;
      c.ctrl->barrier = 0;
      c.ctrl->epoch = epoch;
      __threadfence();
    }
  }
  __syncthreads();
  if (last)
    for (int peer = threadIdx.x; peer < c.nranks; peer += blockDim.x)
      ptx_st_release_sys_u64(loom_flag_ptr(c, peer, c.rank, c.slots - 1), epoch);
  return last;
}

/* ---- puts ---------------------------------------------------------------- */

/* Copy `nrows` rows of `row_bytes` from src (pitch src_pitch) to dst (pitch
 * dst_pitch), spread over the calling threads (tid in [0, nthreads)). dst
 * may be a peer's window (stores travel over NVLink). 16-byte vectors when
 * every address and length allows, 4 loads in flight per thread. */
static __device__ __forceinline__ void loom_put_rows(char *dst, size_t dst_pitch,
                                                     const char *src, size_t src_pitch,
                                                     size_t row_bytes, size_t nrows,
                                                     unsigned tid, unsigned nthreads) {
  const int vec = ((((uintptr_t)dst | (uintptr_t)src | dst_pitch | src_pitch |
                     row_bytes) & 15u) == 0);
  if (vec && (nrows == 1 || (dst_pitch == row_bytes && src_pitch == row_bytes))) {
    /* contiguous: one flat stream of 16-byte vectors */
    const size_t nv = row_bytes * nrows / 16;
    int4 *d = (int4 *)dst;
    const int4 *s = (const int4 *)src;
    size_t i = tid;
    for (; i + 3 * (size_t)nthreads < nv; i += 4 * (size_t)nthreads) {
      int4 a = s[i], b = s[i + nthreads], e = s[i + 2 * (size_t)nthreads],
           f = s[i + 3 * (size_t)nthreads];
      d[i] = a;
      d[i + nthreads] = b;
      d[i + 2 * (size_t)nthreads] = e;
      d[i + 3 * (size_t)nthreads] = f;
    }
    for (; i < nv; i += nthreads) d[i] = s[i];
  } else if (vec) {
    const size_t vpr = row_bytes / 16;
    for (size_t i = tid; i < vpr * nrows; i += nthreads) {
      size_t r = i / vpr, v = i - r * vpr;
      ((int4 *)(dst + r * dst_pitch))[v] = ((const int4 *)(src + r * src_pitch))[v];
    }
  } else {
    for (size_t i = tid; i < row_bytes * nrows; i += nthreads) {
      size_t r = i / row_bytes, b = i - r * row_bytes;
      dst[r * dst_pitch + b] = src[r * src_pitch + b];
    }
  }
}

/* Read rows that a peer put into our own window (after a successful wait)
 * into ordinary memory. Same shape rules as loom_put_rows; loads go to L2. */
static __device__ __forceinline__ void loom_copy_in_rows(char *dst, size_t dst_pitch,
                                                         const char *src, size_t src_pitch,
                                                         size_t row_bytes, size_t nrows,
                                                         unsigned tid, unsigned nthreads) {
  const int vec = ((((uintptr_t)dst | (uintptr_t)src | dst_pitch | src_pitch |
                     row_bytes) & 15u) == 0);
  if (vec) {
    const size_t vpr = row_bytes / 16;
    for (size_t i = tid; i < vpr * nrows; i += nthreads) {
      size_t r = i / vpr, v = i - r * vpr;
      ((int4 *)(dst + r * dst_pitch))[v] =
          ptx_ld_cg_v4((const int4 *)(src + r * src_pitch) + v);
    }
  } else {
    for (size_t i = tid; i < row_bytes * nrows; i += nthreads) {
      size_t r = i / row_bytes, b = i - r * row_bytes;
      dst[r * dst_pitch + b] = *(volatile const char *)(src + r * src_pitch + b);
    }
  }
}

/* ---- signals --------------------------------------------------------------- */

/* Tell `peer` that slot `slot` of this rank's messages for this call has
 * landed. Call from ONE thread, after a __syncthreads() that follows the
 * block's puts. */
static __device__ __forceinline__ void loom_signal(const loom_dev_comm &c, int peer,
                                                   int slot, uint64_t epoch) {
  ptx_st_release_sys_u64(loom_flag_ptr(c, peer, c.rank, slot), epoch);
}

/* Completion credits. Signal slot slots-1 of every source is reserved:
 * when a rank's kernel for call e ends, it stores e there in every rank's
 * window (loom_kernel_end), meaning "I have finished reading everything of
 * call e". A rank about to write call e's data into a peer buffer that call
 * e - depth also used first waits for that peer's credit e - depth. Without
 * it a rank whose inputs come from elsewhere (a ring) could run several
 * calls ahead of its destination and overwrite unread data. */
static __device__ __forceinline__ int loom_credit_slot(const loom_dev_comm &c) {
  return c.slots - 1;
}

/* Record a fault (first caller wins) and raise the abort flag. Takes
 * scalars, not the comm struct, so the out-of-line call needs no stack. */
static __device__ __noinline__ void loom_raise_fault(loom_ctrl *ctrl, loom_fault_record *f,
                                                     int rank, int op, int status,
                                                     int peer, int what, int slot,
                                                     uint64_t epoch, uint64_t observed,
                                                     uint64_t waited_ns) {
  if (atomicCAS(&ctrl->fault_claim, 0u, 1u) == 0u) {
    f->rank = rank;
    f->peer = peer;
    f->what = what;
    f->slot = slot;
    f->block = (int32_t)blockIdx.x;
    f->op = op;
    f->epoch = epoch;
    f->observed = observed;
    f->waited_ns = waited_ns;
    __threadfence_system();
    f->status = status;
    __threadfence_system();
  }
  atomicExch(&ctrl->abort, 1);
}

/* Wait, from ONE thread, until flags[src][slot] in our window reaches
 * `epoch`. Returns 1 when it did, 0 when this communicator aborted or the
 * wait ran past c.timeout_ns (then the fault is recorded here). Never spins
 * unbounded. */
static __device__ __forceinline__ int loom_wait_signal(const loom_dev_comm &c, int src,
                                                       int slot, uint64_t epoch) {
  const uint64_t *flag = loom_flag_ptr(c, c.rank, src, slot);
  uint64_t seen = ptx_ld_acquire_sys_u64(flag);
  if (seen >= epoch) return 1;
  const uint64_t start = ptx_globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    seen = ptx_ld_acquire_sys_u64(flag);
    if (seen >= epoch) return 1;
    if (polls % LOOM_WAIT_CHECK_EVERY == 0) {
      if (ptx_ld_relaxed_gpu_s32(&c.ctrl->abort)) return 0;
      const uint64_t waited = ptx_globaltimer_ns() - start;
      if (waited > c.timeout_ns) {
        loom_raise_fault(c.ctrl, c.fault, c.rank, c.op, LOOM_TIMEOUT, src, LOOM_WAIT_SIGNAL, slot, epoch,
                         seen, waited);
        return 0;
      }
    }
  }
}

/* Bounded wait, from ONE thread, for a counter in this GPU's memory that
 * other blocks of the same kernel advance (acquire at GPU scope). `what`
 * and `slot` describe it in the fault record. */
static __device__ __forceinline__ int loom_wait_local_geq(const loom_dev_comm &c,
                                                          const uint32_t *counter,
                                                          uint32_t target, int what, int slot) {
  uint32_t seen;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
  if (seen >= target) return 1;
  const uint64_t start = ptx_globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    if (seen >= target) return 1;
    if (polls % LOOM_WAIT_CHECK_EVERY == 0) {
      if (ptx_ld_relaxed_gpu_s32(&c.ctrl->abort)) return 0;
      const uint64_t waited = ptx_globaltimer_ns() - start;
      if (waited > c.timeout_ns) {
        loom_raise_fault(c.ctrl, c.fault, c.rank, c.op, LOOM_TIMEOUT, c.rank, what, slot, target,
                         seen, waited);
        return 0;
      }
    }
  }
}

/* Grid-wide barrier number `index` (1, 2, ... within one kernel): every
 * block's writes before it are visible to every block after it. Bounded;
 * returns 0 (to all threads) if the kernel is aborting. */
static __device__ __forceinline__ int loom_grid_barrier(const loom_dev_comm &c, unsigned index) {
  int failed = 0;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&c.ctrl->barrier, 1u);
    failed = !loom_wait_local_geq(c, &c.ctrl->barrier, index * gridDim.x,
                                  LOOM_WAIT_GRID_BARRIER, (int)index);
    __threadfence();
  }
  return !__syncthreads_or(failed);
}

/* Block-wide wait: thread 0 waits, the block learns the outcome. Every
 * thread of the block must call it. Returns 1 on success, 0 on abort. */
static __device__ __forceinline__ int loom_block_wait(const loom_dev_comm &c, int src,
                                                      int slot, uint64_t epoch) {
  int failed = 0;
  if (threadIdx.x == 0) failed = !loom_wait_signal(c, src, slot, epoch);
  return !__syncthreads_or(failed);
}

/* Block-wide: before writing call `epoch`'s data into `dst`'s buffer that
 * call epoch - depth used, wait for dst's completion credit of that call. */
static __device__ __forceinline__ int loom_block_wait_credit(const loom_dev_comm &c, int dst,
                                                             uint64_t epoch, int depth) {
  if (epoch <= (uint64_t)depth) return 1;
  return loom_block_wait(c, dst, loom_credit_slot(c), epoch - depth);
}

#endif /* LOOM_TRANSPORT_CUH */
