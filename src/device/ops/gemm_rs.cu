/*
 * loom_launch_gemm_rs: GEMM + reduce-scatter (the kernel, its launcher and
 * how it works: gemm_rs.cuh; docs/collective_gemm.md). The all-reduce's
 * entry point is gemm_ar.cu.
 */
#include "gemm_rs.cuh"

extern "C" cudaError_t loom_launch_gemm_rs(const loom_dev_comm *c, const loom_coll_args *a,
                                           cudaStream_t stream) {
  int rows = 0;
  const int groups = rs_groups(a, c->nranks, 0, &rows);
  return coll_dispatch<rs_launcher, true>(c, a, a->dtype, a->act, groups, rows, a->n, coll_wide_ok(a, 0), stream);
}
