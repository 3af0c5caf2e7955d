/* Result strings and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];

const char *loom_result_string(loom_result_t result) {
  switch (result) {
  case LOOM_SUCCESS: return "success";
  case LOOM_INVALID_ARGUMENT: return "invalid argument";
  case LOOM_INVALID_USAGE: return "invalid usage";
  case LOOM_CUDA_ERROR: return "CUDA error";
  case LOOM_NCCL_ERROR: return "NCCL error";
  case LOOM_OUT_OF_MEMORY: return "out of memory";
  case LOOM_TIMEOUT: return "timeout";
  case LOOM_UNSUPPORTED: return "unsupported";
  case LOOM_INTERNAL_ERROR: return "internal error";
  case LOOM_PEER_ERROR: return "peer error";
  case LOOM_NUM_RESULTS: break;
  }
  return "unknown result";
}

const char *loom_last_error(void) { return last_error; }

void loom_clear_error(void) { last_error[0] = '\0'; }

loom_result_t loom_set_error(loom_result_t result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return result;
}

void loom_copy_error(char *dst, size_t n) {
  if (n == 0) return;
  snprintf(dst, n, "%s", last_error);
}

loom_result_t loom_dtype_size(loom_dtype_t dtype, size_t *bytes) {
  loom_clear_error();
  LOOM_ARG(bytes != NULL, "loom_dtype_size", "bytes is NULL");
  switch (dtype) {
  case LOOM_FP32: *bytes = 4; return LOOM_SUCCESS;
  case LOOM_BF16:
  case LOOM_FP16: *bytes = 2; return LOOM_SUCCESS;
  case LOOM_NUM_DTYPES: break;
  }
  return loom_set_error(LOOM_INVALID_ARGUMENT, "loom_dtype_size: dtype (%d) is not a loom_dtype_t",
                        (int)dtype);
}

const char *loom_dtype_string(loom_dtype_t dtype) {
  switch (dtype) {
  case LOOM_FP32: return "fp32";
  case LOOM_BF16: return "bf16";
  case LOOM_FP16: return "fp16";
  case LOOM_NUM_DTYPES: break;
  }
  return "unknown";
}
