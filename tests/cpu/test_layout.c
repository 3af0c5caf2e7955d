/*
 * Window layout math, without a GPU: for an enumerated product of MoE
 * configs and world sizes, and for both exchange patterns, every region a
 * kernel stores into and every signal slot it uses must lie inside what the
 * sizing functions report, never overlap another, and keep the alignment
 * the kernels' 16-byte vector stores need.
 *
 * The expectations are written from the contracts (include/loom.h,
 * src/device/ops/moe.h, src/device/ops/ops.h, layout.h), not copied from
 * src/host/moe.c:
 *   - window: abort record [0, 4096), flags [flags_offset, + R * slots * 8),
 *     data from data_offset; loom_window_layout_make builds it from the
 *     (slots, bytes) that loom_moe_workspace_bytes returns;
 *   - MoE data region: 2 header parities x R sources x a header of >= 4 *
 *     (E + 2) bytes (every expert's count, config hash, call number); the
 *     ready and back row counters; an expert-major dispatch region of R x
 *     Cs rows + 128 rows of padding per local expert (each local expert
 *     starts on a 128-row tile); a return region of R slots each of Cs
 *     rows, where Cs is the most rows one source can send one destination:
 *     every token picks top_k DISTINCT experts, so at most min(top_k, E/R)
 *     of them live on one rank: Cs = max_tokens x min(top_k, E/R). A row is
 *     hidden x dtype bytes;
 *   - MoE slots per source: 0 (header) and the runtime's two, which
 *     operators never use: slots - 2 (call tag) and slots - 1 (completion
 *     credit) (docs/runtime.md);
 *   - workspace total = (2 x R x Cs + 128 x E/R) x row bytes + headers and
 *     counters: 28 GiB + 14 MiB at R = 8, 16384 tokens, top_k 8, E 64,
 *     hidden 7168, bf16 (loom.h);
 *   - exchange: nsrc = 1 (ring) or R (all-to-all) source slots, each
 *     bytes_per_peer long, 256-byte strided.
 * loom_moe_workspace_describe must name every term's number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "host/internal.h"
#include "device/ops/moe.h"
#include "../check.h"

#define MAX_REGIONS (4 * LOOM_MOE_MAX_RANKS + 1)
#define ROW_TILE 128 /* rows per dispatch tile (moe.h, LOOM_MOE_BM) */

_Static_assert(LOOM_MOE_BM == ROW_TILE, "moe.h's tile is the one the slot count assumes");
_Static_assert(sizeof(loom_abort_record) <= LOOM_REGION_ALIGN,
               "the abort record fits its reserved 4096 bytes");

/* CHECK, but a systematic bug prints its first 40 messages, not one per
 * config (the count still says how many). */
static int g_shown;
#define EXPECT(cond, ...)                                                      \
  do {                                                                         \
    if (cond)                                                                  \
      check_passed_++;                                                         \
    else if (g_shown++ < 40)                                                   \
      CHECK(0, __VA_ARGS__);                                                   \
    else                                                                       \
      check_failed_++;                                                         \
  } while (0)

typedef struct {
  size_t off, len; /* window offsets (absolute) */
  const char *what;
  int index;
} region;

static int by_offset(const void *a, const void *b) {
  const region *x = (const region *)a, *y = (const region *)b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Regions inside [lo, hi), 16-byte aligned starts, pairwise disjoint.
 * Sorts r. Returns the number of violations. */
static int check_regions(region *r, int n, size_t lo, size_t hi, const char *ctx) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    if (r[i].off < lo || r[i].off > hi || r[i].len > hi - r[i].off) {
      bad++;
      EXPECT(0, "%s: %s %d [%zu, %zu) outside [%zu, %zu)", ctx, r[i].what, r[i].index, r[i].off,
             r[i].off + r[i].len, lo, hi);
    }
    if (r[i].off % 16 != 0) {
      bad++;
      EXPECT(0, "%s: %s %d starts at %zu, not 16-byte aligned", ctx, r[i].what, r[i].index,
             r[i].off);
    }
  }
  qsort(r, (size_t)n, sizeof *r, by_offset);
  for (int i = 1; i < n; i++) {
    if (r[i - 1].off + r[i - 1].len > r[i].off) {
      bad++;
      EXPECT(0, "%s: %s %d [%zu, %zu) overlaps %s %d [%zu, %zu)", ctx, r[i - 1].what,
             r[i - 1].index, r[i - 1].off, r[i - 1].off + r[i - 1].len, r[i].what, r[i].index,
             r[i].off, r[i].off + r[i].len);
    }
  }
  return bad;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* "28.00 GiB": the figure describe prints for a byte count (B, KiB, MiB,
 * GiB, TiB; two decimals above bytes). */
static void human(double b, char *out, size_t n) {
  static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    u++;
  }
  snprintf(out, n, u == 0 ? "%.0f %s" : "%.2f %s", b, unit[u]);
}

/* ---- MoE ------------------------------------------------------------------------- */

static const int HIDDEN[] = {64, 576, 2048, 7168};
static const int FFN[] = {64, 1408};
static const int EXPERTS[] = {1, 8, 64, 256, 1024}; /* 1 stands for "E = R" */
static const int TOPK[] = {1, 2, 8, 16};
static const int RANKS[] = {1, 2, 3, 4, 8, 16, 64};
static const int TOKENS[] = {1, 127, 4096, 16384};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static loom_moe_config_t moe_config(int H, int F, int E, int k, int T, int dtype, double cf) {
  loom_moe_config_t c = LOOM_MOE_CONFIG_INIT;
  c.hidden = H;
  c.ffn = F;
  c.num_experts = E;
  c.top_k = k;
  c.max_tokens_per_rank = T;
  c.dtype = dtype;
  c.capacity_factor = cf;
  return c;
}

/* Signal slots of one (E, k, R, T): header 0, call tag = slots - 2,
 * credit = slots - 1, all distinct and < slots (rows are counted in the
 * window's ready / back counters, not in slots). */
static int check_slots(const loom_moe_params *p, int slots, int T, const char *ctx) {
  (void)p;
  (void)T;
  const int want = 1 + 2;
  EXPECT(slots >= want, "%s: %d signal slots, the layout uses %d", ctx, slots, want);
  if (slots < want || slots > (1 << 28)) return 1;
  unsigned char *used = calloc((size_t)slots, 1);
  if (used == NULL) {
    EXPECT(0, "%s: out of host memory", ctx);
    return 1;
  }
  int bad = 0;
  const int tag = slots - 2, credit = slots - 1;
#define USE(s, what)                                                                       \
  do {                                                                                     \
    const long s_ = (long)(s);                                                             \
    if (s_ < 0 || s_ >= slots || used[s_]) {                                               \
      bad++;                                                                               \
      EXPECT(0, "%s: %s slot %ld is out of [0, %d) or used twice", ctx, what, s_, slots);  \
    } else {                                                                               \
      used[s_] = 1;                                                                        \
    }                                                                                      \
  } while (0)
  USE(0, "header");
  USE(tag, "call tag");
  USE(credit, "credit");
#undef USE
  free(used);
  return bad;
}

/* Every region of one config on R ranks, in the window the communicator
 * would build from loom_moe_workspace_bytes' answer. */
static int check_moe_one(int H, int F, int E, int k, int R, int T, int dtype, double cf,
                         int with_slots) {
  char ctx[256];
  snprintf(ctx, sizeof ctx, "H=%d F=%d E=%d k=%d R=%d T=%d %s cf=%g", H, F, E, k, R, T,
           loom_dtype_string((loom_dtype_t)dtype), cf);
  const loom_moe_config_t cfg = moe_config(H, F, E, k, T, dtype, cf);
  loom_moe_params p;
  size_t need = 0, bytes = 0;
  int slots = 0, ws_slots = 0;
  loom_result_t r = loom_moe_layout("test_layout", &cfg, R, &p, &need, &slots);
  EXPECT(r == LOOM_SUCCESS, "%s: loom_moe_layout: %s", ctx, loom_last_error());
  if (r != LOOM_SUCCESS) return 1;
  r = loom_moe_workspace_bytes(&cfg, R, &bytes, &ws_slots);
  EXPECT(r == LOOM_SUCCESS, "%s: loom_moe_workspace_bytes: %s", ctx, loom_last_error());
  if (r != LOOM_SUCCESS) return 1;

  int bad = 0;
  const size_t es = dtype == LOOM_FP32 ? 4 : 2, El = (size_t)(E / R);
  const size_t cs = (size_t)T * (k < (int)El ? (size_t)k : El), row = (size_t)H * es;
  bad += p.El != (int)El || p.R != R;
  EXPECT(p.El == (int)El && p.R == R, "%s: El %d R %d", ctx, p.El, p.R);
  bad += (size_t)p.Cs < cs;
  EXPECT((size_t)p.Cs >= cs, "%s: Cs %d < %zu rows one source can send one rank", ctx, p.Cs, cs);
  bad += p.row_bytes != row || row % 16 != 0;
  EXPECT(p.row_bytes == row && row % 16 == 0, "%s: row_bytes %zu, want %zu (16-aligned)", ctx,
         p.row_bytes, row);
  bad += p.hdr_stride < 4 * ((size_t)E + 2);
  EXPECT(p.hdr_stride >= 4 * ((size_t)E + 2), "%s: header %zu bytes < 4 * (E + 2)", ctx, p.hdr_stride);
  /* expert-major dispatch: R sources' rows + a 128-row tile of padding per
   * local expert; NT tiles cover it */
  const size_t dr = (size_t)R * cs + 128 * El;
  bad += (size_t)p.DR < dr || (size_t)p.NT * 128 < (size_t)p.DR;
  EXPECT((size_t)p.DR >= dr && (size_t)p.NT * 128 >= (size_t)p.DR,
         "%s: dispatch rows %d < %zu or tiles %d do not cover them", ctx, p.DR, dr, p.NT);
  bad += bytes < need || ws_slots < slots;
  EXPECT(bytes >= need && ws_slots >= slots,
         "%s: loom_moe_workspace_bytes (%zu bytes, %d slots) is below the layout's (%zu, %d)", ctx,
         bytes, ws_slots, need, slots);

  /* The window a communicator with exactly these settings allocates. */
  const loom_window_layout w = loom_window_layout_make(R, ws_slots, bytes);
  bad += w.abort_offset != 0 || w.flags_offset < LOOM_REGION_ALIGN ||
         w.flags_offset + (size_t)R * ws_slots * 8 > w.data_offset ||
         w.data_offset % LOOM_REGION_ALIGN != 0 || w.data_bytes < bytes ||
         w.data_offset + w.data_bytes > w.total_bytes;
  EXPECT(w.abort_offset == 0 && w.flags_offset >= LOOM_REGION_ALIGN &&
             w.flags_offset + (size_t)R * ws_slots * 8 <= w.data_offset &&
             w.data_offset % LOOM_REGION_ALIGN == 0 && w.data_bytes >= bytes &&
             w.data_offset + w.data_bytes <= w.total_bytes,
         "%s: window: abort %zu, flags [%zu, +%zu) for %d x %d slots, data [%zu, +%zu), total %zu",
         ctx, w.abort_offset, w.flags_offset, w.flags_bytes, R, ws_slots, w.data_offset,
         w.data_bytes, w.total_bytes);
  /* the tagged-store region: between the flags and the data, LOOM_LL_BYTES
   * with two ranks or more, none with one */
  const size_t ll_want = R >= 2 ? LOOM_LL_BYTES : 0;
  bad += w.ll_offset < w.flags_offset + w.flags_bytes || w.ll_bytes != ll_want ||
         w.ll_offset + w.ll_bytes > w.data_offset || w.ll_offset % LOOM_REGION_ALIGN != 0;
  EXPECT(w.ll_offset >= w.flags_offset + w.flags_bytes && w.ll_bytes == ll_want &&
             w.ll_offset + w.ll_bytes <= w.data_offset && w.ll_offset % LOOM_REGION_ALIGN == 0,
         "%s: tagged-store region [%zu, +%zu), want %zu bytes after the flags' end %zu, before the data %zu",
         ctx, w.ll_offset, w.ll_bytes, ll_want, w.flags_offset + w.flags_bytes, w.data_offset);

  /* Every region, in absolute window offsets: the abort record and the
   * flags too, so data never overlaps them. The data regions must end
   * within the bytes the sizing function reported. */
  static region reg[MAX_REGIONS + 2];
  int n = 0;
  const size_t base = w.data_offset;
  for (int par = 0; par < 2; par++)
    for (int s = 0; s < R; s++) {
      reg[n].off = base + p.hdr_off + (size_t)par * p.hdr_parity_bytes + (size_t)s * p.hdr_stride;
      reg[n].len = p.hdr_stride;
      reg[n].what = par ? "header(odd)" : "header(even)";
      reg[n++].index = s;
    }
  reg[n].off = base + p.ready_off;
  reg[n].len = (size_t)p.NT * 4;
  reg[n].what = "ready counters";
  reg[n++].index = 0;
  reg[n].off = base + p.back_off;
  reg[n].len = (size_t)R * El * 4;
  reg[n].what = "back counters";
  reg[n++].index = 0;
  reg[n].off = base + p.disp_off;
  reg[n].len = dr * row;
  reg[n].what = "dispatch (expert-major)";
  reg[n++].index = 0;
  for (int s = 0; s < R; s++) {
    reg[n].off = base + p.ret_off + (size_t)s * p.Cs * p.row_bytes;
    reg[n].len = cs * row;
    reg[n].what = "return from dest";
    reg[n++].index = s;
  }
  bad += check_regions(reg, n, base, base + bytes, ctx);
  reg[n].off = 0;
  reg[n].len = sizeof(loom_abort_record) > 4096 ? sizeof(loom_abort_record) : 4096;
  reg[n].what = "abort record";
  reg[n++].index = 0;
  reg[n].off = w.flags_offset;
  reg[n].len = (size_t)R * ws_slots * 8;
  reg[n].what = "flags";
  reg[n++].index = 0;
  bad += check_regions(reg, n, 0, w.total_bytes, ctx);

  if (with_slots) bad += check_slots(&p, ws_slots, T, ctx);
  return bad;
}

static void test_moe_layouts(void) {
  int configs = 0, refused = 0, bad = 0;
  for (int ri = 0; ri < COUNT(RANKS); ri++)
    for (int ei = 0; ei < COUNT(EXPERTS); ei++)
      for (int ki = 0; ki < COUNT(TOPK); ki++)
        for (int ti = 0; ti < COUNT(TOKENS); ti++) {
          const int R = RANKS[ri], E = EXPERTS[ei] == 1 ? R : EXPERTS[ei], k = TOPK[ki];
          const int T = TOKENS[ti];
          if (EXPERTS[ei] != 1 && E == R) continue; /* counted as E = R already */
          if (E % R != 0 || k > E) {
            /* refused, naming the argument */
            const loom_moe_config_t c = moe_config(64, 64, E, k, T, LOOM_BF16, 0.0);
            size_t b;
            const loom_result_t r = loom_moe_workspace_bytes(&c, R, &b, NULL);
            CHECK(r == LOOM_INVALID_ARGUMENT &&
                      strstr(loom_last_error(), k > E ? "top_k" : "num_experts") != NULL,
                  "E=%d k=%d R=%d: %s (%s), want invalid argument", E, k, R,
                  loom_result_string(r), loom_last_error());
            refused++;
            continue;
          }
          int first = 1;
          for (int hi = 0; hi < COUNT(HIDDEN); hi++)
            for (int fi = 0; fi < COUNT(FFN); fi++)
              for (int dt = 0; dt < LOOM_NUM_DTYPES; dt++)
                for (int cap = 0; cap < 2; cap++) {
                  /* the slot pattern depends on (E, k, R, T) only */
                  bad += check_moe_one(HIDDEN[hi], FFN[fi], E, k, R, T, dt, cap ? 1.25 : 0.0,
                                       first);
                  first = 0;
                  configs++;
                }
        }
  CHECK(bad == 0, "moe layouts: %d violations", bad);
  printf("moe layouts: %d configs checked, %d refused as expected\n", configs, refused);
}

/* The 28 GiB example of loom.h and DESIGN.md: 2 regions x 8 ranks x 16384
 * tokens x min(8, 64/8) rows x 7168 x 2 bytes = 28 GiB exactly, plus
 * headers (a few KiB). */
static void test_moe_28gib(void) {
  const loom_moe_config_t c = moe_config(7168, 2048, 64, 8, 16384, LOOM_BF16, 0.0);
  size_t bytes = 0;
  int slots = 0;
  CHECK(loom_moe_workspace_bytes(&c, 8, &bytes, &slots) == LOOM_SUCCESS, "28 GiB case: %s",
        loom_last_error());
  const size_t regions = (size_t)2 * 8 * 16384 * 8 * 7168 * 2;
  CHECK(regions == (size_t)28 << 30, "the formula's main term is 28 GiB");
  const size_t data = regions + (size_t)128 * 8 * 7168 * 2; /* + a tile of padding per local expert */
  CHECK(bytes >= data && bytes - data <= (size_t)1 << 20,
        "28 GiB case: workspace %zu bytes, want 28 GiB + padding (%zu) + headers (< 1 MiB)", bytes,
        data);
  char text[2048];
  CHECK(loom_moe_workspace_describe(&c, 8, text, sizeof text) == LOOM_SUCCESS, "describe: %s",
        loom_last_error());
  const char *want[] = {"28.01 GiB", "14.00 GiB", "16384", "8 ranks", "top_k 8", "E/R 8", "hidden 7168",
                        "131072 rows", "14336"};
  for (int i = 0; i < COUNT(want); i++)
    CHECK(strstr(text, want[i]) != NULL, "28 GiB case: describe text lacks \"%s\": %s", want[i],
          text);
  char num[32];
  snprintf(num, sizeof num, "%zu", bytes);
  CHECK(strstr(text, num) != NULL, "28 GiB case: describe text lacks the byte count %s: %s", num,
        text);
  /* truncation keeps a NUL-terminated prefix */
  char small[16];
  memset(small, 'x', sizeof small);
  CHECK(loom_moe_workspace_describe(&c, 8, small, sizeof small) == LOOM_SUCCESS &&
            strlen(small) == sizeof small - 1 && strncmp(small, text, sizeof small - 1) == 0,
        "describe truncates to len - 1 characters and a NUL");
}

/* describe names each term's number for a spread of configs. */
static void test_moe_describe(void) {
  int bad = 0, n = 0;
  for (int ri = 0; ri < COUNT(RANKS); ri++)
    for (int ei = 1; ei < COUNT(EXPERTS); ei++)
      for (int ti = 0; ti < COUNT(TOKENS); ti++)
        for (int hi = 0; hi < COUNT(HIDDEN); hi++) {
          const int R = RANKS[ri], E = EXPERTS[ei], T = TOKENS[ti], H = HIDDEN[hi];
          const int k = TOPK[(ri + ti + hi) % COUNT(TOPK)], dt = (ei + hi) % LOOM_NUM_DTYPES;
          if (E % R != 0 || k > E) continue;
          const loom_moe_config_t c = moe_config(H, 1408, E, k, T, dt, 0.0);
          size_t bytes = 0;
          char text[2048];
          if (loom_moe_workspace_bytes(&c, R, &bytes, NULL) != LOOM_SUCCESS ||
              loom_moe_workspace_describe(&c, R, text, sizeof text) != LOOM_SUCCESS) {
            CHECK(0, "H=%d E=%d k=%d R=%d T=%d: %s", H, E, k, R, T, loom_last_error());
            bad++;
            continue;
          }
          const int El = E / R, es = dt == LOOM_FP32 ? 4 : 2;
          const long cs = (long)T * (k < El ? k : El);
          char terms[8][64];
          snprintf(terms[0], sizeof terms[0], "%zu bytes", bytes);
          human((double)bytes, terms[1], sizeof terms[1]);
          snprintf(terms[2], sizeof terms[2], "%d ranks", R);
          snprintf(terms[3], sizeof terms[3], "%ld rows", cs);
          snprintf(terms[4], sizeof terms[4], "max_tokens_per_rank %d", T);
          snprintf(terms[5], sizeof terms[5], "top_k %d", k);
          snprintf(terms[6], sizeof terms[6], "E/R %d", El);
          snprintf(terms[7], sizeof terms[7], "hidden %d x %d", H, es);
          for (int i = 0; i < 8; i++)
            if (strstr(text, terms[i]) == NULL && ++bad)
              EXPECT(0, "H=%d E=%d k=%d R=%d T=%d: describe lacks \"%s\": %s", H, E, k, R, T,
                     terms[i], text);
          n++;
        }
  CHECK(bad == 0, "describe: %d misses over %d configs", bad, n);
}

/* Sizes a communicator must accept: what loom_moe_workspace_bytes answers
 * for a valid config should be a workspace_bytes and signal_slots that
 * loom_comm_create takes, or the config should be refused up front. */
static void test_moe_limits(void) {
  static const struct {
    int H, F, E, k, R, T, dtype;
  } big[] = {
      {64, 64, 1024, 1, 1, 1 << 24, LOOM_BF16},      /* 4 GiB, but 2 * 1024 * 2^17 slots */
      {65536, 64, 1024, 16, 64, 1 << 24, LOOM_FP32}, /* 2^53 bytes */
      {7168, 2048, 256, 8, 8, 16384, LOOM_BF16},     /* an ordinary large one */
  };
  for (int i = 0; i < COUNT(big); i++) {
    const loom_moe_config_t c =
        moe_config(big[i].H, big[i].F, big[i].E, big[i].k, big[i].T, big[i].dtype, 0.0);
    size_t bytes = 0;
    int slots = 0;
    const loom_result_t r = loom_moe_workspace_bytes(&c, big[i].R, &bytes, &slots);
    if (r != LOOM_SUCCESS) {
      CHECK(r == LOOM_INVALID_ARGUMENT, "limits %d: %s", i, loom_last_error());
      continue;
    }
    loom_comm_config_t cc = LOOM_COMM_CONFIG_INIT;
    cc.workspace_bytes = (int64_t)bytes;
    cc.signal_slots = slots;
    loom_resolved_config rc;
    const loom_result_t rr = loom_resolve_comm_config("loom_comm_create", &cc, &rc);
    CHECK(rr == LOOM_SUCCESS,
          "limits %d (H=%d E=%d k=%d R=%d T=%d): loom_moe_workspace_bytes accepts the config "
          "(%zu bytes, %d slots) but a communicator refuses those settings: %s",
          i, big[i].H, big[i].E, big[i].k, big[i].R, big[i].T, bytes, slots, loom_last_error());
  }
}

/* ---- exchange -------------------------------------------------------------------- */

static void test_exchange_layouts(void) {
  static const size_t BPP[] = {1, 15, 16, 17, 255, 256, 257, 4096, 65537, (size_t)3 << 20};
  int bad = 0, n = 0;
  static region reg[LOOM_MOE_MAX_RANKS + 2];
  for (int pat = 0; pat < LOOM_NUM_EXCHANGES; pat++)
    for (int ri = 0; ri < COUNT(RANKS); ri++)
      for (int bi = 0; bi < COUNT(BPP); bi++) {
        const int R = RANKS[ri];
        const size_t bpp = BPP[bi];
        char ctx[128];
        snprintf(ctx, sizeof ctx, "exchange %s R=%d bytes_per_peer=%zu",
                 pat == LOOM_EXCHANGE_RING ? "ring" : "alltoall", R, bpp);
        size_t bytes = 0;
        const loom_result_t r =
            loom_exchange_workspace_bytes((loom_exchange_t)pat, R, bpp, &bytes);
        CHECK(r == LOOM_SUCCESS, "%s: %s", ctx, loom_last_error());
        if (r != LOOM_SUCCESS) continue;
        /* ops.h: source slot s at s * round_up(bpp, 256); ring has one */
        const int nsrc = pat == LOOM_EXCHANGE_RING ? 1 : R;
        const size_t stride = round_up(bpp, 256);
        const int slots = LOOM_DEFAULT_SIGNAL_SLOTS;
        const loom_window_layout w = loom_window_layout_make(R, slots, bytes);
        int m = 0;
        for (int s = 0; s < nsrc; s++) {
          reg[m].off = w.data_offset + (size_t)s * stride;
          reg[m].len = bpp;
          reg[m].what = "source slot";
          reg[m++].index = s;
        }
        bad += check_regions(reg, m, w.data_offset, w.data_offset + bytes, ctx);
        reg[m].off = 0;
        reg[m].len = LOOM_REGION_ALIGN;
        reg[m].what = "abort record";
        reg[m++].index = 0;
        reg[m].off = w.flags_offset;
        reg[m].len = (size_t)R * slots * 8;
        reg[m].what = "flags";
        reg[m++].index = 0;
        bad += check_regions(reg, m, 0, w.total_bytes, ctx);
        n++;
      }
  CHECK(bad == 0, "exchange layouts: %d violations over %d", bad, n);
}

/* The expert phase's task decode (moe.cu moe_decode, run on the host by
 * loom_moe_decode_check): for row counts per (source, local expert) drawn
 * with empty experts, partial tiles, exact tiles and long ones, on every
 * rank of R in {1, 2, 3, 4, 8}, each raster band, local-first mode and a
 * few column-block counts, every ticket is a distinct task in range, GEMM0s
 * before GEMM1s, rows and first source right, and with local first an
 * expert's first tile at the rank's own rows. */
static void test_moe_decode(void) {
  static const int Rs[] = {1, 2, 3, 4, 8}, Els[] = {1, 2, 5, 8}, rasters[] = {1, 3, 8};
  static const int cols[][2] = {{1, 1}, {8, 8}, {3, 5}};
  unsigned rng = 12345u;
  for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++)
    for (size_t ei = 0; ei < sizeof Els / sizeof Els[0]; ei++)
      for (int draw = 0; draw < 3; draw++) {
        const int R = Rs[ri], El = Els[ei];
        int rc[64];
        for (int i = 0; i < R * El; i++) {
          rng = rng * 1664525u + 1013904223u;
          const unsigned u = rng >> 8, kind = u % 8;
          rc[i] = kind == 0 ? 0 : kind < 3 ? (int)(1 + u % 127) : kind < 5 ? 128 * (int)(1 + u % 4)
                                                                              : (int)(129 + u % 1900);
        }
        for (int rank = 0; rank < R; rank++)
          for (size_t ra = 0; ra < sizeof rasters / sizeof rasters[0]; ra++)
            for (int lf = 0; lf <= 2; lf++)
              for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
                char msg[256] = "";
                const int rcode = loom_moe_decode_check(R, El, rank, rasters[ra], lf, cols[ci][0], cols[ci][1], rc,
                                                        msg, sizeof msg);
                CHECK(rcode == 0, "moe_decode: %s", msg);
              }
      }
}

int main(void) {
  test_moe_decode();
  test_moe_layouts();
  test_moe_28gib();
  test_moe_describe();
  test_moe_limits();
  test_exchange_layouts();
  return check_summary("test_layout");
}
