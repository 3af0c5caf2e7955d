/*
 * Public API argument validation, without a GPU: every bad argument of every
 * public function returns LOOM_INVALID_ARGUMENT with a message naming it,
 * before any CUDA or NCCL call. Functions that need a live communicator get
 * a hand-made one (validation never touches the GPU).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "host/internal.h"
#include "../check.h"

/* Expect `call` to fail with `want` and a message containing `needle`. */
#define EXPECT_ERR(call, want, needle)                                         \
  do {                                                                         \
    loom_result_t r_ = (call);                                                 \
    CHECK(r_ == (want), "%s returned %d (%s), expected %d; message: %s", #call, \
          (int)r_, loom_result_string(r_), (int)(want), loom_last_error());    \
    CHECK(strstr(loom_last_error(), (needle)) != NULL,                         \
          "%s: message \"%s\" does not name \"%s\"", #call, loom_last_error(),  \
          (needle));                                                           \
  } while (0)

#define EXPECT_BAD(call, needle) EXPECT_ERR(call, LOOM_INVALID_ARGUMENT, needle)

static void test_results_and_dtypes(void) {
  for (int r = 0; r < LOOM_NUM_RESULTS; r++)
    CHECK(strcmp(loom_result_string((loom_result_t)r), "unknown result") != 0,
          "result %d has no name", r);
  CHECK(strcmp(loom_result_string((loom_result_t)99), "unknown result") == 0, "unknown result");
  CHECK(strcmp(loom_result_string(LOOM_TIMEOUT), "timeout") == 0, "timeout name");
  size_t b = 0;
  CHECK(loom_dtype_size(LOOM_FP32, &b) == LOOM_SUCCESS && b == 4, "fp32 size");
  CHECK(loom_dtype_size(LOOM_BF16, &b) == LOOM_SUCCESS && b == 2, "bf16 size");
  CHECK(loom_dtype_size(LOOM_FP16, &b) == LOOM_SUCCESS && b == 2, "fp16 size");
  CHECK(strcmp(loom_last_error(), "") == 0, "success clears the message");
  EXPECT_BAD(loom_dtype_size((loom_dtype_t)7, &b), "dtype");
  EXPECT_BAD(loom_dtype_size(LOOM_FP32, NULL), "bytes");
  CHECK(strcmp(loom_dtype_string(LOOM_BF16), "bf16") == 0, "bf16 name");
  CHECK(strcmp(loom_dtype_string((loom_dtype_t)9), "unknown") == 0, "unknown dtype name");
}

static void test_config(void) {
  loom_resolved_config rc;
  unsetenv("LOOM_TIMEOUT_MS");
  CHECK(loom_resolve_comm_config("f", NULL, &rc) == LOOM_SUCCESS, "NULL config is defaults");
  CHECK(rc.workspace_bytes == (size_t)LOOM_DEFAULT_WORKSPACE_BYTES &&
            rc.signal_slots == LOOM_DEFAULT_SIGNAL_SLOTS &&
            rc.timeout_ms == LOOM_DEFAULT_TIMEOUT_MS,
        "defaults");
  setenv("LOOM_TIMEOUT_MS", "1500", 1);
  loom_comm_config_t c = LOOM_COMM_CONFIG_INIT;
  CHECK(loom_resolve_comm_config("f", &c, &rc) == LOOM_SUCCESS && rc.timeout_ms == 1500,
        "env sets an unset timeout");
  c.timeout_ms = 250;
  CHECK(loom_resolve_comm_config("f", &c, &rc) == LOOM_SUCCESS && rc.timeout_ms == 250,
        "explicit timeout beats env");
  setenv("LOOM_TIMEOUT_MS", "12abc", 1);
  c.timeout_ms = LOOM_UNSET;
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  setenv("LOOM_TIMEOUT_MS", "0", 1);
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  setenv("LOOM_TIMEOUT_MS", " 1500", 1); /* digits only: no sign, no blank */
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  setenv("LOOM_TIMEOUT_MS", "+1500", 1);
  EXPECT_BAD(loom_resolve_comm_config("f", &c, &rc), "LOOM_TIMEOUT_MS");
  unsetenv("LOOM_TIMEOUT_MS");

  loom_comm_config_t bad = LOOM_COMM_CONFIG_INIT;
  bad.struct_size = 8;
  EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "struct_size");
  bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
  bad.version = 99;
  EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "version");
  bad.version = 0;
  EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "version");
  bad.version = 1; /* a caller built against version 1 (same struct) */
  CHECK(loom_resolve_comm_config("f", &bad, &rc) == LOOM_SUCCESS, "version 1 comm config: %s",
        loom_last_error());
  const int64_t bad_ws[] = {0, -2, ((int64_t)1 << 40) + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.workspace_bytes = bad_ws[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "workspace_bytes");
  }
  const int bad_slots[] = {1, -5, LOOM_MAX_SIGNAL_SLOTS + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.signal_slots = bad_slots[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "signal_slots");
  }
  const int bad_to[] = {0, -7, LOOM_MAX_TIMEOUT_MS + 1};
  for (int i = 0; i < 3; i++) {
    bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
    bad.timeout_ms = bad_to[i];
    EXPECT_BAD(loom_resolve_comm_config("f", &bad, &rc), "timeout_ms");
  }
}

static void test_comm_create_args(void) {
  loom_comm_t comm = (loom_comm_t)0x1;
  loom_comm_t comms[4];
  ncclComm_t fake_nccl = (ncclComm_t)0x1; /* never dereferenced: validation first */
  EXPECT_BAD(loom_comm_create(fake_nccl, NULL, NULL), "comm");
  EXPECT_BAD(loom_comm_create(NULL, NULL, &comm), "nccl");
  CHECK(comm == NULL, "failed create sets *comm = NULL");
  loom_comm_config_t bad = LOOM_COMM_CONFIG_INIT;
  bad.signal_slots = 0;
  EXPECT_BAD(loom_comm_create(fake_nccl, &bad, &comm), "signal_slots");
  CHECK(strstr(loom_last_error(), "loom_comm_create") != NULL, "message names the function");

  EXPECT_BAD(loom_comm_create_all(2, NULL, NULL, NULL), "comms");
  EXPECT_BAD(loom_comm_create_all(0, NULL, NULL, comms), "ndev");
  EXPECT_BAD(loom_comm_create_all(-3, NULL, NULL, comms), "ndev");
  int neg[2] = {0, -1}, dup[3] = {0, 1, 0};
  EXPECT_BAD(loom_comm_create_all(2, neg, NULL, comms), "devlist[1]");
  EXPECT_BAD(loom_comm_create_all(3, dup, NULL, comms), "devlist[0] and devlist[2]");
  bad = (loom_comm_config_t)LOOM_COMM_CONFIG_INIT;
  bad.timeout_ms = 0;
  EXPECT_BAD(loom_comm_create_all(1, NULL, &bad, comms), "timeout_ms");
  CHECK(comms[0] == NULL, "failed create_all clears comms");

  EXPECT_BAD(loom_comm_create_loopback(2, NULL, NULL), "comms");
  EXPECT_BAD(loom_comm_create_loopback(0, NULL, comms), "nranks");
  EXPECT_BAD(loom_comm_create_loopback(65, NULL, comms), "nranks");
  comms[0] = (loom_comm_t)0x1;
  EXPECT_BAD(loom_comm_create_loopback(2, &bad, comms), "timeout_ms");
  CHECK(comms[0] == NULL, "failed create_loopback clears comms");

  CHECK(loom_comm_destroy(NULL) == LOOM_SUCCESS, "destroy(NULL) is a no-op");
  EXPECT_BAD(loom_comm_destroy_all(-1, comms), "n ");
  EXPECT_BAD(loom_comm_destroy_all(2, NULL), "comms");
  CHECK(loom_comm_destroy_all(0, NULL) == LOOM_SUCCESS, "destroy_all of nothing");
  struct loom_comm dead;
  memset(&dead, 0, sizeof dead);
  loom_comm_t deadp = &dead;
  EXPECT_BAD(loom_comm_destroy(deadp), "not a live");
  EXPECT_BAD(loom_comm_destroy_all(1, &deadp), "comms[0]");
}

/* A communicator that exists only on the host, for validation paths. */
static struct loom_comm fake_comm(loom_fault_record *rec, int nranks) {
  struct loom_comm c;
  memset(&c, 0, sizeof c);
  memset(rec, 0, sizeof *rec);
  c.magic = LOOM_COMM_MAGIC;
  c.rank = 0;
  c.nranks = nranks;
  c.device = 0;
  c.config.workspace_bytes = 1 << 20;
  c.config.signal_slots = 64;
  c.config.timeout_ms = 1000;
  c.fault_host = rec;
  return c;
}

static void test_comm_queries_and_async(void) {
  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 4);
  int v = -1;
  size_t ws = 0;
  CHECK(loom_comm_rank(&c, &v) == LOOM_SUCCESS && v == 0, "rank");
  CHECK(loom_comm_size(&c, &v) == LOOM_SUCCESS && v == 4, "size");
  CHECK(loom_comm_device(&c, &v) == LOOM_SUCCESS && v == 0, "device");
  CHECK(loom_comm_workspace_bytes(&c, &ws) == LOOM_SUCCESS && ws == (1u << 20), "workspace");
  EXPECT_BAD(loom_comm_rank(NULL, &v), "comm");
  EXPECT_BAD(loom_comm_size(&c, NULL), "loom_comm_size");
  EXPECT_BAD(loom_comm_device(&c, NULL), "loom_comm_device");
  EXPECT_BAD(loom_comm_workspace_bytes(NULL, &ws), "comm");
  EXPECT_BAD(loom_comm_rank(&c, NULL), "NULL");
  /* one handle twice in destroy_all: refused before anything is destroyed */
  loom_comm_t twice[3] = {&c, NULL, &c};
  EXPECT_BAD(loom_comm_destroy_all(3, twice), "comms[0] and comms[2] are the same communicator");
  CHECK(twice[0] == &c && twice[2] == &c && c.magic == LOOM_COMM_MAGIC,
        "a refused destroy_all leaves the handles as they were");
  /* each names its output as loom.h does */
  EXPECT_BAD(loom_comm_rank(&c, NULL), "loom_comm_rank: rank is NULL");
  EXPECT_BAD(loom_comm_size(&c, NULL), "loom_comm_size: nranks is NULL");
  EXPECT_BAD(loom_comm_device(&c, NULL), "loom_comm_device: device is NULL");
  EXPECT_BAD(loom_comm_workspace_bytes(&c, NULL), "loom_comm_workspace_bytes: bytes is NULL");
  EXPECT_BAD(loom_comm_nccl(&c, NULL), "loom_comm_nccl: nccl is NULL");

  loom_result_t async = LOOM_INTERNAL_ERROR;
  EXPECT_BAD(loom_comm_get_async_error(NULL, &async), "comm");
  EXPECT_BAD(loom_comm_get_async_error(&c, NULL), "async_error");
  CHECK(loom_comm_get_async_error(&c, &async) == LOOM_SUCCESS && async == LOOM_SUCCESS,
        "no fault yet");

  /* A kernel's fault record, as the device would leave it. */
  rec.rank = 0;
  rec.peer = 3;
  rec.what = LOOM_WAIT_SIGNAL;
  rec.slot = 5;
  rec.block = 17;
  rec.op = LOOM_OP_EXCHANGE;
  rec.epoch = 9;
  rec.observed = 8;
  rec.waited_ns = 1000000000ull;
  rec.status = LOOM_TIMEOUT;
  CHECK(loom_comm_get_async_error(&c, &async) == LOOM_SUCCESS && async == LOOM_TIMEOUT,
        "fault reported as LOOM_TIMEOUT");
  const char *m = loom_last_error();
  CHECK(strstr(m, "rank 0") && strstr(m, "peer 3") && strstr(m, "slot 5") &&
            strstr(m, "exchange") && strstr(m, "epoch 9"),
        "fault message names rank, peer and what: %s", m);
  char buf[64] = {0};
  EXPECT_ERR(loom_exchange(&c, LOOM_EXCHANGE_RING, buf, buf + 32, 16, 0), LOOM_INVALID_USAGE,
             "must be destroyed");
}

static void test_exchange_args(void) {
  size_t b = 0;
  CHECK(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 1000, &b) == LOOM_SUCCESS &&
            b == 1024,
        "ring workspace: 1 source x 1000 rounded to 256 (got %zu)", b);
  CHECK(loom_exchange_workspace_bytes(LOOM_EXCHANGE_ALLTOALL, 4, 4096, &b) == LOOM_SUCCESS &&
            b == 4 * 4096,
        "all-to-all workspace: 4 sources x 4096 (got %zu)", b);
  EXPECT_BAD(loom_exchange_workspace_bytes((loom_exchange_t)5, 4, 16, &b), "pattern");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 0, 16, &b), "nranks");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 0, &b), "bytes_per_peer");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, (size_t)1 << 62, &b),
             "bytes_per_peer");
  EXPECT_BAD(loom_exchange_workspace_bytes(LOOM_EXCHANGE_RING, 4, 16, NULL), "bytes");

  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 4);
  static char buf[1 << 16];
  char *s = buf, *r = buf + (1 << 15);
  EXPECT_BAD(loom_exchange(NULL, LOOM_EXCHANGE_RING, s, r, 16, 0), "comm");
  EXPECT_BAD(loom_exchange(&c, (loom_exchange_t)-1, s, r, 16, 0), "pattern");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, NULL, r, 16, 0), "sendbuf");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, s, NULL, 16, 0), "recvbuf");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_RING, s, r, 0, 0), "bytes_per_peer");
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_ALLTOALL, s, s + 1024, 512, 0), "overlap");
  /* far-apart fake addresses: validation never dereferences them */
  EXPECT_BAD(loom_exchange(&c, LOOM_EXCHANGE_ALLTOALL, (void *)0x10000000, (void *)0x20000000,
                           (size_t)1 << 20, 0),
             "workspace");
  struct loom_comm dead = c;
  dead.magic = 0;
  EXPECT_BAD(loom_exchange(&dead, LOOM_EXCHANGE_RING, s, r, 16, 0), "not a live");
}


/* ---- all-gather + GEMM: workspace and argument validation --------------- */

static loom_gemm_args_t good_gemm(void) {
  loom_gemm_args_t a = LOOM_GEMM_ARGS_INIT;
  a.dtype = LOOM_BF16;
  a.m = 300;
  a.n = 264;
  a.k = 1032;
  /* far-apart fake device addresses: validation never dereferences them */
  a.a = (const void *)0x10000000;
  a.b = (const void *)0x20000000;
  a.c = (void *)0x40000000;
  return a;
}

static void test_ag_gemm_args(void) {
  loom_gemm_args_t a = good_gemm();
  size_t b = 0;
  int slots = 0;
  CHECK(a.struct_size == sizeof(loom_gemm_args_t) && a.version == LOOM_API_VERSION &&
            a.activation == LOOM_UNSET && a.a_gathered == NULL && a.bias == NULL,
        "LOOM_GEMM_ARGS_INIT");
  /* a caller built before a_gathered: its struct_size is taken */
  a.struct_size = offsetof(loom_gemm_args_t, a_gathered);
  CHECK(loom_ag_gemm_workspace_bytes(&a, 4, &b, NULL) == LOOM_SUCCESS, "the struct without a_gathered: %s",
        loom_last_error());
  /* and one built before bias (2026-11-27) */
  a = good_gemm();
  a.struct_size = offsetof(loom_gemm_args_t, bias);
  CHECK(loom_ag_gemm_workspace_bytes(&a, 4, &b, NULL) == LOOM_SUCCESS, "the struct without bias: %s",
        loom_last_error());
  a = good_gemm();
  /* 4 ranks x 300 x 1032 bf16 = 619200 bytes each, rounded to 256 */
  CHECK(loom_ag_gemm_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 4 * 619264u &&
            slots == 3 + 2,
        "ag workspace: 4 x 619264 bytes, 3 row blocks + 2 slots (got %zu, %d)", b, slots);
  a.dtype = LOOM_FP32;
  CHECK(loom_ag_gemm_workspace_bytes(&a, 1, &b, NULL) == LOOM_SUCCESS && b == 1238528u,
        "ag workspace fp32 (got %zu)", b);
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(NULL, 2, &b, NULL), "args");
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 2, NULL, NULL), "bytes");
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 0, &b, NULL), "ranks");
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 9, &b, NULL), "ranks");
  /* 2^27 rows: 2^20 row blocks + 2 slots, more than a communicator has
   * (the reduce-scatter and the all-reduce refuse theirs up front too) */
  a.m = (int64_t)1 << 27;
  a.n = 8;
  a.k = 8;
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 2, &b, &slots), "signal slots");
  /* m x nranks below 2^31 (loom.h): 3 x 715827882 = 2^31 - 2 passes that
   * check (and then needs too many slots), one row more does not */
  a.m = INT32_MAX / 3;
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 3, &b, &slots), "signal slots");
  a.m = INT32_MAX / 3 + 1;
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 3, &b, &slots), "2^31");
  a.m = ((int64_t)1 << 27) - 256; /* 2^20 - 2 row blocks: the most it takes */
  CHECK(loom_ag_gemm_workspace_bytes(&a, 2, &b, &slots) == LOOM_SUCCESS && slots == LOOM_MAX_SIGNAL_SLOTS,
        "ag: 2^20 - 2 row blocks + 2 slots (got %d): %s", slots, loom_last_error());
  /* 2 ranks x 2^20 rows x 2^19 bf16 = 2^41 bytes, more than a communicator
   * can have (2^40); 2^18 columns is exactly 2^40 */
  a.dtype = LOOM_BF16;
  a.m = (int64_t)1 << 20;
  a.k = (int64_t)1 << 19;
  EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 2, &b, &slots), "workspace bytes");
  a.k = (int64_t)1 << 18;
  CHECK(loom_ag_gemm_workspace_bytes(&a, 2, &b, &slots) == LOOM_SUCCESS && b == (size_t)1 << 40,
        "ag: 2 x 2^20 x 2^18 bf16 = 2^40 bytes (got %zu): %s", b, loom_last_error());
  const struct {
    int field;
    int64_t v;
    const char *msg;
  } bad[] = {{0, 4, "struct_size"}, {1, 9, "version"}, {2, 7, "dtype"},   {3, 0, "m, n, k"},
             {4, 100, "multiples of 8"}, {5, 1028, "multiples of 8"},     {6, LOOM_ACT_SWIGLU, "activation"},
             {3, (int64_t)1 << 31, "2^31"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    a = good_gemm();
    switch (bad[i].field) {
    case 0: a.struct_size = (size_t)bad[i].v; break;
    case 1: a.version = (int)bad[i].v; break;
    case 2: a.dtype = (loom_dtype_t)bad[i].v; break;
    case 3: a.m = bad[i].v; break;
    case 4: a.n = bad[i].v; break;
    case 5: a.k = bad[i].v; break;
    case 6: a.activation = (int)bad[i].v; break;
    }
    EXPECT_BAD(loom_ag_gemm_workspace_bytes(&a, 2, &b, NULL), bad[i].msg);
  }

  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 2);
  c.config.workspace_bytes = 64 << 20;
  a = good_gemm();
  EXPECT_BAD(loom_ag_gemm(NULL, &a, 0), "comm");
  EXPECT_BAD(loom_ag_gemm(&c, NULL, 0), "args");
  a.b = NULL;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "b must not be NULL");
  a = good_gemm();
  a.c = (void *)0x40000008;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "c (0x40000008) must be 16-byte aligned");
  a = good_gemm();
  a.c = (void *)((const char *)a.a + 4096); /* C [2*300 x 264] runs over A */
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "overlaps");
  a = good_gemm();
  c.config.workspace_bytes = 1 << 20;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "workspace");
  c.config.workspace_bytes = 64 << 20;
  c.config.signal_slots = 4;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "signal slots");
  c.config.signal_slots = 64;
  a.a_gathered = (void *)0x60000008;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "a_gathered must be 16-byte aligned");
  a.a_gathered = (void *)((char *)a.c + 1024); /* [2*300 x 1032] runs over C */
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "a_gathered overlaps");
  a = good_gemm();
  a.bias = (const void *)0x60000008;
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "bias must be 16-byte aligned");
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "bias must be 16-byte aligned");
  a.bias = (const void *)((char *)a.c + 256); /* [264] inside C */
  EXPECT_BAD(loom_ag_gemm(&c, &a, 0), "bias overlaps");
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "bias overlaps");

  /* GEMM + reduce-scatter: m = 300 rows over 2 ranks, 150 each */
  a = good_gemm();
  CHECK(loom_gemm_rs_workspace_bytes(&a, 2, &b, &slots) == LOOM_SUCCESS && b == 2 * 79360u &&
            slots == 2 * 3 + 2,
        "rs workspace: 2 x (150 x 264 bf16 = 79200, rounded to 256), 2 x 3 tiles + 2 slots (got %zu, %d)",
        b, slots);
  EXPECT_BAD(loom_gemm_rs_workspace_bytes(&a, 8, &b, NULL), "multiple of the 8 ranks");
  a.n = 100;
  EXPECT_BAD(loom_gemm_rs_workspace_bytes(&a, 2, &b, NULL), "multiples of 8");
  a = good_gemm();
  c.config.signal_slots = 64;
  EXPECT_BAD(loom_gemm_rs(NULL, &a, 0), "comm");
  double phases[LOOM_COLL_STAMPS];
  EXPECT_BAD(loom_coll_phases(NULL, phases), "comm"); /* the CLI's diagnostics */
  a.m = 301;
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "multiple of the 2 ranks");
  a = good_gemm();
  a.c = (void *)((const char *)a.b + 64); /* C [150 x 264] runs over B */
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "overlaps");
  a = good_gemm();
  a.a_gathered = (void *)0x60000000;
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "loom_ag_gemm only");
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "loom_ag_gemm only");
  a = good_gemm();
  c.config.workspace_bytes = 100000;
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "workspace");
  c.config.workspace_bytes = 64 << 20;
  c.config.signal_slots = 7;
  EXPECT_BAD(loom_gemm_rs(&c, &a, 0), "signal slots");
}

/* GEMM + all-reduce: any m; two-shot, every part of the workspace is the
 * largest owner's ceil(m / R) rows, R partials and the R - 1 other owners'
 * reduced rows, two slots per tile of those rows; one-shot (small
 * partials), R parts of all m rows, a slot per tile of them; the larger of
 * the two (one-shot at up to m rows). */
static void test_gemm_ar_args(void) {
  loom_gemm_args_t a = good_gemm();
  size_t b = 0;
  int slots = 0;
  a.n = 256;
  a.k = 64;
  /* one-shot (the default for partials this small): 300 x 256 bf16 = 153600
   * bytes a rank's partial, 3 x of it <= 1 MiB: 4 parts; 3 x 2 tiles of the
   * 300 rows + 2 slots */
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 4 * 153600u && slots == 3 * 2 + 2,
        "ar workspace, one-shot: 4 x 153600 bytes, 3 x 2 tiles + 2 slots (got %zu, %d)", b, slots);
  /* 1800 rows: 3 x 900 KB > 1 MiB, two-shot (7 x 450 x 256 x 2 = 7 x 230400
   * bytes), but a call of up to 682 rows would go one-shot: 4 x 682 x 512
   * bytes (rounded to 256) are reserved for it */
  a.m = 1800;
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 7 * 230400u &&
            slots == 2 * 4 * 2 + 2,
        "ar workspace, m = 1800: 7 x 230400 bytes (got %zu, %d)", b, slots);
  a.m = 1300; /* two-shot 7 x 166400 = 1164800 bytes; one-shot up to 682 rows: 4 x 349184 = 1396736 */
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 4 * 349184u &&
            slots == 6 * 2 + 2,
        "ar workspace, m = 1300: the one-shot part of 682 rows (got %zu, %d)", b, slots);
  a.m = 300;
  setenv("LOOM_AR_ONE_SHOT", "0", 1); /* two-shot forced: no one-shot part */
  /* 300 rows over 4 ranks, 75 each: 75 x 256 bf16 = 38400 bytes (already a
   * multiple of 256), 1 x 2 tiles */
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 7 * 38400u &&
            slots == 2 * 2 + 2,
        "ar workspace: 7 x 38400 bytes, 2 x 2 tiles + 2 slots (got %zu, %d)", b, slots);
  a.dtype = LOOM_FP32;
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, NULL) == LOOM_SUCCESS && b == 7 * 76800u,
        "ar workspace fp32: 7 x 76800 bytes (got %zu)", b);
  CHECK(loom_gemm_ar_workspace_bytes(&a, 1, &b, &slots) == LOOM_SUCCESS && b == 0 && slots == 3,
        "ar workspace on one rank: the plain GEMM, 0 bytes, 3 slots (got %zu, %d)", b, slots);
  /* uneven: 301 rows over 4 ranks, 76 at most: 76 x 264 bf16 = 40128 bytes,
   * rounded to 40192; 1 x 3 tiles. Fewer rows than ranks is taken too. */
  a = good_gemm();
  a.m = 301;
  CHECK(loom_gemm_ar_workspace_bytes(&a, 4, &b, &slots) == LOOM_SUCCESS && b == 7 * 40192u &&
            slots == 2 * 3 + 2,
        "ar workspace, m %% R != 0: 7 x 40192 bytes, 2 x 3 tiles + 2 slots (got %zu, %d)", b, slots);
  a.m = 3;
  CHECK(loom_gemm_ar_workspace_bytes(&a, 8, &b, &slots) == LOOM_SUCCESS && b == 15 * 768u &&
            slots == 2 * 3 + 2,
        "ar workspace, m < R: 15 x (1 x 264 bf16 rounded to 768) bytes (got %zu, %d)", b, slots);
  unsetenv("LOOM_AR_ONE_SHOT");
  CHECK(loom_gemm_ar_workspace_bytes(&a, 8, &b, &slots) == LOOM_SUCCESS && b == 8 * 1792u && slots == 2 * 3 + 2,
        "ar workspace, m < R, one-shot: 8 x (3 x 264 bf16 rounded to 1792) bytes (got %zu, %d)", b, slots);
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(NULL, 2, &b, NULL), "args");
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(&a, 2, NULL, NULL), "bytes");
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(&a, 0, &b, NULL), "ranks");
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(&a, 9, &b, NULL), "ranks");
  a.n = 100;
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(&a, 2, &b, NULL), "multiples of 8");
  /* 2^24 rows over 2 ranks x 1024: 2^16 x 8 tiles, twice, + 2 > 2^20 slots */
  a = good_gemm();
  a.m = (int64_t)1 << 24;
  a.n = 1024;
  b = 12345;
  slots = 77;
  EXPECT_BAD(loom_gemm_ar_workspace_bytes(&a, 2, &b, &slots), "signal slots");
  CHECK(b == 12345 && slots == 77, "a refused ar sizing leaves its outputs as they were (%zu, %d)", b, slots);
  /* the same for the reduce-scatter: 2^24 rows a rank x 1024 > 2^20 slots */
  a.m = (int64_t)1 << 25;
  EXPECT_BAD(loom_gemm_rs_workspace_bytes(&a, 2, &b, &slots), "signal slots");
  CHECK(b == 12345 && slots == 77, "a refused rs sizing leaves its outputs as they were (%zu, %d)", b, slots);

  /* the call: 300 rows over 2 ranks, one-shot (158400 bytes a partial):
   * 2 parts of 158464 bytes (two-shot: 3 of 79360); slots: two-shot's 2 x
   * 3 tiles, twice, + 2 = 14 (one-shot 3 x 3 + 2) */
  loom_fault_record rec;
  struct loom_comm c = fake_comm(&rec, 2);
  c.config.workspace_bytes = 64 << 20;
  a = good_gemm();
  EXPECT_BAD(loom_gemm_ar(NULL, &a, 0), "comm");
  EXPECT_BAD(loom_gemm_ar(&c, NULL, 0), "args");
  a.c = NULL;
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "c must not be NULL");
  a = good_gemm();
  a.c = (void *)((const char *)a.b - 100000); /* C [300 x 264] (158400 bytes) runs into B */
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "overlaps");
  a = good_gemm();
  c.config.workspace_bytes = 300000; /* two-shot's 3 x 79360 fit, not one-shot's 2 x 158464 */
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "workspace");
  c.config.workspace_bytes = 64 << 20;
  c.config.signal_slots = 13;
  EXPECT_BAD(loom_gemm_ar(&c, &a, 0), "signal slots");
}

/* ---- MoE layer: config, create, weights and forward validation ---------- */

static loom_moe_config_t good_moe(void) {
  loom_moe_config_t c = LOOM_MOE_CONFIG_INIT;
  c.hidden = 128;
  c.ffn = 256;
  c.num_experts = 8;
  c.top_k = 2;
  c.max_tokens_per_rank = 1000;
  return c;
}

/* Bad config number i (and the field its message must name); -1 when i is
 * past the list. */
static const char *bad_moe(int i, loom_moe_config_t *c) {
  *c = good_moe();
  switch (i) {
  case 0: c->struct_size = 4; return "struct_size";
  case 1: c->version = 7; return "version";
  case 2: c->hidden = LOOM_UNSET; return "hidden";
  case 3: c->hidden = 100; return "hidden"; /* not a multiple of 64 */
  case 4: c->ffn = 32; return "ffn";
  case 5: c->num_experts = 0; return "num_experts";
  case 6: c->num_experts = 2048; return "num_experts";
  case 7: c->top_k = 0; return "top_k";
  case 8: c->top_k = 17; return "top_k";
  case 9: c->top_k = 9; return "exceeds num_experts";
  case 10: c->max_tokens_per_rank = 0; return "max_tokens_per_rank";
  case 11: c->activation = 9; return "activation";
  case 12: c->dtype = 5; return "dtype";
  case 13: c->fp32_math = 3; return "fp32_math";
  case 14: c->normalize_top_k = 2; return "normalize_top_k";
  case 15: c->capacity_factor = -1.5; return "capacity_factor";
  case 16: c->weight_layout = LOOM_NUM_WEIGHT_LAYOUTS; return "weight_layout";
  case 17: c->weight_layout = -2; return "weight_layout";
  case 18: c->version = 0; return "version";
  case 19: c->version = 1; return "struct_size"; /* version 1 with the version 3 size */
  case 20: c->struct_size = offsetof(loom_moe_config_t, weight_layout); return "struct_size";
  /* the upper bounds loom.h states */
  case 21: c->hidden = 65536 + 64; return "hidden";
  case 22: c->ffn = 65536 + 64; return "ffn";
  case 23: c->max_tokens_per_rank = (1 << 24) + 1; return "max_tokens_per_rank";
  case 24: c->capacity_factor = 2e6; return "capacity_factor";
  case 25: c->gate_math = LOOM_NUM_GATE_MATHS; return "gate_math";
  case 26: c->gate_math = -2; return "gate_math";
  case 27: c->gate_math = LOOM_GATE_FAST; c->dtype = LOOM_FP32; return "gate_math"; /* 16-bit only */
  }
  return NULL;
}

static void test_moe_config(void) {
  size_t b = 0;
  int slots = 0;
  loom_moe_config_t c = good_moe();
  CHECK(loom_moe_workspace_bytes(&c, 4, &b, &slots) == LOOM_SUCCESS && slots >= 2,
        "good config sizes: %s", loom_last_error());
  /* dispatch + return regions: 2 regions x R sources x Tmax*min(k, E/R)
   * rows of H bf16, plus headers */
  CHECK(b >= (size_t)2 * 4 * 1000 * 2 * 128 * 2, "workspace covers both regions (%zu)", b);
  CHECK(loom_moe_workspace_bytes(&c, 1, &b, NULL) == LOOM_SUCCESS, "signal_slots may be NULL");
  EXPECT_BAD(loom_moe_workspace_bytes(NULL, 4, &b, &slots), "config");
  EXPECT_BAD(loom_moe_workspace_bytes(&c, 4, NULL, &slots), "bytes");
  EXPECT_BAD(loom_moe_workspace_bytes(&c, 0, &b, &slots), "nranks");
  EXPECT_BAD(loom_moe_workspace_bytes(&c, 3, &b, &slots), "not divisible");
  loom_moe_config_t bad;
  const char *field;
  for (int i = 0; (field = bad_moe(i, &bad)) != NULL; i++)
    EXPECT_BAD(loom_moe_workspace_bytes(&bad, 4, &b, &slots), field);

  /* create: validated against the communicator before any GPU work */
  loom_fault_record rec;
  struct loom_comm comm = fake_comm(&rec, 4);
  loom_moe_t moe = (loom_moe_t)0x1;
  EXPECT_BAD(loom_moe_create(&comm, &c, NULL), "moe");
  EXPECT_BAD(loom_moe_create(NULL, &c, &moe), "comm");
  CHECK(moe == NULL, "failed create sets *moe = NULL");
  EXPECT_BAD(loom_moe_create(&comm, NULL, &moe), "config");
  for (int i = 0; (field = bad_moe(i, &bad)) != NULL; i++)
    EXPECT_BAD(loom_moe_create(&comm, &bad, &moe), field);
  loom_moe_config_t odd = good_moe();
  odd.num_experts = 6; /* 4 ranks */
  EXPECT_BAD(loom_moe_create(&comm, &odd, &moe), "not divisible");
  EXPECT_BAD(loom_moe_create(&comm, &c, &moe), "workspace"); /* fake comm has 1 MiB */
  loom_moe_workspace_bytes(&c, 4, &b, &slots);
  comm.config.workspace_bytes = b;
  comm.config.signal_slots = slots - 1;
  EXPECT_BAD(loom_moe_create(&comm, &c, &moe), "signal_slots");
}

/* The dispatch region's rows (R x max_tokens_per_rank x min(top_k, E/R) +
 * 128 x E/R) are int in the layout and the kernel: configs whose rows pass
 * 2^31 are refused by the sizing functions and by create, naming
 * max_tokens_per_rank, not sized from a wrapped count (16 ranks x 2^24
 * tokens x 16 choices is 2^32 rows: a wrapped 0 gave 512 GiB, half the
 * return region alone). One just below the limit is sized in full. */
static void test_moe_row_limits(void) {
  static const struct {
    int64_t E, k;
    int R;
  } big[] = {{1024, 16, 16}, {1024, 16, 8}, {128, 2, 64}, {256, 4, 32}};
  loom_fault_record rec;
  struct loom_comm comm = fake_comm(&rec, 1);
  comm.config.workspace_bytes = (size_t)LOOM_MAX_WORKSPACE_BYTES;
  comm.config.signal_slots = LOOM_MAX_SIGNAL_SLOTS;
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
    loom_moe_config_t c = good_moe();
    c.hidden = 64;
    c.ffn = 64;
    c.num_experts = big[i].E;
    c.top_k = big[i].k;
    c.max_tokens_per_rank = (int64_t)1 << 24;
    size_t b = 0;
    char text[1024];
    /* the rows, not a wrapped byte count, and the argument to lower */
    EXPECT_BAD(loom_moe_workspace_bytes(&c, big[i].R, &b, NULL), "dispatch region");
    CHECK(strstr(loom_last_error(), "max_tokens_per_rank") != NULL, "names max_tokens_per_rank: %s",
          loom_last_error());
    EXPECT_BAD(loom_moe_workspace_describe(&c, big[i].R, text, sizeof text), "dispatch region");
    comm.nranks = big[i].R;
    loom_moe_t moe = (loom_moe_t)0x1;
    EXPECT_BAD(loom_moe_create(&comm, &c, &moe), "dispatch region");
    CHECK(moe == NULL, "refused create sets *moe = NULL");
  }
  /* 64 ranks x 2^24 tokens x 1 choice + 128 = 2^30 + 128 rows: taken, and
   * both regions (2 x 2^30 rows of 128 bytes) are in the answer */
  loom_moe_config_t c = good_moe();
  c.hidden = 64;
  c.ffn = 64;
  c.num_experts = 64;
  c.top_k = 1;
  c.max_tokens_per_rank = (int64_t)1 << 24;
  size_t b = 0;
  CHECK(loom_moe_workspace_bytes(&c, 64, &b, NULL) == LOOM_SUCCESS && b >= (size_t)2 << 37,
        "2^30 + 128 dispatch rows: sized (%zu bytes, want >= 2^38): %s", b, loom_last_error());
}

/* The weight layout: default (LOOM_UNSET and a version-1 caller's struct,
 * which has no such field), explicit values, and the config hash that
 * ranks compare (a layer built with the other layout must not match). */
static void test_moe_weight_layout(void) {
  loom_moe_params p;
  size_t bytes = 0;
  int slots = 0;
  loom_moe_config_t c = good_moe();
  CHECK(c.weight_layout == LOOM_UNSET && c.version == LOOM_API_VERSION &&
            c.struct_size == sizeof(loom_moe_config_t),
        "LOOM_MOE_CONFIG_INIT leaves weight_layout unset");
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.wlayout == LOOM_WEIGHTS_OUT_IN,
        "default weight layout is OUT_IN: %d (%s)", p.wlayout, loom_last_error());
  const uint32_t h_default = p.cfg_hash;
  c.weight_layout = LOOM_WEIGHTS_OUT_IN;
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.wlayout == LOOM_WEIGHTS_OUT_IN && p.cfg_hash == h_default,
        "explicit OUT_IN is the default, same hash");
  c.weight_layout = LOOM_WEIGHTS_IN_OUT;
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.wlayout == LOOM_WEIGHTS_IN_OUT,
        "IN_OUT accepted: %s", loom_last_error());
  CHECK(p.cfg_hash != h_default, "the config hash covers the weight layout (%08x both)",
        (unsigned)h_default);
  size_t b2 = 0;
  CHECK(loom_moe_workspace_bytes(&c, 4, &b2, NULL) == LOOM_SUCCESS && b2 == bytes,
        "the layout does not change the workspace");
  /* a caller compiled against version 1: its struct ends before
   * weight_layout, so whatever lies there is not read */
  union {
    loom_moe_config_t c;
    unsigned char raw[sizeof(loom_moe_config_t)];
  } v1;
  v1.c = good_moe();
  v1.c.struct_size = offsetof(loom_moe_config_t, weight_layout);
  v1.c.version = 1;
  memset(v1.raw + offsetof(loom_moe_config_t, weight_layout), 0x5a,
         sizeof v1.raw - offsetof(loom_moe_config_t, weight_layout));
  CHECK(loom_moe_layout("f", &v1.c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.wlayout == LOOM_WEIGHTS_OUT_IN && p.cfg_hash == h_default,
        "version 1 config: default layout, default hash (%s)", loom_last_error());
  CHECK(loom_moe_weight_layout(&v1.c) == LOOM_WEIGHTS_OUT_IN, "resolver on a version 1 struct");
}

/* The gate's sums: default exact (LOOM_UNSET, and a version-2 struct,
 * which has the same size: gate_math lies in its tail padding, so it is
 * read only from version 3 on), fast for bf16 and fp16, and the config
 * hash that ranks compare. */
static void test_moe_gate_math(void) {
  loom_moe_params p;
  size_t bytes = 0;
  int slots = 0;
  loom_moe_config_t c = good_moe();
  CHECK(c.gate_math == LOOM_UNSET && sizeof(loom_moe_config_t) == 88,
        "LOOM_MOE_CONFIG_INIT leaves gate_math unset (struct %zu bytes)", sizeof(loom_moe_config_t));
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.gate_math == LOOM_GATE_EXACT,
        "default gate is exact: %d (%s)", p.gate_math, loom_last_error());
  const uint32_t h_default = p.cfg_hash;
  c.gate_math = LOOM_GATE_EXACT;
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS && p.cfg_hash == h_default,
        "explicit exact is the default, same hash");
  const loom_dtype_t dt[2] = {LOOM_BF16, LOOM_FP16};
  for (int i = 0; i < 2; i++) {
    c = good_moe();
    c.dtype = dt[i];
    c.gate_math = LOOM_GATE_FAST;
    CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
              p.gate_math == LOOM_GATE_FAST,
          "fast gate accepted for %s: %s", loom_dtype_string(dt[i]), loom_last_error());
    CHECK(p.cfg_hash != h_default || dt[i] != LOOM_BF16, "the config hash covers the gate");
  }
  c = good_moe();
  c.dtype = LOOM_FP32;
  c.gate_math = LOOM_GATE_FAST;
  EXPECT_BAD(loom_moe_layout("f", &c, 4, &p, &bytes, &slots), "fp32 layers have only the exact gate");
  /* a version-2 caller: whatever lies where gate_math now is is not read */
  c = good_moe();
  c.version = 2;
  c.gate_math = 0x5a5a5a5a;
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS &&
            p.gate_math == LOOM_GATE_EXACT && p.cfg_hash == h_default,
        "version 2 config: exact gate, default hash (%s)", loom_last_error());
  CHECK(loom_moe_gate_math(&c) == LOOM_GATE_EXACT, "resolver on a version 2 struct");
}

/* The config hash of a layer like good_moe() with capacity factor cf. */
static uint32_t capacity_hash(double cf) {
  loom_moe_params p;
  size_t bytes = 0;
  int slots = 0;
  loom_moe_config_t c = good_moe();
  c.capacity_factor = cf;
  CHECK(loom_moe_layout("f", &c, 4, &p, &bytes, &slots) == LOOM_SUCCESS, "cf %g: %s", cf, loom_last_error());
  return p.cfg_hash;
}

/* The config hash covers the capacity factor's exact value: layers whose
 * factors differ by a few ulps must not match (each rank would cap its
 * experts differently); 0, -0 and LOOM_UNSET are all dropless and match. */
static void test_moe_capacity_hash(void) {
  const uint32_t h[3] = {capacity_hash(1.0), capacity_hash(1.0 + 1e-12), capacity_hash(1.25)};
  CHECK(h[0] != h[1] && h[0] != h[2] && h[1] != h[2], "capacity factors 1, 1 + 1e-12, 1.25: hashes %08x %08x %08x",
        (unsigned)h[0], (unsigned)h[1], (unsigned)h[2]);
  const uint32_t d[3] = {capacity_hash(0.0), capacity_hash(-0.0), capacity_hash((double)LOOM_UNSET)};
  CHECK(d[0] == d[1] && d[0] == d[2] && d[0] != h[0], "dropless 0, -0, LOOM_UNSET: hashes %08x %08x %08x",
        (unsigned)d[0], (unsigned)d[1], (unsigned)d[2]);
}

/* A layer that exists only on the host (validation never touches the GPU). */
static struct loom_moe fake_moe(struct loom_comm *comm) {
  struct loom_moe m;
  memset(&m, 0, sizeof m);
  m.magic = LOOM_MOE_MAGIC;
  m.comm = comm;
  m.p.H = 128;
  m.p.Tmax = 1000;
  m.p.row_bytes = 256;
  m.p.wg = (void *)0x1000;
  m.weights_set = 1;
  return m;
}

static void test_moe_calls(void) {
  loom_fault_record rec;
  struct loom_comm comm = fake_comm(&rec, 4);
  struct loom_moe m = fake_moe(&comm);
  void *w = (void *)0x100000, *odd = (void *)0x100008;
  EXPECT_BAD(loom_moe_set_weights(NULL, w, w, w), "moe");
  EXPECT_BAD(loom_moe_set_weights(&m, w, NULL, w), "w1");
  EXPECT_BAD(loom_moe_set_weights(&m, w, w, NULL), "w2");
  EXPECT_BAD(loom_moe_set_weights(&m, odd, w, w), "gate_w");
  EXPECT_BAD(loom_moe_set_weights(&m, w, odd, w), "w1");
  EXPECT_BAD(loom_moe_set_weights(&m, w, w, odd), "w2");
  CHECK(loom_moe_set_weights(&m, NULL, w, w) == LOOM_SUCCESS, "gate_w may be NULL");

  m = fake_moe(&comm);
  void *x = (void *)0x10000000, *y = (void *)0x20000000;
  int32_t *ids = (int32_t *)0x30000000;
  float *wts = (float *)0x40000000;
  EXPECT_BAD(loom_moe_forward(NULL, x, 10, y, 0), "moe");
  EXPECT_BAD(loom_moe_forward(&m, x, -1, y, 0), "num_tokens");
  EXPECT_BAD(loom_moe_forward(&m, x, 1001, y, 0), "num_tokens");
  EXPECT_BAD(loom_moe_forward(&m, NULL, 10, y, 0), "x is NULL");
  EXPECT_BAD(loom_moe_forward(&m, x, 10, NULL, 0), "y is NULL");
  EXPECT_BAD(loom_moe_forward(&m, (char *)x + 4, 10, y, 0), "x (");
  EXPECT_BAD(loom_moe_forward(&m, x, 10, (char *)y + 8, 0), "y (");
  EXPECT_BAD(loom_moe_forward(&m, x, 10, (char *)x + 256, 0), "overlap");
  EXPECT_BAD(loom_moe_forward_ex(&m, NULL, 0), "args");
  loom_moe_args_t a;
  memset(&a, 0, sizeof a);
  a.x = x;
  a.y = y;
  a.num_tokens = 10;
  a.expert_ids_in = ids;
  EXPECT_BAD(loom_moe_forward_ex(&m, &a, 0), "both");
  a.expert_ids_in = NULL;
  a.weights_out = wts;
  EXPECT_BAD(loom_moe_forward_ex(&m, &a, 0), "both");
  a.weights_out = NULL;
  m.p.wg = NULL;
  EXPECT_BAD(loom_moe_forward_ex(&m, &a, 0), "no routing");
  m = fake_moe(&comm);
  m.weights_set = 0;
  EXPECT_BAD(loom_moe_forward_ex(&m, &a, 0), "weights not set");
  m = fake_moe(&comm);
  rec.status = LOOM_TIMEOUT; /* a pending async error stops every launch */
  EXPECT_ERR(loom_moe_forward_ex(&m, &a, 0), LOOM_INVALID_USAGE, "must be destroyed");
  struct loom_moe dead = fake_moe(&comm);
  dead.magic = 0;
  EXPECT_BAD(loom_moe_forward(&dead, x, 1, y, 0), "not a live");
  EXPECT_BAD(loom_moe_destroy(&dead), "not a live");
  CHECK(loom_moe_destroy(NULL) == LOOM_SUCCESS, "destroy(NULL) is a no-op");
}

/* loom_moe_set_trace validates before touching anything; NULL turns it
 * off whatever the other arguments are. No GPU: it only records pointers. */
static void test_moe_set_trace(void) {
  struct loom_moe m;
  memset(&m, 0, sizeof m);
  m.magic = LOOM_MOE_MAGIC;
  loom_moe_trace_info_t info;
  _Alignas(16) loom_moe_trace_event_t ev[2];
  EXPECT_BAD(loom_moe_set_trace(NULL, ev, 2, &info), "moe");
  EXPECT_BAD(loom_moe_set_trace(&m, ev, 0, &info), "capacity");
  EXPECT_BAD(loom_moe_set_trace(&m, ev, -5, &info), "capacity");
  EXPECT_BAD(loom_moe_set_trace(&m, ev, ((int64_t)1 << 40) + 1, &info), "capacity");
  EXPECT_BAD(loom_moe_set_trace(&m, ev, 2, NULL), "info");
  EXPECT_BAD(loom_moe_set_trace(&m, (loom_moe_trace_event_t *)((char *)ev + 8), 1, &info),
             "16-byte aligned");
  EXPECT_BAD(loom_moe_set_trace(&m, ev, 2, (loom_moe_trace_info_t *)((char *)&info + 4)),
             "8-byte aligned");
  CHECK(m.trace_events == NULL, "refused calls leave tracing off");
  CHECK(loom_moe_set_trace(&m, ev, 2, &info) == LOOM_SUCCESS && m.trace_events == ev &&
            m.trace_capacity == 2 && m.trace_info == &info,
        "on: %s", loom_last_error());
  CHECK(loom_moe_set_trace(&m, NULL, 7, (loom_moe_trace_info_t *)0x3) == LOOM_SUCCESS &&
            m.trace_events == NULL && m.trace_capacity == 0 && m.trace_info == NULL,
        "NULL events: off, the rest ignored");
  m.magic = 0;
  EXPECT_BAD(loom_moe_set_trace(&m, NULL, 0, NULL), "not a live");
}

int main(void) {
  test_results_and_dtypes();
  test_config();
  test_comm_create_args();
  test_comm_queries_and_async();
  test_exchange_args();
  test_ag_gemm_args();
  test_gemm_ar_args();
  test_moe_config();
  test_moe_weight_layout();
  test_moe_gate_math();
  test_moe_capacity_hash();
  test_moe_row_limits();
  test_moe_set_trace();
  test_moe_calls();
  return check_summary("test_api");
}
