/* disk_blob.h — a compiled kernel binary kept in the kernel cache directory (the OpenCL and CUDA devices'
 * program binaries; the CPU's shared objects carry their own record, compile_cache.c).
 *
 * A file is a 40-byte header (an 8-byte magic naming the format, two independent hashes of what it was built
 * from, the size and a checksum of the bytes) followed by the bytes. It is written to a temporary file renamed
 * into place, so a reader never sees half of one; a file that fails any check is reported damaged, and the
 * caller deletes it and builds again.
 */
#ifndef TG_DISK_BLOB_H
#define TG_DISK_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum disk_blob_status {
  DISK_BLOB_OK,       /* *data and *nbytes hold the bytes (mem_alloc'd: the caller frees them) */
  DISK_BLOB_MISSING,  /* no file, or no memory to read it: not the file's fault */
  DISK_BLOB_DAMAGED,  /* the file fails a check (*why says which) or was built from something else */
} disk_blob_status;

disk_blob_status disk_blob_read(const char *path, const char magic[8], uint64_t key, uint64_t key2, size_t max_bytes,
                                void **data, size_t *nbytes, const char **why);
/* writes a file at path (creating dir and its parents); false on any failure, which leaves no file */
bool disk_blob_write(const char *dir, const char *path, const char magic[8], uint64_t key, uint64_t key2,
                     const void *data, size_t nbytes);
/* mkdir -p; a failure shows when a file cannot be created there */
void make_dirs(const char *path);

#endif
