/*
 * The collective GEMMs' shape rules (src/device/ops/coll_rules.h), without
 * a GPU: the choices that measurements made at named shapes stay what they
 * were (bench/RESULTS.md sessions 25 and 27 name the numbers), and over a
 * sweep of shapes every choice keeps the kernels' invariants:
 *   - a push piece is a power of two of rows dividing the 128-row block of
 *     one readiness flag (its last piece of a block completes the block);
 *   - bulk pushes never get smaller pieces than register copies, and grow
 *     only while half the blocks still push one, up to 256 KB;
 *   - the lockstep form's piece is no smaller than the 16 KB floor unless
 *     it is a whole block;
 *   - slices per tile are a power of two of at least 16 rows each (or 1),
 *     and at R = 2 the rule is the one before session 27;
 *   - column chunks lie in [1, min(n-blocks, 4)], all of them kept where
 *     several groups share a B larger than half the L2.
 * The tile rule (narrow or wide) is checked at the named shapes only.
 */
#include <stdio.h>
#include <stdlib.h>

#include "device/ops/coll_rules.h"
#include "../check.h"

static int is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

/* The slices rule before session 27 (the floor of 4 wherever the rows
 * allow, doubling while the items fit one per block): what R = 2 keeps. */
static int old_slices(int64_t tiles, int sms, int rows) {
  const int most = rows / COLL_RS_MIN_SLICE_ROWS;
  int s = 1;
  while (s * 2 <= most && (s * 2 <= COLL_RS_MIN_SLICES || tiles * s * 2 <= (int64_t)sms)) s *= 2;
  return s;
}

static void named_shapes(void) {
  const int sms = 132; /* H100 / H200 */
  /* all-gather, 4 GPUs (3 destinations), session 27 (a) */
  CHECK(coll_ag_piece_rows(1024, 4096 * 2, 3, sms, 1) == 32, "mKernel M = 4096, bulk: 32-row (256 KB) pieces");
  CHECK(coll_ag_piece_rows(1024, 4096 * 2, 3, sms, 0) == 4, "mKernel M = 4096, register copies: 4 rows");
  CHECK(coll_ag_piece_rows(2048, 8192 * 2, 3, sms, 1) == 16, "mKernel M = 8192, bulk: 16 rows (was 8)");
  CHECK(coll_ag_piece_rows(2048, 8192 * 2, 3, sms, 0) == 8, "mKernel M = 8192, register copies: 8 rows");
  /* the decode-sized one group (32 rows a source, own part too): 1-row
   * pieces, 128 of them, as before: growing would leave half the blocks idle */
  CHECK(coll_ag_piece_rows(32, 8192 * 2, 4, sms, 1) == 1, "Llama 128 tokens on 4 GPUs: 1-row pieces");
  /* lockstep: 4 rows (64 KB) at 128 rows a source on 4 GPUs (session 25) */
  CHECK(coll_ag_lockstep_piece_rows(128, 8192 * 2, 4, sms) == 4, "lockstep, 128 rows a source: 4 rows");
  /* all-reduce slices, 4 GPUs, session 27 (c): the measured best */
  CHECK(coll_rs_slices(256, sms, 64, 128 * 2, 4) == 1, "all-reduce Llama 256 tokens on 4 GPUs: 1 slice");
  CHECK(coll_rs_slices(256, sms, 32, 128 * 2, 4) == 1, "all-reduce Llama 128 tokens on 4 GPUs: 1 slice");
  CHECK(coll_rs_slices(256, sms, 128, 128 * 2, 4) == 2, "all-reduce mKernel M = 8192 on 4 GPUs: 2 slices");
  CHECK(coll_rs_slices(64, sms, 128, 128 * 2, 4) == 4, "all-reduce mKernel M = 4096 on 4 GPUs: 4 slices");
  /* unchanged by session 27: the 128 x 256 tiles of M = 16384 and Llama M = 4096 */
  CHECK(coll_rs_slices(512, sms, 128, 256 * 2, 4) == 4, "all-reduce M = 16384, N = 1024: 4 slices");
  CHECK(coll_rs_slices(256, sms, 128, 256 * 2, 4) == 4, "reduce-scatter Llama M = 4096: 4 slices");
  CHECK(coll_rs_slices(256, sms, 128, 256 * 4, 4) == 4, "reduce-scatter Llama M = 4096, TF32: 4 slices");
  CHECK(coll_rs_slices(4, sms, 4, 128 * 2, 4) == 1, "all-reduce 16 tokens: 4-row tiles, 1 slice");
  /* the tile (session 25; collective.cuh's tile comment): wide-tile task
   * counts groups x m-blocks x n-blocks of 256 */
  CHECK(coll_narrow_rule(4 * 8 * 1, sms, coll_wide_ok_rule(4096, 256, 1)), "mKernel all-gather M = 4096: narrow");
  CHECK(coll_narrow_rule(4 * 16 * 2, sms, coll_wide_ok_rule(8192, 512, 1)),
        "mKernel all-gather M = 8192 (n = 512: the pushes are the work): narrow");
  CHECK(coll_narrow_rule(4 * 16 * 2, sms, coll_wide_ok_rule(2048, 512, 0)),
        "mKernel reduce-scatter M = 8192 (k = 2048): narrow");
  CHECK(!coll_narrow_rule(4 * 1 * 32, sms, coll_wide_ok_rule(7168, 8192, 0)),
        "Llama reduce-scatter 512 tokens (k = 7168, 128 tiles): wide");
  CHECK(!coll_narrow_rule(4 * 28, sms, coll_wide_ok_rule(8192, 7168, 1)),
        "Llama all-gather 512 tokens, one group (112 tiles): wide");
  CHECK(coll_narrow_rule(28, sms, coll_wide_ok_rule(8192, 7168, 1)), "Llama all-gather 128 tokens (28 tiles): narrow");
  CHECK(!coll_narrow_rule(4 * 32 * 4, sms, 0), "mKernel all-gather M = 16384 (512 tiles): wide");
  /* column chunks (session 23 (h)) */
  CHECK(coll_rs_chunks(32, 4, 4, 1, sms) == 4, "Llama reduce-scatter 256 tokens, a group per owner, B past L2: 4");
  CHECK(coll_rs_chunks(2, 32, 4, 0, sms) == 1, "mKernel reduce-scatter M = 4096 (B in L2, 32 m-blocks): 1");
  /* the all-reduce's one-shot mode (partial bytes = m n esize) */
  CHECK(coll_ar_one_shot_rule(16 * 8192 * 2, 4), "all-reduce Llama 16 tokens on 4 GPUs: one-shot");
  CHECK(coll_ar_one_shot_rule(256 * 128 * 2, 4), "all-reduce floor (256 x 128) on 4 GPUs: one-shot");
  CHECK(!coll_ar_one_shot_rule(128 * 8192 * 2, 4), "all-reduce Llama 128 tokens on 4 GPUs: two-shot");
  CHECK(!coll_ar_one_shot_rule(4096 * 256 * 2, 4), "all-reduce mKernel M = 4096 on 4 GPUs: two-shot");
  CHECK(coll_ar_one_shot_rule(64 * 8192 * 2, 2) && !coll_ar_one_shot_rule(16 * 8192 * 2, 8),
        "one-shot up to 64 tokens on 2 GPUs, below 16 on 8");
  CHECK(!coll_ar_one_shot_rule(1, 1), "never on one rank");
  /* the rows the workspace reserves: the most the rule takes, on every R */
  for (int R = 1; R <= 8; R++)
    for (int64_t rb = 16; rb <= 1 << 21; rb *= 3) {
      const int64_t most = coll_ar_one_shot_rows(rb, R);
      const int ok = most >= 0 && (most == 0 || coll_ar_one_shot_rule(most * rb, R)) &&
                     !coll_ar_one_shot_rule((most + 1) * rb, R);
      CHECK(ok, "one-shot rows, %lld B a row, R = %d: %lld", (long long)rb, R, (long long)most);
    }
  CHECK(coll_ar_one_shot_rows(256 * 2, 4) == 682, "n = 256 bf16 on 4 ranks: 682 rows (test_api's workspace case)");
  /* tagged partials (parts of part_rows rows from each of R sources; session 30) */
  CHECK(coll_rs_ll_rule(4, 8192, 2, 4, LOOM_LL_BYTES), "Llama reduce-scatter 16 tokens on 4 GPUs: tagged");
  CHECK(coll_rs_ll_rule(1, 8192, 2, 4, LOOM_LL_BYTES), "Llama all-reduce 1 token on 4 GPUs (one-shot): tagged");
  CHECK(coll_rs_ll_rule(256, 128, 2, 4, LOOM_LL_BYTES), "all-reduce floor (256 x 128, one-shot): tagged");
  CHECK(!coll_rs_ll_rule(16, 8192, 2, 4, LOOM_LL_BYTES), "Llama all-reduce 16 tokens on 4 GPUs (one-shot): plain");
  CHECK(!coll_rs_ll_rule(32, 8192, 2, 4, LOOM_LL_BYTES), "Llama 128 tokens on 4 GPUs (one tile): plain");
  CHECK(coll_rs_ll_rule(2, 8192, 2, 8, LOOM_LL_BYTES), "Llama reduce-scatter 16 tokens on 8 GPUs: tagged");
  CHECK(!coll_rs_ll_rule(4, 8192, 4, 4, LOOM_LL_BYTES), "fp32 outputs: plain");
  CHECK(!coll_rs_ll_rule(4, 8196, 2, 4, LOOM_LL_BYTES), "n not a multiple of 8 (no 16-byte chunks): plain");
  CHECK(!coll_rs_ll_rule(4, 8192, 2, 1, LOOM_LL_BYTES), "one rank: plain");
  /* whatever the shape, what the rule takes fits the region */
  for (int R = 2; R <= 8; R++)
    for (int64_t n = 8; n <= 1 << 17; n *= 2)
      for (int64_t rows = 1; rows <= 1 << 14; rows *= 2)
        if (coll_rs_ll_rule(rows, n, 2, R, (size_t)1 << 40))
          CHECK(coll_rs_ll_rule(rows, n, 2, R, LOOM_LL_BYTES), "%lld x %lld on %d ranks: fits the region",
                (long long)rows, (long long)n, R);
  CHECK(coll_rs_chunks(4, 128, 4, 0, sms) == 3,
        "mKernel reduce-scatter M = 16384 (128 m-blocks of 4 n-blocks: a chunk of one would not fill 132 SMs): 3");
}

static void sweep(void) {
  static const int sms_list[] = {8, 66, 132};
  static const int64_t m_list[] = {1, 4, 20, 32, 64, 100, 128, 257, 1024, 2048, 4096};
  static const size_t row_list[] = {16, 400, 2064, 8192, 16384, 65536};
  static const int dest_list[] = {1, 3, 4, 7, 8};
  int n = 0;
  for (size_t i = 0; i < sizeof sms_list / sizeof *sms_list; i++)
    for (size_t j = 0; j < sizeof m_list / sizeof *m_list; j++)
      for (size_t k = 0; k < sizeof row_list / sizeof *row_list; k++)
        for (size_t d = 0; d < sizeof dest_list / sizeof *dest_list; d++) {
          const int sms = sms_list[i], dests = dest_list[d];
          const int64_t m = m_list[j];
          const size_t rb = row_list[k];
          const int reg = coll_ag_piece_rows(m, rb, dests, sms, 0);
          const int bulk = coll_ag_piece_rows(m, rb, dests, sms, 1);
          const int lock = coll_ag_lockstep_piece_rows(m, rb, dests, sms);
          int ok = is_pow2(reg) && LOOM_AG_BLOCK_ROWS % reg == 0 && is_pow2(bulk) && LOOM_AG_BLOCK_ROWS % bulk == 0 &&
                   is_pow2(lock) && LOOM_AG_BLOCK_ROWS % lock == 0;
          ok = ok && bulk >= reg;
          /* grown past the register copies' piece: only while half the blocks got one, below 256 KB */
          if (bulk > reg)
            ok = ok && (size_t)(bulk / 2) * rb < COLL_AG_BULK_PIECE_BYTES &&
                 (int64_t)dests * ((m + bulk - 1) / bulk) * 2 >= sms;
          ok = ok && (lock == LOOM_AG_BLOCK_ROWS || (size_t)lock * rb >= COLL_AG_MIN_PIECE_BYTES);
          CHECK(ok, "m %lld, row %zu B, %d destinations, %d SMs: pieces %d / bulk %d / lockstep %d", (long long)m,
                rb, dests, sms, reg, bulk, lock);
          n++;
        }
  static const int64_t tiles_list[] = {1, 4, 16, 32, 64, 128, 256, 512, 1024};
  static const int rows_list[] = {1, 4, 16, 32, 64, 128};
  static const int rowb_list[] = {128, 256, 512, 1024};
  for (size_t i = 0; i < sizeof sms_list / sizeof *sms_list; i++)
    for (size_t t = 0; t < sizeof tiles_list / sizeof *tiles_list; t++)
      for (size_t r = 0; r < sizeof rows_list / sizeof *rows_list; r++)
        for (size_t b = 0; b < sizeof rowb_list / sizeof *rowb_list; b++)
          for (int R = 2; R <= 8; R *= 2) {
            const int sms = sms_list[i], rows = rows_list[r];
            const int s = coll_rs_slices(tiles_list[t], sms, rows, rowb_list[b], R);
            const int most = rows / COLL_RS_MIN_SLICE_ROWS;
            int ok = is_pow2(s) && (s == 1 || s <= most);
            if (R == 2) ok = ok && s == old_slices(tiles_list[t], sms, rows);
            CHECK(ok, "%lld tiles of %d rows (%d B a row), %d SMs, R = %d: %d slices", (long long)tiles_list[t],
                  rows, rowb_list[b], sms, R, s);
            n++;
          }
  for (int nt = 1; nt <= 64; nt *= 2)
    for (int64_t mt = 1; mt <= 256; mt *= 4)
      for (int g = 1; g <= 8; g *= 2)
        for (int b = 0; b <= 1; b++)
          for (size_t i = 0; i < sizeof sms_list / sizeof *sms_list; i++) {
            const int ch = coll_rs_chunks(nt, mt, g, b, sms_list[i]);
            CHECK(ch >= 1 && ch <= nt && ch <= COLL_RS_MAX_CHUNKS &&
                      (!(g > 1 && b) || ch == (nt < COLL_RS_MAX_CHUNKS ? nt : COLL_RS_MAX_CHUNKS)),
                  "%d n-blocks, %lld m-blocks, %d groups, B past L2 %d: %d chunks", nt, (long long)mt, g, b, ch);
            n++;
          }
  printf("  %d swept shapes\n", n);
}

int main(void) {
  named_shapes();
  sweep();
  return check_summary("test_rules");
}
