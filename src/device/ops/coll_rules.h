/*
 * The collective GEMMs' host-side choices that are plain arithmetic on the
 * call's shape (no environment, no CUDA): how the all-gather cuts its
 * pushes into pieces, how the reduce-scatter / all-reduce cut their
 * tiles into side-role work items and order their tasks in column chunks,
 * and which tile a launch takes. ag_gemm.cu, gemm_rs.cuh and collective.cuh
 * take them
 * from here (and apply their LOOM_* diagnostic overrides on top);
 * tests/cpu/test_rules.c checks them on the CPU at the shapes whose
 * measurements chose them. C and C++.
 */
#ifndef LOOM_COLL_RULES_H
#define LOOM_COLL_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h" /* LOOM_AG_BLOCK_ROWS: the rows of one all-gather readiness flag */

/* Smallest piece a push is cut into (below it the per-piece barrier,
 * counter and signal start to show); a guess, not measured yet. */
#define COLL_AG_MIN_PIECE_BYTES 16384
/* Bulk pushes (the ping-pong tile) grow their pieces towards this size as
 * long as half the blocks still get one: each piece costs a block ~3 us
 * with nothing on the wire (its staging ring drains and refills; session
 * 27, mKernel M = 4096 on 4x H200: 32 KB pieces 134 us, 128 KB 116, 256
 * KB 114; bench/RESULTS.md session 27 (a)). */
#define COLL_AG_BULK_PIECE_BYTES (256 * 1024)

/* The all-gather's rows per push piece, a power of two dividing
 * LOOM_AG_BLOCK_ROWS, for m rows a source of row_bytes each, `dests`
 * destinations (the one-group mode counts this rank's own part), `sms`
 * blocks; `bulk`: the pushes are bulk copies (the ping-pong tile). The
 * largest piece that still gives every block one per destination, but not
 * below COLL_AG_MIN_PIECE_BYTES; bulk pushes then grow it towards
 * COLL_AG_BULK_PIECE_BYTES while at least half the blocks still push one. */
static inline int coll_ag_piece_rows(int64_t m, size_t row_bytes, int dests, int sms, int bulk) {
  int pr = LOOM_AG_BLOCK_ROWS;
  while (pr > 1 && (m + pr - 1) / pr < sms && (size_t)(pr / 2) * row_bytes >= COLL_AG_MIN_PIECE_BYTES) pr /= 2;
  while (bulk && pr < LOOM_AG_BLOCK_ROWS && (size_t)pr * row_bytes < COLL_AG_BULK_PIECE_BYTES &&
         (int64_t)dests * ((m + 2 * pr - 1) / (2 * pr)) * 2 >= sms)
    pr *= 2;
  return pr;
}

/* The same for the lockstep form (R sources, this rank's own part among
 * them), which waits for every destination's pieces at once, so the order
 * of destinations does not matter: the fewest rows a block pushes in all
 * (rounds of pieces times their rows; ties to the larger piece, one fence
 * and count each), e.g. 4 rows (64 KB) at 128 rows a source on 4 GPUs
 * where the rule above took 1 and left each block four pieces one behind
 * the other. */
static inline int coll_ag_lockstep_piece_rows(int64_t m, size_t row_bytes, int R, int sms) {
  int64_t best = -1;
  int rows = LOOM_AG_BLOCK_ROWS;
  for (int pr = LOOM_AG_BLOCK_ROWS; pr >= 1; pr /= 2) {
    if (pr < LOOM_AG_BLOCK_ROWS && (size_t)pr * row_bytes < COLL_AG_MIN_PIECE_BYTES) break;
    const int64_t items = (int64_t)R * ((m + pr - 1) / pr);
    const int64_t cost = (items + sms - 1) / sms * pr;
    if (best < 0 || cost < best) {
      best = cost;
      rows = pr;
    }
  }
  return rows;
}

/* Work items per tile (slices) of the reduce-scatter / all-reduce side
 * role for `tiles` reduction (and gather) tiles of up to `rows` rows (the
 * tile's, or fewer where an owner has fewer) of row_bytes each, on `sms`
 * blocks and R ranks: a power of two, slices of at least
 * COLL_RS_MIN_SLICE_ROWS rows, at least COLL_RS_MIN_SLICES where the rows
 * allow (on R >= 4 ranks only while a slice keeps COLL_RS_SLICE_BYTES), and
 * doubled while the items still fit in one per block (R >= 4: two).
 *   - Slices of no row cost what a slice does (thread 0's polls of every
 *     source, the barriers; the all-reduce's count of the slice, a system
 *     fence): at decode sizes (4x H100, all-reduce of 16 tokens, 4 rows an
 *     owner) three of the four slices of every tile were empty, and the
 *     reductions and copies ran ~20 us past the engine.
 *   - Where there are fewer tiles than blocks (M = 4096, N = 256 on 2
 *     GPUs: 32 own tiles for 132 blocks), one item per tile left most
 *     blocks out of the reductions (2x H200: 45.2 -> 37.4 us with 8).
 *   - The last column chunk's reductions can start only as the engine
 *     ends; then each block's consumers and side warps share its items, so
 *     whole tiles left blocks idle and one team per tile. 4x H100, slices
 *     1 / 2 / 4 (bench/RESULTS.md session 20): M = 16384, N = 1024
 *     reduce-scatter 313 / 291 / 279 us, all-reduce 380 / 354 / 347;
 *     Llama M = 4096 reduce-scatter 804 / 777 / 773, all-reduce 878 / 841
 *     / 852; M = 8192, N = 512 all-reduce 106 / 97 / 100.
 *   - Session 27, R >= 4: the COLL_RS_MIN_SLICES floor only while a slice
 *     keeps COLL_RS_SLICE_BYTES (16 KB), and the doubling while the items
 *     fit two per block (each block's two teams take items). An item's
 *     fixed cost grows with R (R flag polls, the all-reduce's R - 1
 *     signals), and where there are many tiles the floor's small slices
 *     cost more than they spread: 4x H100, all-reduce, slices 1 / 2 / 4
 *     (bench/RESULTS.md session 27): Llama 256 tokens (64-row tiles) 102.9
 *     / 107.6 / 110.7 us (NCCL + cuBLAS 101.5); M = 8192, N = 512 99.1 /
 *     92.9 / 97.4 (93.0); M = 4096, N = 256 (64 tiles) 58.6 / 49.1 / 44.2.
 *     At R = 2 the same rule lost (2x H200, all-reduce 128 tokens 2 slices
 *     116.5 us against the floor's 4 at 112.9; 256 tokens 131.4 against
 *     129.1), so it keeps the floor there. */
#define COLL_RS_MIN_SLICE_ROWS 16
#define COLL_RS_MIN_SLICES 4
#define COLL_RS_SLICE_BYTES 16384
static inline int coll_rs_slices(int64_t tiles, int sms, int rows, int row_bytes, int R) {
  const int most = rows / COLL_RS_MIN_SLICE_ROWS;
  const int64_t floor_bytes = R >= 4 ? COLL_RS_SLICE_BYTES : 0;
  int s = 1;
  while (s * 2 <= most && ((s * 2 <= COLL_RS_MIN_SLICES && (int64_t)rows / (s * 2) * row_bytes >= floor_bytes) ||
                           tiles * s * 2 <= (R >= 4 ? 2 : 1) * (int64_t)sms))
    s *= 2;
  return s;
}

/* Whether a launch of `tasks_wide` wide (128 x 256) tiles on `sms` blocks
 * takes the narrow (128 x 128 ping-pong) tile: where at most half the
 * blocks would get a wide tile, and below one wave unless the operator
 * finds the wide tile worth it there (wide_ok: coll_wide_ok_rule). The
 * measurements behind it are at collective.cuh's tile comment. */
static inline int coll_narrow_rule(int64_t tasks_wide, int sms, int wide_ok) {
  return 2 * tasks_wide <= sms || (tasks_wide < sms && !wide_ok);
}

/* Whether a call takes the wide tile between half a wave and one: a long
 * mainloop (k >= COLL_WIDE_MIN_K, so the cooperative tile's exposed
 * epilogue is a small part of a task), and, for the all-gather, a GEMM
 * that outweighs the pushes (n >= COLL_WIDE_MIN_N per rank; the ping-pong
 * form pushes with bulk copies). The measurements are at the tile rule;
 * the two thresholds sit between them, not at a measured edge. */
#define COLL_WIDE_MIN_K 4096
#define COLL_WIDE_MIN_N 2048
static inline int coll_wide_ok_rule(int64_t k, int64_t n, int all_gather) {
  return k >= COLL_WIDE_MIN_K && (!all_gather || n >= COLL_WIDE_MIN_N);
}

/* The reduce-scatter's / all-reduce's column chunks of the task order for
 * n_tiles n-blocks and mt_all m-blocks over `groups` owner groups: at most
 * COLL_RS_MAX_CHUNKS (each chunk reads the A rows once more), and fewer
 * while one chunk of every owner (a phase) would not fill the grid once,
 * unless B is larger than half the L2 (b_past_l2) and there are several
 * groups: in one chunk, each owner's tasks streamed all of B in turn from
 * HBM; in COLL_RS_MAX_CHUNKS, every owner's tasks of a chunk run side by
 * side and share its part of B in L2. 4x H100, Llama-70B-class, 1 / 4
 * chunks (LOOM_RS_CHUNKS; bench/RESULTS.md session 23 (h)): 256 tokens
 * reduce-scatter 135.9 / 114.2 us, all-reduce 154.6 / 137.2; 512 tokens
 * 146.1 / 132.6 and 173.2 / 168.2. Returns the chunks (the launcher turns
 * them into n-blocks per chunk). */
#define COLL_RS_MAX_CHUNKS 4
static inline int coll_rs_chunks(int n_tiles, int64_t mt_all, int groups, int b_past_l2, int sms) {
  int chunks = n_tiles < COLL_RS_MAX_CHUNKS ? n_tiles : COLL_RS_MAX_CHUNKS;
  const int keep = groups > 1 && b_past_l2;
  while (!keep && chunks > 1 && mt_all * ((n_tiles + chunks - 1) / chunks) < sms) chunks--;
  return chunks;
}

/* Whether an all-reduce whose partial (all m rows of this rank's GEMM) is
 * `partial_bytes` goes one-shot on R ranks: each rank's epilogue stores
 * its partial into every rank's window, and every rank sums all R
 * partials of every tile in source order (the same bits everywhere). The
 * two-shot form (the reduce-scatter, then each owner's reduced rows pushed
 * to every peer and copied into C there) sends 2 (R - 1) / R partials a
 * rank over two hops; one-shot sends R - 1 partials over one. At decode
 * sizes every tile of the partial finishes at once and the second hop's
 * fixed costs are the tail (4x H100: the all-reduce ran 6-9 us past the
 * reduce-scatter of the same shape at 16 tokens and at the floor,
 * bench/RESULTS.md session 28); where the partial is large its extra
 * bytes would cost more. One-shot while R - 1 partials stay within
 * COLL_AR_ONE_SHOT_BYTES, on 2 ranks or more. */
#define COLL_AR_ONE_SHOT_BYTES (1024 * 1024)
static inline int coll_ar_one_shot_rule(int64_t partial_bytes, int R) {
  return R >= 2 && (R - 1) * partial_bytes <= COLL_AR_ONE_SHOT_BYTES;
}

/* The most rows of row_bytes each whose partial the rule sends one-shot
 * on R ranks (0: none; what the workspace reserves for it). */
static inline int64_t coll_ar_one_shot_rows(int64_t row_bytes, int R) {
  return R >= 2 ? COLL_AR_ONE_SHOT_BYTES / ((R - 1) * row_bytes) : 0;
}

/* Whether a launch in the one-tile mode (reduce-scatter, all-reduce) or
 * the all-reduce's one-shot mode sends its partials as tagged stores
 * (ops.h, loom_rs_ll_stride): parts of `part_rows` rows of n elements of
 * esize bytes from each of R sources, into a tagged-store region of
 * ll_bytes (layout.h). Each 64-bit word carries the call's tag beside two
 * elements, so the owner polls the data itself: the tile's system fence
 * and flag round trip are gone, for twice the bytes on the wire. 16-bit
 * outputs with n % 8 == 0 (the epilogue's 16-byte chunks), 2 ranks or
 * more, every source's part in the region, and at most COLL_LL_MAX_BYTES
 * of plain partials sent a rank ((R - 1) parts in either mode). 4x H100,
 * Llama-70B-class (bench/RESULTS.md session 30), tagged / plain us:
 * reduce-scatter 4 and 16 tokens (48 / 192 KiB a rank) 63.7 / 67.1 and
 * 63.6 / 67.1; all-reduce one-shot 1 token (48 KiB) 64.0 / 65.8, the
 * floor (192 KiB) 29.2 / 29.0, 16 tokens (768 KiB) 66.9 / 67.2;
 * reduce-scatter and all-reduce one-tile at 128 tokens (1.5 MiB) 84.3 /
 * 77.2 and 95.4 / 87.8: where the partials are large the doubled bytes
 * cost more than the round trip. */
/* The launcher (gemm_rs.cuh, rs_ll_cfg) also asks for the decode tile
 * (groups of <= COLL_DECODE_ROWS rows): the other tiles' kernels carry no
 * tagged path, so the all-reduce floor's one-shot (256 rows) stays plain. */
#define COLL_LL_MAX_BYTES (256 * 1024)
static inline int coll_rs_ll_rule(int64_t part_rows, int64_t n, size_t esize, int R, size_t ll_bytes) {
  return R >= 2 && esize == 2 && n % 8 == 0 && part_rows >= 1 &&
         (size_t)R * loom_rs_ll_stride(part_rows, n, esize) <= ll_bytes &&
         (int64_t)(R - 1) * part_rows * n * (int64_t)esize <= COLL_LL_MAX_BYTES;
}

#endif
