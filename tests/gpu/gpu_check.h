/*
 * Helpers shared by the GPU tests, on top of ../check.h: check a CUDA or
 * loom call, record a failure with its message and return -1 from the
 * calling function; check that a communicator has no async error; a
 * monotonic clock in seconds.
 */
#ifndef LOOM_TEST_GPU_CHECK_H
#define LOOM_TEST_GPU_CHECK_H

#include <time.h>

#include <cuda_runtime_api.h>

#include "loom.h"
#include "../check.h"

#define CUDA_T(call)                                                           \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));         \
    if (e_ != cudaSuccess) return -1;                                          \
  } while (0)

#define LOOM_T(call)                                                           \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    CHECK(r_ == LOOM_SUCCESS, "%s: %s: %s", #call, loom_result_string(r_),     \
          loom_last_error());                                                  \
    if (r_ != LOOM_SUCCESS) return -1;                                         \
  } while (0)

/* No async error on `comm` (rank `rank`, its work drained): one CHECK
 * naming `what`. 0 when none; -1 when one is set or the query fails. */
static inline int check_no_async_error(loom_comm_t comm, int rank, const char *what) {
  loom_result_t a = LOOM_SUCCESS;
  LOOM_T(loom_comm_get_async_error(comm, &a));
  CHECK(a == LOOM_SUCCESS, "%s: rank %d async error %s: %s", what, rank, loom_result_string(a),
        loom_last_error());
  return a == LOOM_SUCCESS ? 0 : -1;
}

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
