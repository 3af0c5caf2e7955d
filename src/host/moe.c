/* The MoE layer: config validation, sizing, buffers and the one launch. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../device/ops/moe.h"


/* ---- config ---------------------------------------------------------------------- */

typedef struct {
  int H, F, E, K, Tmax, act, dtype, math, normalize, wlayout, gate_math;
  double cf;
} moe_shape;

/* loom_moe_config_t as LOOM_API_VERSION 1 laid it out: a caller built
 * against that header passes struct_size == sizeof of this, and the fields
 * added since take their defaults. */
typedef struct {
  size_t struct_size;
  int version;
  int64_t hidden, ffn, num_experts, top_k, max_tokens_per_rank;
  int activation, dtype, fp32_math, normalize_top_k;
  double capacity_factor;
} moe_config_v1;
_Static_assert(sizeof(moe_config_v1) == offsetof(loom_moe_config_t, weight_layout),
               "version 2 appends weight_layout to the version 1 struct");
/* ... and as version 2 did: version 1's and weight_layout. */
typedef struct {
  moe_config_v1 v1;
  int weight_layout;
} moe_config_v2;
_Static_assert(offsetof(moe_config_v2, weight_layout) == offsetof(loom_moe_config_t, weight_layout) &&
                   offsetof(loom_moe_config_t, gate_math) == offsetof(loom_moe_config_t, weight_layout) +
                                                                sizeof(int),
               "version 3 appends gate_math to the version 2 struct");

/* The trace records' layouts are part of the API (loom.h). */
_Static_assert(sizeof(loom_moe_trace_event_t) == 32 && offsetof(loom_moe_trace_event_t, a) == 20,
               "loom_moe_trace_event_t is 32 bytes");
_Static_assert(sizeof(loom_moe_trace_info_t) == 40, "loom_moe_trace_info_t is 40 bytes");

/* sizeof(loom_moe_config_t) at each version (index version - 1); a version
 * that adds fields to another struct only repeats the previous size. */
static const size_t moe_config_size[LOOM_API_VERSION] = {sizeof(moe_config_v1), sizeof(moe_config_v2),
                                                         sizeof(loom_moe_config_t)};

/* Does the caller's struct (struct_size bytes) include `field`? */
#define HAS_FIELD(c, field) ((c)->struct_size >= offsetof(loom_moe_config_t, field) + \
                             sizeof((c)->field))

int loom_moe_weight_layout(const loom_moe_config_t *c) {
  const int v = HAS_FIELD(c, weight_layout) ? c->weight_layout : LOOM_UNSET;
  return v == LOOM_UNSET ? LOOM_WEIGHTS_OUT_IN : v;
}

int loom_moe_gate_math(const loom_moe_config_t *c) {
  /* version 2's struct has the same size (gate_math fills what was its
   * tail padding), so the version decides */
  const int v = c->version >= 3 && HAS_FIELD(c, gate_math) ? c->gate_math : LOOM_UNSET;
  return v == LOOM_UNSET ? LOOM_GATE_EXACT : v;
}

static loom_result_t resolve_config(const char *fn, const loom_moe_config_t *c, moe_shape *s) {
  LOOM_ARG(c != NULL, fn, "config is NULL");
  LOOM_ARG(c->version >= 1 && c->version <= LOOM_API_VERSION, fn,
           "config->version (%d) is not in [1, LOOM_API_VERSION = %d]: initialise the config "
           "with LOOM_MOE_CONFIG_INIT",
           c->version, LOOM_API_VERSION);
  LOOM_ARG(c->struct_size == moe_config_size[c->version - 1], fn,
           "config->struct_size (%zu) is not the size of a version %d loom_moe_config_t (%zu): "
           "initialise it with LOOM_MOE_CONFIG_INIT",
           c->struct_size, c->version, moe_config_size[c->version - 1]);
  LOOM_ARG(c->hidden >= LOOM_MOE_DIM_ALIGN && c->hidden % LOOM_MOE_DIM_ALIGN == 0 &&
               c->hidden <= (1 << 16),
           fn, "config->hidden (%lld) must be a multiple of %d in [%d, 65536]",
           (long long)c->hidden, LOOM_MOE_DIM_ALIGN, LOOM_MOE_DIM_ALIGN);
  LOOM_ARG(c->ffn >= LOOM_MOE_DIM_ALIGN && c->ffn % LOOM_MOE_DIM_ALIGN == 0 && c->ffn <= (1 << 16),
           fn, "config->ffn (%lld) must be a multiple of %d in [%d, 65536]", (long long)c->ffn,
           LOOM_MOE_DIM_ALIGN, LOOM_MOE_DIM_ALIGN);
  LOOM_ARG(c->num_experts >= 1 && c->num_experts <= LOOM_MOE_MAX_EXPERTS, fn,
           "config->num_experts (%lld) must be in [1, %d]", (long long)c->num_experts,
           LOOM_MOE_MAX_EXPERTS);
  LOOM_ARG(c->top_k >= 1 && c->top_k <= LOOM_MOE_MAX_TOPK, fn,
           "config->top_k (%lld) must be in [1, %d]", (long long)c->top_k, LOOM_MOE_MAX_TOPK);
  LOOM_ARG(c->top_k <= c->num_experts, fn, "config->top_k (%lld) exceeds num_experts (%lld)",
           (long long)c->top_k, (long long)c->num_experts);
  LOOM_ARG(c->max_tokens_per_rank >= 1 && c->max_tokens_per_rank <= (1 << 24), fn,
           "config->max_tokens_per_rank (%lld) must be in [1, 2^24]",
           (long long)c->max_tokens_per_rank);
  const int act = c->activation == LOOM_UNSET ? LOOM_ACT_SILU : c->activation;
  LOOM_ARG(act >= 0 && act < LOOM_NUM_ACTIVATIONS, fn,
           "config->activation (%d) is not a loom_activation_t", c->activation);
  const int dtype = c->dtype == LOOM_UNSET ? LOOM_BF16 : c->dtype;
  LOOM_ARG(dtype >= 0 && dtype < LOOM_NUM_DTYPES, fn, "config->dtype (%d) is not a loom_dtype_t",
           c->dtype);
  const int math = c->fp32_math == LOOM_UNSET ? LOOM_MATH_TF32 : c->fp32_math;
  LOOM_ARG(math >= 0 && math < LOOM_NUM_MATHS, fn, "config->fp32_math (%d) is not a loom_math_t",
           c->fp32_math);
  const int norm = c->normalize_top_k == LOOM_UNSET ? 1 : c->normalize_top_k;
  LOOM_ARG(norm == 0 || norm == 1, fn, "config->normalize_top_k (%d) must be 0, 1 or LOOM_UNSET",
           c->normalize_top_k);
  const double cf = c->capacity_factor == (double)LOOM_UNSET ? 0.0 : c->capacity_factor;
  LOOM_ARG(isfinite(cf) && cf >= 0.0 && cf <= 1e6, fn,
           "config->capacity_factor (%g) must be 0 (dropless) or in (0, 1e6]", c->capacity_factor);
  const int wl = loom_moe_weight_layout(c);
  LOOM_ARG(wl >= 0 && wl < LOOM_NUM_WEIGHT_LAYOUTS, fn,
           "config->weight_layout (%d) is not a loom_weight_layout_t (LOOM_WEIGHTS_OUT_IN = 0, "
           "LOOM_WEIGHTS_IN_OUT = 1) or LOOM_UNSET",
           c->weight_layout);
  const int gm = loom_moe_gate_math(c);
  LOOM_ARG(gm >= 0 && gm < LOOM_NUM_GATE_MATHS, fn,
           "config->gate_math (%d) is not a loom_gate_math_t (LOOM_GATE_EXACT = 0, LOOM_GATE_FAST = 1) "
           "or LOOM_UNSET",
           c->gate_math);
  LOOM_ARG(gm != LOOM_GATE_FAST || dtype == LOOM_BF16 || dtype == LOOM_FP16, fn,
           "config->gate_math LOOM_GATE_FAST needs dtype bf16 or fp16 (dtype is %s): fp32 layers "
           "have only the exact gate",
           loom_dtype_string((loom_dtype_t)dtype));
  s->H = (int)c->hidden;
  s->F = (int)c->ffn;
  s->E = (int)c->num_experts;
  s->K = (int)c->top_k;
  s->Tmax = (int)c->max_tokens_per_rank;
  s->act = act;
  s->dtype = dtype;
  s->math = math;
  s->normalize = norm;
  s->cf = cf;
  s->wlayout = wl;
  s->gate_math = gm;
  return LOOM_SUCCESS;
}

/* FNV-1a over everything that must match between ranks; travels in every
 * header so a receiver can refuse a layer built differently elsewhere. */
static uint32_t shape_hash(const moe_shape *s) {
  /* the capacity factor's exact bits (until session 43 cf x 1e6 as an
   * integer: ranks 1e-7 apart matched); 0 and -0 are both dropless */
  const double cf = s->cf == 0.0 ? 0.0 : s->cf;
  int64_t cf_bits;
  memcpy(&cf_bits, &cf, sizeof cf_bits);
  const int64_t v[12] = {s->H, s->F, s->E, s->K, s->Tmax, s->act, s->dtype, s->math,
                         cf_bits, s->normalize, s->wlayout, s->gate_math};
  uint32_t h = 2166136261u;
  const unsigned char *b = (const unsigned char *)v;
  for (size_t i = 0; i < sizeof v; i++) h = (h ^ b[i]) * 16777619u;
  return h;
}

/* Window offsets and slot numbers (moe.h has the picture). */
static void layout(const moe_shape *s, int R, loom_moe_params *p, size_t *window_bytes,
                   int *slots) {
  size_t es = 0;
  loom_dtype_size((loom_dtype_t)s->dtype, &es);
  memset(p, 0, sizeof *p);
  p->H = s->H;
  p->F = s->F;
  p->E = s->E;
  p->K = s->K;
  p->R = R;
  p->El = s->E / R;
  p->Tmax = s->Tmax;
  p->Cs = s->Tmax * (s->K < p->El ? s->K : p->El);
  /* expert-major dispatch region: every local expert starts on a 128-row
   * boundary, so up to 128 rows of padding each */
  p->DR = R * p->Cs + LOOM_MOE_BM * p->El;
  p->NT = (p->DR + LOOM_MOE_BM - 1) / LOOM_MOE_BM;
  p->act = s->act;
  p->dtype = s->dtype;
  p->math = s->math;
  p->normalize = s->normalize;
  p->gated = s->act == LOOM_ACT_SWIGLU;
  p->wlayout = s->wlayout;
  p->gate_math = s->gate_math;
  p->cfg_hash = shape_hash(s);
  p->capacity_factor = s->cf;
  p->es = (int)es;
  p->row_bytes = (size_t)s->H * es;
  p->hdr_stride = loom_align_up((size_t)(p->E + 2) * 4, 16); /* every count, hash, call */
  p->hdr_parity_bytes = loom_align_up((size_t)R * p->hdr_stride, 256);
  p->hdr_off = 0;
  p->ready_off = p->hdr_off + 2 * p->hdr_parity_bytes;
  p->back_off = p->ready_off + loom_align_up((size_t)p->NT * sizeof(uint32_t), 256);
  p->disp_off = p->back_off + loom_align_up((size_t)R * p->El * sizeof(uint32_t), 256);
  p->ret_off = p->disp_off + loom_align_up((size_t)p->DR * p->row_bytes, 256);
  *window_bytes = p->ret_off + loom_align_up((size_t)R * p->Cs * p->row_bytes, 256);
  *slots = 1 + 2; /* the header, + the runtime's call tag and credit slots */
}

/* The dispatch region's rows, R x Cs + 128 x E/R, must fit the int row
 * indices of the layout and the kernel (moe.h DR, NT), with room for NT's
 * round-up: refused here, before layout() computes them in int. */
static loom_result_t check_dispatch_rows(const char *fn, const moe_shape *s, int R) {
  const int64_t El = s->E / R, k = s->K < El ? s->K : El;
  const int64_t rows = (int64_t)R * s->Tmax * k + (int64_t)LOOM_MOE_BM * El;
  LOOM_ARG(rows <= (int64_t)INT32_MAX - (LOOM_MOE_BM - 1), fn,
           "the layer's dispatch region would have %lld rows (%d ranks x max_tokens_per_rank %d x "
           "min(top_k %d, E/R %lld) + %d x E/R), more than its row indices hold (2^31 - %d): "
           "lower max_tokens_per_rank, top_k or the rank count",
           (long long)rows, R, s->Tmax, s->K, (long long)El, LOOM_MOE_BM, LOOM_MOE_BM);
  return LOOM_SUCCESS;
}

loom_result_t loom_moe_layout(const char *fn, const loom_moe_config_t *config, int nranks,
                              loom_moe_params *p, size_t *window_bytes, int *slots) {
  moe_shape s;
  loom_result_t res = resolve_config(fn, config, &s);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(nranks >= 1 && nranks <= LOOM_MOE_MAX_RANKS, fn, "nranks (%d) must be in [1, %d]",
           nranks, LOOM_MOE_MAX_RANKS);
  LOOM_ARG(s.E % nranks == 0, fn, "config->num_experts (%d) is not divisible by nranks (%d)", s.E,
           nranks);
  res = check_dispatch_rows(fn, &s, nranks);
  if (res != LOOM_SUCCESS) return res;
  layout(&s, nranks, p, window_bytes, slots);
  /* a layout no communicator can hold is refused here, not at create */
  LOOM_ARG(*window_bytes <= (size_t)LOOM_MAX_WORKSPACE_BYTES, fn,
           "the layer would need %zu workspace bytes, more than a communicator can have "
           "(%lld): lower max_tokens_per_rank (%d), hidden or the rank count",
           *window_bytes, (long long)LOOM_MAX_WORKSPACE_BYTES, s.Tmax);
  LOOM_ARG(*slots <= LOOM_MAX_SIGNAL_SLOTS, fn,
           "the layer would need %d signal slots, more than a communicator can have (%d): "
           "lower max_tokens_per_rank (%d) or num_experts (%d)",
           *slots, LOOM_MAX_SIGNAL_SLOTS, s.Tmax, s.E);
  return LOOM_SUCCESS;
}

loom_result_t loom_moe_workspace_bytes(const loom_moe_config_t *config, int nranks,
                                       size_t *bytes, int *signal_slots) {
  loom_clear_error();
  const char *fn = "loom_moe_workspace_bytes";
  LOOM_ARG(bytes != NULL, fn, "bytes is NULL");
  loom_moe_params p;
  int slots;
  loom_result_t res = loom_moe_layout(fn, config, nranks, &p, bytes, &slots);
  if (res != LOOM_SUCCESS) return res;
  if (signal_slots != NULL) *signal_slots = slots;
  return LOOM_SUCCESS;
}

/* Human units for a byte count ("28.00 GiB"). */
static void human_bytes(double b, char *out, size_t n) {
  const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    u++;
  }
  snprintf(out, n, u == 0 ? "%.0f %s" : "%.2f %s", b, unit[u]);
}

/* The layer's private device buffers (loom_moe_create allocates them
 * beside the window), in one table so their sizes, the allocation and the
 * release cannot drift apart. The intermediate h dominates: one row of ffn
 * per received row slot. */
#define MOE_NUM_BUFFERS 17
typedef struct {
  void **ptr;
  size_t bytes;
} moe_buffer;

/* Units (token tile, pass of 16 experts) whose gate jobs' parts the layer
 * holds: calls with more units than this (or than half the grid) run the
 * gate without jobs (moe.cu phase_gate). */
static int gate_part_units(const loom_moe_params *p) {
  const size_t ntt = (size_t)(p->Tmax + LOOM_MOE_TT - 1) / LOOM_MOE_TT;
  const size_t units = ntt * (size_t)((p->E + 15) / 16);
  return units < LOOM_MOE_GATE_PART_UNITS ? (int)units : LOOM_MOE_GATE_PART_UNITS;
}

static void private_buffers(loom_moe_params *p, moe_buffer b[MOE_NUM_BUFFERS]) {
  const size_t tk = (size_t)p->Tmax * p->K;
  const size_t ntt = (size_t)(p->Tmax + LOOM_MOE_TT - 1) / LOOM_MOE_TT;
  const size_t ndone = (size_t)p->NT;
  const size_t rows = (size_t)p->R * p->Cs, drows = (size_t)p->DR;
  const moe_buffer t[MOE_NUM_BUFFERS] = {
      {(void **)&p->ids, tk * sizeof(int32_t)},
      {(void **)&p->wts, tk * sizeof(float)},
      {(void **)&p->dest_row, tk * sizeof(int32_t)},
      {(void **)&p->tile_counts, ntt * p->E * sizeof(int32_t)},
      {(void **)&p->gate_lg, ntt * LOOM_MOE_TT * p->E * sizeof(float)},
      {(void **)&p->gate_cnt, (ntt + 1) * sizeof(unsigned long long)},
      {(void **)&p->gate_part,
       (size_t)gate_part_units(p) * LOOM_MOE_GATE_PART_WARPS * LOOM_MOE_TT * 16 * sizeof(double)},
      {(void **)&p->gate_flag, (size_t)gate_part_units(p) * LOOM_MOE_GATE_PART_WARPS * sizeof(uint32_t)},
      {(void **)&p->kept, (size_t)p->E * sizeof(int32_t)},
      {(void **)&p->row_token, rows * sizeof(int32_t)},
      {(void **)&p->h, drows * p->F * p->es},
      {(void **)&p->done0, ndone * sizeof(uint32_t)},
      {(void **)&p->done1, ndone * sizeof(uint32_t)},
      {(void **)&p->ticket, 2 * sizeof(uint32_t)},
      {(void **)&p->split_cnt, LOOM_MOE_SPLIT_PAIRS * sizeof(uint32_t)},
      {(void **)&p->trace, sizeof(uint64_t) * 5 * LOOM_MOE_MAX_BLOCKS},
      {(void **)&p->tr_state, sizeof(loom_moe_trace_state)},
  };
  memcpy(b, t, sizeof t);
}

static size_t private_bytes(loom_moe_params *p) {
  moe_buffer b[MOE_NUM_BUFFERS];
  private_buffers(p, b);
  size_t sum = 0;
  for (int i = 0; i < MOE_NUM_BUFFERS; i++) sum += b[i].bytes;
  return sum;
}

static void describe_layout(loom_moe_params *p, size_t bytes, char *buf, size_t len) {
  const size_t region = (size_t)p->R * p->Cs * p->row_bytes;
  char total[32], reg[32], priv[32];
  human_bytes((double)bytes, total, sizeof total);
  human_bytes((double)region, reg, sizeof reg);
  human_bytes((double)private_bytes(p), priv, sizeof priv);
  snprintf(buf, len,
           "%zu bytes (%s) = 2 regions (dispatch + return) x %d ranks x %d rows "
           "(max_tokens_per_rank %d x min(top_k %d, E/R %d)) x %zu bytes a row (hidden %d x %d) "
           "[%s each, the dropless worst case: any source may send one rank all its "
           "tokens' choices of that rank's experts] + %d x 128 rows of padding in the "
           "dispatch region (each local expert starts on a 128-row tile) + headers and row "
           "counters %zu bytes; besides the window the layer allocates %s of its own (mostly "
           "the intermediate: %d rows x ffn %d x %d bytes)",
           bytes, total, p->R, p->Cs, p->Tmax, p->K, p->El, p->row_bytes, p->H, p->es, reg, p->El,
           (size_t)(p->disp_off - p->hdr_off), priv, p->DR, p->F, p->es);
}

loom_result_t loom_moe_workspace_describe(const loom_moe_config_t *config, int nranks,
                                          char *buf, size_t len) {
  loom_clear_error();
  const char *fn = "loom_moe_workspace_describe";
  LOOM_ARG(buf != NULL && len > 0, fn, "buf is NULL or len is 0");
  loom_moe_params p;
  size_t bytes;
  int slots;
  loom_result_t res = loom_moe_layout(fn, config, nranks, &p, &bytes, &slots);
  if (res != LOOM_SUCCESS) return res;
  describe_layout(&p, bytes, buf, len);
  return LOOM_SUCCESS;
}

/* ---- create / destroy --------------------------------------------------------------- */

static void free_buffers(loom_moe_params *p) {
  moe_buffer b[MOE_NUM_BUFFERS];
  private_buffers(p, b);
  for (int i = 0; i < MOE_NUM_BUFFERS; i++)
    if (*b[i].ptr != NULL) cudaFree(*b[i].ptr);
}

loom_result_t loom_moe_create(loom_comm_t comm, const loom_moe_config_t *config, loom_moe_t *moe) {
  loom_clear_error();
  const char *fn = "loom_moe_create";
  LOOM_ARG(moe != NULL, fn, "moe is NULL");
  *moe = NULL;
  loom_result_t res = loom_check_comm(fn, comm);
  if (res != LOOM_SUCCESS) return res;
  moe_shape s;
  res = resolve_config(fn, config, &s);
  if (res != LOOM_SUCCESS) return res;
  const int R = comm->nranks;
  LOOM_ARG(R <= LOOM_MOE_MAX_RANKS, fn, "communicator has %d ranks; at most %d are supported", R,
           LOOM_MOE_MAX_RANKS);
  LOOM_ARG(s.E % R == 0, fn, "config->num_experts (%d) is not divisible by the %d ranks", s.E, R);
  res = check_dispatch_rows(fn, &s, R);
  if (res != LOOM_SUCCESS) return res;
  struct loom_moe *m = (struct loom_moe *)calloc(1, sizeof *m);
  if (m == NULL) return loom_set_error(LOOM_OUT_OF_MEMORY, "%s: out of host memory", fn);
  size_t need;
  int slots;
  layout(&s, R, &m->p, &need, &slots);
  if (need > comm->config.workspace_bytes) {
    char why[768];
    describe_layout(&m->p, need, why, sizeof why);
    res = loom_set_error(LOOM_INVALID_ARGUMENT,
                         "%s: the layer needs %zu workspace bytes but comm has %zu (create the "
                         "communicator with loom_moe_workspace_bytes' value): %s",
                         fn, need, comm->config.workspace_bytes, why);
    goto fail;
  }
  if (slots > comm->config.signal_slots) {
    res = loom_set_error(LOOM_INVALID_ARGUMENT,
                         "%s: the layer needs %d signal slots but comm has %d (set "
                         "loom_comm_config_t.signal_slots from loom_moe_workspace_bytes)",
                         fn, slots, comm->config.signal_slots);
    goto fail;
  }
  CUDA_CHECK(cudaSetDevice(comm->device));
  loom_moe_params *p = &m->p;
  {
    /* A layer that does not fit is LOOM_OUT_OF_MEMORY naming the bytes. */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (private_bytes(p) > free_b) {
      char why[768];
      describe_layout(p, need, why, sizeof why);
      res = loom_set_error(LOOM_OUT_OF_MEMORY,
                           "%s: the layer's own buffers need %zu bytes on device %d, %zu of %zu "
                           "bytes are free: %s",
                           fn, private_bytes(p), comm->device, free_b, total_b, why);
      goto fail;
    }
  }
  {
    moe_buffer b[MOE_NUM_BUFFERS];
    private_buffers(p, b);
    for (int i = 0; i < MOE_NUM_BUFFERS; i++) {
      CUDA_CHECK(cudaMalloc(b[i].ptr, b[i].bytes));
      /* the trace counter starts at 0 (every kernel leaves it at 0); gate
       * arrivals and the gate jobs' flags carry their call's epoch (moe.cu
       * phase_gate): they start at epoch 0, which no call has */
      if (b[i].ptr == (void **)&p->tr_state || b[i].ptr == (void **)&p->gate_cnt ||
          b[i].ptr == (void **)&p->gate_flag)
        CUDA_CHECK(cudaMemset(*b[i].ptr, 0, b[i].bytes));
    }
  }
  p->gate_part_units = gate_part_units(p);
  /* the window offsets are relative to the data region */
  p->hdr_off += comm->layout.data_offset;
  p->ready_off += comm->layout.data_offset;
  p->back_off += comm->layout.data_offset;
  p->disp_off += comm->layout.data_offset;
  p->ret_off += comm->layout.data_offset;
  p->win_base = (const char *)comm->window_base;
  m->comm = comm;
  m->magic = LOOM_MOE_MAGIC;
  *moe = m;
  return LOOM_SUCCESS;
fail:
  free_buffers(&m->p);
  free(m);
  return res;
}

static loom_result_t check_moe(const char *fn, loom_moe_t moe) {
  LOOM_ARG(moe != NULL, fn, "moe is NULL");
  LOOM_ARG(moe->magic == LOOM_MOE_MAGIC, fn, "moe is not a live MoE layer (destroyed or corrupt)");
  return LOOM_SUCCESS;
}

static int misaligned(const void *ptr) { return ((uintptr_t)ptr & 15u) != 0; }

loom_result_t loom_moe_set_weights(loom_moe_t moe, const void *gate_w, const void *w1,
                                   const void *w2) {
  loom_clear_error();
  const char *fn = "loom_moe_set_weights";
  loom_result_t res = check_moe(fn, moe);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(w1 != NULL, fn, "w1 is NULL");
  LOOM_ARG(w2 != NULL, fn, "w2 is NULL");
  LOOM_ARG(gate_w == NULL || !misaligned(gate_w), fn, "gate_w (%p) is not 16-byte aligned",
           gate_w);
  LOOM_ARG(!misaligned(w1), fn, "w1 (%p) is not 16-byte aligned", w1);
  LOOM_ARG(!misaligned(w2), fn, "w2 (%p) is not 16-byte aligned", w2);
  moe->p.wg = gate_w;
  moe->p.w1 = w1;
  moe->p.w2 = w2;
  moe->weights_set = 1;
  /* the plan's tensor maps point at the old weights; a launch already made
   * holds its own copy of them */
  loom_moe_plan_destroy(moe->plan);
  moe->plan = NULL;
  return LOOM_SUCCESS;
}

loom_result_t loom_moe_forward_ex(loom_moe_t moe, const loom_moe_args_t *a, cudaStream_t stream) {
  loom_clear_error();
  const char *fn = "loom_moe_forward";
  loom_result_t res = check_moe(fn, moe);
  if (res != LOOM_SUCCESS) return res;
  LOOM_ARG(a != NULL, fn, "args is NULL");
  const loom_moe_params *p = &moe->p;
  LOOM_ARG(moe->weights_set, fn, "weights not set (call loom_moe_set_weights first)");
  LOOM_ARG(a->num_tokens >= 0 && a->num_tokens <= p->Tmax, fn,
           "num_tokens (%lld) must be in [0, max_tokens_per_rank = %d]", (long long)a->num_tokens,
           p->Tmax);
  LOOM_ARG((a->expert_ids_in == NULL) == (a->weights_in == NULL), fn,
           "expert_ids_in and weights_in must both be set or both be NULL");
  LOOM_ARG((a->expert_ids_out == NULL) == (a->weights_out == NULL), fn,
           "expert_ids_out and weights_out must both be set or both be NULL");
  if (a->num_tokens > 0) {
    LOOM_ARG(a->x != NULL, fn, "x is NULL");
    LOOM_ARG(a->y != NULL, fn, "y is NULL");
    LOOM_ARG(!misaligned(a->x), fn, "x (%p) is not 16-byte aligned", a->x);
    LOOM_ARG(!misaligned(a->y), fn, "y (%p) is not 16-byte aligned", a->y);
    const size_t bytes = (size_t)a->num_tokens * p->row_bytes;
    const char *x = (const char *)a->x, *y = (const char *)a->y;
    LOOM_ARG(x + bytes <= y || y + bytes <= x, fn, "x and y overlap");
    LOOM_ARG(a->expert_ids_in != NULL || p->wg != NULL, fn,
             "no routing: gate_w was set to NULL and expert_ids_in is NULL");
  }
  res = loom_comm_prepare_launch(fn, moe->comm);
  if (res != LOOM_SUCCESS) return res;
  loom_dev_comm dc = loom_comm_dev_view(moe->comm, LOOM_OP_MOE);
  loom_moe_call call;
  call.x = a->x;
  call.y = a->y;
  call.T = (int)a->num_tokens;
  call.ids_in = a->expert_ids_in;
  call.wts_in = a->weights_in;
  call.ids_out = a->expert_ids_out;
  call.wts_out = a->weights_out;
  call.stats = a->stats;
  call.tr_events = moe->trace_events;
  call.tr_capacity = moe->trace_capacity;
  call.tr_info = moe->trace_info;
  if (moe->plan == NULL) {
    const cudaError_t e = loom_moe_plan_create(&dc, &moe->p, &moe->plan);
    if (e == cudaErrorInvalidConfiguration && moe->p.smem_need > moe->p.smem_have)
      return loom_set_error(LOOM_INVALID_ARGUMENT,
                            "%s: num_experts %d needs %zu bytes of shared memory a block (the gate's "
                            "32-token tile of logits is 128 bytes an expert), more than the %zu this GPU "
                            "gives a block: at most %d experts fit",
                            fn, moe->p.E, moe->p.smem_need, moe->p.smem_have, moe->p.experts_fit);
    CUDA_CHECK(e);
  }
  CUDA_CHECK(loom_launch_moe(moe->plan, &dc, p, &call, stream));
  return LOOM_SUCCESS;
fail:
  return res;
}

loom_result_t loom_moe_forward(loom_moe_t moe, const void *x, int64_t num_tokens, void *y,
                               cudaStream_t stream) {
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.num_tokens = num_tokens;
  a.y = y;
  return loom_moe_forward_ex(moe, &a, stream);
}

loom_result_t loom_moe_set_trace(loom_moe_t moe, loom_moe_trace_event_t *events,
                                 int64_t capacity, loom_moe_trace_info_t *info) {
  loom_clear_error();
  const char *fn = "loom_moe_set_trace";
  loom_result_t res = check_moe(fn, moe);
  if (res != LOOM_SUCCESS) return res;
  if (events != NULL) {
    LOOM_ARG(capacity >= 1 && capacity <= ((int64_t)1 << 40), fn,
             "capacity (%lld) must be in [1, 2^40] events", (long long)capacity);
    LOOM_ARG(info != NULL, fn, "info is NULL (events is not)");
    LOOM_ARG(!misaligned(events), fn, "events (%p) is not 16-byte aligned", (void *)events);
    LOOM_ARG(((uintptr_t)info & 7u) == 0, fn, "info (%p) is not 8-byte aligned", (void *)info);
  }
  moe->trace_events = events;
  moe->trace_capacity = events != NULL ? capacity : 0;
  moe->trace_info = events != NULL ? info : NULL;
  return LOOM_SUCCESS;
}

loom_result_t loom_moe_destroy(loom_moe_t moe) {
  loom_clear_error();
  if (moe == NULL) return LOOM_SUCCESS;
  loom_result_t res = check_moe("loom_moe_destroy", moe);
  if (res != LOOM_SUCCESS) return res;
  moe->magic = 0;
  CUDA_CHECK(cudaSetDevice(moe->comm->device));
  CUDA_CHECK(cudaDeviceSynchronize());
fail:
  loom_moe_plan_destroy(moe->plan);
  free_buffers(&moe->p);
  free(moe);
  return res;
}
