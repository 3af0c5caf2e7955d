/*
 * loom CPU references: the exact, double-accumulated truth every GPU result
 * is checked against (DESIGN.md, "Correctness contract").
 *
 * Conventions shared by every function here:
 *   - matrices are dense row-major float arrays; "[R x C]" gives the shape;
 *   - all dot products accumulate in double and round to float once;
 *   - for bf16/fp16 runs, callers first round their float inputs through
 *     ref_round_bf16 / ref_round_fp16 so the reference sees exactly the
 *     values the GPU sees;
 *   - functions return 0 on success and -1 on a bad argument (NULL pointer,
 *     non-positive dimension where one is required, top_k out of range) or
 *     when a temporary allocation fails; they never abort. A call that
 *     returns -1 has written none of its outputs;
 *   - a required pointer may be NULL only when the array it addresses has
 *     no elements (e.g. T == 0); optional outputs are named as such.
 */
#ifndef LOOM_REFERENCE_H
#define LOOM_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- scalar conversion (round to nearest, ties to even) ------------------ */

/* float -> bf16 bits. NaN stays NaN (quiet), +-Inf stays Inf, overflow past
 * the largest finite bf16 rounds to Inf as IEEE RNE demands. */
uint16_t ref_float_to_bf16(float f);
float ref_bf16_to_float(uint16_t h);
/* float -> IEEE binary16 bits, with subnormals, RNE, overflow to Inf, NaN kept. */
uint16_t ref_float_to_fp16(float f);
float ref_fp16_to_float(uint16_t h);
/* Round a float through the 16-bit format and back. */
float ref_round_bf16(float f);
float ref_round_fp16(float f);
/* In-place rounding of n floats. x == NULL is a no-op. */
void ref_round_bf16_array(float *x, size_t n);
void ref_round_fp16_array(float *x, size_t n);

/* Arrays in a storage format: fmt 0 = fp32, 1 = bf16, 2 = fp16 (the codes of
 * h_round below and of loom_dtype_t). ref_round_array rounds n floats in
 * place to the format's values; ref_pack_array writes n elements in the
 * format to dst (4 or 2 bytes each, RNE); ref_unpack_array reads n back as
 * floats. */
void ref_round_array(float *x, size_t n, int fmt);
void ref_pack_array(void *dst, const float *src, size_t n, int fmt);
void ref_unpack_array(float *dst, const void *src, size_t n, int fmt);

/* count matrices of [rows x cols] back to back in src, each written
 * transposed ([cols x rows]) to dst: dst[m][c][r] = src[m][r][c]. Turns the
 * reference's [in x out] weights into loom's LOOM_WEIGHTS_OUT_IN layout
 * (and back, with rows and cols swapped). dst must not overlap src. Any
 * count, rows or cols of 0 is a no-op. */
void ref_transpose(float *dst, const float *src, size_t count, size_t rows, size_t cols);

/* ---- GEMM ----------------------------------------------------------------- */

/* C[m x n] = alpha * A[m x k] * B[k x n] + beta * C, double accumulation.
 * m, n >= 0, k >= 0 (k == 0 gives beta*C). beta == 0 ignores C's contents
 * (NaN in C does not propagate). C must not overlap A or B. */
int ref_gemm(int m, int n, int k, float alpha, const float *A, const float *B,
             float beta, float *C);

/* ---- activations ------------------------------------------------------------ */

typedef enum {
  REF_ACT_RELU = 0,
  REF_ACT_GELU = 1,   /* exact erf form: 0.5 x (1 + erf(x / sqrt 2)) */
  REF_ACT_SILU = 2,   /* x * sigmoid(x) */
  REF_ACT_SWIGLU = 3  /* gated: silu(gate) * up, see ref_expert_ffn */
} ref_activation;

/* Apply a non-gated activation (RELU, GELU, SILU) to one double. SWIGLU is
 * not a pointwise function of one value; passing it returns x unchanged.
 * A value outside the enum returns NaN. */
double ref_act(ref_activation act, double x);

/* ---- MoE gate ----------------------------------------------------------------- */

/* logits[t][e] = sum_h x[t][h] * wg[h][e]  (x [T x H], wg [H x E]) in
 * double, in a canonical order (the fused gate sums the same exact
 * products in another order on fp64 tensor cores; loom.h says when the two
 * can differ): 32 slices h = s,
 * s+32, ... summed in order, then combined by a butterfly over the slice
 * index (o = 16, 8, 4, 2, 1: p[s] += p[s^o]), rounded to float once;
 * top-k over the fp32-rounded logits (the values the GPU gate holds), in
 * descending order: NaN ranks below every number (-Inf included), equal
 * values rank by the LOWER expert index, so the k ids are always distinct
 * and a pure function of the inputs;
 * weights = softmax over all E logits (max-subtracted, in double) at the
 * chosen experts, divided by the sum of the chosen ones when renormalize
 * != 0. A token with any non-finite logit (NaN, +-Inf) gets NaN weights.
 * Outputs: ids [T x k] (int32), weights [T x k] (float). logits_out
 * [T x E] (float, may be NULL) receives the fp32-rounded logits.
 * H >= 1 and 1 <= k <= E required. T == 0 is valid and writes nothing. */
int ref_moe_gate(int T, int H, int E, int k, int renormalize, const float *x,
                 const float *wg, int32_t *ids, float *weights,
                 float *logits_out);

/* The fast gate's contract (loom.h "The fast gate") checked on one token:
 * a routing (ids [k], weights [k]) produced from logits that may each be
 * off the exact sum by eps_e = (2 ceil(H / 256) + 1) x 2^-18 x P_e, P_e =
 * sum_h |x_h wg[h][e]| (wg [H x E], as ref_moe_gate). In double: the
 * exact logits L_e, their band b_e = eps_e + 2^-23 |L_e| (the fp32
 * rounding of either side); the ids are consistent when some logits l_e
 * in [L_e - b_e, L_e + b_e] rank them first, in their order (every chosen
 * id above every other, each chosen one above the next: pairwise interval
 * tests, which suffice); the weights are within w_tol = exp(2 max_e b_e)
 * - 1 + 1e-6 relative of the softmax of L at the ids (renormalised over
 * them when renormalize). A token with a non-finite exact logit must have
 * the exact gate's ids and NaN weights. */
typedef struct {
  int same;       /* ids equal to the exact gate's (ref_moe_gate), in order */
  int near;       /* the exact k-th and (k+1)-th logits within their bands (k < E) */
  int consistent; /* ids distinct, in [0, E), and consistent as above */
  int ok;         /* consistent and every weight within w_tol */
  double eps_max; /* max_e b_e */
  double w_err;   /* max_j |weights_j - want_j| / |want_j| */
  double w_tol;
} ref_fast_gate;

int ref_moe_gate_fast_check(int H, int E, int k, int renormalize, const float *x,
                            const float *wg, const int32_t *ids,
                            const float *weights, ref_fast_gate *out);

/* Top-k over an explicit vector of E scores (same ordering and tie rule as
 * ref_moe_gate; a NaN score ranks below every number). Writes k indices.
 * 1 <= k <= E required. */
int ref_topk(int E, int k, const double *scores, int32_t *ids);

/* ---- expert FFN ------------------------------------------------------------------ */

/* One expert on n rows: out [n x H] = act(x [n x H] * w1) * w2.
 *   non-gated: w1 [H x F], h = act(x*w1) [n x F], w2 [F x H].
 *   SWIGLU:    w1 [H x 2F]; columns [0, F) are the gate, [F, 2F) the up
 *              projection; h = silu(x*w1[:, :F]) * (x*w1[:, F:]); w2 [F x H].
 * h_round selects how the intermediate h is stored before the second GEMM,
 * to mirror the GPU: 0 = float, 1 = round to bf16, 2 = round to fp16.
 * H, F >= 1; n == 0 is valid and writes nothing.
 * Accumulation is double throughout; h is rounded to float (then to the
 * 16-bit type if asked) once. */
int ref_expert_ffn(int n, int H, int F, ref_activation act, int h_round,
                   const float *x, const float *w1, const float *w2,
                   float *out);

/* ---- the whole MoE layer forward (one process's view of all experts) ------------ */

/* y [T x H] = sum_{j<k} weights[t][j] * expert_{ids[t][j]}(x[t])
 * with experts stored back to back: w1 is E blocks of [H x F] (or [H x 2F]
 * for SWIGLU), w2 is E blocks of [F x H].
 * Routing: if ids_in/weights_in are non-NULL they are used as given
 * (caller-supplied routing, each id in [0, E)); otherwise the gate runs on
 * wg (ref_moe_gate) and, when ids_out/weights_out are non-NULL, the routing
 * it chose is written there. ids_in and weights_in come together or not at
 * all; with caller routing wg may be NULL, ids_out/weights_out are left
 * untouched, and an id may repeat within a token (each is an assignment).
 * T == 0 is valid and writes nothing; H, F, E >= 1, 1 <= k <= E.
 * capacity: 0 means dropless (negative is -1). capacity > 0 keeps, for
 * each expert, only the first `capacity` (token, choice) assignments in
 * token-major order (t ascending, then j ascending); a dropped assignment
 * contributes 0.
 * The sum over j runs in ascending j, in double, rounded to float once.
 * h_round as in ref_expert_ffn; out_round (0/1/2) rounds each expert's
 * output row to float/bf16/fp16 before the weighted combine. */
typedef struct {
  int T, H, F, E, k;
  ref_activation act;
  int renormalize;
  int capacity;
  int h_round;
  int out_round;
} ref_moe_shape;

int ref_moe_forward(const ref_moe_shape *s, const float *x, const float *wg,
                    const float *w1, const float *w2, const int32_t *ids_in,
                    const float *weights_in, int32_t *ids_out,
                    float *weights_out, float *y);

/* Per-expert assignment counts for a routing [T x k] over E experts
 * (counts [E], int64). Ids outside [0, E) return -1. Counts every
 * assignment (no capacity). 1 <= k <= E as elsewhere. */
int ref_expert_counts(int T, int k, int E, const int32_t *ids, int64_t *counts);

/* ---- deterministic test data ------------------------------------------------------ */

/* splitmix64's step: z + 0x9e3779b97f4a7c15, then its finaliser. The
 * generators of the tests and of `loom moe` key their streams with it. */
uint64_t ref_splitmix64(uint64_t z);

/* ---- checks --------------------------------------------------------------------- */

/* ||out - ref||_2 / ||ref||_2 in double. If ||ref|| == 0 returns ||out||_2.
 * Any NaN or Inf in out returns +Inf (never passes a bound); so does one in
 * ref (a broken reference) or a NULL array. n == 0 returns 0. */
double ref_rel_error(const float *out, const float *ref, size_t n);

#ifdef __cplusplus
}
#endif
#endif
