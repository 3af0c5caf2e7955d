/* The loom CLI's subcommands. Each returns the process exit code. */
#ifndef LOOM_CLI_H
#define LOOM_CLI_H

#include "args.h"

int cli_info(const cli_options *o);
int cli_moe(const cli_options *o);
int cli_ag_gemm(const cli_options *o);
int cli_gemm_rs(const cli_options *o);
int cli_gemm_ar(const cli_options *o); /* gemm_rs.c */

#endif
