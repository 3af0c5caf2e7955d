/* The in-kernel trace's host side (src/cli/trace.c): SM busy figures and
 * the Perfetto JSON writer on hand-made events, the per-token-count file
 * names, --trace parsing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom.h"
#include "cli/args.h"
#include "cli/trace.h"
#include "../check.h"

#define T0 1000000000000ull /* a kernel start, as %globaltimer reads */

static loom_moe_trace_event_t ev(int sm, int kind, uint64_t s, uint64_t e, int peer, int a,
                                 int b, int c) {
  loom_moe_trace_event_t x;
  memset(&x, 0, sizeof x);
  x.start_ns = T0 + s;
  x.end_ns = T0 + e;
  x.sm = (uint16_t)sm;
  x.kind = (uint8_t)kind;
  x.peer = (uint8_t)peer;
  x.a = a;
  x.b = b;
  x.c = c;
  return x;
}

static loom_moe_trace_info_t info_of(int64_t n, uint64_t wall, int blocks) {
  loom_moe_trace_info_t i;
  memset(&i, 0, sizeof i);
  i.recorded = n;
  i.start_ns = T0;
  i.end_ns = T0 + wall;
  i.blocks = blocks;
  i.rank = 0;
  return i;
}

static int near(double a, double b) { return a - b < 1e-12 && b - a < 1e-12; }

/* Busy = inside a work slice and not inside a wait, clipped to the kernel;
 * overlapping work slices count once; SMs without events count as 0. */
static void test_busy(void) {
  const loom_moe_trace_event_t e[] = {
      /* SM 0: gate [0, 100), GEMM0 [100, 600) with a nested 100 ns wait,
       * a short barrier wait outside any work: 500 of 1000 */
      ev(0, LOOM_MOE_TRACE_GATE, 0, 100, LOOM_MOE_TRACE_NO_PEER, 0, 0, 32),
      ev(0, LOOM_MOE_TRACE_GEMM0, 100, 600, 1, 3, 0, 2),
      ev(0, LOOM_MOE_TRACE_WAIT_DISPATCH, 200, 300, 1, 3, 0, 0),
      ev(0, LOOM_MOE_TRACE_WAIT_BARRIER, 700, 900, LOOM_MOE_TRACE_NO_PEER, 1, 0, 0),
      /* SM 1: overlapping work [0, 400) and [300, 500): 500; a wait that
       * overlaps the end of the second by 50 ns: 450 */
      ev(1, LOOM_MOE_TRACE_DISPATCH, 0, 400, 2, 0, 0, 128),
      ev(1, LOOM_MOE_TRACE_GEMM1, 300, 500, 0, 1, 2, 3),
      ev(1, LOOM_MOE_TRACE_WAIT_GEMM0, 450, 800, 0, 1, 2, 16),
      /* SM 3: a slice past the kernel's end is clipped: [900, 1000) */
      ev(3, LOOM_MOE_TRACE_COMBINE, 900, 1200, LOOM_MOE_TRACE_NO_PEER, 5, 160, 32),
  };
  const int n = (int)(sizeof e / sizeof e[0]);
  loom_moe_trace_info_t info = info_of(n, 1000, 4);
  double per[8];
  cli_trace_busy b;
  CHECK(cli_trace_sm_busy(&info, e, per, 8, &b) == 0, "busy computed");
  CHECK(b.sms == 4, "4 SMs (blocks), SM 2 without events: %d", b.sms);
  CHECK(near(per[0], 0.5) && near(per[1], 0.45) && near(per[2], 0.0) && near(per[3], 0.1),
        "per SM: %g %g %g %g (want 0.5 0.45 0 0.1)", per[0], per[1], per[2], per[3]);
  CHECK(near(b.mean, (0.5 + 0.45 + 0.0 + 0.1) / 4) && near(b.min, 0.0) && near(b.max, 0.5),
        "mean %g min %g max %g", b.mean, b.min, b.max);
  /* an SM id past the launch's blocks widens the count; NULL per_sm */
  info.blocks = 2;
  CHECK(cli_trace_sm_busy(&info, e, NULL, 0, &b) == 0 && b.sms == 4, "SMs from the events: %d",
        b.sms);
  CHECK(cli_trace_sm_busy(&info, e, per, 3, &b) == -1, "per_sm too small is refused");
  /* events in any order give the same figures */
  loom_moe_trace_event_t r[sizeof e / sizeof e[0]];
  for (int i = 0; i < n; i++) r[i] = e[n - 1 - i];
  info.blocks = 4;
  cli_trace_busy b2;
  CHECK(cli_trace_sm_busy(&info, r, per, 8, &b2) == 0 && near(b2.mean, (0.5 + 0.45 + 0.1) / 4) &&
            near(per[1], 0.45),
        "order does not matter");
  /* a fully busy SM and an empty trace */
  const loom_moe_trace_event_t full[] = {
      ev(0, LOOM_MOE_TRACE_GEMM1, 0, 600, 0, 0, 0, 0),
      ev(0, LOOM_MOE_TRACE_GEMM1, 600, 1000, 0, 0, 0, 1)};
  loom_moe_trace_info_t fi = info_of(2, 1000, 1);
  CHECK(cli_trace_sm_busy(&fi, full, per, 8, &b) == 0 && near(b.mean, 1.0) && near(b.min, 1.0),
        "back-to-back slices: 100%% busy (%g)", b.mean);
  loom_moe_trace_info_t empty = info_of(0, 1000, 3);
  CHECK(cli_trace_sm_busy(&empty, NULL, per, 8, &b) == 0 && b.sms == 3 && near(b.max, 0.0),
        "no events: every SM idle");
  loom_moe_trace_info_t zero = info_of(0, 0, 3);
  CHECK(cli_trace_sm_busy(&zero, NULL, per, 8, &b) == -1, "no kernel time is refused");
}

static char *slurp(FILE *f) {
  fseek(f, 0, SEEK_END);
  const long n = ftell(f);
  rewind(f);
  char *buf = calloc((size_t)n + 1, 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
  return buf;
}

/* The timeline: metadata, one slice per event with its name, category,
 * track, exact microseconds and indices; balanced; unknown kinds refused. */
static void test_json(void) {
  const loom_moe_trace_event_t e0[] = {
      ev(5, LOOM_MOE_TRACE_GEMM0, 100, 600, 1, 3, 7, 2),
      ev(5, LOOM_MOE_TRACE_WAIT_DISPATCH, 1234567, 1234999, 1, 3, 7, 0),
      ev(0, LOOM_MOE_TRACE_GATE, 0, 2000, LOOM_MOE_TRACE_NO_PEER, 4, 128, 32),
      ev(0, LOOM_MOE_TRACE_PLACE, 2000, 2500, LOOM_MOE_TRACE_NO_PEER, 1, 1, 0),
      ev(0, LOOM_MOE_TRACE_DISPATCH, 3000, 4000, 2, 1, 8, 8),
      ev(0, LOOM_MOE_TRACE_WAIT_BARRIER, 2500, 2900, LOOM_MOE_TRACE_NO_PEER, 2, 0, 0),
      ev(0, LOOM_MOE_TRACE_WAIT_CREDIT, 2100, 2200, 3, 0, 0, 0),
      ev(0, LOOM_MOE_TRACE_WAIT_HEADER, 4000, 4100, 1, 0, 0, 0),
      ev(0, LOOM_MOE_TRACE_WAIT_GEMM0, 4200, 5300, 0, 2, 1, 16),
      ev(0, LOOM_MOE_TRACE_GEMM1, 4100, 9000, 0, 2, 1, 15),
      ev(0, LOOM_MOE_TRACE_COMBINE, 9000, 9500, LOOM_MOE_TRACE_NO_PEER, 9, 288, 32),
      ev(0, LOOM_MOE_TRACE_WAIT_RETURN, 9000, 9400, LOOM_MOE_TRACE_NO_PEER, 9, 288, 32),
      ev(0, LOOM_MOE_TRACE_WAIT_STAGE, 3900, 4100, LOOM_MOE_TRACE_NO_PEER, 6, 0, 0),
  };
  const loom_moe_trace_event_t e1[] = {ev(131, LOOM_MOE_TRACE_GEMM1, 10, 20, 0, 0, 0, 0)};
  cli_trace_gpu g[2];
  memset(g, 0, sizeof g);
  g[0].gpu = 0;
  g[0].info = info_of(sizeof e0 / sizeof e0[0], 2000000, 132);
  g[0].info.dropped = 3;
  g[0].events = e0;
  g[1].gpu = 1;
  g[1].info = info_of(1, 30, 132);
  g[1].info.rank = 1;
  g[1].events = e1;
  FILE *f = tmpfile();
  CHECK(f != NULL, "tmpfile");
  if (f == NULL) return;
  CHECK(cli_write_trace_json(f, g, 2) == 0, "timeline written");
  char *buf = slurp(f);
  fclose(f);
  if (buf == NULL) return;
  CHECK(strncmp(buf, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [", 42) == 0 &&
            strstr(buf, "\n]}\n") != NULL,
        "one object with traceEvents: %.80s", buf);
  const char *want[] = {
      "{\"name\": \"GEMM0 src1 e3 t7 c2\", \"cat\": \"work\", \"ph\": \"X\", \"pid\": 0, "
      "\"tid\": 5, \"ts\": 0.100, \"dur\": 0.500, \"args\": {\"source\": 1, \"expert\": 3, "
      "\"row_tile\": 7, \"col_block\": 2}}",
      "{\"name\": \"wait dispatch src1 e3 t7\", \"cat\": \"wait\", \"ph\": \"X\", \"pid\": 0, "
      "\"tid\": 5, \"ts\": 1234.567, \"dur\": 0.432, \"args\": {\"source\": 1, \"expert\": 3, "
      "\"row_tile\": 7}}",
      "\"name\": \"gate tile 4\", \"cat\": \"work\"",
      "\"args\": {\"tile\": 4, \"first_token\": 128, \"tokens\": 32}",
      "\"name\": \"place\"",
      "\"args\": {\"token_tiles\": 1, \"headers\": 1}",
      "\"name\": \"dispatch to r2 e1 rows 8+8\"",
      "\"args\": {\"dest\": 2, \"expert\": 1, \"first_row\": 8, \"rows\": 8}",
      "\"name\": \"wait barrier 2\", \"cat\": \"wait\"",
      "\"name\": \"wait credit r3\"",
      "\"name\": \"wait header r1\"",
      "\"name\": \"wait GEMM0 src0 e2 t1\"",
      "\"args\": {\"source\": 0, \"expert\": 2, \"row_tile\": 1, \"gemm0_tasks\": 16}",
      "\"name\": \"GEMM1 src0 e2 t1 c15\"",
      "\"name\": \"combine tile 9\"",
      "\"name\": \"wait return tile 9\", \"cat\": \"wait\"",
      "{\"name\": \"wait stage task 6\", \"cat\": \"wait\", \"ph\": \"X\", \"pid\": 0, "
      "\"tid\": 0, \"ts\": 3.900, \"dur\": 0.200, \"args\": {\"task\": 6}}",
      "\"tid\": 131, \"ts\": 0.010, \"dur\": 0.010",
      "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"GPU 0 "
      "(rank 0): 13 events, 3 dropped\"}}",
      "\"args\": {\"name\": \"GPU 1 (rank 1): 1 events, 0 dropped\"}",
      "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": 5, \"args\": {\"name\": "
      "\"SM 5\"}}",
      "{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": 131, \"args\": "
      "{\"sort_index\": 131}}",
      "\"name\": \"moe_kernel\", \"cat\": \"kernel\", \"ph\": \"X\", \"pid\": 0, \"tid\": 100000, "
      "\"ts\": 0.000, \"dur\": 2000.000",
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    CHECK(strstr(buf, want[i]) != NULL, "timeline lacks %s", want[i]);
  CHECK(strstr(buf, "\"tid\": 1,") == NULL, "no track for an SM without events");
  int braces = 0, brackets = 0, quotes = 0, slices = 0;
  for (const char *p = buf; *p; p++) {
    braces += *p == '{' ? 1 : *p == '}' ? -1 : 0;
    brackets += *p == '[' ? 1 : *p == ']' ? -1 : 0;
    quotes += *p == '"';
  }
  for (const char *p = buf; (p = strstr(p, "\"ph\": \"X\"")) != NULL; p++) slices++;
  CHECK(braces == 0 && brackets == 0 && quotes % 2 == 0, "balanced: %d %d %d", braces, brackets,
        quotes);
  CHECK(slices == 13 + 1 + 2, "one slice per event plus a kernel slice per GPU: %d", slices);
  free(buf);

  loom_moe_trace_event_t bad = ev(0, 99, 0, 1, 0, 0, 0, 0);
  g[0].info = info_of(1, 10, 1);
  g[0].events = &bad;
  f = tmpfile();
  if (f != NULL) {
    CHECK(cli_write_trace_json(f, g, 1) == -1, "an unknown kind is an error");
    fclose(f);
  }
  CHECK(strcmp(cli_trace_kind_name(LOOM_MOE_TRACE_GEMM1), "GEMM1") == 0 &&
            strcmp(cli_trace_kind_name(LOOM_MOE_TRACE_WAIT_RETURN), "wait return") == 0 &&
            strcmp(cli_trace_kind_name(LOOM_MOE_TRACE_WAIT_STAGE), "wait stage") == 0 &&
            strcmp(cli_trace_kind_name(LOOM_MOE_TRACE_NUM_KINDS), "unknown") == 0 &&
            strcmp(cli_trace_kind_name(-1), "unknown") == 0,
        "kind names");
}

static void test_paths_and_options(void) {
  char p[64];
  CHECK(cli_trace_path("t.json", 4096, 0, p, sizeof p) == 0 && strcmp(p, "t.json") == 0,
        "one token count: the name as given");
  CHECK(cli_trace_path("out/t.json", 4096, 1, p, sizeof p) == 0 &&
            strcmp(p, "out/t.T4096.json") == 0,
        "several: before the extension: %s", p);
  CHECK(cli_trace_path("out.d/trace", 8, 1, p, sizeof p) == 0 && strcmp(p, "out.d/trace.T8") == 0,
        "a dot in the directory is no extension: %s", p);
  CHECK(cli_trace_path(".trace", 8, 1, p, sizeof p) == 0 && strcmp(p, ".trace.T8") == 0,
        "dot file: %s", p);
  CHECK(cli_trace_path("a-rather-long-file-name.json", 16384, 1, p, 16) == -1,
        "a name that does not fit is refused");
  cli_options o;
  char err[256];
  const char *a[] = {"loom", "moe", "--trace", "t.json", "--tokens", "4096"};
  CHECK(cli_parse(6, (char **)a, &o, err, sizeof err) == 0 && o.trace != NULL &&
            strcmp(o.trace, "t.json") == 0 && o.tokens[0] == 4096,
        "--trace FILE: %s", err);
  const char *b[] = {"loom", "moe"};
  CHECK(cli_parse(2, (char **)b, &o, err, sizeof err) == 0 && o.trace == NULL, "off by default");
  const char *c[] = {"loom", "moe", "--trace", ""};
  CHECK(cli_parse(4, (char **)c, &o, err, sizeof err) == -1 && strstr(err, "--trace"),
        "--trace needs a name: %s", err);
  const char *d[] = {"loom", "moe", "--trace"};
  CHECK(cli_parse(3, (char **)d, &o, err, sizeof err) == -1 && strstr(err, "needs a value"),
        "--trace without a value: %s", err);
}

int main(void) {
  CHECK(sizeof(loom_moe_trace_event_t) == 32 && sizeof(loom_moe_trace_info_t) == 40,
        "trace records: 32 and 40 bytes");
  CHECK(LOOM_MOE_TRACE_FIRST_WAIT == LOOM_MOE_TRACE_COMBINE + 1, "waits follow the work kinds");
  test_busy();
  test_json();
  test_paths_and_options();
  return check_summary("test_trace");
}
