/*
 * The gate's ranking of logits, shared by the fused gate (moe.cu) and the
 * baseline's router (src/baseline/kernels.cu), and mirrored by the CPU
 * reference (src/reference/moe.c): a total order, so top-k always returns
 * distinct ids and is a pure function of the logits.
 *   - a larger value ranks above a smaller one;
 *   - NaN ranks below every number (-Inf included);
 *   - equal values, and NaNs among themselves, rank by the lower index.
 */
#ifndef LOOM_TOPK_CUH
#define LOOM_TOPK_CUH

/* Whether (va, ia) ranks above (vb, ib). ib == none means "no candidate
 * yet": anything real ranks above it. */
static __device__ __forceinline__ bool topk_above(float va, int ia, float vb, int ib, int none) {
  if (ia == none) return false;
  if (ib == none) return true;
  const bool na = isnan(va), nb = isnan(vb);
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

/* Warp-wide selection of the next choice: each lane offers its best
 * (value, index) among the experts it owns that are not taken yet; returns,
 * on every lane, the winner's index (and value through *best). */
static __device__ __forceinline__ int topk_warp_pick(float *best, int besti, int none) {
  float b = *best;
  for (int o = 16; o > 0; o >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, b, o);
    const int oi = __shfl_xor_sync(0xffffffffu, besti, o);
    if (topk_above(ob, oi, b, besti, none)) { b = ob; besti = oi; }
  }
  *best = b;
  return besti;
}

/* The same order as an unsigned key, larger = ranks above, for warp-wide
 * selection by __reduce_max_sync (one instruction for the whole warp):
 * NaN is 1, every number maps above it in value order (-0 and +0 to one
 * key, as they compare equal), and 0 is left for "no candidate". Equal
 * keys are equal values (or both NaN): the lower index then wins, which
 * the caller settles with __reduce_min_sync over the tied indices. */
static __device__ __forceinline__ unsigned topk_key(float v) {
  if (isnan(v)) return 1u;
  const unsigned b = __float_as_uint(v + 0.0f); /* -0 -> +0 */
  return b & 0x80000000u ? ~b : b | 0x80000000u; /* -Inf -> 0x007fffff > 1 */
}

#endif /* LOOM_TOPK_CUH */
