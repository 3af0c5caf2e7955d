/*
 * What the collective GEMM kernels (ag_gemm.cu, gemm_rs.cu) share: the
 * tile choice, the engine parameters of R host groups carried in the
 * kernel parameter, and the cooperative launch. docs/collective_gemm.md.
 */
#ifndef LOOM_OPS_COLLECTIVE_CUH
#define LOOM_OPS_COLLECTIVE_CUH

#include <stdlib.h>
#include <string.h>

#include "../runtime/transport.cuh"
#include "../tile/hopper_host.cuh"
#include "ops.h"

/* The tiles, every dtype: 128 x 256 with both consumer warpgroups on one
 * tile and one wgmma batch in flight (hop_large_w1), unless that gives
 * fewer tiles than the grid has blocks; then the ping-pong 128 x 128 tile
 * (twice the tiles). On 1x H200 (docs/collective_gemm.md "Measured") the
 * wide tile beat ping-pong by 12-15% (bf16, K = 8192 and 16384) and 6%
 * (TF32); at M = K = 4096, N = 256 (32 wide tiles on 132 SMs) it lost 29%.
 * Both 128 rows per task: one readiness flag per LOOM_AG_BLOCK_ROWS rows. */
template <int DT> struct coll_wide { typedef hop_large_w1<DT> cfg; };
template <int DT> struct coll_narrow { typedef hop_pp<DT> cfg; };
static_assert(hop_large_w1<HOP_BF16>::TM == LOOM_AG_BLOCK_ROWS && hop_pp<HOP_BF16>::TM == LOOM_AG_BLOCK_ROWS,
              "one flag per task row block");

/* Whether a launch of `tasks_wide` wide tiles on `sms` blocks takes the
 * narrow tile. LOOM_AG_TILE=wide|narrow forces one (tests cover both;
 * diagnostics). Every rank of a call must decide the same: the inputs are
 * the same shapes and SM counts on every rank. */
static inline int coll_narrow_tile(int64_t tasks_wide, int sms) {
  int narrow = tasks_wide < sms;
  const char *force = getenv("LOOM_AG_TILE");
  if (force && !strcmp(force, "wide")) narrow = 0;
  if (force && !strcmp(force, "narrow")) narrow = 1;
  return narrow;
}

/* The engine parameters of R host groups of `rows` rows each, whose group
 * table and maps sit in the same kernel parameter struct at byte offsets
 * groups_off / maps_off from its hop_params (hop_params.maps_const). */
template <class CFG>
static cudaError_t coll_params(hop_params *hp, int act, int R, int rows, int n, int k, int ldc, int sms,
                               uint32_t *error, uint64_t timeout_ns, size_t groups_off, size_t maps_off,
                               int store16) {
  hop_problem pr;
  memset(&pr, 0, sizeof pr);
  hop_group_desc unused; /* validation only asks that a group table exists */
  pr.groups = &unused;
  pr.dtype = CFG::dtype;
  pr.act = act;
  pr.n = n;
  pr.k = k;
  pr.ldc = ldc;
  pr.num_groups = R;
  pr.error = error;
  pr.timeout_ns = timeout_ns;
  pr.num_sms = sms;
  cudaError_t e = hop_validate_common<CFG>(&pr);
  if (e != cudaSuccess) return e;
  hop_params_common<CFG>(hp, &pr);
  const int tiles = (rows + CFG::BM - 1) / CFG::BM * hp->n_tiles; /* per group */
  hp->total_tiles = tiles * R;
  hp->total_tasks = tiles * R;
  hp->split_k = 1;
  hp->kb_per_split = hp->nkb;
  hp->store16 = store16;
  hp->maps_const = 1; /* offsets from the hop_params, which the kernel reads in place */
  hp->group_maps = (const CUtensorMap *)(uintptr_t)maps_off;
  hp->groups = (const hop_group *)(uintptr_t)groups_off;
  return cudaSuccess;
}

/* One cooperative launch of `kernel` on every SM of the communicator (a
 * loopback rank's share), CFG's threads and shared memory. */
template <class CFG, class KP>
static cudaError_t coll_launch(void (*kernel)(KP), const KP &kp, const loom_dev_comm *c, cudaStream_t stream) {
  const int smem = CFG::smem_bytes;
  /* per device: a process may drive several (every call, it is cheap) */
  cudaError_t e = cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)kernel, CFG::threads, smem)) !=
      cudaSuccess)
    return e;
  if (per_sm < 1) return cudaErrorCooperativeLaunchTooLarge;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.gridDim = dim3(c->sms);
  cfg.blockDim = dim3(CFG::threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, kp);
}

/* loom_activation_t (or -1: none) as the engine's epilogue: returns
 * CLS::run<HOP_ACT_...>(args) (CLS a type name without commas). */
#define COLL_DISPATCH_ACT(act, CLS, ...)                                               \
  switch (act) {                                                                       \
  case LOOM_ACT_RELU: return CLS::template run<HOP_ACT_RELU>(__VA_ARGS__);             \
  case LOOM_ACT_GELU: return CLS::template run<HOP_ACT_GELU_ERF>(__VA_ARGS__);         \
  case LOOM_ACT_SILU: return CLS::template run<HOP_ACT_SILU>(__VA_ARGS__);             \
  case -1: return CLS::template run<HOP_ACT_NONE>(__VA_ARGS__);                        \
  default: return cudaErrorInvalidValue;                                               \
  }

#endif /* LOOM_OPS_COLLECTIVE_CUH */
