/* CLI parsing: sizes, integers, lists and the option set of `loom`. */
#include <string.h>

#include "cli/args.h"
#include "../check.h"

static int parse(cli_options *o, char *err, int argc, const char **argv) {
  return cli_parse(argc, (char **)argv, o, err, 256);
}

int main(void) {
  uint64_t v = 0;
  CHECK(cli_parse_size("123", &v) == 0 && v == 123, "plain");
  CHECK(cli_parse_size("64K", &v) == 0 && v == 65536, "K");
  CHECK(cli_parse_size("16M", &v) == 0 && v == 16u << 20, "M");
  CHECK(cli_parse_size("2g", &v) == 0 && v == 2ull << 30, "g");
  CHECK(cli_parse_size("", &v) == -1, "empty");
  CHECK(cli_parse_size("-1", &v) == -1, "negative");
  CHECK(cli_parse_size("12X", &v) == -1, "junk suffix");
  CHECK(cli_parse_size("1KB", &v) == -1, "two-letter suffix");
  CHECK(cli_parse_size("99999999999999999999", &v) == -1, "overflow");
  CHECK(cli_parse_size("17179869184G", &v) == -1, "overflow after shift");
  long n = 0;
  CHECK(cli_parse_int("42", 0, 100, &n) == 0 && n == 42, "int");
  CHECK(cli_parse_int("101", 0, 100, &n) == -1, "int above range");
  CHECK(cli_parse_int("4x", 0, 100, &n) == -1, "int junk");
  uint64_t list[4];
  CHECK(cli_parse_size_list("4096,8192,16K", list, 4) == 3 && list[2] == 16384, "list");
  CHECK(cli_parse_size_list("1,,2", list, 4) == -1, "empty item");
  CHECK(cli_parse_size_list("1,2,", list, 4) == -1, "trailing comma");
  CHECK(cli_parse_size_list("1,2,3,4,5", list, 4) == -1, "too many");

  cli_options o;
  char err[256];
  const char *a1[] = {"loom"};
  CHECK(parse(&o, err, 1, a1) == 0 && strcmp(o.command, "help") == 0, "no args is help");
  const char *a2[] = {"loom", "info", "--gpus", "4", "--bytes", "64M", "--iters", "5"};
  CHECK(parse(&o, err, 8, a2) == 0 && strcmp(o.command, "info") == 0 && o.gpus == 4 &&
            o.bytes == 64u << 20 && o.iters == 5 && o.warmup == 3,
        "info options");
  const char *a3[] = {"loom", "info", "--gpus"};
  CHECK(parse(&o, err, 3, a3) == -1 && strstr(err, "--gpus"), "missing value: %s", err);
  const char *a4[] = {"loom", "info", "--frobnicate", "1"};
  CHECK(parse(&o, err, 4, a4) == -1 && strstr(err, "--frobnicate"), "unknown option");
  const char *a5[] = {"loom", "info", "--iters", "0"};
  CHECK(parse(&o, err, 4, a5) == -1 && strstr(err, "--iters"), "iters must be >= 1");
  const char *a6[] = {"loom", "info", "--bytes", "0"};
  CHECK(parse(&o, err, 4, a6) == -1 && strstr(err, "--bytes"), "bytes must be > 0");
  return check_summary("test_cli");
}
