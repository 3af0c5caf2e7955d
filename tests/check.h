/*
 * Minimal test harness shared by loom's C tests (CPU and GPU).
 *
 * CHECK(cond, fmt, ...) records one assertion; a failure prints file:line and
 * the message. Each test binary ends with check_summary(), which prints
 * "<name>: N passed, N failed" (the closing line CI reads) and returns the
 * process exit code. CHECK_SKIP records a skipped case with its reason.
 */
#ifndef LOOM_TEST_CHECK_H
#define LOOM_TEST_CHECK_H

#include <stdio.h>

static int check_passed_, check_failed_, check_skipped_;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (cond) {                                                                \
      check_passed_++;                                                         \
    } else {                                                                   \
      check_failed_++;                                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  } while (0)

#define CHECK_SKIP(...)                                                        \
  do {                                                                         \
    check_skipped_++;                                                          \
    printf("SKIP: ");                                                          \
    printf(__VA_ARGS__);                                                       \
    putchar('\n');                                                             \
  } while (0)

static inline int check_summary(const char *name) {
  if (check_skipped_)
    printf("%s: %d passed, %d failed, %d skipped\n", name, check_passed_,
           check_failed_, check_skipped_);
  else
    printf("%s: %d passed, %d failed\n", name, check_passed_, check_failed_);
  fflush(stdout);
  return check_failed_ ? 1 : 0;
}

#endif
