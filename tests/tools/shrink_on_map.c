/* LD_PRELOAD shim for the CLI tests of issue 7 bug 5: the first time the process maps the file
 * named by DS_SHRINK_FILE (its basename), the file is truncated to DS_SHRINK_SIZE bytes right
 * after the map is made, as a writer cutting a live dump would. Every later access past the new
 * end is a SIGBUS the reader must survive. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

typedef void* (*mmap_fn)(void*, size_t, int, int, int, off_t);

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  static mmap_fn real;
  static int done;
  if (!real) real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
  void* p = real(addr, len, prot, flags, fd, off);
  const char* want = getenv("DS_SHRINK_FILE");
  if (p == MAP_FAILED || done || fd < 0 || !want) return p;
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return p;
  target[n] = '\0';
  const char* base = strrchr(target, '/');
  base = base ? base + 1 : target;
  if (strcmp(base, want) != 0) return p;
  done = 1;
  const char* size = getenv("DS_SHRINK_SIZE");
  int w = open(target, O_WRONLY);
  if (w >= 0) {
    if (ftruncate(w, size ? atoll(size) : 0) != 0) perror("shrink_on_map: ftruncate");
    close(w);
  }
  return p;
}
