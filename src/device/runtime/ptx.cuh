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

/* Acquire load at system scope of a 32-bit word (a status a peer GPU
 * release-publishes into our memory). */
static __device__ __forceinline__ int32_t ptx_ld_acquire_sys_s32(const int32_t *p) {
  int32_t v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
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

/* 16-byte load that bypasses L1 (data another GPU wrote into our memory). */
static __device__ __forceinline__ int4 ptx_ld_cg_v4(const int4 *p) {
  int4 v;
  asm volatile("ld.global.cg.v4.s32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

#endif /* LOOM_PTX_CUH */
