/*
 * Shared layouts between the host runtime (C) and the device runtime (CUDA):
 * the symmetric window, the per-communicator control block and the
 * host-visible fault record. Plain C, included from both sides.
 */
#ifndef LOOM_LAYOUT_H
#define LOOM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inline helpers below are shared by host C code and device code. */
#ifdef __CUDACC__
#define LOOM_HD __host__ __device__
#else
#define LOOM_HD
#endif

/* Alignment of the window's own regions (abort record, flags, data area;
 * NCCL requires 4096 for the window itself). Operators align their regions
 * inside the data area as they need (the MoE layer and the exchange: 256
 * bytes, so 16-byte vector stores never straddle a region). */
#define LOOM_REGION_ALIGN 4096u

static inline LOOM_HD size_t loom_align_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}

/*
 * The symmetric window, identical on every rank (byte offsets):
 *
 *   [0, 4096)                    abort record (loom_abort_record below): the
 *                                first peer whose kernel stopped on an error
 *                                claims it (atomic CAS at system scope) and
 *                                copies its fault there; the owner's waits
 *                                poll it. Never reset: a communicator that
 *                                saw an error must be destroyed.
 *   [flags_offset, +flags_bytes) signal flags: uint64_t flags[nranks][slots].
 *                                flags[s][i] is written only by source rank
 *                                s (a release store of the call's epoch) and
 *                                read only by the owner (acquire loads).
 *                                Epochs only grow, so flags are never reset.
 *   [ll_offset, +ll_bytes)       the tagged-store region (LOOM_LL_BYTES with
 *                                two or more ranks, else none): written
 *                                only by the collective GEMMs' tagged
 *                                stores (ops.h, loom_rs_ll) and by the
 *                                owner that clears what it consumed, so
 *                                every word is zero between calls.
 *   [data_offset, +data_bytes)   operator data (layout per operator).
 *
 * flags_offset = 4096; flags_bytes = align(nranks * slots * 8, 4096);
 * ll_offset = flags_offset + flags_bytes; data_offset = ll_offset +
 * ll_bytes.
 */
#define LOOM_LL_BYTES (4u << 20)
typedef struct {
  size_t abort_offset; /* always 0 */
  size_t flags_offset; /* always LOOM_REGION_ALIGN */
  size_t flags_bytes;
  size_t ll_offset;
  size_t ll_bytes;
  size_t data_offset;
  size_t data_bytes;
  size_t total_bytes; /* what is allocated and registered */
} loom_window_layout;

static inline LOOM_HD loom_window_layout loom_window_layout_make(int nranks, int slots,
                                                         size_t data_bytes) {
  loom_window_layout l;
  l.abort_offset = 0;
  l.flags_offset = LOOM_REGION_ALIGN;
  l.flags_bytes = loom_align_up((size_t)nranks * (size_t)slots * 8u,
                                LOOM_REGION_ALIGN);
  l.ll_offset = l.flags_offset + l.flags_bytes;
  l.ll_bytes = nranks >= 2 ? LOOM_LL_BYTES : 0;
  l.data_offset = l.ll_offset + l.ll_bytes;
  l.data_bytes = loom_align_up(data_bytes, LOOM_REGION_ALIGN);
  l.total_bytes = l.data_offset + l.data_bytes;
  return l;
}

/*
 * Control block, one per communicator, in the GPU's own memory (not in the
 * window; no peer touches it). 64 bytes:
 *   epoch       8  epoch of the last completed kernel. A kernel runs with
 *                  epoch + 1; its last block to finish stores it back. Kept
 *                  on the device so a CUDA graph replay gets a fresh epoch.
 *   blocks_done 4  blocks of the running kernel that have finished.
 *   abort       4  non-zero once any block timed out: every bounded wait of
 *                  this communicator gives up at its next check.
 *   fault_claim 4  0 until one block wins the right to fill the fault record.
 *   barrier     4  arrivals at the running kernel's grid barriers (barrier
 *                  i completes at i * gridDim.x); reset by the last block.
 *   op_error    4  the tile engine's error bits (HOP_ERR_*) of the running
 *                  kernel, for operators built on it; reset by the last block.
 *   tiles       4  the tile engine's task counter (hop_params.tile_counter)
 *                  of the running kernel, for operators that take their tasks
 *                  in the dynamic order; reset by the last block.
 *   pad        32
 */
typedef struct {
  uint64_t epoch;
  uint32_t blocks_done;
  int32_t abort;
  uint32_t fault_claim;
  uint32_t barrier;
  uint32_t op_error;
  uint32_t tiles;
  uint32_t pad[8];
} loom_ctrl;

/* What a bounded wait was waiting for (loom_fault_record.what). */
typedef enum {
  LOOM_WAIT_SIGNAL = 1,       /* a peer's signal flag reaching the call's epoch */
  LOOM_WAIT_GRID_BARRIER = 2, /* the blocks of this kernel (slot = barrier #) */
  LOOM_WAIT_TILE_DEP = 3,     /* a local tile dependency (slot = tile index) */
  LOOM_WAIT_BAD_ROUTING = 4,  /* not a wait: caller routing had an expert id
                                 out of range (slot = t*top_k + j,
                                 observed = the id) */
  LOOM_WAIT_CONFIG_MISMATCH = 5, /* not a wait: peer's layer config hash
                                    (observed) differs from ours (epoch) */
  LOOM_WAIT_DUP_ROUTING = 6,  /* not a wait: caller routing repeats expert
                                 `observed` within token `epoch` (slot =
                                 the repeating entry t*top_k + j) */
  LOOM_WAIT_CREDIT = 7,       /* peer's completion credit of the previous
                                 call (epoch = that call, observed = the
                                 last call the peer finished) */
  LOOM_WAIT_CALL_MISMATCH = 8, /* not a wait: peer's header carries call
                                  number `observed` (low 32 bits), ours is
                                  `epoch`: the ranks are out of step */
  LOOM_WAIT_ROWS = 9,         /* a row counter (peer = who adds to it, slot =
                                 which counter, epoch = rows awaited,
                                 observed = rows seen) */
} loom_wait_kind;

/*
 * Fault record, one per communicator, in pinned host memory mapped into the
 * device (so the host reads it while or after the kernel runs). Written once
 * by the block that won ctrl.fault_claim; `status` is written last, after a
 * system fence, so a non-zero status means every other field is valid.
 * The fields after `status` describe the ORIGINAL fault: this rank's own,
 * or, for status LOOM_PEER_ERROR, the one a peer stored into our window's
 * abort record (then `rank` is that peer). 64 bytes:
 *   status    4  0 = no fault, else a loom_result_t for this rank
 *   cause     4  the original fault's loom_result_t (== status if own)
 *   rank      4  rank that failed first (that waited, or found bad input)
 *   peer      4  rank it waited on
 *   what      4  loom_wait_kind
 *   slot      4  signal slot index
 *   block     4  CUDA block that failed
 *   op        4  operator id (loom_op_id) of the failing kernel
 *   epoch     8  value awaited (>=)
 *   observed  8  last value seen
 *   waited_ns 8  time waited before giving up
 *   time_ns   8  %globaltimer when the original fault was raised
 */
typedef struct {
  volatile int32_t status;
  volatile int32_t cause;
  volatile int32_t rank;
  volatile int32_t peer;
  volatile int32_t what;
  volatile int32_t slot;
  volatile int32_t block;
  volatile int32_t op;
  volatile uint64_t epoch;
  volatile uint64_t observed;
  volatile uint64_t waited_ns;
  volatile uint64_t time_ns;
} loom_fault_record;

/*
 * Abort record at the start of every rank's window (window offset 0),
 * written by a PEER: the first rank whose kernel stops on its own error
 * claims `claim` (0 -> its rank + 1, atom.cas.sys), fills `fault` (status
 * = cause = its error), fences at system scope and stores fault.status
 * last. The owner's bounded waits read fault.status every
 * LOOM_WAIT_CHECK_EVERY polls; non-zero means stop and report
 * LOOM_PEER_ERROR with `fault` as the reason. 4096 bytes reserved:
 *   claim  4  0, or the claiming rank + 1
 *   pad   60
 *   fault 64  copy of the claimant's fault record
 */
typedef struct {
  uint32_t claim;
  uint32_t pad[15];
  loom_fault_record fault;
} loom_abort_record;

/* Operator ids, for fault messages. */
typedef enum {
  LOOM_OP_EXCHANGE = 1,
  LOOM_OP_PUT_BENCH = 2,
  LOOM_OP_MOE = 3,
  LOOM_OP_AG_GEMM = 4,
  LOOM_OP_GEMM_RS = 5,
  LOOM_OP_GEMM_AR = 6,
} loom_op_id;

#ifdef __cplusplus
}
#endif
#endif /* LOOM_LAYOUT_H */
