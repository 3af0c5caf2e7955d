/*
 * Layer 1: loom's transport primitives, used by every operator kernel.
 *
 *   loom_kernel_begin / loom_kernel_end   the call's epoch, kept on device;
 *                                         completion credits to every rank
 *   loom_peer_ptr / loom_local_ptr        addresses in a rank's window
 *   loom_put_rows                         vectorised row put (block-wide)
 *   loom_copy_in_rows                     read rows a peer put into our window
 *   loom_signal                           release-store the epoch to a peer
 *   loom_count_add / loom_wait_count      row counters: release add (peer
 *                                         or local), bounded acquire wait
 *   loom_wait_signal / loom_block_wait    bounded acquire wait
 *   loom_block_wait_peer_ready            before the first store into a
 *                                         peer's window in call e: wait until
 *                                         it finished call e-1 (any operator)
 *   loom_raise_fault / loom_check_abort   errors travel: a fault is copied
 *                                         into every peer's abort record;
 *                                         every wait polls ours
 *
 * Memory ordering of one message (producer block P, consumer block C):
 *   P: every thread stores its part of the rows (weak stores over NVLink)
 *   P: __syncthreads()                    orders them before thread 0's ...
 *   P: thread 0 st.release.sys flag = epoch
 *   C: thread 0 ld.acquire.sys flag >= epoch (bounded)
 *   C: __syncthreads()                    ... and C's threads after it
 *   C: every thread reads the rows (ld.cg: from L2, never a stale L1 line)
 * A warp may stand for P's block (the MoE dispatch pieces: __syncwarp(),
 * then lane 0's release add on a row counter), and one thread for C's
 * (the Hopper engine's producer: acquire, fence.proxy.async, then TMA
 * reads of the rows).
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
  size_t off = c.flags_offset + ((size_t)src * (size_t)c.slots + (size_t)slot) * sizeof(uint64_t);
  return (uint64_t *)loom_peer_ptr(c, owner, off);
}

/* The abort record at the start of `owner`'s window (layout.h). */
static __device__ __forceinline__ loom_abort_record *loom_abort_ptr(ncclWindow_t window,
                                                                    int owner) {
  return (loom_abort_record *)ncclGetLsaPointer(window, 0, owner);
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
 * rank a completion credit for this call (loom_wait_peer_ready); it
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
      c.ctrl->op_error = 0;
      c.ctrl->tiles = 0; /* the engine's dynamic task counter: every producer has taken its last */
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

/* loom_signal for a thread that has just fenced at system scope
 * (__threadfence_system) after what the signal publishes: a relaxed store,
 * so signals to several peers after one fence go out together instead of
 * one network round trip apart. */
static __device__ __forceinline__ void loom_signal_fenced(const loom_dev_comm &c, int peer,
                                                         int slot, uint64_t epoch) {
  ptx_st_relaxed_sys_u64(loom_flag_ptr(c, peer, c.rank, slot), epoch);
}

/* Completion credits. Signal slot slots-1 of every source is reserved:
 * when a rank's kernel for call e ends, it stores e there in every rank's
 * window (loom_kernel_end), meaning "I have finished reading everything of
 * call e". Every operator's first store into a peer's window in call e
 * waits for that peer's credit e - 1 (loom_wait_peer_ready), so a rank can
 * never run ahead of a peer that is still reading, whatever operators the
 * two calls were. */
static __device__ __forceinline__ int loom_credit_slot(const loom_dev_comm &c) {
  return c.slots - 1;
}

/* Call tags. Signal slot slots-2 of every source is reserved too: right
 * after its credit wait for a peer (loom_wait_peer_ready), a kernel stores
 * its call tag there in that peer's window -- the call number and the
 * operator -- before any data or signal. Every successful signal wait then
 * checks the sender's tag (loom_wait_signal): a peer that is in another call,
 * or runs another operator in this call, is an async error on both sides,
 * never data read as if it were ours. Operators' own slots are [0, slots-2). */
static __device__ __forceinline__ int loom_tag_slot(const loom_dev_comm &c) {
  return c.slots - 2;
}

static __device__ __forceinline__ uint64_t loom_call_tag(uint64_t epoch, int op) {
  return epoch << 8 | (uint64_t)(op & 0xff);
}

/* The tag of a tagged store (ptx_st_relaxed_sys_v2_u64; the collective
 * GEMMs' low-latency form): the call number's low 24 bits, the operator's
 * id, and bit 7, so never 0, the value of a cleared word. */
static __device__ __forceinline__ uint32_t loom_ll_tag(uint64_t epoch, int op) {
  return (uint32_t)(epoch << 8) | (uint32_t)(op & 0x7f) | 0x80u;
}

/* Fill a fault record, `status` last after a system fence. */
static __device__ __forceinline__ void loom_fill_fault(loom_fault_record *f, int status, int cause,
                                                       int rank, int peer, int what, int slot,
                                                       int block, int op, uint64_t epoch,
                                                       uint64_t observed, uint64_t waited_ns,
                                                       uint64_t time_ns) {
  f->cause = cause;
  f->rank = rank;
  f->peer = peer;
  f->what = what;
  f->slot = slot;
  f->block = block;
  f->op = op;
  f->epoch = epoch;
  f->observed = observed;
  f->waited_ns = waited_ns;
  f->time_ns = time_ns;
  __threadfence_system();
  f->status = status;
  __threadfence_system();
}

/* This rank's kernel stops on its own error (one thread calls it). First
 * caller on this rank wins the local fault record; it also copies the fault
 * into the abort record of every peer's window (the first claimant there
 * wins), so every peer's kernel stops at its next wait poll and names this
 * rank. Then the local abort flag stops this kernel's other blocks. Takes
 * scalars, not the comm struct, so the out-of-line call needs no stack. */
static __device__ __noinline__ void loom_raise_fault(loom_ctrl *ctrl, loom_fault_record *f,
                                                     ncclWindow_t window, int nranks,
                                                     int rank, int op, int status,
                                                     int peer, int what, int slot,
                                                     uint64_t epoch, uint64_t observed,
                                                     uint64_t waited_ns) {
  if (atomicCAS(&ctrl->fault_claim, 0u, 1u) == 0u) {
    const uint64_t now = ptx_globaltimer_ns();
    const int block = (int)blockIdx.x;
    loom_fill_fault(f, status, status, rank, peer, what, slot, block, op, epoch, observed,
                    waited_ns, now);
    for (int d = 0; d < nranks; d++) {
      if (d == rank) continue;
      loom_abort_record *rec = loom_abort_ptr(window, d);
      if (atomicCAS_system(&rec->claim, 0u, (unsigned)rank + 1u) == 0u)
        loom_fill_fault(&rec->fault, status, status, rank, peer, what, slot, block, op, epoch,
                        observed, waited_ns, now);
    }
  }
  atomicExch(&ctrl->abort, 1);
}

/* Shorthand for a fault of this kernel's communicator. */
#define LOOM_RAISE(c, status, peer, what, slot, epoch, observed, waited)                   \
  loom_raise_fault((c).ctrl, (c).fault, (c).window, (c).nranks, (c).rank, (c).op, (status), \
                   (peer), (what), (slot), (epoch), (observed), (waited))

/* Whether this kernel must stop (one thread calls it): our own abort flag,
 * or a fault a peer stored into our window's abort record. The first block
 * to see the latter copies it into our fault record as LOOM_PEER_ERROR (the
 * original fault's fields, so the message names the rank that failed first)
 * and raises our abort flag; nothing is propagated further. */
static __device__ __noinline__ int loom_check_abort_at(loom_ctrl *ctrl, loom_fault_record *fault,
                                                       ncclWindow_t window, int rank) {
  if (ptx_ld_relaxed_gpu_s32(&ctrl->abort)) return 1;
  loom_abort_record *rec = loom_abort_ptr(window, rank);
  const int32_t status = ptx_ld_acquire_sys_s32((const int32_t *)&rec->fault.status);
  if (status == 0) return 0;
  if (atomicCAS(&ctrl->fault_claim, 0u, 1u) == 0u) {
    const loom_fault_record *o = &rec->fault;
    loom_fill_fault(fault, LOOM_PEER_ERROR, status, o->rank, o->peer, o->what, o->slot,
                    o->block, o->op, o->epoch, o->observed, o->waited_ns, o->time_ns);
  }
  atomicExch(&ctrl->abort, 1);
  return 1;
}

/* Scalars, not the comm struct, go to the out-of-line call: no stack. */
static __device__ __forceinline__ int loom_check_abort(const loom_dev_comm &c) {
  return loom_check_abort_at(c.ctrl, c.fault, c.window, c.rank);
}

/* Block-wide: whether the kernel must stop (every thread calls it). */
static __device__ __forceinline__ int loom_block_aborted(const loom_dev_comm &c) {
  int stop = 0;
  if (threadIdx.x == 0) stop = loom_check_abort(c);
  return __syncthreads_or(stop);
}

/* ---- bounded waits ----
 * Each wait is a poll (inline, no call) plus, on failure, a settle step
 * that records the fault out of line. A role running at a reduced register
 * budget (setmaxnreg.dec: the tile engine's producer) must not make an
 * out-of-line call: ptxas then ignores every setmaxnreg of the kernel
 * (C7507) and the consumers lose their registers. Such a role calls the
 * poll, keeps the loom_wait_fail, and settles it once back at the full
 * budget; everyone else calls the wait (poll + settle). */

/* Why a poll failed. status 0: the kernel is aborting (our flag, or a
 * peer's fault in our abort record, which settling copies); otherwise the
 * fault to raise (LOOM_TIMEOUT, LOOM_INVALID_USAGE) and its fields. */
struct loom_wait_fail {
  int status, peer, what, slot;
  uint64_t epoch, observed, waited_ns;
};

/* Whether this kernel must stop, without any call: loom_check_abort's two
 * loads (our abort flag, our abort record's status). */
static __device__ __forceinline__ int loom_abort_seen(const loom_dev_comm &c) {
  if (ptx_ld_relaxed_gpu_s32(&c.ctrl->abort)) return 1;
  return ptx_ld_acquire_sys_s32((const int32_t *)&loom_abort_ptr(c.window, c.rank)->fault.status) != 0;
}

/* Poll-loop bookkeeping shared by every poll: every LOOM_WAIT_CHECK_EVERY
 * polls, stop on an abort or past limit_ns (c.timeout_ns but where a wait
 * is allowed several periods; then f says what timed out). */
static __device__ __forceinline__ int loom_poll_give_up(const loom_dev_comm &c, uint32_t polls, uint64_t start,
                                                        uint64_t limit_ns, int peer, int what, int slot,
                                                        uint64_t want, uint64_t seen, loom_wait_fail *f) {
  if (polls % LOOM_WAIT_CHECK_EVERY) return 0;
  if (loom_abort_seen(c)) {
    f->status = 0;
    return 1;
  }
  const uint64_t waited = ptx_globaltimer_ns() - start;
  if (waited <= limit_ns) return 0;
  *f = loom_wait_fail{LOOM_TIMEOUT, peer, what, slot, want, seen, waited};
  return 1;
}

/* Record a failed poll's fault (or copy a peer's, and raise the abort flag). */
static __device__ __forceinline__ void loom_wait_settle(const loom_dev_comm &c, const loom_wait_fail &f) {
  if (f.status == 0) loom_check_abort(c);
  else LOOM_RAISE(c, f.status, f.peer, f.what, f.slot, f.epoch, f.observed, f.waited_ns);
}

/* Poll, from ONE thread, until flags[src][slot] in our window reaches
 * `epoch`: 1 when it did, 0 (f filled) on abort or past `periods` x
 * c.timeout_ns. With `stop` (else NULL), also 0 with *stopped = 1 and f
 * untouched once *stop is non-zero, checked with the abort: a word that
 * other threads of the block set when they have given up, so that the
 * block settles their fault without this wait running out first (the
 * reduce-scatter's two teams, gemm_rs.cuh). Never spins unbounded. */
static __device__ __forceinline__ int loom_poll_flag_stop(const loom_dev_comm &c, int src, int slot, uint64_t epoch,
                                                          int what, uint64_t periods, const int *stop,
                                                          int *stopped, loom_wait_fail *f) {
  const uint64_t *flag = loom_flag_ptr(c, c.rank, src, slot);
  uint64_t seen = ptx_ld_acquire_sys_u64(flag);
  if (seen >= epoch) return 1;
  const uint64_t start = ptx_globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    seen = ptx_ld_acquire_sys_u64(flag);
    if (seen >= epoch) return 1;
    if (stop && polls % LOOM_WAIT_CHECK_EVERY == 0 && *(const volatile int *)stop) {
      *stopped = 1;
      return 0;
    }
    if (loom_poll_give_up(c, polls, start, periods * c.timeout_ns, src, what, slot, epoch, seen, f)) return 0;
  }
}

/* loom_poll_flag_stop for one period, without a stop word. */
static __device__ __forceinline__ int loom_poll_flag(const loom_dev_comm &c, int src, int slot, uint64_t epoch,
                                                     int what, loom_wait_fail *f) {
  return loom_poll_flag_stop(c, src, slot, epoch, what, 1, NULL, NULL, f);
}

/* Wait, from ONE thread, until flags[src][slot] in our window reaches
 * `epoch`. Returns 1 when it did, 0 when this communicator aborted (ours or
 * a peer's error) or the wait ran past c.timeout_ns (then the fault is
 * recorded here as `what`). */
static __device__ __forceinline__ int loom_wait_flag(const loom_dev_comm &c, int src, int slot,
                                                     uint64_t epoch, int what) {
  loom_wait_fail f;
  if (loom_poll_flag(c, src, slot, epoch, what, &f)) return 1;
  loom_wait_settle(c, f);
  return 0;
}

/* Poll, from ONE thread, for src's signal `slot` of call `epoch`, then check
 * src's call tag: it must be this call of this operator (a signal value
 * alone cannot tell, flags only grow). A different tag fails with
 * LOOM_INVALID_USAGE (what = LOOM_WAIT_CALL_MISMATCH). */
static __device__ __forceinline__ int loom_poll_signal(const loom_dev_comm &c, int src, int slot, uint64_t epoch,
                                                       loom_wait_fail *f) {
  if (!loom_poll_flag(c, src, slot, epoch, LOOM_WAIT_SIGNAL, f)) return 0;
  const uint64_t want = loom_call_tag(epoch, c.op);
  const uint64_t tag = ptx_ld_acquire_sys_u64(loom_flag_ptr(c, c.rank, src, loom_tag_slot(c)));
  if (tag == want) return 1;
  *f = loom_wait_fail{LOOM_INVALID_USAGE, src, LOOM_WAIT_CALL_MISMATCH, slot, want, tag, 0};
  return 0;
}

/* loom_poll_signal, settled: 1 on success, 0 (fault recorded) otherwise. */
static __device__ __forceinline__ int loom_wait_signal(const loom_dev_comm &c, int src,
                                                       int slot, uint64_t epoch) {
  loom_wait_fail f;
  if (loom_poll_signal(c, src, slot, epoch, &f)) return 1;
  loom_wait_settle(c, f);
  return 0;
}

/* Poll, from ONE thread, for a counter in this GPU's memory that other
 * blocks of the same kernel advance (acquire at GPU scope) to reach
 * `target`. `what` and `slot` describe it in the fault. */
static __device__ __forceinline__ int loom_poll_local_geq(const loom_dev_comm &c, const uint32_t *counter,
                                                          uint32_t target, int what, int slot,
                                                          loom_wait_fail *f) {
  uint32_t seen = ptx_ld_acquire_gpu_u32(counter);
  if (seen >= target) return 1;
  const uint64_t start = ptx_globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    seen = ptx_ld_acquire_gpu_u32(counter);
    if (seen >= target) return 1;
    if (loom_poll_give_up(c, polls, start, c.timeout_ns, c.rank, what, slot, target, seen, f)) return 0;
  }
}

/* loom_poll_local_geq, settled: 1 on success, 0 (fault recorded) otherwise. */
static __device__ __forceinline__ int loom_wait_local_geq(const loom_dev_comm &c,
                                                          const uint32_t *counter,
                                                          uint32_t target, int what, int slot) {
  loom_wait_fail f;
  if (loom_poll_local_geq(c, counter, target, what, slot, &f)) return 1;
  loom_wait_settle(c, f);
  return 0;
}

/* Grid-wide barrier number `index` (1, 2, ... within one kernel): every
 * block's writes before it are visible to every block after it. Bounded;
 * returns 0 (to all threads) if the kernel is aborting, also when the abort
 * came before the barrier completed (so no block starts the next phase of
 * a call that already failed). */
/* Row counters: a counter in this rank's window that peers advance with
 * loom_count_add after storing rows into it (ready rows of a tile, rows
 * returned). Poll until it reaches `target` (acquire, system scope); on
 * failure *f names (peer, what, slot, target, seen). */
static __device__ __forceinline__ int loom_poll_count(const loom_dev_comm &c, const uint32_t *counter,
                                                      uint32_t target, int peer, int what, int slot,
                                                      loom_wait_fail *f) {
  uint32_t seen = ptx_ld_acquire_sys_u32(counter);
  if (seen >= target) return 1;
  const uint64_t start = ptx_globaltimer_ns();
  for (uint32_t polls = 1;; ++polls) {
    seen = ptx_ld_acquire_sys_u32(counter);
    if (seen >= target) return 1;
    if (loom_poll_give_up(c, polls, start, c.timeout_ns, peer, what, slot, target, seen, f)) return 0;
  }
}

static __device__ __forceinline__ int loom_wait_count(const loom_dev_comm &c, const uint32_t *counter,
                                                      uint32_t target, int peer, int what, int slot) {
  loom_wait_fail f;
  if (loom_poll_count(c, counter, target, peer, what, slot, &f)) return 1;
  loom_wait_settle(c, f);
  return 0;
}

/* One thread, after a barrier that ordered the block's row stores: add n
 * to a counter (this rank's window or a peer's), release at system scope. */
static __device__ __forceinline__ void loom_count_add(uint32_t *counter, uint32_t n) {
  ptx_red_add_release_sys_u32(counter, n);
}

/* The grid barrier in two halves, for a block with work to do between its
 * arrival and the others' (work that needs nothing the barrier orders):
 * loom_grid_arrive, then loom_grid_arrived_wait with the barrier's index.
 * All threads of the block call both. */
static __device__ __forceinline__ void loom_grid_arrive(const loom_dev_comm &c) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&c.ctrl->barrier, 1u);
  }
}
static __device__ __forceinline__ int loom_grid_arrived_wait(const loom_dev_comm &c, unsigned index) {
  int failed = 0;
  if (threadIdx.x == 0) {
    failed = !loom_wait_local_geq(c, &c.ctrl->barrier, index * gridDim.x,
                                  LOOM_WAIT_GRID_BARRIER, (int)index);
    __threadfence();
    if (!failed) failed = loom_check_abort(c);
  }
  return !__syncthreads_or(failed);
}
static __device__ __forceinline__ int loom_grid_barrier(const loom_dev_comm &c, unsigned index) {
  loom_grid_arrive(c);
  return loom_grid_arrived_wait(c, index);
}

/* Block-wide wait: thread 0 waits, the block learns the outcome. Every
 * thread of the block must call it. Returns 1 on success, 0 on abort. */
static __device__ __forceinline__ int loom_block_wait(const loom_dev_comm &c, int src,
                                                      int slot, uint64_t epoch) {
  int failed = 0;
  if (threadIdx.x == 0) failed = !loom_wait_signal(c, src, slot, epoch);
  return !__syncthreads_or(failed);
}

/* The reuse rule of every operator (docs/runtime.md): before its FIRST
 * store (data or signal) into rank dst's window in call `epoch`, a kernel
 * waits until dst's kernel of call epoch - 1 -- whatever operator that was
 * -- has finished reading (dst's completion credit). Then no region of
 * dst's window is still being read when it is overwritten, whatever layout
 * the two operators use. One thread waits; bounded like every wait. A
 * timeout names the peer and the call it has not finished. Then it stores
 * this call's tag into dst's window (loom_tag_slot). */
static __device__ __forceinline__ int loom_wait_peer_ready(const loom_dev_comm &c, int dst,
                                                           uint64_t epoch) {
  if (epoch > 1 && !loom_wait_flag(c, dst, loom_credit_slot(c), epoch - 1, LOOM_WAIT_CREDIT))
    return 0;
  /* our call tag for dst, ordered before our data by the release of the
   * signal that follows it */
  ptx_st_release_sys_u64(loom_flag_ptr(c, dst, c.rank, loom_tag_slot(c)),
                         loom_call_tag(epoch, c.op));
  return 1;
}

/* Block-wide loom_wait_peer_ready: thread 0 waits, the block learns the
 * outcome (1 ready, 0 aborting). Every thread of the block calls it. */
static __device__ __forceinline__ int loom_block_wait_peer_ready(const loom_dev_comm &c, int dst,
                                                                 uint64_t epoch) {
  int failed = 0;
  if (threadIdx.x == 0) failed = !loom_wait_peer_ready(c, dst, epoch);
  return !__syncthreads_or(failed);
}

#endif /* LOOM_TRANSPORT_CUH */
