/* file_out.c — files written through a temporary name and renamed into place (file_out.h) */
#include "runtime/file_out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uop/uop.h"

bool fd_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

bool fd_read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  /* the file ended early */
      return false;
    }
    p += r;
    n -= (size_t)r;
  }
  return true;
}

bool file_out_open(file_out *f, const char *path) {
  static unsigned long counter;
  *f = (file_out){.fd = -1};
  size_t plen = strlen(path);
  f->path = mem_alloc(plen + 1);
  f->tmp = mem_alloc(plen + 64);
  if (!f->path || !f->tmp) {  /* neither name is written yet: none is kept (file_out_tmp says "?") */
    free(f->path);
    free(f->tmp);
    f->path = f->tmp = NULL;
    f->err = ENOMEM;
    return false;
  }
  memcpy(f->path, path, plen + 1);
  /* a name no other thread or process of ours picks: the pid and a counter; O_EXCL refuses a leftover */
  for (int tries = 0; f->fd < 0 && tries < 100; tries++) {
    snprintf(f->tmp, plen + 64, "%s.tmp.%ld.%lu", path, (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f->fd < 0 && errno != EEXIST) break;
  }
  if (f->fd < 0) f->err = errno;
  f->created = f->fd >= 0;
  return f->fd >= 0;
}

bool file_out_write(file_out *f, const void *p, size_t n) {
  if (f->err || f->fd < 0) return false;
  if (!fd_write_all(f->fd, p, n)) f->err = errno;
  return !f->err;
}

bool file_out_commit(file_out *f, bool sync) {
  if (!f->err && f->fd >= 0 && sync && fsync(f->fd) != 0) f->err = errno;
  if (f->fd >= 0) {
    if (close(f->fd) != 0 && !f->err) f->err = errno;
    f->fd = -1;
  }
  if (!f->err && f->tmp && rename(f->tmp, f->path) != 0) f->err = errno;
  if (f->err) {
    if (f->created) unlink(f->tmp);
    f->created = false;
    return false;
  }
  f->created = false;  /* renamed: nothing left to remove */
  return true;
}

void file_out_discard(file_out *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->created) unlink(f->tmp);
  free(f->tmp);
  free(f->path);
  int err = f->err;
  *f = (file_out){.fd = -1, .err = err};
}

const char *file_out_tmp(const file_out *f) { return f->tmp ? f->tmp : "?"; }
const char *file_out_why(const file_out *f) { return f->err ? strerror(f->err) : ""; }
