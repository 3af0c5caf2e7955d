/*
 * Unit tests for the CPU references (src/reference): hand-checked cases
 * first, then invariants on seeded random data.
 *
 * Most comparisons are bitwise: the references are deterministic and every
 * invariant below is built so that both sides perform the same double sums
 * in the same order.
 */
#include "../check.h"
#include "../../src/reference/reference.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEED 0x10011u

/* ---- helpers ------------------------------------------------------------- */

typedef struct {
  uint64_t s;
} rng_t;

/* splitmix64: tiny, and good enough for test data. */
static uint64_t rng_next(rng_t *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rng_float(rng_t *r) {
  return (float)((double)(rng_next(r) >> 11) * 0x1.0p-52 - 1.0);
}

static int rng_int(rng_t *r, int n) { return (int)(rng_next(r) % (uint64_t)n); }

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "test_reference: out of memory\n");
    exit(2);
  }
  return p;
}

static float *rand_floats(rng_t *r, size_t n, float scale) {
  float *p = xmalloc(n * sizeof *p);
  for (size_t i = 0; i < n; i++)
    p[i] = scale * rng_float(r);
  return p;
}

/* Outputs are poisoned with NaN so an element never written shows up. */
static void poison(float *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    p[i] = NAN;
}

static int all_finite(const float *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(p[i]))
      return 0;
  return 1;
}

static int same_bits(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof *a) == 0;
}

static int is_nan_bf16(uint16_t h) {
  return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
}

static int is_nan_fp16(uint16_t h) {
  return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
}

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static ref_moe_shape moe_shape(int T, int H, int F, int E, int k,
                               ref_activation act) {
  ref_moe_shape s = {T, H, F, E, k, act, 1, 0, 0, 0};
  return s;
}

static size_t w1_cols(const ref_moe_shape *s) {
  return (size_t)(s->act == REF_ACT_SWIGLU ? 2 * s->F : s->F);
}

/* Random inputs of one MoE layer; the gate is scaled up so softmax has
 * clear winners and the top-k is not a coin toss. */
typedef struct {
  float *x, *wg, *w1, *w2;
} moe_data;

static moe_data moe_data_new(rng_t *r, const ref_moe_shape *s) {
  moe_data d;
  size_t H = (size_t)s->H, F = (size_t)s->F, E = (size_t)s->E;
  d.x = rand_floats(r, (size_t)s->T * H, 1.0f);
  d.wg = rand_floats(r, H * E, 1.0f);
  d.w1 = rand_floats(r, E * H * w1_cols(s), 0.5f);
  d.w2 = rand_floats(r, E * F * H, 0.5f);
  return d;
}

static void moe_data_free(moe_data *d) {
  free(d->x);
  free(d->wg);
  free(d->w1);
  free(d->w2);
}

/* Expert e applied to token row t alone (rows are independent, so this is
 * bitwise what the layer computes for that row). */
static int expert_row(const ref_moe_shape *s, const moe_data *d, int e, int t,
                      float *out) {
  size_t H = (size_t)s->H, F = (size_t)s->F;
  return ref_expert_ffn(1, s->H, s->F, s->act, s->h_round, d->x + (size_t)t * H,
                        d->w1 + (size_t)e * H * w1_cols(s),
                        d->w2 + (size_t)e * F * H, out);
}

static float round_mode(int mode, float v) {
  return mode == 1 ? ref_round_bf16(v) : mode == 2 ? ref_round_fp16(v) : v;
}

/* The layer's output recomputed from per-row expert calls and a given
 * keep mask (NULL keeps every assignment). */
static void expected_y(const ref_moe_shape *s, const moe_data *d,
                       const int32_t *ids, const float *w, const int *keep,
                       float *y) {
  size_t H = (size_t)s->H, k = (size_t)s->k;
  float *o = xmalloc(k * H * sizeof *o);
  for (int t = 0; t < s->T; t++) {
    for (size_t j = 0; j < k; j++)
      expert_row(s, d, ids[t * k + j], t, o + j * H);
    for (size_t c = 0; c < H; c++) {
      double acc = 0.0;
      for (size_t j = 0; j < k; j++)
        if (!keep || keep[t * k + j])
          acc += (double)w[t * k + j] *
                 (double)round_mode(s->out_round, o[j * H + c]);
      y[(size_t)t * H + c] = (float)acc;
    }
  }
  free(o);
}

/* ---- conversions: hand cases --------------------------------------------- */

static void test_bf16_hand(void) {
  CHECK(ref_float_to_bf16(1.0f) == 0x3F80, "bf16(1)");
  CHECK(ref_float_to_bf16(-1.0f) == 0xBF80, "bf16(-1)");
  CHECK(ref_float_to_bf16(0.0f) == 0x0000, "bf16(0)");
  CHECK(ref_float_to_bf16(-0.0f) == 0x8000, "bf16(-0)");
  /* The bf16 ulp at 1 is 2^-7: 2^-8 is an exact tie, kept even. */
  CHECK(ref_float_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "1+2^-8 ties to even");
  CHECK(ref_float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82,
        "1+3*2^-8 ties up to even");
  CHECK(ref_float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81,
        "just above a tie rounds up");
  CHECK(ref_float_to_bf16(3.140625f) == 0x4049, "bf16(3.140625)");
  CHECK(ref_float_to_bf16(INFINITY) == 0x7F80, "bf16(+inf)");
  CHECK(ref_float_to_bf16(-INFINITY) == 0xFF80, "bf16(-inf)");
  CHECK(ref_float_to_bf16(FLT_MAX) == 0x7F80, "FLT_MAX overflows to inf");
  CHECK(ref_float_to_bf16(ref_bf16_to_float(0x7F7F)) == 0x7F7F,
        "largest finite bf16 kept");
  CHECK(is_nan_bf16(ref_float_to_bf16(NAN)), "quiet NaN stays NaN");
  /* A NaN whose payload is all in the low half must not truncate to inf. */
  CHECK(is_nan_bf16(ref_float_to_bf16(bits_to_float(0x7F800001u))),
        "low-payload NaN stays NaN");
  CHECK(ref_float_to_bf16(bits_to_float(0xFF800001u)) & 0x8000,
        "NaN keeps its sign");
  CHECK(ref_float_to_bf16(bits_to_float(0x00008000u)) == 0x0000,
        "subnormal tie to even (down)");
  CHECK(ref_float_to_bf16(bits_to_float(0x00018000u)) == 0x0002,
        "subnormal tie to even (up)");
  CHECK(ref_bf16_to_float(0x3F80) == 1.0f, "bf16 0x3F80 -> 1");
  CHECK(ref_bf16_to_float(0xC049) == -3.140625f, "bf16 0xC049 -> -3.140625");
  CHECK(isinf(ref_bf16_to_float(0x7F80)), "bf16 0x7F80 -> inf");
  CHECK(isnan(ref_bf16_to_float(0xFFC0)), "bf16 0xFFC0 -> NaN");
  CHECK(ref_round_bf16(1.0f + 3 * 0x1p-8f) == 1.015625f, "ref_round_bf16");
}

static void test_fp16_hand(void) {
  CHECK(ref_float_to_fp16(1.0f) == 0x3C00, "fp16(1)");
  CHECK(ref_float_to_fp16(-2.0f) == 0xC000, "fp16(-2)");
  CHECK(ref_float_to_fp16(-0.0f) == 0x8000, "fp16(-0)");
  CHECK(ref_float_to_fp16(65504.0f) == 0x7BFF, "fp16(65504) max finite");
  CHECK(ref_float_to_fp16(65519.0f) == 0x7BFF, "65519 below the tie");
  CHECK(ref_float_to_fp16(65520.0f) == 0x7C00, "65520 ties to inf");
  CHECK(ref_float_to_fp16(1e6f) == 0x7C00, "overflow to inf");
  CHECK(ref_float_to_fp16(-1e6f) == 0xFC00, "overflow to -inf");
  CHECK(ref_float_to_fp16(INFINITY) == 0x7C00, "fp16(inf)");
  CHECK(ref_float_to_fp16(0x1p-14f) == 0x0400, "smallest normal");
  CHECK(ref_float_to_fp16(0x1p-24f) == 0x0001, "smallest subnormal 2^-24");
  CHECK(ref_float_to_fp16(0x1p-25f) == 0x0000, "2^-25 ties to zero (even)");
  CHECK(ref_float_to_fp16(-0x1p-25f) == 0x8000, "-2^-25 ties to -0");
  CHECK(ref_float_to_fp16(0x1p-25f * 1.0000001f) == 0x0001,
        "just above 2^-25 rounds up");
  CHECK(ref_float_to_fp16(1.5f * 0x1p-24f) == 0x0002,
        "1.5 * 2^-24 ties up to even");
  CHECK(ref_float_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400,
        "rounding carries from subnormal into the smallest normal");
  CHECK(ref_float_to_fp16(1e-8f) == 0x0000, "tiny rounds to zero");
  CHECK(ref_float_to_fp16(bits_to_float(0x00000001u)) == 0x0000,
        "float subnormal rounds to zero");
  CHECK(ref_float_to_fp16(1.0f + 0x1p-11f) == 0x3C00, "1+2^-11 ties to even");
  CHECK(ref_float_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3C02,
        "1+3*2^-11 ties up to even");
  CHECK(is_nan_fp16(ref_float_to_fp16(NAN)), "NaN stays NaN");
  CHECK(is_nan_fp16(ref_float_to_fp16(bits_to_float(0x7F800001u))),
        "low-payload NaN stays NaN");
  CHECK(ref_fp16_to_float(0x0001) == 0x1p-24f, "0x0001 -> 2^-24");
  CHECK(ref_fp16_to_float(0x8001) == -0x1p-24f, "0x8001 -> -2^-24");
  CHECK(ref_fp16_to_float(0x7BFF) == 65504.0f, "0x7BFF -> 65504");
  CHECK(ref_fp16_to_float(0x3555) == 0.333251953125f, "0x3555 -> 1/3ish");
  CHECK(isinf(ref_fp16_to_float(0xFC00)) && ref_fp16_to_float(0xFC00) < 0,
        "0xFC00 -> -inf");
  CHECK(isnan(ref_fp16_to_float(0x7E00)), "0x7E00 -> NaN");
  CHECK(ref_round_fp16(0.1f) == 0.0999755859375f, "ref_round_fp16(0.1)");
}

static void test_round_arrays(void) {
  float a[3] = {1.0f + 3 * 0x1p-8f, 65520.0f, 0.1f};
  float b[3] = {1.0f + 3 * 0x1p-8f, 65520.0f, 0.1f};
  ref_round_bf16_array(a, 3);
  ref_round_fp16_array(b, 3);
  CHECK(a[0] == 1.015625f && a[1] == 65536.0f && a[2] == ref_round_bf16(0.1f),
        "ref_round_bf16_array");
  CHECK(b[0] == 1.01171875f && isinf(b[1]) && b[2] == 0.0999755859375f,
        "ref_round_fp16_array");
  ref_round_bf16_array(NULL, 3); /* must be a no-op, not a crash */
  ref_round_fp16_array(NULL, 3);
}

/* Packing into a storage format and reading back = rounding to it. */
static void test_pack_arrays(void) {
  const float src[3] = {1.0f + 3 * 0x1p-8f, 65520.0f, -0.1f};
  const uint16_t bf16[3] = {0x3F82, 0x4780, 0xBDCD}, fp16[3] = {0x3C0C, 0x7C00, 0xAE66};
  float f32[3], back[3], want[3];
  uint16_t h[3];
  ref_pack_array(f32, src, 3, 0);
  ref_unpack_array(back, f32, 3, 0);
  memcpy(want, src, sizeof src);
  ref_round_array(want, 3, 0);
  CHECK(memcmp(f32, src, sizeof src) == 0 && memcmp(back, src, sizeof src) == 0 &&
            memcmp(want, src, sizeof src) == 0,
        "fp32: pack and unpack copy, round leaves alone");
  ref_pack_array(h, src, 3, 1);
  ref_unpack_array(back, h, 3, 1);
  memcpy(want, src, sizeof src);
  ref_round_array(want, 3, 1);
  CHECK(memcmp(h, bf16, sizeof h) == 0, "bf16 bits %04x %04x %04x", h[0], h[1], h[2]);
  for (size_t i = 0; i < 3; i++)
    CHECK(back[i] == ref_round_bf16(src[i]) && want[i] == back[i], "bf16 element %zu", i);
  ref_pack_array(h, src, 3, 2);
  ref_unpack_array(back, h, 3, 2);
  memcpy(want, src, sizeof src);
  ref_round_array(want, 3, 2);
  CHECK(memcmp(h, fp16, sizeof h) == 0, "fp16 bits %04x %04x %04x", h[0], h[1], h[2]);
  for (size_t i = 0; i < 3; i++)
    CHECK(back[i] == ref_round_fp16(src[i]) && want[i] == back[i], "fp16 element %zu", i);
  CHECK(isinf(back[1]), "65520 packs to fp16 Inf");
}

/* The published first output of splitmix64 seeded with 0. */
static void test_splitmix64(void) {
  CHECK(ref_splitmix64(0) == 0xe220a8397b1dcdafull, "splitmix64(0) = %016llx",
        (unsigned long long)ref_splitmix64(0));
}

/* ref_transpose: a hand case, then several matrices of sizes that are not
 * multiples of its 32 x 32 blocks, element by element and back again
 * (bitwise, NaN payloads included); empty shapes write nothing. */
static void test_transpose(rng_t *r) {
  const float a[6] = {1, 2, 3, 4, 5, 6}; /* [2 x 3] */
  float t[6] = {0};
  ref_transpose(t, a, 1, 2, 3);
  const float want[6] = {1, 4, 2, 5, 3, 6}; /* [3 x 2] */
  CHECK(memcmp(t, want, sizeof t) == 0, "transpose [2 x 3]: %g %g %g %g %g %g", t[0], t[1], t[2],
        t[3], t[4], t[5]);
  const size_t count = 3, rows = 45, cols = 70, n = count * rows * cols;
  float *src = rand_floats(r, n, 1.0f), *dst = xmalloc(n * sizeof(float)),
        *back = xmalloc(n * sizeof(float));
  src[7] = bits_to_float(0x7FC01234u); /* a NaN with a payload */
  ref_transpose(dst, src, count, rows, cols);
  size_t bad = 0;
  for (size_t m = 0; m < count; m++)
    for (size_t i = 0; i < rows; i++)
      for (size_t j = 0; j < cols; j++)
        bad += memcmp(&dst[(m * cols + j) * rows + i], &src[(m * rows + i) * cols + j], 4) != 0;
  CHECK(bad == 0, "transpose of %zu [%zu x %zu]: %zu elements misplaced", count, rows, cols, bad);
  ref_transpose(back, dst, count, cols, rows);
  CHECK(same_bits(back, src, n), "transposing twice gives the input back, bit for bit");
  poison(back, n);
  memcpy(dst, back, n * sizeof(float));
  ref_transpose(back, src, 0, rows, cols);
  ref_transpose(back, src, count, 0, cols);
  ref_transpose(back, src, count, rows, 0);
  CHECK(same_bits(back, dst, n), "empty transposes write nothing");
  free(src);
  free(dst);
  free(back);
}

/* ---- conversions: invariants --------------------------------------------- */

/* Every non-NaN 16-bit pattern survives 16 -> float -> 16; NaNs stay NaN. */
static void test_roundtrip_all(void) {
  long bad_bf = 0, bad_fp = 0, first_bf = -1, first_fp = -1;
  for (uint32_t i = 0; i <= 0xFFFFu; i++) {
    uint16_t h = (uint16_t)i;
    float fb = ref_bf16_to_float(h), ff = ref_fp16_to_float(h);
    int ok_b = isnan(fb) ? is_nan_bf16(ref_float_to_bf16(fb))
                         : ref_float_to_bf16(fb) == h;
    int ok_f = isnan(ff) ? is_nan_fp16(ref_float_to_fp16(ff))
                         : ref_float_to_fp16(ff) == h;
    if (!ok_b && bad_bf++ == 0)
      first_bf = (long)i;
    if (!ok_f && bad_fp++ == 0)
      first_fp = (long)i;
  }
  CHECK(bad_bf == 0, "bf16 round trip: %ld bad, first 0x%04lX", bad_bf,
        (unsigned long)first_bf);
  CHECK(bad_fp == 0, "fp16 round trip: %ld bad, first 0x%04lX", bad_fp,
        (unsigned long)first_fp);
}

/* The neighbours of pattern h in the direction away from / toward zero. */
static int is_nearest(float f, uint16_t h, float (*to_float)(uint16_t),
                      uint16_t inf_bits) {
  double r = to_float(h), d = fabs((double)f - r);
  uint16_t mag = h & 0x7FFFu;
  if (mag > 0 && fabs((double)f - to_float((uint16_t)(h - 1))) < d)
    return 0;
  if (mag < inf_bits && fabs((double)f - to_float((uint16_t)(h + 1))) < d)
    return 0;
  return 1;
}

/* Random finite floats inside each format's range: the result is a value
 * of the format no farther from the input than either neighbour. */
static void test_nearest_random(rng_t *r) {
  long bad_bf = 0, bad_fp = 0;
  for (int i = 0; i < 200000; i++) {
    float m = rng_float(r);
    float fb = ldexpf(m, rng_int(r, 250) - 125);
    float ff = ldexpf(m, rng_int(r, 42) - 26);
    uint16_t hb = ref_float_to_bf16(fb), hf = ref_float_to_fp16(ff);
    if ((hb & 0x7FFFu) < 0x7F80u &&
        !is_nearest(fb, hb, ref_bf16_to_float, 0x7F80u))
      bad_bf++;
    if ((hf & 0x7FFFu) < 0x7C00u &&
        !is_nearest(ff, hf, ref_fp16_to_float, 0x7C00u))
      bad_fp++;
  }
  CHECK(bad_bf == 0, "bf16 not nearest for %ld random floats", bad_bf);
  CHECK(bad_fp == 0, "fp16 not nearest for %ld random floats", bad_fp);
}

/* ---- GEMM ---------------------------------------------------------------- */

static void test_gemm_hand(void) {
  const float A[6] = {1, 2, 3, 4, 5, 6};    /* 2 x 3 */
  const float B[6] = {7, 8, 9, 10, 11, 12}; /* 3 x 2 */
  float C[4] = {NAN, NAN, NAN, NAN};
  /* [1 2 3; 4 5 6] * [7 8; 9 10; 11 12] = [58 64; 139 154] */
  CHECK(ref_gemm(2, 2, 3, 1.0f, A, B, 0.0f, C) == 0, "gemm rc");
  CHECK(C[0] == 58 && C[1] == 64 && C[2] == 139 && C[3] == 154,
        "gemm 2x3*3x2 = [%g %g; %g %g]", C[0], C[1], C[2], C[3]);

  float D[4] = {1, 1, 1, 2};
  CHECK(ref_gemm(2, 2, 3, 2.0f, A, B, 0.5f, D) == 0, "gemm alpha/beta rc");
  CHECK(D[0] == 116.5f && D[1] == 128.5f && D[2] == 278.5f && D[3] == 309.0f,
        "alpha*AB + beta*C");

  float E[2] = {3, -4};
  CHECK(ref_gemm(1, 2, 0, 1.0f, NULL, NULL, 2.0f, E) == 0 && E[0] == 6 &&
            E[1] == -8,
        "k == 0 gives beta*C");
  CHECK(ref_gemm(0, 5, 3, 1.0f, NULL, B, 0.0f, NULL) == 0, "m == 0 is a no-op");
}

/* Independent i-j-p loop: summation order per element matches ref_gemm. */
static void naive_gemm(int m, int n, int k, float alpha, const float *A,
                       const float *B, float beta, float *C) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0.0;
      for (int p = 0; p < k; p++)
        acc += (double)A[i * k + p] * (double)B[p * n + j];
      double v = (double)alpha * acc;
      if (beta != 0.0f)
        v += (double)beta * (double)C[i * n + j];
      C[i * n + j] = (float)v;
    }
}

static void test_gemm_random(rng_t *r) {
  for (int it = 0; it < 20; it++) {
    int m = 1 + rng_int(r, 40), n = 1 + rng_int(r, 40), k = 1 + rng_int(r, 64);
    float alpha = rng_float(r) * 2, beta = it % 2 ? rng_float(r) : 0.0f;
    float *A = rand_floats(r, (size_t)m * k, 1.0f);
    float *B = rand_floats(r, (size_t)k * n, 1.0f);
    float *C = rand_floats(r, (size_t)m * n, 1.0f);
    float *D = xmalloc((size_t)m * n * sizeof *D);
    memcpy(D, C, (size_t)m * n * sizeof *D);
    if (beta == 0.0f)
      poison(C, (size_t)m * n);
    naive_gemm(m, n, k, alpha, A, B, beta, D);
    CHECK(ref_gemm(m, n, k, alpha, A, B, beta, C) == 0, "gemm rc");
    CHECK(same_bits(C, D, (size_t)m * n), "gemm %dx%dx%d != naive", m, n, k);
    free(A);
    free(B);
    free(C);
    free(D);
  }
}

/* ---- activations and error ----------------------------------------------- */

static int close_to(double a, double b, double tol) {
  return fabs(a - b) <= tol;
}

static void test_act(void) {
  CHECK(ref_act(REF_ACT_RELU, -1.0) == 0.0, "relu(-1)");
  CHECK(ref_act(REF_ACT_RELU, 0.0) == 0.0, "relu(0)");
  CHECK(ref_act(REF_ACT_RELU, 2.5) == 2.5, "relu(2.5)");
  CHECK(ref_act(REF_ACT_GELU, 0.0) == 0.0, "gelu(0)");
  CHECK(close_to(ref_act(REF_ACT_GELU, 1.0), 0.8413447460685429, 1e-15),
        "gelu(1)");
  CHECK(close_to(ref_act(REF_ACT_GELU, -1.0), -0.15865525393145707, 1e-15),
        "gelu(-1)");
  CHECK(close_to(ref_act(REF_ACT_GELU, 3.0), 2.99595030590511, 1e-14),
        "gelu(3)");
  CHECK(close_to(ref_act(REF_ACT_GELU, -3.0), -0.00404969409489031, 1e-15),
        "gelu(-3) (erf form, not tanh)");
  CHECK(ref_act(REF_ACT_SILU, 0.0) == 0.0, "silu(0)");
  CHECK(close_to(ref_act(REF_ACT_SILU, 1.0), 0.7310585786300049, 1e-15),
        "silu(1)");
  CHECK(close_to(ref_act(REF_ACT_SILU, -1.0), -0.2689414213699951, 1e-15),
        "silu(-1)");
  CHECK(close_to(ref_act(REF_ACT_SILU, 2.0), 1.7615941559557646, 1e-15),
        "silu(2)");
  CHECK(ref_act(REF_ACT_SWIGLU, -1.25) == -1.25, "swiglu passes x through");
  CHECK(isnan(ref_act((ref_activation)7, 1.0)), "unknown act gives NaN");
}

static void test_rel_error(void) {
  const float ref[2] = {3, 4}, out[2] = {3, 4.5f}, zero[2] = {0, 0};
  const float bad[2] = {3, NAN}, inf[2] = {INFINITY, 4};
  CHECK(ref_rel_error(ref, ref, 2) == 0.0, "equal -> 0");
  CHECK(close_to(ref_rel_error(out, ref, 2), 0.1, 1e-15), "0.5 / 5 = 0.1");
  CHECK(ref_rel_error(ref, zero, 2) == 5.0, "zero ref -> ||out||");
  CHECK(isinf(ref_rel_error(bad, ref, 2)), "NaN in out -> inf");
  CHECK(isinf(ref_rel_error(inf, ref, 2)), "inf in out -> inf");
  CHECK(isinf(ref_rel_error(ref, bad, 2)), "NaN in ref -> inf");
  CHECK(ref_rel_error(NULL, NULL, 0) == 0.0, "n == 0 -> 0");
  CHECK(isinf(ref_rel_error(NULL, ref, 2)), "NULL -> inf");
}

/* ---- top-k and gate ------------------------------------------------------ */

static void test_topk_hand(void) {
  int32_t ids[4];
  const double s[4] = {0.1, 0.5, 0.3, 0.5};
  CHECK(ref_topk(4, 3, s, ids) == 0 && ids[0] == 1 && ids[1] == 3 &&
            ids[2] == 2,
        "top-3 of {.1 .5 .3 .5} = {1 3 2}, got {%d %d %d}", ids[0], ids[1],
        ids[2]);
  const double tie[4] = {2, 2, 2, 2};
  CHECK(ref_topk(4, 2, tie, ids) == 0 && ids[0] == 0 && ids[1] == 1,
        "all tied: lower index first");
  const double neg[3] = {-3, -1, -2};
  CHECK(ref_topk(3, 3, neg, ids) == 0 && ids[0] == 1 && ids[1] == 2 &&
            ids[2] == 0,
        "k == E sorts descending");
  const double nan[3] = {NAN, 1, 0};
  CHECK(ref_topk(3, 3, nan, ids) == 0 && ids[0] == 1 && ids[1] == 2 &&
            ids[2] == 0,
        "NaN ranks last");
}

static void test_gate_hand(void) {
  /* T=2, H=1, E=3: logits are x * (0, 1, 2) = (0,1,2) and (0,2,4). */
  const float x[2] = {1, 2}, wg[3] = {0, 1, 2};
  int32_t ids[4];
  float w[4], logits[6];
  CHECK(ref_moe_gate(2, 1, 3, 2, 0, x, wg, ids, w, logits) == 0, "gate rc");
  CHECK(logits[0] == 0 && logits[1] == 1 && logits[2] == 2 && logits[3] == 0 &&
            logits[4] == 2 && logits[5] == 4,
        "logits");
  CHECK(ids[0] == 2 && ids[1] == 1 && ids[2] == 2 && ids[3] == 1, "gate ids");
  double s0 = 1 + exp(1) + exp(2), s1 = 1 + exp(2) + exp(4);
  CHECK(close_to(w[0], exp(2) / s0, 1e-7) && close_to(w[1], exp(1) / s0, 1e-7),
        "softmax weights token 0");
  CHECK(close_to(w[2], exp(4) / s1, 1e-7) && close_to(w[3], exp(2) / s1, 1e-7),
        "softmax weights token 1");

  /* Renormalised top-2 of softmax is a sigmoid of the logit gap. */
  CHECK(ref_moe_gate(2, 1, 3, 2, 1, x, wg, ids, w, NULL) == 0, "gate rc");
  CHECK(close_to(w[0], 0.7310585786300049, 1e-7) &&
            close_to(w[1], 0.2689414213699951, 1e-7),
        "renormalised token 0");
  CHECK(close_to(w[2], 0.8807970779778823, 1e-7) &&
            close_to(w[3], 0.11920292202211755, 1e-7),
        "renormalised token 1");
  CHECK(close_to(w[0] + w[1], 1.0, 1e-7) && close_to(w[2] + w[3], 1.0, 1e-7),
        "renormalised weights sum to 1");

  /* Ties: lower expert index wins. */
  const float one[1] = {1}, flat[3] = {0.5f, 0.5f, 0.5f};
  const float pair[4] = {0.1f, 0.7f, 0.7f, 0.2f};
  CHECK(ref_moe_gate(1, 1, 3, 2, 1, one, flat, ids, w, NULL) == 0 &&
            ids[0] == 0 && ids[1] == 1 && w[0] == 0.5f && w[1] == 0.5f,
        "flat gate picks 0,1 with 0.5 each");
  CHECK(ref_moe_gate(1, 1, 4, 1, 0, one, pair, ids, w, NULL) == 0 &&
            ids[0] == 1,
        "tie at the top picks the lower index");
  /* Logits near 1000 overflow exp() unless the max is subtracted. */
  const float big[3] = {1000, 999, 0};
  CHECK(ref_moe_gate(1, 1, 3, 2, 1, one, big, ids, w, NULL) == 0 &&
            ids[0] == 0 && ids[1] == 1 &&
            close_to(w[0], 0.7310585786300049, 1e-7) &&
            close_to(w[1], 0.2689414213699951, 1e-7),
        "softmax is max-subtracted");
  CHECK(ref_moe_gate(0, 4, 3, 2, 1, NULL, wg, NULL, NULL, NULL) == 0,
        "T == 0 is valid");
}

/* Non-finite logits: ids stay k distinct experts in the documented order
 * (larger first, NaN below every number, ties to the lower index), the
 * token's weights are NaN, and the other tokens are untouched. */
static int distinct_in_range(const int32_t *ids, int k, int E) {
  for (int j = 0; j < k; j++) {
    if (ids[j] < 0 || ids[j] >= E)
      return 0;
    for (int i = 0; i < j; i++)
      if (ids[i] == ids[j])
        return 0;
  }
  return 1;
}

static void test_gate_nonfinite(void) {
  /* H = 1, E = 4, wg = (1, 2, 3, 4): logit = x * wg. */
  const float wg[4] = {1, 2, 3, 4};
  const float x[4] = {1, NAN, INFINITY, -INFINITY};
  int32_t ids[16];
  float w[16];
  CHECK(ref_moe_gate(4, 1, 4, 4, 1, x, wg, ids, w, NULL) == 0, "gate rc");
  CHECK(ids[0] == 3 && ids[1] == 2 && ids[2] == 1 && ids[3] == 0 &&
            all_finite(w, 4),
        "finite token unchanged by its neighbours");
  /* All-NaN logits: every expert ties below the numbers, lower index first. */
  CHECK(ids[4] == 0 && ids[5] == 1 && ids[6] == 2 && ids[7] == 3,
        "all-NaN token picks 0,1,2,3");
  /* +Inf everywhere: equal values, lower index first. */
  CHECK(ids[8] == 0 && ids[9] == 1 && ids[10] == 2 && ids[11] == 3,
        "all +Inf token picks 0,1,2,3");
  CHECK(ids[12] == 0 && ids[13] == 1 && ids[14] == 2 && ids[15] == 3,
        "all -Inf token picks 0,1,2,3");
  int nan_w = 1;
  for (int i = 4; i < 16; i++)
    nan_w = nan_w && isnan(w[i]);
  CHECK(nan_w, "non-finite tokens get NaN weights");

  /* Mixed: a NaN column ranks below -Inf; an Inf column ranks first. */
  const float mix[4] = {NAN, -INFINITY, INFINITY, 0.5f};
  const float one[1] = {1};
  CHECK(ref_moe_gate(1, 1, 4, 4, 0, one, mix, ids, w, NULL) == 0 &&
            ids[0] == 2 && ids[1] == 3 && ids[2] == 1 && ids[3] == 0 &&
            isnan(w[0]) && isnan(w[3]),
        "mixed column order: +Inf, 0.5, -Inf, NaN; weights NaN");
  CHECK(distinct_in_range(ids, 4, 4), "mixed ids distinct");

  /* Fewer finite logits than k (E = 2, k = 2, one NaN). */
  const float half[2] = {NAN, 1};
  CHECK(ref_moe_gate(1, 1, 2, 2, 1, one, half, ids, w, NULL) == 0 &&
            ids[0] == 1 && ids[1] == 0 && isnan(w[0]) && isnan(w[1]),
        "k = E with one NaN: both distinct, NaN weights");

  /* Ranking is on logits: two logits far below the top whose softmax
   * probabilities both underflow to 0 still rank in logit order. */
  const float far[3] = {0, -1000, -900};
  CHECK(ref_moe_gate(1, 1, 3, 3, 0, one, far, ids, w, NULL) == 0 &&
            ids[0] == 0 && ids[1] == 2 && ids[2] == 1 && w[0] == 1.0f &&
            w[1] == 0.0f && w[2] == 0.0f,
        "underflowing probabilities keep the logit order");
}

static void test_gate_random(rng_t *r) {
  const int T = 64, H = 32, E = 16, k = 4;
  float *x = rand_floats(r, (size_t)T * H, 1.0f);
  float *wg = rand_floats(r, (size_t)H * E, 1.0f);
  int32_t *ids = xmalloc((size_t)T * k * sizeof *ids);
  float *w = xmalloc((size_t)T * k * sizeof *w);
  float *logits = xmalloc((size_t)T * E * sizeof *logits);
  poison(w, (size_t)T * k);
  CHECK(ref_moe_gate(T, H, E, k, 1, x, wg, ids, w, logits) == 0, "gate rc");
  CHECK(all_finite(w, (size_t)T * k), "every weight written");
  int bad_sum = 0, bad_order = 0, bad_ids = 0;
  for (int t = 0; t < T; t++) {
    const int32_t *it = ids + t * k;
    const float *lt = logits + t * E;
    double sum = 0;
    for (int j = 0; j < k; j++) {
      sum += w[t * k + j];
      if (it[j] < 0 || it[j] >= E)
        bad_ids++;
      for (int i = 0; i < j; i++)
        if (it[i] == it[j])
          bad_ids++;
      if (j > 0 && w[t * k + j] > w[t * k + j - 1])
        bad_order++;
    }
    /* Nothing left out may beat the last chosen logit. */
    for (int e = 0; e < E; e++) {
      int chosen = 0;
      for (int j = 0; j < k; j++)
        chosen |= it[j] == e;
      if (!chosen && lt[e] > lt[it[k - 1]])
        bad_order++;
    }
    if (fabs(sum - 1.0) > 1e-6)
      bad_sum++;
  }
  CHECK(bad_ids == 0, "gate ids out of range or repeated: %d", bad_ids);
  CHECK(bad_order == 0, "gate not descending / missed a larger logit: %d",
        bad_order);
  CHECK(bad_sum == 0, "renormalised weights not summing to 1: %d tokens",
        bad_sum);
  free(x);
  free(wg);
  free(ids);
  free(w);
  free(logits);
}

/* ---- expert FFN ---------------------------------------------------------- */

/* ref_moe_gate_fast_check: the exact gate's own routing passes; a swap
 * outside the band, a repeated id, a weight off by more than the band
 * allows and a NaN weight fail; a swap of two logits that lie within
 * their bands of each other passes (and is `near`). */
static void test_gate_fast_check(rng_t *r) {
  const int H = 512, E = 8, k = 2;
  float *x = rand_floats(r, (size_t)H, 1.0f);
  float *wg = rand_floats(r, (size_t)H * E, 1.0f);
  int32_t ids[2], alt[2];
  float w[2], wa[2];
  ref_fast_gate f;
  CHECK(ref_moe_gate(1, H, E, k, 1, x, wg, ids, w, NULL) == 0, "gate rc");
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, ids, w, &f) == 0 && f.same && f.consistent &&
            f.ok && f.eps_max > 0 && f.w_tol > 1e-6,
        "fast check: the exact routing passes (eps %g, tol %g)", f.eps_max, f.w_tol);
  /* the chosen two swapped: consistent only if their logits are within
   * their bands (random: far apart) */
  alt[0] = ids[1];
  alt[1] = ids[0];
  wa[0] = w[1];
  wa[1] = w[0];
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, alt, wa, &f) == 0 && !f.same && !f.ok,
        "fast check: a swap far outside the band fails");
  alt[0] = ids[0];
  alt[1] = ids[0];
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, alt, w, &f) == 0 && !f.consistent && !f.ok,
        "fast check: a repeated id fails");
  wa[0] = w[0] * 1.01f;
  wa[1] = w[1];
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, ids, wa, &f) == 0 && f.consistent && !f.ok,
        "fast check: a weight 1%% off fails (tol %g)", f.w_tol);
  wa[0] = NAN;
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, ids, wa, &f) == 0 && !f.ok,
        "fast check: a NaN weight of a finite token fails");
  /* a near tie: expert 1's weights = expert 0's plus one 2^-30 step in
   * row 0, so their logits differ by far less than the band; ranking them
   * either way is consistent */
  for (int h = 0; h < H; h++)
    for (int e = 0; e < E; e++)
      wg[(size_t)h * E + e] = e < 2 ? wg[(size_t)h * E] : wg[(size_t)h * E + e] * 0.25f;
  double dot = 0.0; /* experts 0 and 1 on top: x turned to make their logit positive */
  for (int h = 0; h < H; h++)
    dot += (double)x[h] * wg[(size_t)h * E];
  for (int h = 0; h < H && dot < 0; h++)
    x[h] = -x[h];
  x[0] = 1.0f;
  wg[1] = wg[0] + ldexpf(fabsf(wg[0]) > 0 ? fabsf(wg[0]) : 1.0f, -22);
  CHECK(ref_moe_gate(1, H, E, k, 1, x, wg, ids, w, NULL) == 0, "gate rc");
  alt[0] = ids[1];
  alt[1] = ids[0];
  wa[0] = w[1];
  wa[1] = w[0];
  CHECK(ref_moe_gate_fast_check(H, E, k, 1, x, wg, alt, wa, &f) == 0 && !f.same && f.consistent &&
            f.ok,
        "fast check: a near tie ranked the other way passes");
  free(x);
  free(wg);
}

static void test_ffn_hand(void) {
  float out[2];
  /* SwiGLU, H=2, F=1: gate column (1,0) gives g=1, up column (0,1) gives
   * u=2, h = silu(1) * 2, out = h * (1, -0.5). */
  const float x[2] = {1, 2}, w1[4] = {1, 0, 0, 1}, w2[2] = {1, -0.5f};
  float h = (float)(0.7310585786300049 * 2);
  CHECK(ref_expert_ffn(1, 2, 1, REF_ACT_SWIGLU, 0, x, w1, w2, out) == 0,
        "swiglu rc");
  CHECK(out[0] == h && out[1] == (float)(-0.5 * (double)h),
        "swiglu 1 row: got (%.9g, %.9g), want (%.9g, %.9g)", out[0], out[1], h,
        -0.5 * h);

  /* ReLU, H=2, F=2: x*w1 = (-1, 4) -> (0, 4); * [5 6; .5 .25] = (2, 1). */
  const float xr[2] = {1, -2}, w1r[4] = {1, 2, 1, -1},
              w2r[4] = {5, 6, .5f, .25f};
  CHECK(ref_expert_ffn(1, 2, 2, REF_ACT_RELU, 0, xr, w1r, w2r, out) == 0 &&
            out[0] == 2 && out[1] == 1,
        "relu 1 row");

  /* GELU, H=F=1: out = 2 * gelu(1), h rounded to float first. */
  const float one[1] = {1}, two[1] = {2};
  CHECK(ref_expert_ffn(1, 1, 1, REF_ACT_GELU, 0, one, one, two, out) == 0 &&
            out[0] == (float)(2.0 * (double)(float)0.8413447460685429),
        "gelu 1 row");

  /* h = 1 + 3*2^-10 is 0.375 of a bf16 ulp above 1 (rounds down to 1) and
   * exact in fp16. */
  const float wh[1] = {1.0f + 3 * 0x1p-10f};
  ref_expert_ffn(1, 1, 1, REF_ACT_RELU, 0, one, wh, one, out);
  CHECK(out[0] == wh[0], "h_round 0 keeps float h");
  ref_expert_ffn(1, 1, 1, REF_ACT_RELU, 1, one, wh, one, out);
  CHECK(out[0] == 1.0f, "h_round 1 rounds h to bf16");
  ref_expert_ffn(1, 1, 1, REF_ACT_RELU, 2, one, wh, one, out);
  CHECK(out[0] == wh[0], "h_round 2 rounds h to fp16 (exact here)");
  CHECK(ref_expert_ffn(0, 4, 4, REF_ACT_RELU, 0, NULL, wh, wh, NULL) == 0,
        "n == 0 is valid");
}

/* A block of rows equals the rows run one by one, for every activation. */
static void test_ffn_rows_independent(rng_t *r) {
  for (int a = 0; a < 4; a++) {
    ref_moe_shape s = moe_shape(16, 24, 20, 1, 1, (ref_activation)a);
    s.h_round = a % 3;
    moe_data d = moe_data_new(r, &s);
    size_t H = (size_t)s.H;
    float *blk = xmalloc((size_t)s.T * H * sizeof *blk);
    float *row = xmalloc(H * sizeof *row);
    poison(blk, (size_t)s.T * H);
    CHECK(ref_expert_ffn(s.T, s.H, s.F, s.act, s.h_round, d.x, d.w1, d.w2,
                         blk) == 0,
          "ffn rc");
    CHECK(all_finite(blk, (size_t)s.T * H), "every ffn output written");
    int bad = 0;
    for (int t = 0; t < s.T; t++) {
      expert_row(&s, &d, 0, t, row);
      bad += !same_bits(row, blk + (size_t)t * H, H);
    }
    CHECK(bad == 0, "act %d: %d rows differ from the single-row run", a, bad);
    free(blk);
    free(row);
    moe_data_free(&d);
  }
}

/* ---- MoE forward --------------------------------------------------------- */

/* Gate routing with k = 1 and renormalisation: weight exactly 1, and y is
 * the chosen expert's output on that row. */
static void test_moe_k1(rng_t *r) {
  for (int a = 0; a < 4; a++) {
    ref_moe_shape s = moe_shape(48, 32, 24, 8, 1, (ref_activation)a);
    moe_data d = moe_data_new(r, &s);
    size_t T = (size_t)s.T, H = (size_t)s.H;
    float *y = xmalloc(T * H * sizeof *y), *o = xmalloc(H * sizeof *o);
    int32_t *ids = xmalloc(T * sizeof *ids), *gids = xmalloc(T * sizeof *gids);
    float *w = xmalloc(T * sizeof *w), *gw = xmalloc(T * sizeof *gw);
    poison(y, T * H);
    CHECK(ref_moe_forward(&s, d.x, d.wg, d.w1, d.w2, NULL, NULL, ids, w, y) ==
              0,
          "forward rc");
    CHECK(all_finite(y, T * H), "every y written");
    ref_moe_gate(s.T, s.H, s.E, 1, 1, d.x, d.wg, gids, gw, NULL);
    int bad_w = 0, bad_y = 0;
    for (size_t t = 0; t < T; t++) {
      bad_w += w[t] != 1.0f || ids[t] != gids[t];
      expert_row(&s, &d, ids[t], (int)t, o);
      bad_y += !same_bits(o, y + t * H, H);
    }
    CHECK(bad_w == 0, "k=1 routing: weights not 1 or ids differ from gate");
    CHECK(bad_y == 0, "act %d: %d rows differ from the expert FFN", a, bad_y);
    free(y);
    free(o);
    free(ids);
    free(gids);
    free(w);
    free(gw);
    moe_data_free(&d);
  }
}

/* Caller routing, every token to one expert with weight w: y = w*expert(x);
 * and the routing outputs are left alone. */
static void test_moe_one_expert(rng_t *r) {
  ref_moe_shape s = moe_shape(32, 40, 36, 6, 1, REF_ACT_SWIGLU);
  moe_data d = moe_data_new(r, &s);
  size_t T = (size_t)s.T, H = (size_t)s.H;
  float *y = xmalloc(T * H * sizeof *y), *o = xmalloc(H * sizeof *o);
  int32_t *ids = xmalloc(T * sizeof *ids), *ids_out = xmalloc(T * sizeof *ids);
  float *w = xmalloc(T * sizeof *w), *w_out = xmalloc(T * sizeof *w);
  const float wt = 0.75f;
  int untouched = 1;
  for (size_t t = 0; t < T; t++) {
    ids[t] = 3;
    w[t] = wt;
    ids_out[t] = -7;
    w_out[t] = -7.0f;
  }
  for (int out_round = 0; out_round < 3; out_round++) {
    s.out_round = out_round;
    poison(y, T * H);
    CHECK(ref_moe_forward(&s, d.x, NULL, d.w1, d.w2, ids, w, ids_out, w_out,
                          y) == 0,
          "forward rc");
    int bad = 0;
    for (size_t t = 0; t < T; t++) {
      expert_row(&s, &d, 3, (int)t, o);
      for (size_t c = 0; c < H; c++)
        bad += y[t * H + c] !=
               (float)((double)wt * (double)round_mode(out_round, o[c]));
    }
    CHECK(bad == 0, "out_round %d: %d elements != w * expert(x)", out_round,
          bad);
  }
  for (size_t t = 0; t < T; t++)
    untouched &= ids_out[t] == -7 && w_out[t] == -7.0f;
  CHECK(untouched, "caller routing leaves ids_out/weights_out untouched");
  free(y);
  free(o);
  free(ids);
  free(ids_out);
  free(w);
  free(w_out);
  moe_data_free(&d);
}

/* Random caller routing with k = 3: y is the ascending-j weighted sum. */
static void test_moe_combine(rng_t *r) {
  ref_moe_shape s = moe_shape(40, 24, 16, 10, 3, REF_ACT_GELU);
  s.h_round = 1;
  s.out_round = 2;
  moe_data d = moe_data_new(r, &s);
  size_t n = (size_t)s.T * s.k, TH = (size_t)s.T * s.H;
  int32_t *ids = xmalloc(n * sizeof *ids);
  float *w = rand_floats(r, n, 1.0f);
  float *y = xmalloc(TH * sizeof *y), *want = xmalloc(TH * sizeof *want);
  for (size_t i = 0; i < n; i++)
    ids[i] = rng_int(r, s.E); /* repeats within a token are allowed */
  poison(y, TH);
  CHECK(ref_moe_forward(&s, d.x, NULL, d.w1, d.w2, ids, w, NULL, NULL, y) == 0,
        "forward rc");
  expected_y(&s, &d, ids, w, NULL, want);
  CHECK(same_bits(y, want, TH), "k=3 caller routing != per-row combine");
  free(ids);
  free(w);
  free(y);
  free(want);
  moe_data_free(&d);
}

/* top_k == E with renormalisation: every expert once, weights sum to 1. */
static void test_moe_topk_all(rng_t *r) {
  ref_moe_shape s = moe_shape(32, 16, 16, 8, 8, REF_ACT_SILU);
  moe_data d = moe_data_new(r, &s);
  size_t n = (size_t)s.T * s.k;
  int32_t *ids = xmalloc(n * sizeof *ids);
  float *w = xmalloc(n * sizeof *w);
  float *y = xmalloc((size_t)s.T * s.H * sizeof *y);
  poison(w, n);
  CHECK(ref_moe_forward(&s, d.x, d.wg, d.w1, d.w2, NULL, NULL, ids, w, y) == 0,
        "forward rc");
  int bad_sum = 0, bad_perm = 0;
  for (int t = 0; t < s.T; t++) {
    double sum = 0;
    int seen = 0;
    for (int j = 0; j < s.k; j++) {
      sum += w[t * s.k + j];
      seen |= 1 << ids[t * s.k + j];
    }
    bad_sum += fabs(sum - 1.0) > 1e-6;
    bad_perm += seen != (1 << s.E) - 1;
  }
  CHECK(bad_sum == 0, "top_k == E: %d tokens' weights not summing to 1",
        bad_sum);
  CHECK(bad_perm == 0, "top_k == E: %d tokens not using every expert",
        bad_perm);
  free(ids);
  free(w);
  free(y);
  moe_data_free(&d);
}

/* A capacity no expert can reach changes nothing, bitwise. */
static void test_moe_capacity_large(rng_t *r) {
  ref_moe_shape s = moe_shape(64, 32, 32, 16, 2, REF_ACT_RELU);
  moe_data d = moe_data_new(r, &s);
  size_t TH = (size_t)s.T * s.H;
  float *y0 = xmalloc(TH * sizeof *y0), *y1 = xmalloc(TH * sizeof *y1);
  CHECK(ref_moe_forward(&s, d.x, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        y0) == 0,
        "dropless rc");
  s.capacity = s.T * s.k;
  CHECK(ref_moe_forward(&s, d.x, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        y1) == 0,
        "capacity rc");
  CHECK(same_bits(y0, y1, TH), "capacity T*k differs from dropless");
  free(y0);
  free(y1);
  moe_data_free(&d);
}

/* Hand-built routing with capacity 2 over E=3 (token-major order):
 *   t0:(0,1)  t1:(0,2)  t2:(0,1)  t3:(2,1)
 * expert 0 sees t0j0, t1j0, t2j0 -> t2j0 dropped;
 * expert 1 sees t0j1, t2j1, t3j1 -> t3j1 dropped;
 * expert 2 sees t1j1, t3j0       -> both kept. */
static void test_moe_capacity_hand(rng_t *r) {
  ref_moe_shape s = moe_shape(4, 16, 8, 3, 2, REF_ACT_SWIGLU);
  s.capacity = 2;
  moe_data d = moe_data_new(r, &s);
  const int32_t ids[8] = {0, 1, 0, 2, 0, 1, 2, 1};
  const int keep[8] = {1, 1, 1, 1, 0, 1, 1, 0};
  const float w[8] = {0.6f, 0.4f, 0.3f, 0.7f, 0.5f, 0.5f, 0.9f, 0.1f};
  size_t H = (size_t)s.H, TH = (size_t)s.T * H;
  float *y = xmalloc(TH * sizeof *y), *want = xmalloc(TH * sizeof *want);
  float *o = xmalloc(H * sizeof *o);
  poison(y, TH);
  CHECK(ref_moe_forward(&s, d.x, NULL, d.w1, d.w2, ids, w, NULL, NULL, y) == 0,
        "forward rc");
  expected_y(&s, &d, ids, w, keep, want);
  CHECK(same_bits(y, want, TH), "capacity 2: y != combine of kept rows");
  /* Token 2 keeps only its choice of expert 1: y = 0.5 * expert1(x2). */
  expert_row(&s, &d, 1, 2, o);
  int bad = 0;
  for (size_t c = 0; c < H; c++)
    bad += y[2 * H + c] != (float)(0.5 * (double)o[c]);
  CHECK(bad == 0, "dropped assignment contributed something");
  s.capacity = 0;
  expected_y(&s, &d, ids, w, NULL, want);
  CHECK(ref_moe_forward(&s, d.x, NULL, d.w1, d.w2, ids, w, NULL, NULL, y) ==
                0 &&
            same_bits(y, want, TH),
        "same routing dropless keeps everything");
  free(y);
  free(want);
  free(o);
  moe_data_free(&d);
}

/* ---- counts -------------------------------------------------------------- */

static void test_counts(rng_t *r) {
  const int32_t ids[6] = {0, 1, 1, 2, 1, 3};
  int64_t c[4];
  CHECK(ref_expert_counts(3, 2, 4, ids, c) == 0 && c[0] == 1 && c[1] == 3 &&
            c[2] == 1 && c[3] == 1,
        "hand counts");

  const int T = 64, k = 4, E = 16;
  int32_t *rid = xmalloc((size_t)T * k * sizeof *rid);
  int64_t rc[16], sum = 0;
  for (int i = 0; i < T * k; i++)
    rid[i] = rng_int(r, E);
  CHECK(ref_expert_counts(T, k, E, rid, rc) == 0, "counts rc");
  for (int e = 0; e < E; e++)
    sum += rc[e];
  CHECK(sum == (int64_t)T * k, "counts sum %lld != T*k", (long long)sum);

  /* A bad id fails before anything is written. */
  rid[T * k - 1] = E;
  rc[0] = -5;
  CHECK(ref_expert_counts(T, k, E, rid, rc) == -1 && rc[0] == -5,
        "id == E rejected, counts untouched");
  rid[T * k - 1] = -1;
  CHECK(ref_expert_counts(T, k, E, rid, rc) == -1, "id < 0 rejected");
  free(rid);
}

/* ---- bad arguments ------------------------------------------------------- */

static void test_bad_args_basic(void) {
  const float a[4] = {1, 2, 3, 4};
  float c[4];
  const double sc[4] = {1, 2, 3, 4};
  int32_t ids[4];
  CHECK(ref_gemm(-1, 2, 2, 1, a, a, 0, c) == -1, "gemm m < 0");
  CHECK(ref_gemm(2, -1, 2, 1, a, a, 0, c) == -1, "gemm n < 0");
  CHECK(ref_gemm(2, 2, -1, 1, a, a, 0, c) == -1, "gemm k < 0");
  CHECK(ref_gemm(2, 2, 2, 1, NULL, a, 0, c) == -1, "gemm A NULL");
  CHECK(ref_gemm(2, 2, 2, 1, a, NULL, 0, c) == -1, "gemm B NULL");
  CHECK(ref_gemm(2, 2, 2, 1, a, a, 0, NULL) == -1, "gemm C NULL");
  CHECK(ref_topk(4, 0, sc, ids) == -1, "topk k = 0");
  CHECK(ref_topk(4, 5, sc, ids) == -1, "topk k > E");
  CHECK(ref_topk(0, 1, sc, ids) == -1, "topk E = 0");
  CHECK(ref_topk(4, 2, NULL, ids) == -1, "topk scores NULL");
  CHECK(ref_topk(4, 2, sc, NULL) == -1, "topk ids NULL");

  float w[4];
  CHECK(ref_moe_gate(-1, 2, 2, 1, 0, a, a, ids, w, NULL) == -1, "gate T < 0");
  CHECK(ref_moe_gate(2, 0, 2, 1, 0, a, a, ids, w, NULL) == -1, "gate H = 0");
  CHECK(ref_moe_gate(2, 2, 0, 1, 0, a, a, ids, w, NULL) == -1, "gate E = 0");
  CHECK(ref_moe_gate(2, 2, 2, 0, 0, a, a, ids, w, NULL) == -1, "gate k = 0");
  CHECK(ref_moe_gate(2, 2, 2, 3, 0, a, a, ids, w, NULL) == -1, "gate k > E");
  CHECK(ref_moe_gate(2, 2, 2, 1, 0, NULL, a, ids, w, NULL) == -1,
        "gate x NULL");
  CHECK(ref_moe_gate(2, 2, 2, 1, 0, a, NULL, ids, w, NULL) == -1,
        "gate wg NULL");
  CHECK(ref_moe_gate(2, 2, 2, 1, 0, a, a, NULL, w, NULL) == -1,
        "gate ids NULL");
  CHECK(ref_moe_gate(2, 2, 2, 1, 0, a, a, ids, NULL, NULL) == -1,
        "gate weights NULL");

  const ref_activation relu = REF_ACT_RELU;
  CHECK(ref_expert_ffn(-1, 2, 2, relu, 0, a, a, a, c) == -1, "ffn n < 0");
  CHECK(ref_expert_ffn(2, 0, 2, relu, 0, a, a, a, c) == -1, "ffn H = 0");
  CHECK(ref_expert_ffn(2, 2, -2, relu, 0, a, a, a, c) == -1, "ffn F < 0");
  CHECK(ref_expert_ffn(2, 2, 2, (ref_activation)4, 0, a, a, a, c) == -1,
        "ffn bad act");
  CHECK(ref_expert_ffn(2, 2, 2, relu, 3, a, a, a, c) == -1, "ffn h_round 3");
  CHECK(ref_expert_ffn(2, 2, 2, relu, -1, a, a, a, c) == -1, "ffn h_round -1");
  CHECK(ref_expert_ffn(2, 2, 2, relu, 0, NULL, a, a, c) == -1, "ffn x NULL");
  CHECK(ref_expert_ffn(2, 2, 2, relu, 0, a, NULL, a, c) == -1, "ffn w1 NULL");
  CHECK(ref_expert_ffn(2, 2, 2, relu, 0, a, a, NULL, c) == -1, "ffn w2 NULL");
  CHECK(ref_expert_ffn(2, 2, 2, relu, 0, a, a, a, NULL) == -1, "ffn out NULL");

  int64_t cnt[2];
  CHECK(ref_expert_counts(-1, 1, 2, ids, cnt) == -1, "counts T < 0");
  CHECK(ref_expert_counts(1, 0, 2, ids, cnt) == -1, "counts k = 0");
  CHECK(ref_expert_counts(1, 3, 2, ids, cnt) == -1, "counts k > E");
  CHECK(ref_expert_counts(1, 1, 0, ids, cnt) == -1, "counts E = 0");
  CHECK(ref_expert_counts(1, 1, 2, NULL, cnt) == -1, "counts ids NULL");
  CHECK(ref_expert_counts(1, 1, 2, ids, NULL) == -1, "counts counts NULL");
}

/* One forward call with a mutated shape or argument must fail and leave y
 * (poisoned) untouched. */
static void expect_forward_fails(const ref_moe_shape *s, const moe_data *d,
                                 const float *wg, const float *w1,
                                 const float *w2, const int32_t *ids,
                                 const float *w, float *y, size_t ny,
                                 const char *what) {
  poison(y, ny);
  int rc = ref_moe_forward(s, d->x, wg, w1, w2, ids, w, NULL, NULL, y);
  int untouched = 1;
  for (size_t i = 0; i < ny; i++)
    untouched &= isnan(y[i]);
  CHECK(rc == -1 && untouched, "forward should reject: %s", what);
}

static void test_bad_args_forward(rng_t *r) {
  const ref_moe_shape good = moe_shape(4, 8, 8, 4, 2, REF_ACT_RELU);
  moe_data d = moe_data_new(r, &good);
  size_t ny = (size_t)good.T * good.H;
  float *y = xmalloc(ny * sizeof *y);
  int32_t ids[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  const float w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  ref_moe_shape s;

#define BAD_FIELD(field, value)                                                \
  do {                                                                         \
    s = good;                                                                  \
    s.field = value;                                                           \
    expect_forward_fails(&s, &d, d.wg, d.w1, d.w2, NULL, NULL, y, ny,          \
                         #field " = " #value);                                 \
  } while (0)
  BAD_FIELD(T, -1);
  BAD_FIELD(H, 0);
  BAD_FIELD(F, 0);
  BAD_FIELD(E, 0);
  BAD_FIELD(k, 0);
  BAD_FIELD(k, 5);
  BAD_FIELD(act, (ref_activation)9);
  BAD_FIELD(capacity, -1);
  BAD_FIELD(h_round, 3);
  BAD_FIELD(out_round, -1);
#undef BAD_FIELD

  s = good;
  CHECK(ref_moe_forward(NULL, d.x, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        y) == -1,
        "forward shape NULL");
  expect_forward_fails(&s, &d, NULL, d.w1, d.w2, NULL, NULL, y, ny,
                       "wg NULL without caller routing");
  expect_forward_fails(&s, &d, d.wg, NULL, d.w2, NULL, NULL, y, ny, "w1 NULL");
  expect_forward_fails(&s, &d, d.wg, d.w1, NULL, NULL, NULL, y, ny, "w2 NULL");
  expect_forward_fails(&s, &d, d.wg, d.w1, d.w2, ids, NULL, y, ny,
                       "ids_in without weights_in");
  expect_forward_fails(&s, &d, d.wg, d.w1, d.w2, NULL, w, y, ny,
                       "weights_in without ids_in");
  ids[5] = 4;
  expect_forward_fails(&s, &d, d.wg, d.w1, d.w2, ids, w, y, ny, "caller id E");
  ids[5] = -1;
  expect_forward_fails(&s, &d, d.wg, d.w1, d.w2, ids, w, y, ny, "caller id -1");
  ids[5] = 2;
  CHECK(ref_moe_forward(&s, NULL, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        y) == -1,
        "forward x NULL");
  CHECK(ref_moe_forward(&s, d.x, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        NULL) == -1,
        "forward y NULL");
  CHECK(ref_moe_forward(&s, d.x, NULL, d.w1, d.w2, ids, w, NULL, NULL, y) == 0,
        "the same call with valid routing succeeds");
  s.T = 0;
  CHECK(ref_moe_forward(&s, NULL, d.wg, d.w1, d.w2, NULL, NULL, NULL, NULL,
                        NULL) == 0,
        "T == 0 is valid");
  free(y);
  moe_data_free(&d);
}

int main(void) {
  rng_t rng = {SEED};
  printf("test_reference: seed 0x%X\n", SEED);

  test_bf16_hand();
  test_fp16_hand();
  test_round_arrays();
  test_pack_arrays();
  test_splitmix64();
  test_transpose(&rng);
  test_roundtrip_all();
  test_nearest_random(&rng);
  test_gemm_hand();
  test_gemm_random(&rng);
  test_act();
  test_rel_error();
  test_topk_hand();
  test_gate_hand();
  test_gate_nonfinite();
  test_gate_random(&rng);
  test_gate_fast_check(&rng);
  test_ffn_hand();
  test_ffn_rows_independent(&rng);
  test_moe_k1(&rng);
  test_moe_one_expert(&rng);
  test_moe_combine(&rng);
  test_moe_topk_all(&rng);
  test_moe_capacity_large(&rng);
  test_moe_capacity_hand(&rng);
  test_counts(&rng);
  test_bad_args_basic();
  test_bad_args_forward(&rng);
  return check_summary("test_reference");
}
