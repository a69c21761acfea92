/* file_out.h — a file written whole or not at all, and reads and writes that finish.
 *
 * Every file tgc writes for a user or for its caches (.npy, safetensors, GGUF, kernel binaries) goes to a
 * temporary name beside its target and is renamed over it only when every byte is written: a reader, or a
 * crash half-way, never sees half a file. The temporary file is created with 0666 (not mkstemp's 0600) so the
 * result gets the permissions the umask gives new files.
 */
#ifndef TG_FILE_OUT_H
#define TG_FILE_OUT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct file_out {
  int fd;       /* -1 when not open */
  char *tmp;    /* the temporary name (mem_alloc'd) */
  char *path;   /* the target (mem_alloc'd) */
  int err;      /* the errno of the first failure (0: none) */
  bool created; /* tmp exists and is ours to remove */
} file_out;

/* creates the temporary file for path; false on failure (f->err; file_out_discard still to be called) */
bool file_out_open(file_out *f, const char *path);
/* appends n bytes (retrying short writes and EINTR); false on failure, and every later call fails too */
bool file_out_write(file_out *f, const void *p, size_t n);
/* flushes to the disk when sync, closes and renames over the target; false on failure (the temporary removed) */
bool file_out_commit(file_out *f, bool sync);
/* closes and removes the temporary file if still there, frees the names (safe after commit, twice, or on
 * a zeroed struct) */
void file_out_discard(file_out *f);
/* the temporary name ("?" before open) and the failure ("" when none), for error messages */
const char *file_out_tmp(const file_out *f);
const char *file_out_why(const file_out *f);

/* reads or writes exactly n bytes of fd (retrying short transfers and EINTR); false on failure or end of file */
bool fd_read_all(int fd, void *buf, size_t n);
bool fd_write_all(int fd, const void *buf, size_t n);

#endif
