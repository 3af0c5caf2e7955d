/*
 * Reference MoE: gate (softmax + top-k), one expert's FFN, the whole layer
 * forward with optional capacity, and routing counts.
 *
 * Every function validates all arguments and allocates all temporaries
 * before it writes any output, so a -1 leaves the caller's buffers as they
 * were. Temporaries are released through one exit label per function.
 */
#include "reference.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A NULL pointer is acceptable only for an array with no elements. */
static int bad_array(const void *p, int rows, int cols) {
  return p == NULL && rows > 0 && cols > 0;
}

/* malloc(a * b * size) with overflow checking. Asks for at least one
 * element so that NULL always means failure, even for empty arrays. */
static void *alloc_array(size_t a, size_t b, size_t size) {
  if (a == 0 || b == 0)
    a = b = 1;
  if (b > SIZE_MAX / a || a * b > SIZE_MAX / size)
    return NULL;
  return malloc(a * b * size);
}

static int valid_act(ref_activation act) {
  return act == REF_ACT_RELU || act == REF_ACT_GELU || act == REF_ACT_SILU ||
         act == REF_ACT_SWIGLU;
}

/* mode: 0 keep float, 1 through bf16, 2 through fp16 (h_round/out_round). */
static float round_mode(int mode, float v) {
  if (mode == 1)
    return ref_round_bf16(v);
  if (mode == 2)
    return ref_round_fp16(v);
  return v;
}

/* ---- top-k --------------------------------------------------------------- */

/* Whether a candidate scanned later (so with a higher index) ranks above an
 * earlier one: only when strictly greater, so ties keep the lower index.
 * NaN ranks below every number, which keeps the order total. */
static int later_ranks_above(double later, double earlier) {
  if (isnan(later))
    return 0;
  return isnan(earlier) || later > earlier;
}

/* Insertion into a sorted list of at most k entries, scanning e ascending. */
static void topk_unchecked(int E, int k, const double *s, int32_t *ids) {
  int filled = 0;
  for (int e = 0; e < E; e++) {
    int pos;
    if (filled < k)
      pos = filled++;
    else if (later_ranks_above(s[e], s[ids[k - 1]]))
      pos = k - 1;
    else
      continue;
    while (pos > 0 && later_ranks_above(s[e], s[ids[pos - 1]])) {
      ids[pos] = ids[pos - 1];
      pos--;
    }
    ids[pos] = e;
  }
}

int ref_topk(int E, int k, const double *scores, int32_t *ids) {
  if (E < 1 || k < 1 || k > E || !scores || !ids)
    return -1;
  topk_unchecked(E, k, scores, ids);
  return 0;
}

/* ---- gate ---------------------------------------------------------------- */

/* One token: top-k of its fp32 logits (the order of ref_topk: larger
 * first, NaN below every number, ties to the lower index), then softmax
 * over all experts and the chosen probabilities, (re)normalised. Ranking
 * the logits, not the probabilities, keeps two different logits whose
 * probabilities underflow to the same value in their logit order, as on
 * the GPU. A token with any non-finite logit gets NaN weights (its ids are
 * still k distinct experts). scratch holds E doubles. */
static void gate_row(int E, int k, int renormalize, const float *logits,
                     double *scratch, int32_t *ids, float *weights) {
  int finite = 1;
  for (int e = 0; e < E; e++) {
    scratch[e] = logits[e];
    finite = finite && isfinite(logits[e]);
  }
  topk_unchecked(E, k, scratch, ids);
  if (!finite) {
    for (int j = 0; j < k; j++)
      weights[j] = NAN;
    return;
  }
  const double max = logits[ids[0]];
  double sum = 0.0;
  for (int e = 0; e < E; e++) {
    scratch[e] = exp((double)logits[e] - max);
    sum += scratch[e];
  }
  double chosen = 0.0;
  for (int j = 0; j < k; j++)
    chosen += scratch[ids[j]];
  const double scale = renormalize ? chosen : sum;
  for (int j = 0; j < k; j++)
    weights[j] = (float)(scratch[ids[j]] / scale);
}

/* The gate's canonical summation order, shared with the GPU so the fp32
 * logits (and so the routing) agree bit for bit: 32 slices, slice s summing
 * x[h] * w[h] for h = s, s + 32, ... in order, in double (products of two
 * floats are exact in double); then the slices combined by a butterfly:
 * for o = 16, 8, 4, 2, 1: p[s] = p[s] + p[s ^ o]; the logit is p[0]
 * rounded to float. */
#define GATE_SLICES 32
static float gate_logit(int H, const float *x, const float *wg, int E, int e) {
  double p[GATE_SLICES], q[GATE_SLICES];
  for (int s = 0; s < GATE_SLICES; s++) {
    double acc = 0.0;
    for (int h = s; h < H; h += GATE_SLICES) acc += (double)x[h] * (double)wg[(size_t)h * E + e];
    p[s] = acc;
  }
  for (int o = GATE_SLICES / 2; o > 0; o /= 2) {
    for (int s = 0; s < GATE_SLICES; s++) q[s] = p[s] + p[s ^ o];
    memcpy(p, q, sizeof p);
  }
  return (float)p[0];
}

int ref_moe_gate(int T, int H, int E, int k, int renormalize, const float *x,
                 const float *wg, int32_t *ids, float *weights,
                 float *logits_out) {
  if (T < 0 || H < 1 || E < 1 || k < 1 || k > E || bad_array(x, T, H) || !wg ||
      bad_array(ids, T, k) || bad_array(weights, T, k))
    return -1;
  if (T == 0)
    return 0;

  int rc = -1;
  float *logits = alloc_array((size_t)T, (size_t)E, sizeof *logits);
  double *probs = alloc_array((size_t)E, 1, sizeof *probs);
  if (!logits || !probs)
    goto exit;
  /* The GPU gate holds fp32 logits, so softmax and ties see the same
   * rounded values here. */
  for (size_t t = 0; t < (size_t)T; t++)
    for (int e = 0; e < E; e++)
      logits[t * (size_t)E + e] = gate_logit(H, x + t * (size_t)H, wg, E, e);
  for (size_t t = 0; t < (size_t)T; t++)
    gate_row(E, k, renormalize, logits + t * (size_t)E, probs,
             ids + t * (size_t)k, weights + t * (size_t)k);
  if (logits_out)
    memcpy(logits_out, logits, (size_t)T * (size_t)E * sizeof *logits);
  rc = 0;
exit:
  free(logits);
  free(probs);
  return rc;
}

int ref_moe_gate_fast_check(int H, int E, int k, int renormalize, const float *x,
                            const float *wg, const int32_t *ids,
                            const float *weights, ref_fast_gate *out) {
  if (H < 1 || E < 1 || k < 1 || k > E || !x || !wg || !ids || !weights || !out)
    return -1;
  int rc = -1;
  double *L = alloc_array((size_t)E, 1, sizeof *L);
  double *b = alloc_array((size_t)E, 1, sizeof *b);
  int32_t *want = alloc_array((size_t)k, 1, sizeof *want);
  float *wwant = alloc_array((size_t)k, 1, sizeof *wwant);
  char *chosen = alloc_array((size_t)E, 1, 1);
  if (!L || !b || !want || !wwant || !chosen)
    goto exit;
  memset(out, 0, sizeof *out);
  /* the exact gate's routing of this token */
  if (ref_moe_gate(1, H, E, k, renormalize, x, wg, want, wwant, NULL) != 0)
    goto exit;
  out->same = 1;
  for (int j = 0; j < k; j++)
    out->same &= ids[j] == want[j];
  const double chain = 2.0 * (double)((H + 255) / 256) + 1.0;
  int finite = 1;
  for (int e = 0; e < E; e++) {
    double l = 0.0, pabs = 0.0;
    for (size_t h = 0; h < (size_t)H; h++) {
      const double t = (double)x[h] * (double)wg[h * (size_t)E + e];
      l += t;
      pabs += fabs(t);
    }
    L[e] = l;
    b[e] = chain * ldexp(pabs, -18) + ldexp(fabs(l), -23);
    finite &= isfinite(l) && isfinite(b[e]);
    if (b[e] > out->eps_max)
      out->eps_max = b[e];
  }
  if (!finite) { /* the exact gate's ids, NaN weights */
    int nan_w = 1;
    for (int j = 0; j < k; j++)
      nan_w &= isnan(weights[j]);
    out->consistent = out->same;
    out->ok = out->same && nan_w;
    out->w_err = nan_w ? 0.0 : INFINITY;
    rc = 0;
    goto exit;
  }
  if (k < E) {
    const int a = want[k - 1];
    double next = -INFINITY;
    int u = -1;
    memset(chosen, 0, (size_t)E);
    for (int j = 0; j < k; j++)
      chosen[want[j]] = 1;
    for (int e = 0; e < E; e++)
      if (!chosen[e] && (u < 0 || L[e] > next)) {
        next = L[e];
        u = e;
      }
    out->near = L[a] - L[u] <= b[a] + b[u];
  }
  /* consistency of the given ids */
  int cons = 1;
  memset(chosen, 0, (size_t)E);
  for (int j = 0; j < k && cons; j++) {
    cons = ids[j] >= 0 && ids[j] < E && !chosen[ids[j]];
    if (cons)
      chosen[ids[j]] = 1;
  }
  double lowest_hi = INFINITY;
  for (int j = 0; j < k && cons; j++) {
    const int s = ids[j];
    if (L[s] + b[s] < lowest_hi)
      lowest_hi = L[s] + b[s];
    for (int i = 0; i < j && cons; i++)
      cons = L[ids[i]] + b[ids[i]] >= L[s] - b[s];
  }
  for (int e = 0; e < E && cons; e++)
    if (!chosen[e])
      cons = L[e] - b[e] <= lowest_hi;
  out->consistent = cons;
  out->w_tol = expm1(2.0 * out->eps_max) + 1e-6;
  if (cons) {
    double m = -INFINITY, all = 0.0, sel = 0.0;
    for (int e = 0; e < E; e++)
      if (L[e] > m)
        m = L[e];
    for (int e = 0; e < E; e++)
      all += exp(L[e] - m);
    for (int j = 0; j < k; j++)
      sel += exp(L[ids[j]] - m);
    for (int j = 0; j < k; j++) {
      const double w = exp(L[ids[j]] - m) / (renormalize ? sel : all);
      const double err = fabs((double)weights[j] - w) / w;
      if (!(err <= out->w_err))
        out->w_err = isnan(err) ? INFINITY : err;
    }
  }
  out->ok = cons && out->w_err <= out->w_tol;
  rc = 0;
exit:
  free(L);
  free(b);
  free(want);
  free(wwant);
  free(chosen);
  return rc;
}

/* ---- expert FFN ---------------------------------------------------------- */

/* g[0, n) = x[0, H) * w[H x n], left in double so the activation sees the
 * unrounded sum (h is rounded once, after it). */
static void row_times_matrix(int H, int n, const float *x, const float *w,
                             double *g) {
  for (int c = 0; c < n; c++)
    g[c] = 0.0;
  for (size_t p = 0; p < (size_t)H; p++) {
    const float *wp = w + p * (size_t)n;
    for (int c = 0; c < n; c++)
      g[c] += (double)x[p] * (double)wp[c];
  }
}

int ref_expert_ffn(int n, int H, int F, ref_activation act, int h_round,
                   const float *x, const float *w1, const float *w2,
                   float *out) {
  const int gated = act == REF_ACT_SWIGLU;
  if (n < 0 || H < 1 || F < 1 || (gated && F > INT_MAX / 2) ||
      !valid_act(act) || h_round < 0 || h_round > 2 || bad_array(x, n, H) ||
      !w1 || !w2 || bad_array(out, n, H))
    return -1;
  if (n == 0)
    return 0;

  int rc = -1;
  const int F1 = gated ? 2 * F : F;
  double *g = alloc_array((size_t)F1, 1, sizeof *g);
  float *h = alloc_array((size_t)n, (size_t)F, sizeof *h);
  if (!g || !h)
    goto exit;

  for (size_t r = 0; r < (size_t)n; r++) {
    row_times_matrix(H, F1, x + r * (size_t)H, w1, g);
    float *hr = h + r * (size_t)F;
    for (int f = 0; f < F; f++) {
      double v =
          gated ? ref_act(REF_ACT_SILU, g[f]) * g[F + f] : ref_act(act, g[f]);
      hr[f] = round_mode(h_round, (float)v);
    }
  }
  rc = ref_gemm(n, H, F, 1.0f, h, w2, 0.0f, out);
exit:
  free(g);
  free(h);
  return rc;
}

/* ---- whole layer forward ------------------------------------------------- */

static int bad_shape(const ref_moe_shape *s) {
  return s->T < 0 || s->H < 1 || s->F < 1 || s->E < 1 || s->k < 1 ||
         s->k > s->E || !valid_act(s->act) || s->capacity < 0 ||
         s->h_round < 0 || s->h_round > 2 || s->out_round < 0 ||
         s->out_round > 2 || (s->act == REF_ACT_SWIGLU && s->F > INT_MAX / 2);
}

static int ids_in_range(size_t n, int E, const int32_t *ids) {
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= E)
      return 0;
  return 1;
}

/* Places each (token, choice) assignment a = t*k + j at row pos[a] of the
 * expert-grouped buffer (expert e owns rows [off[e], off[e+1])), or marks
 * it dropped with -1 once its expert already holds `capacity` rows.
 * Token-major scan order is what makes "the first capacity" well defined. */
static void place_assignments(size_t n, int E, int capacity, const int32_t *ids,
                              size_t *off, size_t *fill, int64_t *pos) {
  memset(fill, 0, (size_t)E * sizeof *fill);
  for (size_t a = 0; a < n; a++)
    if (capacity == 0 || fill[ids[a]] < (size_t)capacity)
      fill[ids[a]]++;
  off[0] = 0;
  for (int e = 0; e < E; e++)
    off[e + 1] = off[e] + fill[e];
  memset(fill, 0, (size_t)E * sizeof *fill);
  for (size_t a = 0; a < n; a++) {
    int32_t e = ids[a];
    if (capacity == 0 || fill[e] < (size_t)capacity)
      pos[a] = (int64_t)(off[e] + fill[e]++);
    else
      pos[a] = -1;
  }
}

/* y[t] = sum over kept j, ascending, of w[t][j] * out[pos[t][j]]. */
static void combine(int T, int H, int k, const float *w, const int64_t *pos,
                    const float *og, float *y) {
  for (size_t t = 0; t < (size_t)T; t++) {
    for (size_t c = 0; c < (size_t)H; c++) {
      double acc = 0.0;
      for (size_t j = 0; j < (size_t)k; j++) {
        size_t a = t * (size_t)k + j;
        if (pos[a] >= 0)
          acc += (double)w[a] * (double)og[(size_t)pos[a] * (size_t)H + c];
      }
      y[t * (size_t)H + c] = (float)acc;
    }
  }
}

/* Gathers each kept assignment's token row into xg, grouped by expert, runs
 * every expert on its block, and leaves the (out_round-ed) rows in og. */
static int run_experts(const ref_moe_shape *s, const float *x, const float *w1,
                       const float *w2, const int64_t *pos, const size_t *off,
                       float *xg, float *og) {
  const size_t H = (size_t)s->H, F = (size_t)s->F, k = (size_t)s->k;
  const size_t F1 = s->act == REF_ACT_SWIGLU ? 2 * F : F;
  const size_t n = (size_t)s->T * k;
  for (size_t a = 0; a < n; a++)
    if (pos[a] >= 0)
      memcpy(xg + (size_t)pos[a] * H, x + (a / k) * H, H * sizeof *xg);
  for (int e = 0; e < s->E; e++) {
    size_t rows = off[e + 1] - off[e];
    if (rows == 0)
      continue;
    /* rows <= T, so the cast to int is exact. */
    if (ref_expert_ffn((int)rows, s->H, s->F, s->act, s->h_round,
                       xg + off[e] * H, w1 + (size_t)e * H * F1,
                       w2 + (size_t)e * F * H, og + off[e] * H) != 0)
      return -1;
  }
  for (size_t i = 0; i < off[s->E] * H; i++)
    og[i] = round_mode(s->out_round, og[i]);
  return 0;
}

int ref_moe_forward(const ref_moe_shape *s, const float *x, const float *wg,
                    const float *w1, const float *w2, const int32_t *ids_in,
                    const float *weights_in, int32_t *ids_out,
                    float *weights_out, float *y) {
  if (!s || bad_shape(s))
    return -1;
  const int T = s->T, H = s->H, E = s->E, k = s->k;
  const size_t n = (size_t)T * (size_t)k; /* (token, choice) assignments */
  const int caller = ids_in != NULL;
  if ((ids_in == NULL) != (weights_in == NULL) || (!caller && !wg) ||
      bad_array(x, T, H) || !w1 || !w2 || bad_array(y, T, H))
    return -1;
  if (caller && !ids_in_range(n, E, ids_in))
    return -1;
  if (T == 0)
    return 0;

  int rc = -1;
  const int32_t *ids = ids_in;
  const float *w = weights_in;
  int32_t *ids_buf = NULL;
  float *w_buf = NULL, *xg = NULL, *og = NULL;
  size_t *off = alloc_array((size_t)E + 1, 1, sizeof *off);
  size_t *fill = alloc_array((size_t)E, 1, sizeof *fill);
  int64_t *pos = alloc_array(n, 1, sizeof *pos);
  if (!off || !fill || !pos)
    goto exit;

  if (!caller) {
    ids_buf = alloc_array(n, 1, sizeof *ids_buf);
    w_buf = alloc_array(n, 1, sizeof *w_buf);
    if (!ids_buf || !w_buf ||
        ref_moe_gate(T, H, E, k, s->renormalize, x, wg, ids_buf, w_buf, NULL) !=
            0)
      goto exit;
    ids = ids_buf;
    w = w_buf;
  }

  place_assignments(n, E, s->capacity, ids, off, fill, pos);
  xg = alloc_array(off[E], (size_t)H, sizeof *xg);
  og = alloc_array(off[E], (size_t)H, sizeof *og);
  if (!xg || !og || run_experts(s, x, w1, w2, pos, off, xg, og) != 0)
    goto exit;

  /* Nothing below can fail, so outputs are written only on success. */
  combine(T, H, k, w, pos, og, y);
  if (!caller && ids_out)
    memcpy(ids_out, ids, n * sizeof *ids);
  if (!caller && weights_out)
    memcpy(weights_out, w, n * sizeof *w);
  rc = 0;
exit:
  free(off);
  free(fill);
  free(pos);
  free(ids_buf);
  free(w_buf);
  free(xg);
  free(og);
  return rc;
}

/* ---- counts -------------------------------------------------------------- */

int ref_expert_counts(int T, int k, int E, const int32_t *ids,
                      int64_t *counts) {
  if (T < 0 || E < 1 || k < 1 || k > E || bad_array(ids, T, k) || !counts)
    return -1;
  size_t n = (size_t)T * (size_t)k;
  /* Validate first so a bad id leaves counts untouched. */
  if (!ids_in_range(n, E, ids))
    return -1;
  for (int e = 0; e < E; e++)
    counts[e] = 0;
  for (size_t a = 0; a < n; a++)
    counts[ids[a]]++;
  return 0;
}
