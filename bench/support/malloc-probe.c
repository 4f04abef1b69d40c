/*
 * Loaded into a benchmarked server with LD_PRELOAD (bench/idle-sessions.ts, MALLOC_INFO=1): asks
 * glibc's allocator what it holds, from outside, without stopping the process. A thread waits on
 * the FIFO named by BURROW_MALLOC_PROBE; for each byte written there it writes malloc_info's XML to
 * "<fifo>.xml", and for a 't' it then calls malloc_trim(0) and writes its result to "<fifo>.trim".
 * (gdb's inferior calls, the usual way, fail in some sandboxes; this needs only a compiler.)
 *
 *   gcc -shared -fPIC -O2 -o /tmp/malloc-probe.so bench/support/malloc-probe.c -lpthread
 */
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fifo[512];

static void write_file(const char *suffix, void (*fill)(FILE *)) {
  char path[600];
  char tmp[610];
  snprintf(path, sizeof path, "%s%s", fifo, suffix);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fill(f);
  fclose(f);
  rename(tmp, path); /* the reader sees the whole file or none */
}

static void fill_info(FILE *f) { malloc_info(0, f); }
static void fill_trim(FILE *f) { fprintf(f, "%d\n", malloc_trim(0)); }

static void *serve(void *arg) {
  (void)arg;
  for (;;) {
    int fd = open(fifo, O_RDONLY);
    if (fd < 0) return NULL;
    char c;
    while (read(fd, &c, 1) == 1) {
      write_file(".xml", fill_info);
      if (c == 't') write_file(".trim", fill_trim);
    }
    close(fd);
  }
}

__attribute__((constructor)) static void start(void) {
  const char *name = getenv("BURROW_MALLOC_PROBE");
  if (!name || strlen(name) >= sizeof fifo - 16) return;
  strcpy(fifo, name);
  /* Only the process that owns the FIFO's name serves it: children inherit the environment. */
  unsetenv("BURROW_MALLOC_PROBE");
  unsetenv("LD_PRELOAD");
  pthread_t thread;
  if (pthread_create(&thread, NULL, serve, NULL) == 0) pthread_detach(thread);
}
