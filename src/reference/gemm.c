/*
 * Reference GEMM, activations and the relative-error check.
 */
#include "reference.h"

#include <math.h>
#include <stdlib.h>

/* A NULL pointer is acceptable only for an array with no elements. */
static int bad_array(const void *p, int rows, int cols) {
  return p == NULL && rows > 0 && cols > 0;
}

int ref_gemm(int m, int n, int k, float alpha, const float *A, const float *B,
             float beta, float *C) {
  if (m < 0 || n < 0 || k < 0 || bad_array(A, m, k) || bad_array(B, k, n) ||
      bad_array(C, m, n))
    return -1;
  if (m == 0 || n == 0)
    return 0;

  /* One double row of C at a time, walked i-p-j so B is read contiguously;
   * each element still sums its k products in ascending p. */
  double *acc = malloc((size_t)n * sizeof *acc);
  if (!acc)
    return -1;
  for (size_t i = 0; i < (size_t)m; i++) {
    for (size_t j = 0; j < (size_t)n; j++)
      acc[j] = 0.0;
    const float *a = A + i * (size_t)k;
    for (size_t p = 0; p < (size_t)k; p++) {
      const float *b = B + p * (size_t)n;
      for (size_t j = 0; j < (size_t)n; j++)
        acc[j] += (double)a[p] * (double)b[j];
    }
    float *c = C + i * (size_t)n;
    for (size_t j = 0; j < (size_t)n; j++) {
      /* k == 0 means "beta*C" even for a non-finite alpha. */
      double v = k > 0 ? (double)alpha * acc[j] : 0.0;
      /* beta == 0 must not read C: it may hold NaN poison. */
      if (beta != 0.0f)
        v += (double)beta * (double)c[j];
      c[j] = (float)v;
    }
  }
  free(acc);
  return 0;
}

double ref_act(ref_activation act, double x) {
  static const double inv_sqrt2 = 0.70710678118654752440;
  switch (act) {
  case REF_ACT_RELU:
    return x > 0.0 ? x : 0.0;
  case REF_ACT_GELU:
    return 0.5 * x * (1.0 + erf(x * inv_sqrt2));
  case REF_ACT_SILU:
    return x / (1.0 + exp(-x));
  case REF_ACT_SWIGLU:
    return x;
  }
  /* An out-of-range enum value is a caller bug: make it poison the result
   * rather than pass a check by accident. */
  return NAN;
}

double ref_rel_error(const float *out, const float *ref, size_t n) {
  if (n == 0)
    return 0.0;
  if (!out || !ref)
    return INFINITY;
  double diff2 = 0.0, ref2 = 0.0, out2 = 0.0;
  for (size_t i = 0; i < n; i++) {
    /* isfinite on each input: a NaN would otherwise make the result NaN,
     * and every comparison against a bound would quietly be false. */
    if (!isfinite(out[i]) || !isfinite(ref[i]))
      return INFINITY;
    double d = (double)out[i] - (double)ref[i];
    diff2 += d * d;
    ref2 += (double)ref[i] * (double)ref[i];
    out2 += (double)out[i] * (double)out[i];
  }
  if (ref2 == 0.0)
    return sqrt(out2);
  return sqrt(diff2) / sqrt(ref2);
}
