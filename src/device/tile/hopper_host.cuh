/*
 * Host side of the Hopper tile engine (hopper.cuh): tensor maps, the group
 * table, the launch. Include from a .cu file compiled for sm_90a.
 *
 *   hop_problem  what the caller describes (host memory)
 *   hop_plan     device resources built from it once (group table, tensor
 *                maps) and reused by every launch of the same problem
 *
 * Groups come one of two ways (hopper.cuh, "problem description"):
 *   hop_problem.groups    host groups: M_g known here, per-group maps
 *   hop_problem.dgroups   device groups: M_g and row offsets written on the
 *                         device before the launch or during it (behind a
 *                         readiness counter); one map over the row buffer,
 *                         one over the stacked weights
 *
 *   hop_plan plan;
 *   hop_plan_create<hop_large<HOP_BF16>>(&plan, &problem);      // allocates
 *   hop_launch<hop_large<HOP_BF16>, HOP_ACT_NONE, HOP_OUT_BF16>(&plan, stream);
 *   hop_plan_destroy(&plan);
 *
 * Tensor maps are encoded with cuTensorMapEncodeTiled fetched through
 * cudaGetDriverEntryPointByVersion, so nothing links libcuda.
 * Errors come back as cudaError_t (cudaErrorInvalidValue for a problem the
 * engine does not take); nothing here exits.
 */
#ifndef LOOM_TILE_HOPPER_HOST_CUH
#define LOOM_TILE_HOPPER_HOST_CUH

#include <cuda_runtime.h>
#include <cudaTypedefs.h> /* PFN_cuTensorMapEncodeTiled_v12000 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hopper.cuh"

/* One group as the caller sees it (host memory). Pointers are device pointers. */
struct hop_group_desc {
  const void *a;          /* first A row of this group; [rows x K], pitch lda elements */
  int64_t lda;            /* >= K; lda * element size must be a multiple of 16 bytes */
  int rows;               /* M_g >= 0 (0: no tasks, no map)                          */
  const void *b;          /* weights [N x K], pitch ldb elements (same rules as lda)  */
  int64_t ldb;
  void *c;                /* output [rows x n_out], pitch hop_problem.ldc; or NULL with row_ptr */
  void *const *row_ptr;   /* optional, device array of rows pointers                  */
  const float *row_scale; /* optional, device array of rows scales                    */
  const uint32_t *ready;  /* optional readiness counters (see hop_group)              */
  uint32_t ready_target;
  int ready_stride;
};

/* Device groups (docs/tile.md "Device groups"). Rows of group g are rows
 * [row_offset[g], row_offset[g] + rows[g]) of one row buffer of `capacity`
 * rows: A, C, row_ptr and row_scale are all indexed by buffer row. The
 * offsets need no alignment; groups may leave gaps and must not overlap
 * (overlapping groups would write the same C rows). The weights of all
 * groups are stacked: group g's B is rows [g*N, (g+1)*N) of b.
 * Pointers are device pointers; the table arrays are read by the kernel
 * after table_ready says they are written, so a kernel running before or
 * beside the engine may write them. */
struct hop_dgroups_desc {
  const void *a;           /* row buffer [capacity x K], pitch lda elements       */
  int64_t lda;
  int capacity;            /* rows of the buffer (the A map's outer dimension: TMA
                              zero-fills past it); C / row_ptr / row_scale hold as many */
  const void *b;           /* stacked weights [num_groups * N x K], pitch ldb     */
  int64_t ldb;
  void *c;                 /* output [capacity x n_out], pitch hop_problem.ldc; or NULL with row_ptr */
  void *const *row_ptr;    /* optional [capacity] destinations, by buffer row     */
  const float *row_scale;  /* optional [capacity] scales, by buffer row           */
  const int32_t *row_offset; /* [num_groups], written on the device               */
  const int32_t *rows;       /* [num_groups] M_g >= 0, written on the device       */
  const uint32_t *table_ready; /* optional: the kernel waits (bounded, timeout_ns)
                                  until (int32)(*table_ready - table_target) >= 0
                                  before reading row_offset / rows (acquire; the
                                  writer must release). NULL: written in stream order */
  uint32_t table_target;
  const uint32_t *ready;   /* optional per-task counters: task (g, m_blk) waits for */
  uint32_t ready_target;   /*   ready[g * ready_group_stride + m_blk * ready_stride] */
  int ready_stride;        /*   - ready_target >= 0; both strides 0: one counter    */
  int ready_group_stride;
};

struct hop_problem {
  int dtype;          /* hop_dtype of A and B; must match the CFG's           */
  int act;            /* hop_act the launch will use (n_out = N/2 for SwiGLU) */
  int n, k;           /* N (rows of every B), K                                */
  int ldc;            /* output pitch in elements (>= n_out, even)             */
  int num_groups;     /* >= 1; 1 = dense (maps go in the kernel parameter)    */
  const hop_group_desc *groups; /* host groups [num_groups], or NULL with dgroups */
  const hop_dgroups_desc *dgroups; /* device groups, or NULL (set exactly one of the two) */
  uint32_t *error;    /* device word for HOP_ERR_* bits, or NULL              */
  uint64_t timeout_ns;/* bound of each readiness wait                          */
  int num_sms;        /* grid cap: the device's multiprocessor count           */
  int raster_m;       /* m-blocks per raster band; 0 = 16                      */
  int split_k;        /* K slices per output tile, 0 or 1 = none; > 1 only for
                         HOP_ML_COOP configurations. Lowered so that every slice
                         has >= 1 k-block (plan.params.split_k is the value used).
                         Deterministic: fixed-order fp32 reduction in a workspace
                         the plan owns, so launches of one plan must not overlap.
                         Device groups: must be 0 or 1 (the tile count is not
                         known here to size the workspace). */
  int row_ptr_align16; /* 1: every row_ptr destination is 16-byte aligned (the
                          caller's promise), so the epilogue may store 16 bytes
                          per lane; 0: 4/8-byte stores wherever row_ptr is used.
                          For C the plan checks the base and ldc itself. */
  int l2_hints;       /* hop_params.l2_hints: L2 eviction policies of the TMA loads
                         (0 none, 1 weights evict_last, 2 and A evict_first) */
  int no_pdl;         /* 0: launches use programmatic dependent launch (the
                         grid may be scheduled while the previous kernel of the
                         stream finishes; it waits for that kernel's completion
                         before touching memory: griddepcontrol.wait first);
                         1: plain stream order */
  int no_hg_table;    /* host groups: 0 = the groups' tile starts and rows are copied into
                         each block's shared memory where they fit beside the ring
                         (hop_params.hg_table); 1: tasks decoded from the group table */
  int out;            /* hop_out the launches will use (0 = bf16). Read only by
                         HOP_EPI_TMA configurations: a 16-bit output to C (no
                         row_ptr, 16-byte aligned rows) gets C maps; a launch
                         with an fp32 OUT then fails (cudaErrorInvalidValue) */
};

struct hop_plan {
  hop_params params;      /* the kernel argument                        */
  hop_group *d_groups;    /* device group table (num_groups entries)    */
  CUtensorMap *d_maps;    /* device maps (grouped only), 2 per group    */
  CUtensorMap *d_cmaps;   /* HOP_EPI_TMA: C maps (hop_params.c_maps), or NULL */
  void *d_split;          /* split-K workspace + counters, or NULL      */
  int grid;               /* blocks to launch: min(num_sms, tiles); device groups: num_sms */
  int pdl;                /* launch with programmatic stream serialization (hop_problem.no_pdl) */
  int smem_bytes;         /* dynamic shared memory per block (+ the task table: device groups,
                             host groups with hop_params.hg_table) */
};

typedef PFN_cuTensorMapEncodeTiled_v12000 hop_encode_fn;

struct hop_encode_entry {
  hop_encode_fn fn;
  cudaError_t err;
};
static hop_encode_entry hop_lookup_encode(void) {
  void *f = NULL;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
  if (e == cudaSuccess && (q != cudaDriverEntryPointSuccess || !f)) e = cudaErrorSymbolNotFound;
  return hop_encode_entry{e == cudaSuccess ? (hop_encode_fn)f : NULL, e};
}
/* Looked up once per process: a function-local static's initialisation is
 * thread-safe in C++, and loom.h lets threads call on distinct
 * communicators at once (every collective GEMM launch encodes maps). */
static cudaError_t hop_get_encode(hop_encode_fn *fn) {
  static const hop_encode_entry entry = hop_lookup_encode();
  *fn = entry.fn;
  return entry.err;
}

/* Map over a row-major [rows x k] matrix (pitch ld elements): box of box_k
 * (= 128 bytes) x box_rows, 128-byte swizzle, out-of-bounds zero fill. */
static cudaError_t hop_make_map(CUtensorMap *map, int dtype, const void *base, uint64_t rows,
                                uint64_t k, uint64_t ld, uint32_t box_k, uint32_t box_rows) {
  hop_encode_fn encode;
  cudaError_t e = hop_get_encode(&encode);
  if (e != cudaSuccess) return e;
  const uint64_t esize = dtype == HOP_TF32 ? 4 : 2;
  const CUtensorMapDataType t = dtype == HOP_BF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                : dtype == HOP_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  if (((uintptr_t)base & 15) || (ld * esize) % 16 || rows == 0 || k == 0) return cudaErrorInvalidValue;
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {ld * esize};
  const cuuint32_t box[2] = {box_k, box_rows};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = encode(map, t, 2, (void *)base, dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* Map over a 16-bit row-major output [rows x n_out] (pitch ldc elements) for
 * the TMA epilogue: box 64 columns (128 bytes) x 16 rows, 128-byte swizzle
 * (the staging layout of hop_epilogue_tma). The element type is only bits:
 * bf16 and fp16 both travel as uint16. */
static cudaError_t hop_make_cmap(CUtensorMap *map, const void *base, uint64_t rows, uint64_t n_out, uint64_t ldc) {
  hop_encode_fn encode;
  cudaError_t e = hop_get_encode(&encode);
  if (e != cudaSuccess) return e;
  if (((uintptr_t)base & 15) || (ldc * 2) % 16 || rows == 0 || n_out == 0) return cudaErrorInvalidValue;
  const cuuint64_t dims[2] = {n_out, rows};
  const cuuint64_t strides[1] = {ldc * 2};
  const cuuint32_t box[2] = {64, 16};
  const cuuint32_t estr[2] = {1, 1};
  CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void *)base, dims, strides, box, estr,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

/* HOP_EPI_TMA: whether the plan gives the launch C maps (16-bit output to
 * C, every row 16-byte aligned: hop_params.store16). */
template <class CFG> static int hop_wants_cmaps(const hop_problem *pr, int store16) {
  return CFG::epi_tma && pr->out != HOP_OUT_FP32 && store16;
}

/* Copy `n` host-built C maps to the device as the plan's c_maps. */
static cudaError_t hop_upload_cmaps(hop_plan *plan, const CUtensorMap *maps, int n) {
  cudaError_t e = cudaMalloc((void **)&plan->d_cmaps, sizeof(CUtensorMap) * n);
  if (e != cudaSuccess) return e;
  e = cudaMemcpy(plan->d_cmaps, maps, sizeof(CUtensorMap) * n, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) return e;
  plan->params.c_maps = plan->d_cmaps;
  return cudaSuccess;
}

static void hop_plan_destroy(hop_plan *plan) {
  if (plan->d_groups) cudaFree(plan->d_groups);
  if (plan->d_maps) cudaFree(plan->d_maps);
  if (plan->d_cmaps) cudaFree(plan->d_cmaps);
  if (plan->d_split) cudaFree(plan->d_split);
  plan->d_groups = NULL;
  plan->d_maps = NULL;
  plan->d_cmaps = NULL;
  plan->d_split = NULL;
}

/* Checks common to both modes. */
template <class CFG> static cudaError_t hop_validate_common(const hop_problem *pr) {
  if (pr->dtype != CFG::dtype || pr->num_groups < 1 || pr->num_sms < 1) return cudaErrorInvalidValue;
  if (!pr->groups == !pr->dgroups) return cudaErrorInvalidValue; /* exactly one mode */
  if (pr->split_k < 0 || pr->split_k > 64 || (pr->split_k > 1 && (CFG::ml != HOP_ML_COOP || CFG::CL > 1)))
    return cudaErrorInvalidValue;
  /* the swapped tile: no K split (its partials would need a transposed workspace) */
  if (CFG::swap && pr->split_k > 1) return cudaErrorInvalidValue;
  /* KSUB > 1: every k-block of the last stage must hold some K (a box that
   * starts past K would rely on fully out-of-bounds TMA loads) */
  if (CFG::KSUB > 1 && ((pr->k + CFG::BK - 1) / CFG::BK) % CFG::KSUB) return cudaErrorInvalidValue;
  if (CFG::CL > 1 && pr->num_sms < CFG::CL) return cudaErrorInvalidValue;
  if (pr->n < 8 || pr->n % 8 || pr->k < 8 || pr->k % 8) return cudaErrorInvalidValue;
  if (pr->act == HOP_ACT_SWIGLU && pr->n % (2 * HOP_SWIGLU_BLOCK)) return cudaErrorInvalidValue;
  const int n_out = pr->act == HOP_ACT_SWIGLU ? pr->n / 2 : pr->n;
  if (pr->ldc % 2 || pr->ldc < n_out) return cudaErrorInvalidValue;
  return cudaSuccess;
}

/* Whether rows of C (or of row_ptr) may take 16-byte stores: 16-byte aligned
 * base and ldc a multiple of 8 elements (16 bytes of a 16-bit output). */
static int hop_rows_align16(const hop_problem *pr, const void *c, const void *const *row_ptr) {
  if (row_ptr) return pr->row_ptr_align16 != 0;
  return ((uintptr_t)c & 15) == 0 && pr->ldc % 8 == 0;
}

/* Fields of hop_params both modes set the same way. */
template <class CFG> static void hop_params_common(hop_params *p, const hop_problem *pr) {
  p->num_groups = pr->num_groups;
  p->l2_hints = pr->l2_hints;
  p->nkb = (pr->k + CFG::BKS - 1) / CFG::BKS; /* stages of K */
  p->n_tiles = (pr->n + CFG::TN - 1) / CFG::TN;
  p->raster_m = pr->raster_m > 0 ? pr->raster_m : 16;
  p->n = pr->n;
  p->k = pr->k;
  p->n_out = pr->act == HOP_ACT_SWIGLU ? pr->n / 2 : pr->n;
  p->ldc = pr->ldc;
  p->error = pr->error;
  p->timeout_ns = pr->timeout_ns;
}

/* Device groups: one descriptor, the two whole-buffer maps; the tile count is
 * derived by every block at run time (hop_dg_build), so the grid is every SM. */
template <class CFG> static cudaError_t hop_plan_create_dgroups(hop_plan *plan, const hop_problem *pr) {
  const hop_dgroups_desc *d = pr->dgroups;
  const int G = pr->num_groups;
  hop_group hg;
  hop_params *p = &plan->params;
  cudaError_t e;
  if (pr->split_k > 1) return cudaErrorInvalidValue;
  if (!d->a || !d->b || (!d->c && !d->row_ptr) || !d->row_offset || !d->rows || d->capacity < 1 ||
      d->capacity > INT32_MAX - 256 /* rows + BM - 1 stays in int32 */ ||
      d->lda < pr->k || d->ldb < pr->k || d->ready_stride < 0 || d->ready_group_stride < 0)
    return cudaErrorInvalidValue;
  /* the table must fit beside the ring, and every tile index in int32:
   * tiles <= (capacity / BM + G) * n_tiles (each group adds at most one
   * partial tile) */
  if (CFG::smem_bytes + hop_dg_smem_bytes(G) > 232448) return cudaErrorInvalidValue;
  if (((int64_t)d->capacity / CFG::TM + G) * ((pr->n + CFG::TN - 1) / CFG::TN) > INT32_MAX)
    return cudaErrorInvalidValue;
  if ((int64_t)G * pr->n > INT32_MAX) return cudaErrorInvalidValue; /* B row coordinates */
  memset(&hg, 0, sizeof(hg));
  hg.c = d->c;
  hg.row_ptr = d->row_ptr;
  hg.row_scale = d->row_scale;
  hg.ready = d->ready;
  hg.ready_target = d->ready_target;
  hg.ready_stride = d->ready_stride;
  hg.ready_group_stride = d->ready_group_stride;
  hop_params_common<CFG>(p, pr);
  p->store16 = hop_rows_align16(pr, d->c, d->row_ptr);
  p->split_k = 1;
  p->kb_per_split = p->nkb;
  e = hop_make_map(&p->a, pr->dtype, d->a, (uint64_t)d->capacity, pr->k, d->lda, CFG::BK, CFG::a_box_rows);
  if (e != cudaSuccess) return e;
  e = hop_make_map(&p->b, pr->dtype, d->b, (uint64_t)G * pr->n, pr->k, d->ldb, CFG::BK, CFG::b_box_rows);
  if (e != cudaSuccess) return e;
  p->group_maps = NULL;
  p->dg_row_offset = d->row_offset;
  p->dg_rows = d->rows;
  p->dg_table_ready = d->table_ready;
  p->dg_table_target = d->table_target;
  p->dg_capacity = d->capacity;
  p->b_group_rows = pr->n;
  plan->grid = pr->num_sms / CFG::CL * CFG::CL;
  plan->pdl = !pr->no_pdl;
  plan->smem_bytes = CFG::smem_bytes + hop_dg_smem_bytes(G);
  e = cudaMalloc((void **)&plan->d_groups, sizeof(hop_group));
  if (e != cudaSuccess) return e;
  e = cudaMemcpy(plan->d_groups, &hg, sizeof(hop_group), cudaMemcpyHostToDevice);
  if (e == cudaSuccess && hop_wants_cmaps<CFG>(pr, p->store16) && !d->row_ptr) {
    CUtensorMap cm;
    e = hop_make_cmap(&cm, d->c, (uint64_t)d->capacity, (uint64_t)p->n_out, (uint64_t)pr->ldc);
    if (e == cudaSuccess) e = hop_upload_cmaps(plan, &cm, 1);
  }
  if (e != cudaSuccess) {
    hop_plan_destroy(plan);
    return e;
  }
  p->groups = plan->d_groups;
  return cudaSuccess;
}

/* Validate `pr` for configuration CFG and build the plan (synchronous
 * allocations and copies: do it once, outside the timed path). */
template <class CFG> static cudaError_t hop_plan_create(hop_plan *plan, const hop_problem *pr) {
  cudaError_t e = cudaSuccess;
  hop_group *hg = NULL;
  CUtensorMap *maps = NULL;
  const int G = pr->num_groups;
  memset(plan, 0, sizeof(*plan));
  /* ---- validate ---- */
  e = hop_validate_common<CFG>(pr);
  if (e != cudaSuccess) return e;
  if (pr->dgroups) return hop_plan_create_dgroups<CFG>(plan, pr);
  for (int g = 0; g < G; g++) {
    const hop_group_desc *d = &pr->groups[g];
    if (d->rows < 0) return cudaErrorInvalidValue;
    if (d->rows == 0) continue;
    if (!d->a || !d->b || (!d->c && !d->row_ptr) || d->lda < pr->k || d->ldb < pr->k)
      return cudaErrorInvalidValue;
  }
  /* ---- group table and maps ---- */
  hg = (hop_group *)calloc(G, sizeof(hop_group));
  maps = (CUtensorMap *)aligned_alloc(64, sizeof(CUtensorMap) * 2 * G);
  if (!hg || !maps) {
    e = cudaErrorMemoryAllocation;
    goto fail;
  }
  memset(maps, 0, sizeof(CUtensorMap) * 2 * G);
  {
    const int n_tiles = (pr->n + CFG::TN - 1) / CFG::TN;
    int64_t tiles = 0;
    for (int g = 0; g < G; g++) {
      const hop_group_desc *d = &pr->groups[g];
      hg[g].rows = d->rows;
      hg[g].tile_begin = (int32_t)tiles;
      hg[g].c = d->c;
      hg[g].row_ptr = d->row_ptr;
      hg[g].row_scale = d->row_scale;
      hg[g].ready = d->ready;
      hg[g].ready_target = d->ready_target;
      hg[g].ready_stride = d->ready_stride;
      if (d->rows == 0) continue;
      tiles += (int64_t)((d->rows + CFG::TM - 1) / CFG::TM) * n_tiles; /* clusters: pairs of tiles */
      e = hop_make_map(&maps[2 * g], pr->dtype, d->a, d->rows, pr->k, d->lda, CFG::BK, CFG::a_box_rows);
      if (e != cudaSuccess) goto fail;
      e = hop_make_map(&maps[2 * g + 1], pr->dtype, d->b, pr->n, pr->k, d->ldb, CFG::BK, CFG::b_box_rows);
      if (e != cudaSuccess) goto fail;
    }
    /* split-K: S slices of kbs k-blocks each; lower S until none is empty */
    const int nkb = (pr->k + CFG::BKS - 1) / CFG::BKS;
    int S = pr->split_k > 1 ? pr->split_k : 1;
    if (S > nkb) S = nkb;
    const int kbs = (nkb + S - 1) / S;
    S = (nkb + kbs - 1) / kbs;
    if (tiles * S > INT32_MAX) {
      e = cudaErrorInvalidValue;
      goto fail;
    }
    hop_params *p = &plan->params;
    hop_params_common<CFG>(p, pr);
    p->store16 = 1;
    for (int g = 0; g < G; g++)
      if (pr->groups[g].rows > 0 && !hop_rows_align16(pr, pr->groups[g].c, pr->groups[g].row_ptr)) p->store16 = 0;
    p->total_tiles = (int32_t)tiles;
    p->total_tasks = (int32_t)(tiles * S);
    p->split_k = S;
    p->kb_per_split = kbs;
    { /* clusters: grid = CL x clusters, one cluster per task pair */
      const int64_t clusters = pr->num_sms / CFG::CL;
      plan->grid = (int)((tiles * S < clusters ? tiles * S : clusters) * CFG::CL);
    }
    plan->smem_bytes = CFG::smem_bytes;
    plan->pdl = !pr->no_pdl;
    /* the task table in shared memory where it fits (no column chunks here) */
    if (!pr->no_hg_table && CFG::smem_bytes + hop_dg_smem_bytes(G) <= 232448) {
      p->hg_table = 1;
      plan->smem_bytes = CFG::smem_bytes + hop_dg_smem_bytes(G);
    }

    if (S > 1 && tiles > 0) { /* workspace [tiles][S][BM*BN] fp32, then [tiles] u32 counters */
      const size_t ws_bytes = (size_t)tiles * S * CFG::BM * CFG::BN * sizeof(float);
      e = cudaMalloc(&plan->d_split, ws_bytes + (size_t)tiles * sizeof(uint32_t));
      if (e != cudaSuccess) goto fail;
      e = cudaMemset((char *)plan->d_split + ws_bytes, 0, (size_t)tiles * sizeof(uint32_t));
      if (e != cudaSuccess) goto fail;
      p->workspace = (float *)plan->d_split;
      p->counters = (uint32_t *)((char *)plan->d_split + ws_bytes);
    }
  }
  e = cudaMalloc((void **)&plan->d_groups, sizeof(hop_group) * G);
  if (e != cudaSuccess) goto fail;
  e = cudaMemcpy(plan->d_groups, hg, sizeof(hop_group) * G, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) goto fail;
  plan->params.groups = plan->d_groups;
  if (G == 1) { /* dense: maps travel in the kernel parameter */
    plan->params.a = maps[0];
    plan->params.b = maps[1];
    plan->params.group_maps = NULL;
  } else {
    e = cudaMalloc((void **)&plan->d_maps, sizeof(CUtensorMap) * 2 * G);
    if (e != cudaSuccess) goto fail;
    e = cudaMemcpy(plan->d_maps, maps, sizeof(CUtensorMap) * 2 * G, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) goto fail;
    plan->params.group_maps = plan->d_maps;
  }
  if (hop_wants_cmaps<CFG>(pr, plan->params.store16)) {
    /* one map per group over its own rows (TMA drops rows past the end);
     * none when any group writes through row_ptr. An empty group's map is
     * never used (no tasks) and stays zero. */
    int any_row_ptr = 0;
    for (int g = 0; g < G; g++) any_row_ptr |= pr->groups[g].rows > 0 && pr->groups[g].row_ptr != NULL;
    if (!any_row_ptr) {
      memset(maps, 0, sizeof(CUtensorMap) * G);
      for (int g = 0; g < G && e == cudaSuccess; g++)
        if (pr->groups[g].rows > 0)
          e = hop_make_cmap(&maps[g], pr->groups[g].c, (uint64_t)pr->groups[g].rows,
                            (uint64_t)plan->params.n_out, (uint64_t)pr->ldc);
      if (e == cudaSuccess) e = hop_upload_cmaps(plan, maps, G);
      if (e != cudaSuccess) goto fail;
    }
  }
  free(hg);
  free(maps);
  return cudaSuccess;
fail:
  free(hg);
  free(maps);
  hop_plan_destroy(plan);
  return e;
}

/* Launch the engine for a plan built with the same CFG. Asynchronous on
 * `stream`; errors of the launch itself come back, readiness timeouts land
 * in the problem's error word. */
template <class CFG, int ACT, int OUT>
static cudaError_t hop_launch(const hop_plan *plan, cudaStream_t stream) {
  static int attr_bytes = 0; /* per instantiation: the opt-in set so far */
  if (CFG::epi_tma && OUT == HOP_OUT_FP32 && plan->params.c_maps) return cudaErrorInvalidValue;
  if (plan->grid == 0) return cudaSuccess;
  if (plan->smem_bytes > attr_bytes) {
    cudaError_t e = cudaFuncSetAttribute(hop_gemm_kernel<CFG, ACT, OUT>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, plan->smem_bytes);
    if (e != cudaSuccess) return e;
    attr_bytes = plan->smem_bytes;
  }
  if (CFG::CL == 1 && !plan->pdl) {
    hop_gemm_kernel<CFG, ACT, OUT><<<plan->grid, CFG::threads, plan->smem_bytes, stream>>>(plan->params);
    return cudaGetLastError();
  }
  /* one attribute: programmatic stream serialization (CL = 1), or the
   * cluster shape: clusters of CL CTAs along x (consecutive blockIdx.x);
   * the schedule strides by gridDim.x / CL, so the grid may shrink to the
   * clusters the device can hold at once (a GPC with an odd free SM leaves
   * it idle) */
  static int max_clusters = 0, max_smem = 0; /* per instantiation, for the largest smem asked so far */
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  if (CFG::CL == 1) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
  } else {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CFG::CL;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
  }
  cfg.gridDim = dim3(plan->grid, 1, 1);
  cfg.blockDim = dim3(CFG::threads, 1, 1);
  cfg.dynamicSmemBytes = plan->smem_bytes;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (CFG::CL == 1) return cudaLaunchKernelEx(&cfg, hop_gemm_kernel<CFG, ACT, OUT>, plan->params);
  if (plan->smem_bytes != max_smem) {
    int n = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, hop_gemm_kernel<CFG, ACT, OUT>, &cfg);
    if (e != cudaSuccess) return e;
    if (n < 1) return cudaErrorInvalidConfiguration;
    max_clusters = n;
    max_smem = plan->smem_bytes;
  }
  if (plan->grid / CFG::CL > max_clusters) cfg.gridDim.x = max_clusters * CFG::CL;
  return cudaLaunchKernelEx(&cfg, hop_gemm_kernel<CFG, ACT, OUT>, plan->params);
}

#endif /* LOOM_TILE_HOPPER_HOST_CUH */
