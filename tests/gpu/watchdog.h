/*
 * One watchdog for the GPU tests: watchdog_start(name) installs it;
 * watchdog(seconds, fmt, ...) names the step about to run and (re)arms an
 * alarm. When a step outlives its alarm, the handler prints
 * "NAME: WATCHDOG expired; in progress: STEP", kills the rank processes
 * ranks.h started, and ends the process with status 124, so a hang in a
 * test is an error message, never a stuck run.
 */
#ifndef LOOM_TEST_GPU_WATCHDOG_H
#define LOOM_TEST_GPU_WATCHDOG_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ranks.h"

static char watchdog_head[96] = "test: WATCHDOG expired; in progress: ";
static char watchdog_doing[1024] = "startup";

static void watchdog_on_alarm(int sig) {
  (void)sig;
  if (write(2, watchdog_head, strnlen(watchdog_head, sizeof watchdog_head)) < 0 ||
      write(2, watchdog_doing, strnlen(watchdog_doing, sizeof watchdog_doing)) < 0 ||
      write(2, "\n", 1) < 0) {
    /* the process ends either way */
  }
  for (int i = 0; i < RANKS_MAX; i++)
    if (ranks_children[i] > 0) kill(ranks_children[i], SIGKILL);
  _exit(124);
}

/* Install the handler; `name` starts the message. */
static void watchdog_start(const char *name) {
  snprintf(watchdog_head, sizeof watchdog_head, "%s: WATCHDOG expired; in progress: ", name);
  signal(SIGALRM, watchdog_on_alarm);
}

/* (Re)arm the watchdog for `seconds` and name what is about to run. */
static void watchdog(int seconds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void watchdog(int seconds, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(watchdog_doing, sizeof watchdog_doing, fmt, ap);
  va_end(ap);
  alarm((unsigned)seconds);
}

#endif
