/* The baselines' cuBLAS check, for functions with `loom_result_t res` and a
 * `fail:` label (the CUDA_CHECK / NCCL_CHECK convention of src/host). */
#ifndef LOOM_BASELINE_BLAS_CHECK_H
#define LOOM_BASELINE_BLAS_CHECK_H

#include <cublas_v2.h>

#include "../host/internal.h"

#define BLAS_CHECK(call)                                                       \
  do {                                                                         \
    cublasStatus_t s_ = (call);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      res = loom_set_error(LOOM_CUDA_ERROR, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, \
                           #call, (int)s_);                                    \
      goto fail;                                                               \
    }                                                                          \
  } while (0)

#endif
