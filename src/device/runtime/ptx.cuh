/*
 * Layer 0: one-line wrappers around the PTX loom's runtime needs. Each
 * instruction lives here and only here, so its memory-model meaning is
 * stated once.
 */
#ifndef LOOM_PTX_CUH
#define LOOM_PTX_CUH

#include <stdint.h>

/* Acquire load at system scope: later loads of this thread see everything
 * the releasing writer (any GPU) did before its release store. */
static __device__ __forceinline__ uint64_t ptx_ld_acquire_sys_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* Release store at system scope: every earlier write of this thread (and,
 * through a preceding __syncthreads, of its block) is visible to a peer
 * that acquire-loads the new value. */
static __device__ __forceinline__ void ptx_st_release_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Relaxed store at system scope of a 64-bit word: after a fence.sys by the
 * same thread it completes a release pattern (PTX memory model), so several
 * flags can follow one fence; each st.release would fence again and wait
 * for the previous flag's remote store. */
static __device__ __forceinline__ void ptx_st_relaxed_sys_u64(uint64_t *p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* Acquire load at system scope of a 32-bit word (a status a peer GPU
 * release-publishes into our memory). */
static __device__ __forceinline__ int32_t ptx_ld_acquire_sys_s32(const int32_t *p) {
  int32_t v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* Add without a result, release at system scope: everything this thread
 * (and, cumulatively, what it observed, e.g. a block's stores ordered by a
 * barrier) wrote before is visible to whoever acquires the new value; the
 * address may be a peer's window (NVLink). */
static __device__ __forceinline__ void ptx_red_add_release_sys_u32(uint32_t *p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Relaxed load at GPU scope: a fresh value from L2, no ordering implied. */
static __device__ __forceinline__ int32_t ptx_ld_relaxed_gpu_s32(const int32_t *p) {
  int32_t v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

static __device__ __forceinline__ uint64_t ptx_ld_relaxed_gpu_u64(const uint64_t *p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

/* Nanosecond wall clock shared by all SMs (coarse: ~1 us updates). */
static __device__ __forceinline__ uint64_t ptx_globaltimer_ns(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* The SM this thread runs on (%smid). */
static __device__ __forceinline__ uint32_t ptx_smid(void) {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}

/* 16-byte load that bypasses L1 (data another GPU wrote into our memory). */
static __device__ __forceinline__ int4 ptx_ld_cg_v4(const int4 *p) {
  int4 v;
  asm volatile("ld.global.cg.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}


/* Tagged stores (the collective GEMMs' low-latency form, gemm_rs.cuh): two
 * 64-bit words, each a 32-bit payload in its low half and the call's tag
 * in its high half, relaxed at system scope. Each 64-bit element is
 * single-copy atomic, so a reader that sees a word's tag sees that word's
 * payload with it: no fence and no flag between the data and its reader
 * (NCCL's LL protocol has the same shape). */
static __device__ __forceinline__ void ptx_st_relaxed_sys_v2_u64(void *p, uint64_t a, uint64_t b) {
  asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

/* The reader's side of ptx_st_relaxed_sys_v2_u64: two 64-bit words, each
 * seen whole (a fresh value from L2, no ordering implied). */
static __device__ __forceinline__ void ptx_ld_relaxed_sys_v2_u64(const void *p, uint64_t *a, uint64_t *b) {
  asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}

/* ======================================================================== */
/* Hopper (sm_90a): TMA, mbarrier, wgmma, setmaxnreg.                        */
/* Used by the tile engine in src/device/tile/hopper*.cuh. Everything below  */
/* needs -gencode=arch=compute_90a,code=sm_90a (wgmma, setmaxnreg) or sm_90. */
/* ======================================================================== */

/* 32-bit shared-window address of a generic pointer into shared memory. */
static __device__ __forceinline__ uint32_t ptx_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* Acquire load of a 32-bit counter at system scope (a readiness counter that
 * another block, kernel or peer GPU release-increments). */
static __device__ __forceinline__ uint32_t ptx_ld_acquire_sys_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* Acquire load of a 32-bit counter at GPU scope (one that other blocks of
 * this GPU release-increment). */
static __device__ __forceinline__ uint32_t ptx_ld_acquire_gpu_u32(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

/* One lane of the (full) warp is elected; returns 1 there, 0 elsewhere. */
static __device__ __forceinline__ uint32_t ptx_elect_one(void) {
  uint32_t pred;
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 r;\nelect.sync r|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(pred));
  return pred;
}

/* mbarrier at `bar` (8 bytes, shared) expects `count` arrivals per phase. */
static __device__ __forceinline__ void ptx_mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(ptx_smem_addr(bar)), "r"(count)
               : "memory");
}

/* Make mbarrier inits visible to the async proxy (TMA) before first use. */
static __device__ __forceinline__ void ptx_fence_mbar_init(void) {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* Arrive once (release, CTA scope) and add `bytes` to the phase's expected
 * transaction count; the phase completes when arrivals and bytes are done. */
static __device__ __forceinline__ void ptx_mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(ptx_smem_addr(bar)),
               "r"(bytes)
               : "memory");
}

/* Add `bytes` to the current phase's expected transaction count without
 * arriving: loads issued ahead of the arrival that completes the phase
 * (the engine's weights ahead of a readiness wait, hop_producer). */
static __device__ __forceinline__ void ptx_mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(ptx_smem_addr(bar)), "r"(bytes)
               : "memory");
}

/* Arrive once (release, CTA scope), no transaction bytes. */
static __device__ __forceinline__ void ptx_mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(ptx_smem_addr(bar)) : "memory");
}

/* Arrive once (release, CTA scope) where `pred` is nonzero; every thread of
 * the warp executes the instruction (predicated, not a branch), so no
 * divergent path is opened while wgmma batches are still in flight (ptxas
 * would otherwise serialise them: warning C7518). */
static __device__ __forceinline__ void ptx_mbar_arrive_pred(uint64_t *bar, uint32_t pred) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(
          ptx_smem_addr(bar)),
      "r"(pred)
      : "memory");
}

/* One bounded probe (acquire, CTA scope): 1 once the phase with parity
 * `parity` has completed. The hardware may suspend the thread a while inside
 * the probe; callers loop. */
static __device__ __forceinline__ uint32_t ptx_mbar_try_wait_parity(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(ptx_smem_addr(bar)), "r"(parity)
      : "memory");
  return done;
}

/* 2^x and 1/x on the SFU, approximate (ex2: 2 ulp, rcp: 1 ulp), subnormal
 * inputs and results flushed to zero: one MUFU op each, without the range
 * fix-ups exp2f-style intrinsics wrap around it (a compare and two
 * predicated multiplies each). Not volatile: the compiler may schedule them. */
static __device__ __forceinline__ float ptx_ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
static __device__ __forceinline__ float ptx_rcp_ftz(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Bring the line holding *p into L1 (generic address: global memory or the
 * kernel parameter), no register written. */
static __device__ __forceinline__ void ptx_prefetch_l1(const void *p) {
  asm volatile("prefetch.L1 [%0];" ::"l"(p));
}

/* Bring a tensor map (param, const or global space) into the descriptor cache. */
static __device__ __forceinline__ void ptx_prefetch_tensormap(const void *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

/* Acquire a 128-byte tensor map that generic-proxy writes (host memcpy or a
 * kernel) put in global memory, before TMA reads it through the tensormap proxy. */
static __device__ __forceinline__ void ptx_fence_tensormap_acquire(const void *map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
}

/* Order this thread's earlier generic-proxy global accesses (e.g. an acquire
 * of a readiness counter) before its later async-proxy (TMA) global reads. */
static __device__ __forceinline__ void ptx_fence_proxy_async_global(void) {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* Order this thread's earlier generic-proxy accesses of every state space
 * before later async-proxy (TMA) ones, e.g. shared memory a kernel used for
 * something else before it becomes a TMA destination. */
static __device__ __forceinline__ void ptx_fence_proxy_async(void) {
  asm volatile("fence.proxy.async;" ::: "memory");
}

/* TMA 2D tile load: box at element coordinates (c0 = inner/K, c1 = outer/row)
 * of `map` into shared `dst`; completes `bytes` on mbarrier `bar`. Out-of-bound
 * elements are zero-filled and still counted in the transaction bytes. */
static __device__ __forceinline__ void ptx_tma_load_2d(void *dst, const void *map, uint64_t *bar,
                                                       int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(ptx_smem_addr(dst)),
      "l"(map), "r"(ptx_smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

/* ---- programmatic dependent launch (tile/hopper_host.cuh hop_launch) ---- */

/* Wait until every grid this one depends on programmatically has completed
 * and its memory operations are visible; returns at once for a grid launched
 * without the programmatic-serialization attribute. */
static __device__ __forceinline__ void ptx_griddep_wait(void) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

/* Let the next grid of the stream (launched with programmatic
 * serialization) be scheduled before this one completes; it still waits in
 * ptx_griddep_wait for this grid's completion before touching memory. */
static __device__ __forceinline__ void ptx_griddep_launch_dependents(void) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/* ---- TMA stores (the engine's staged epilogue, tile/hopper_epilogue.cuh) ---- */

/* Order this thread's earlier generic-proxy writes to shared memory before
 * later async-proxy (TMA) reads of it: every writing thread, then a
 * barrier (or __syncwarp), then one thread issues the store. */
static __device__ __forceinline__ void ptx_fence_proxy_async_shared(void) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* Store four 8 x 8 matrices of 16-bit values to shared memory
 * (stmatrix.m8n8.x4): lane l passes the address of row l % 8 of matrix l / 8
 * (16 contiguous bytes); register j holds this lane's two adjacent values of
 * matrix j, row l / 4, columns 2 (l % 4), +1: the mma/wgmma accumulator
 * fragment layout. */
static __device__ __forceinline__ void ptx_stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                       uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

/* TMA 2D tile store: the box at shared `src` to element coordinates (c0 =
 * inner, c1 = outer) of `map`; elements outside the map are not written. Joins
 * this thread's open bulk group (ptx_bulk_commit). */
static __device__ __forceinline__ void ptx_tma_store_2d(const void *map, const void *src, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
               "r"(ptx_smem_addr(src)), "r"(c0), "r"(c1)
               : "memory");
}

/* Close this thread's bulk group of TMA stores issued since the last commit. */
static __device__ __forceinline__ void ptx_bulk_commit(void) {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

/* Wait until at most N of this thread's committed bulk groups still read
 * their shared-memory source (the source may then be overwritten; the global
 * writes may still be in flight). */
template <int N> static __device__ __forceinline__ void ptx_bulk_wait_read(void) {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Wait until at most N of this thread's committed bulk groups are pending
 * (their global writes performed). */
template <int N> static __device__ __forceinline__ void ptx_bulk_wait(void) {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

/* Bulk (non-tensor) copy of `bytes` (a multiple of 16; both addresses
 * 16-aligned) from global `src` into shared `dst`; completes `bytes` on the
 * mbarrier `bar` (the caller arms it with ptx_mbar_arrive_expect_tx). */
static __device__ __forceinline__ void ptx_bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   ptx_smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(ptx_smem_addr(bar))
               : "memory");
}

/* Bulk (non-tensor) store of `bytes` (a multiple of 16; both addresses
 * 16-aligned) from shared `src` to global `dst`, this GPU's memory or a
 * peer's mapped over NVLink. Joins this thread's open bulk group
 * (ptx_bulk_commit; ptx_bulk_wait_read before `src` is reused,
 * ptx_bulk_wait before the writes are relied on). */
static __device__ __forceinline__ void ptx_bulk_store(void *dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(ptx_smem_addr(src)),
               "r"(bytes)
               : "memory");
}

/* L2 eviction-priority policies (createpolicy) for .L2::cache_hint operands:
 * evict_last keeps the lines over normal ones, evict_first lets them go first. */
static __device__ __forceinline__ uint64_t ptx_policy_evict_last(void) {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
static __device__ __forceinline__ uint64_t ptx_policy_evict_first(void) {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

/* Prefetch a 2D box of `map` at (c0, c1) into L2 (no shared memory, no
 * barrier; a hint the memory system may drop). */
static __device__ __forceinline__ void ptx_tma_prefetch_2d(const void *map, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(map), "r"(c0), "r"(c1)
               : "memory");
}

/* ptx_tma_load_2d with an L2 cache-hint policy (ptx_policy_*) for the lines it reads. */
static __device__ __forceinline__ void ptx_tma_load_2d_hint(void *dst, const void *map, uint64_t *bar,
                                                            int32_t c0, int32_t c1, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(ptx_smem_addr(dst)),
      "l"(map), "r"(ptx_smem_addr(bar)), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}

/* ---- clusters (2-CTA multicast variants, tile/hopper.cuh "CL") ---- */

/* Rank of this CTA inside its cluster (%cluster_ctarank). */
static __device__ __forceinline__ uint32_t ptx_cluster_ctarank(void) {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

/* Every non-exited thread of the cluster arrives (release, cluster scope)
 * and waits (acquire) for all others: orders shared-memory and mbarrier
 * initialisation of every CTA before any peer's remote access, and keeps a
 * CTA alive until its peers stop touching its shared memory. Not .aligned:
 * threads of a warp may reach it at different times. */
static __device__ __forceinline__ void ptx_cluster_sync(void) {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/* Shared::cluster address of the variable at shared::cta address `addr` in
 * the CTA of rank `rank` of this cluster. */
static __device__ __forceinline__ uint32_t ptx_mapa_shared(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

/* 32-bit load from a shared::cluster address (a peer CTA's shared memory). */
static __device__ __forceinline__ uint32_t ptx_ld_shared_cluster_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

/* Arrive once on the mbarrier at shared::cluster address `addr` (a peer
 * CTA's barrier, from ptx_mapa_shared) where `pred` is nonzero; predicated
 * like ptx_mbar_arrive_pred (no branch). Default semantics (release at CTA
 * scope), on purpose: the engine's consumers use it to hand a stage back to
 * the peer's producer, whose only reaction is a TMA write into that stage,
 * and the reads it must follow (wgmma) completed at wgmma.wait_group. A
 * .release.cluster arrive compiles to MEMBAR.ALL.GPU + error barriers
 * before the arrive, on every stage of every consumer warp: that fence was
 * what held the 2-CTA variants at 0.3-0.6x (docs/tile.md "v5"). Code that
 * needs the peer to see its earlier ordinary writes must fence itself. */
static __device__ __forceinline__ void ptx_mbar_arrive_cluster_pred(uint32_t addr, uint32_t pred) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [%0];\n}\n" ::"r"(addr),
      "r"(pred)
      : "memory");
}

/* TMA 2D tile load multicast to the CTAs of `cta_mask` (bit r = cluster
 * rank r): the box lands at the same shared offset `dst` in each of them and
 * completes its bytes on the mbarrier at the same offset `bar` in each. */
static __device__ __forceinline__ void ptx_tma_load_2d_multicast(void *dst, const void *map, uint64_t *bar,
                                                                 int32_t c0, int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(ptx_smem_addr(dst)),
      "l"(map), "r"(ptx_smem_addr(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

/* Release registers: every warp of the warpgroup drops to N per thread. */
template <int N> static __device__ __forceinline__ void ptx_setmaxnreg_dec(void) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

/* Claim registers released by other warpgroups of the CTA: N per thread. */
template <int N> static __device__ __forceinline__ void ptx_setmaxnreg_inc(void) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/* Order earlier register writes to wgmma accumulators/A before the next
 * wgmma.mma_async of this warpgroup (issue before each batch). */
static __device__ __forceinline__ void ptx_wgmma_fence(void) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

/* Close the batch of wgmma.mma_async issued since the last commit. */
static __device__ __forceinline__ void ptx_wgmma_commit(void) {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Wait until at most N committed wgmma batches are still pending. */
template <int N> static __device__ __forceinline__ void ptx_wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Named barrier `id` (1..15; 0 is __syncthreads) over `nthreads` threads
 * (a multiple of 32) of the CTA; orders their shared and global accesses at
 * CTA scope like __syncthreads does for the whole block. */
static __device__ __forceinline__ void ptx_named_bar_sync(uint32_t id, uint32_t nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

/* Arrive on named barrier `id` without waiting, where `pred` is nonzero
 * (predicated: the same value across the warp; no branch is opened). The
 * barrier completes when `nthreads` threads have arrived or synced on it:
 * a producer/consumer handshake between warpgroups (bar.arrive here,
 * ptx_named_bar_sync there). Orders this thread's earlier shared/global
 * accesses before the waiters' later ones (CTA scope). */
static __device__ __forceinline__ void ptx_named_bar_arrive_pred(uint32_t id, uint32_t nthreads, uint32_t pred) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n@p bar.arrive %0, %1;\n}\n" ::"r"(id), "r"(nthreads),
               "r"(pred)
               : "memory");
}

/* Acquire-release fence at GPU scope (= __threadfence): this thread's
 * earlier accesses are ordered before its later ones for every thread of
 * the GPU that synchronises with it. */
static __device__ __forceinline__ void ptx_fence_acq_rel_gpu(void) {
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
}

/* Atomic add at GPU scope with acquire-release semantics; returns the old
 * value (split-K arrival counters: release my partial, acquire the others'). */
static __device__ __forceinline__ uint32_t ptx_atom_add_acq_rel_gpu_u32(uint32_t *p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

/* Release store at GPU scope: a flag that publishes this thread's earlier
 * writes (and those a barrier ordered before them) to other blocks. */
static __device__ __forceinline__ void ptx_st_release_gpu_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* Relaxed store at GPU scope (resetting a counter nobody else touches until
 * the next kernel). */
static __device__ __forceinline__ void ptx_st_relaxed_gpu_u32(uint32_t *p, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

/* 16-byte load of four floats that bypasses L1 (partials other SMs wrote in
 * this kernel); ordered after earlier fences by the memory clobber. */
static __device__ __forceinline__ float4 ptx_ld_cg_f4(const float4 *p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

/* fp64 tensor-core MMA, sm_90 shape: D[16 x 8] += A[16 x 16] B[16 x 8],
 * every element in fp64 (8x the work of sm_80's m8n8k4 per instruction). With g = l / 4, t = l % 4, the
 * fragments of lane l are
 *   a[v] = A[g + 8 (v % 2)][t + 4 (v / 2)]   v < 8
 *   b[v] = B[t + 4 v][g]                     v < 4
 *   d[v] = D[g + 8 (v / 2)][2 t + v % 2]     v < 4 */
static __device__ __forceinline__ void ptx_dmma_m16n8k16(double *d, const double *a, const double *b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
      : "+d"(d[0]), "+d"(d[1]), "+d"(d[2]), "+d"(d[3])
      : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
        "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
}

/* v through an opaque register move, so that the front end does not re-read
 * a kernel parameter where it is used (a loop's reload of a parameter is an
 * LDC whose result the next instruction waits on; the gate chunk loop had
 * three, ~13% of its stall samples, ncu session 45). A hint, not a
 * guarantee: ptxas may still fold the move back into the load (it did for
 * the gate's T, session 48); check the SASS. */
static __device__ __forceinline__ int ptx_keep_i32(int v) {
  int r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(v));
  return r;
}

/* This thread's index in the block, read from the special register where
 * it is used (volatile: not hoisted, not kept live across a loop). A value
 * held across the Hopper consumers' mainloop beside 128 accumulators is
 * spilled, and its reload after the mainloop is an L2 round trip (the L1
 * is mostly shared memory there); reading %tid.x again costs an S2R. */
static __device__ __forceinline__ int ptx_tid_x(void) {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}

/* Compiler-only fence on an accumulator register: keeps the compiler from
 * moving reads/writes of `r` across wgmma issue/wait points (no instruction). */
static __device__ __forceinline__ void ptx_reg_fence(float &r) {
  asm volatile("" : "+f"(r)::"memory");
}

/* wgmma.mma_async, shared-memory A and B (descriptors, see tile/hopper.cuh),
 * fp32 accumulators: m64n{16,32,64,128,256} x {bf16, f16 (k16), tf32 (k8)}
 * (n16, n32: the swapped decode tiles, hop_cfg::swap).
 * ptx_wgmma_m64n<N>k<K>_<type>(d, da, db, acc): D[64 x N] (+)= A[64 x K] *
 * B[N x K]^T, both K-major in shared memory; d holds the N/2 fp32
 * accumulators of this thread; acc == 0 overwrites D. The 16-bit forms pass
 * imm-trans-a/b = 0 (both operands K-major); tf32 has no transpose operands.
 * One function per instruction, generated by PTX_WGMMA_SS below: the
 * accumulator lists are the only thing that differs in size. */
#define PTX_WG_REGS8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define PTX_WG_REGS16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define PTX_WG_REGS32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define PTX_WG_REGS64 PTX_WG_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define PTX_WG_REGS128 PTX_WG_REGS64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define PTX_WG_ACC8(d)                                                                    \
  "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]), "+f"((d)[4]), "+f"((d)[5]), \
      "+f"((d)[6]), "+f"((d)[7])
#define PTX_WG_ACC16(d) PTX_WG_ACC8(d), PTX_WG_ACC8((d) + 8)
#define PTX_WG_ACC32(d) \
  PTX_WG_ACC8(d), PTX_WG_ACC8((d) + 8), PTX_WG_ACC8((d) + 16), PTX_WG_ACC8((d) + 24)
#define PTX_WG_ACC64(d) PTX_WG_ACC32(d), PTX_WG_ACC32((d) + 32)
#define PTX_WG_ACC128(d) PTX_WG_ACC64(d), PTX_WG_ACC64((d) + 64)

/* name, "shape.types", accumulator count, operand numbers of da, db, acc,
 * trailing immediates (scale-d is the predicate p; scale-a/b = 1; 16-bit
 * forms add imm-trans-a/b = 0). */
#define PTX_WGMMA_SS(name, shape_types, NACC, IA, IB, IP, imms)                                  \
  static __device__ __forceinline__ void name(float *d, uint64_t da, uint64_t db, uint32_t acc) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IP ", 0;\n"                               \
                 "wgmma.mma_async.sync.aligned." shape_types " {" PTX_WG_REGS##NACC                  \
                 "}, %" #IA ", %" #IB ", p, " imms ";\n}\n"                                          \
                 : PTX_WG_ACC##NACC(d)                                                           \
                 : "l"(da), "l"(db), "r"(acc));                                                  \
  }

PTX_WGMMA_SS(ptx_wgmma_m64n16k16_bf16, "m64n16k16.f32.bf16.bf16", 8, 8, 9, 10, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n16k16_f16, "m64n16k16.f32.f16.f16", 8, 8, 9, 10, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n16k8_tf32, "m64n16k8.f32.tf32.tf32", 8, 8, 9, 10, "1, 1")
PTX_WGMMA_SS(ptx_wgmma_m64n32k16_bf16, "m64n32k16.f32.bf16.bf16", 16, 16, 17, 18, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n32k16_f16, "m64n32k16.f32.f16.f16", 16, 16, 17, 18, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n32k8_tf32, "m64n32k8.f32.tf32.tf32", 16, 16, 17, 18, "1, 1")
PTX_WGMMA_SS(ptx_wgmma_m64n64k16_bf16, "m64n64k16.f32.bf16.bf16", 32, 32, 33, 34, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n128k16_bf16, "m64n128k16.f32.bf16.bf16", 64, 64, 65, 66, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n256k16_bf16, "m64n256k16.f32.bf16.bf16", 128, 128, 129, 130, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n64k16_f16, "m64n64k16.f32.f16.f16", 32, 32, 33, 34, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n128k16_f16, "m64n128k16.f32.f16.f16", 64, 64, 65, 66, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n256k16_f16, "m64n256k16.f32.f16.f16", 128, 128, 129, 130, "1, 1, 0, 0")
PTX_WGMMA_SS(ptx_wgmma_m64n64k8_tf32, "m64n64k8.f32.tf32.tf32", 32, 32, 33, 34, "1, 1")
PTX_WGMMA_SS(ptx_wgmma_m64n128k8_tf32, "m64n128k8.f32.tf32.tf32", 64, 64, 65, 66, "1, 1")
PTX_WGMMA_SS(ptx_wgmma_m64n256k8_tf32, "m64n256k8.f32.tf32.tf32", 128, 128, 129, 130, "1, 1")

#endif /* LOOM_PTX_CUH */
