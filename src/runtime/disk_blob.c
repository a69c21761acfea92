/* disk_blob.c — kernel binaries in the cache directory, with a checked header (disk_blob.h) */
#include "runtime/disk_blob.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/device.h"
#include "runtime/file_out.h"
#include "uop/uop.h"

typedef struct blob_header {
  char magic[8];
  uint64_t key;   /* the file's name */
  uint64_t key2;  /* a second hash of what it was built from (another seed) */
  uint64_t size;  /* bytes after the header */
  uint64_t sum;   /* hash of those bytes, seeded with key2 */
} blob_header;
_Static_assert(sizeof(blob_header) == 40, "the header is 40 bytes without padding");

void make_dirs(const char *path) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    mkdir(p, 0755);
    *s = '/';
  }
  mkdir(p, 0755);
}

disk_blob_status disk_blob_read(const char *path, const char magic[8], uint64_t key, uint64_t key2, size_t max_bytes,
                                void **data, size_t *nbytes, const char **why) {
  *data = NULL;
  *nbytes = 0;
  *why = "";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = "cannot be opened";
    return errno == ENOENT ? DISK_BLOB_MISSING : DISK_BLOB_DAMAGED;
  }
  disk_blob_status st = DISK_BLOB_DAMAGED;
  struct stat sb;
  blob_header h;
  void *buf = NULL;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) *why = "is not a regular file";
  else if ((size_t)sb.st_size <= sizeof h || (size_t)sb.st_size - sizeof h > max_bytes) *why = "has a bad size";
  else if (!fd_read_all(fd, &h, sizeof h)) *why = "cannot be read";
  else if (memcmp(h.magic, magic, sizeof h.magic)) *why = "has no header of this format (not written by this tgc)";
  else if (h.key != key || h.key2 != key2) *why = "was built from another source";
  else if (h.size != (uint64_t)sb.st_size - sizeof h) *why = "has the wrong size";
  else if (!(buf = mem_alloc((size_t)h.size))) st = DISK_BLOB_MISSING;   /* out of memory is not the file's fault */
  else if (!fd_read_all(fd, buf, (size_t)h.size)) *why = "cannot be read";
  else if (hash_bytes(buf, (size_t)h.size, key2) != h.sum) *why = "fails its checksum";
  else st = DISK_BLOB_OK;
  close(fd);
  if (st != DISK_BLOB_OK) {
    free(buf);
    return st;
  }
  *data = buf;
  *nbytes = (size_t)h.size;
  return DISK_BLOB_OK;
}

bool disk_blob_write(const char *dir, const char *path, const char magic[8], uint64_t key, uint64_t key2,
                     const void *data, size_t nbytes) {
  make_dirs(dir);
  blob_header h = {.key = key, .key2 = key2, .size = nbytes, .sum = hash_bytes(data, nbytes, key2)};
  memcpy(h.magic, magic, sizeof h.magic);
  /* no fsync: a cache file lost in a crash is built again */
  file_out f;
  bool ok = file_out_open(&f, path) && file_out_write(&f, &h, sizeof h) && file_out_write(&f, data, nbytes) &&
            file_out_commit(&f, false);
  file_out_discard(&f);
  return ok;
}
