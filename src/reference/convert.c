/*
 * Scalar float <-> bf16 / fp16 conversion, round to nearest, ties to even;
 * arrays in a storage format; matrix transposition (weight layouts); the
 * splitmix64 step used for test data.
 * Bit patterns move through memcpy so the compiler sees no aliasing tricks.
 */
#include "reference.h"

#include <math.h>
#include <string.h>

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- bf16: the top half of a binary32 ------------------------------------ */

uint16_t ref_float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    /* Truncating a NaN whose payload sits in the low half would yield Inf;
     * setting the quiet bit keeps it a NaN (and quiets a signalling one). */
    return (uint16_t)((u >> 16) | 0x0040u);
  }
  /* Adding 0x7FFF plus the kept LSB rounds to nearest even; a carry out of
   * the mantissa bumps the exponent, and past the largest finite value it
   * lands exactly on the Inf pattern. */
  uint32_t lsb = (u >> 16) & 1u;
  return (uint16_t)((u + 0x7FFFu + lsb) >> 16);
}

float ref_bf16_to_float(uint16_t h) { return bits_float((uint32_t)h << 16); }

/* ---- fp16: IEEE binary16 (1 sign, 5 exponent, 10 mantissa bits) ---------- */

/* Shift `m` right by `shift` (1..31) rounding to nearest even. */
static uint32_t shift_rne(uint32_t m, int shift) {
  uint32_t kept = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (kept & 1u)))
    kept++;
  return kept;
}

uint16_t ref_float_to_fp16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xFFu;
  uint32_t man = u & 0x7FFFFFu;

  if (exp == 0xFFu) {
    if (man == 0)
      return (uint16_t)(sign | 0x7C00u);
    /* Keep the top payload bits and force the quiet bit so it stays NaN. */
    return (uint16_t)(sign | 0x7E00u | (man >> 13));
  }
  /* Float zeros and subnormals are below 2^-126, far under half of the
   * smallest fp16 subnormal (2^-24), so they round to a signed zero. */
  if (exp == 0)
    return sign;

  int e = (int)exp - 127;
  if (e > 15)
    return (uint16_t)(sign | 0x7C00u);
  if (e >= -14) {
    /* Normal range: build exponent|mantissa, then round; a mantissa carry
     * correctly increments the exponent, and 0x7BFF + 1 is Inf. */
    uint32_t biased = ((uint32_t)(e + 15) << 23) | man;
    return (uint16_t)(sign | shift_rne(biased, 13));
  }
  /* Subnormal result: value = m * 2^(e-23) with the implicit bit restored,
   * expressed in units of 2^-24. With a shift past 24 the value is under
   * 2^-25, below half the smallest subnormal, and rounds to zero. */
  int shift = 13 + (-14 - e);
  if (shift > 24)
    return sign;
  return (uint16_t)(sign | shift_rne(man | 0x800000u, shift));
}

float ref_fp16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;

  if (exp == 0x1Fu)
    return bits_float(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    /* Subnormal (or zero): man * 2^-24 is exact in binary32. */
    float mag = ldexpf((float)man, -24);
    return sign ? -mag : mag;
  }
  return bits_float(sign | ((exp - 15u + 127u) << 23) | (man << 13));
}

/* ---- round trips --------------------------------------------------------- */

float ref_round_bf16(float f) {
  return ref_bf16_to_float(ref_float_to_bf16(f));
}

float ref_round_fp16(float f) {
  return ref_fp16_to_float(ref_float_to_fp16(f));
}

void ref_round_bf16_array(float *x, size_t n) {
  if (!x)
    return;
  for (size_t i = 0; i < n; i++)
    x[i] = ref_round_bf16(x[i]);
}

void ref_round_fp16_array(float *x, size_t n) {
  if (!x)
    return;
  for (size_t i = 0; i < n; i++)
    x[i] = ref_round_fp16(x[i]);
}

void ref_pack_array(void *dst, const float *src, size_t n, int fmt) {
  uint16_t *h = (uint16_t *)dst;
  if (fmt == 0)
    memcpy(dst, src, n * sizeof *src);
  else if (fmt == 1)
    for (size_t i = 0; i < n; i++)
      h[i] = ref_float_to_bf16(src[i]);
  else
    for (size_t i = 0; i < n; i++)
      h[i] = ref_float_to_fp16(src[i]);
}

void ref_unpack_array(float *dst, const void *src, size_t n, int fmt) {
  const uint16_t *h = (const uint16_t *)src;
  if (fmt == 0)
    memcpy(dst, src, n * sizeof *dst);
  else if (fmt == 1)
    for (size_t i = 0; i < n; i++)
      dst[i] = ref_bf16_to_float(h[i]);
  else
    for (size_t i = 0; i < n; i++)
      dst[i] = ref_fp16_to_float(h[i]);
}

void ref_round_array(float *x, size_t n, int fmt) {
  if (fmt == 1)
    ref_round_bf16_array(x, n);
  else if (fmt == 2)
    ref_round_fp16_array(x, n);
}

void ref_transpose(float *dst, const float *src, size_t count, size_t rows, size_t cols) {
  /* 32 x 32 blocks keep both sides' accesses within a few cache lines */
  enum { TB = 32 };
  for (size_t m = 0; m < count; m++) {
    const float *s = src + m * rows * cols;
    float *d = dst + m * rows * cols;
    for (size_t r0 = 0; r0 < rows; r0 += TB)
      for (size_t c0 = 0; c0 < cols; c0 += TB) {
        const size_t r1 = r0 + TB < rows ? r0 + TB : rows;
        const size_t c1 = c0 + TB < cols ? c0 + TB : cols;
        for (size_t r = r0; r < r1; r++)
          for (size_t c = c0; c < c1; c++)
            d[c * rows + r] = s[r * cols + c];
      }
  }
}

uint64_t ref_splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
