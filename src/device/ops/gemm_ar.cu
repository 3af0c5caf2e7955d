/*
 * loom_launch_gemm_ar: GEMM + all-reduce (the kernel, its launcher and how
 * it works: gemm_rs.cuh; docs/collective_gemm.md). The reduce-scatter's
 * entry point is gemm_rs.cu.
 */
#include "gemm_rs.cuh"

extern "C" cudaError_t loom_launch_gemm_ar(const loom_dev_comm *c, const loom_coll_args *a,
                                           cudaStream_t stream) {
  int rows = 0;
  const int groups = rs_groups(a, c->nranks, 1, &rows);
  return coll_dispatch<ar_launcher, true>(c, a, a->dtype, a->act, groups, rows, a->n, coll_wide_ok(a, 0), stream);
}
