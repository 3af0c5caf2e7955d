/*
 * How often a 16-bit gate with a certified ranking would have to recompute
 * logits (session 14, bench/RESULTS.md; the gate itself was reverted, its
 * code is bench/results/2026-11-25-h100/s14_gate16_cert.diff).
 *
 * For T random tokens (x uniform [-1, 1), gate_w uniform +-3/sqrt(H), both
 * rounded to bf16: how `loom moe` draws them) it computes the exact logits
 * and that gate's per-token bound B = max_e 1.125 (2^-18 + n 2^-24) S_e +
 * 2^-22 |logit_e| (S_e = sum_h |x_h w_eh|, n = 2 ceil(H / 384): 12 warps),
 * and counts the tokens where a comparison that decides the top-k
 * (consecutive choices, the k-th against the best unchosen) is closer than
 * 2B: those the gate could not certify.
 *
 * usage: build/bench/gate_margin T H E K   (CPU only)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 88172645463325252ull;
static double uniform(void) { /* xorshift64, [0, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1.0p-53;
}
static float to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s T H E K\n", argv[0]);
    return 2;
  }
  const int T = atoi(argv[1]), H = atoi(argv[2]), E = atoi(argv[3]), K = atoi(argv[4]);
  if (T < 1 || H < 1 || E < 2 || K < 1 || K >= E) {
    fprintf(stderr, "need T, H >= 1 and 1 <= K < E\n");
    return 2;
  }
  float *w = malloc(sizeof(float) * (size_t)H * E), *x = malloc(sizeof(float) * (size_t)H);
  double *lg = malloc(sizeof(double) * E);
  int *ord = malloc(sizeof(int) * E);
  if (!w || !x || !lg || !ord) return 1;
  const double scale = 3.0 / sqrt((double)H);
  for (size_t i = 0; i < (size_t)H * E; i++) w[i] = to_bf16((float)((2.0 * uniform() - 1.0) * scale));
  const double n = 2.0 * ((H + 383) / 384), kappa = 1.125 * (0x1p-18 + 0x1p-24 * n);
  int uncertain = 0;
  for (int t = 0; t < T; t++) {
    for (int h = 0; h < H; h++) x[h] = to_bf16((float)(2.0 * uniform() - 1.0));
    double B = 0.0;
    for (int e = 0; e < E; e++) {
      double v = 0.0, s = 0.0;
      for (int h = 0; h < H; h++) {
        const double q = (double)x[h] * (double)w[(size_t)e * H + h];
        v += q;
        s += fabs(q);
      }
      lg[e] = (float)v;
      B = fmax(B, kappa * s + 0x1p-22 * fabs(v));
    }
    for (int e = 0; e < E; e++) ord[e] = e;
    for (int i = 0; i <= K; i++) /* the top K + 1, largest first */
      for (int j = i + 1; j < E; j++)
        if (lg[ord[j]] > lg[ord[i]]) {
          const int s = ord[i];
          ord[i] = ord[j];
          ord[j] = s;
        }
    int bad = 0;
    for (int j = 0; j < K; j++) bad |= lg[ord[j]] - lg[ord[j + 1]] <= 2.0 * B;
    uncertain += bad;
  }
  printf("T=%d H=%d E=%d K=%d: %d tokens (%.3f%%) not certified\n", T, H, E, K, uncertain,
         100.0 * uncertain / T);
  free(w);
  free(x);
  free(lg);
  free(ord);
  return 0;
}
