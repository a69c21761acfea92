/* node_pool.c — memory for IR nodes: free lists by size, carved from large blocks.
 *
 * An eager step builds and a collection frees hundreds of nodes (a decoding step of stories260K: 611 new nodes,
 * about 115 to 250 bytes each). From the C heap each costs a calloc and a free that walks and merges chunks,
 * and the nodes of one graph lie scattered among the step's other allocations. Here a node is a pop from the
 * free list of its size class (sizes are multiples of 8, the struct then 8-byte words), freed nodes are
 * reused last-in first-out while they are still in the cache, and the nodes of a graph lie together.
 *
 * Blocks are kept until node_pool_release: the pool stays as large as the most nodes alive at once, which
 * the collector bounds. Under AddressSanitizer nodes come from the heap, so that a use of a collected node
 * is still reported. Callers hold the library lock (uop.c). */
#include <stdlib.h>
#include <string.h>

#include "uop/uop.h"

#if defined(__SANITIZE_ADDRESS__)
#define NODE_POOL_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NODE_POOL_OFF 1
#endif
#endif

#define NODE_POOL_MAX 512             /* larger nodes (a SINK of many outputs) come from the heap */
#define BLOCK_BYTES (64u << 10)
#define NCLASSES (NODE_POOL_MAX / 8)

typedef struct free_node { struct free_node *next; } free_node;
typedef struct block { struct block *next; } block;  /* the header of each block, then the nodes */

static free_node *free_lists[NCLASSES + 1];
static block *blocks;
static char *bump, *bump_end;         /* the unused rest of the newest block */

#ifndef NODE_POOL_OFF
static size_t class_of(size_t size) { return (size + 7) / 8; }
#endif

void *node_alloc(size_t size) {
#ifndef NODE_POOL_OFF
  if (size && size <= NODE_POOL_MAX) {
    size_t c = class_of(size), bytes = c * 8;
    if (!mem_pooled(size)) return NULL;
    free_node *f = free_lists[c];
    if (f) {
      free_lists[c] = f->next;
      return memset(f, 0, bytes);
    }
    if ((size_t)(bump_end - bump) < bytes) {
      block *b = mem_alloc(BLOCK_BYTES);
      if (!b) return NULL;
      b->next = blocks;
      blocks = b;
      bump = (char *)b + 16;  /* nodes 16-byte aligned, as malloc's */
      bump_end = (char *)b + BLOCK_BYTES;
    }
    void *p = bump;
    bump += (bytes + 15) & ~(size_t)15;
    return memset(p, 0, bytes);
  }
#endif
  return mem_calloc(1, size);
}

void node_free(void *p, size_t size) {
  (void)size;  /* unused when the pool is off */
  if (!p) return;
#ifndef NODE_POOL_OFF
  if (size && size <= NODE_POOL_MAX) {
    free_node *f = p;
    size_t c = class_of(size);
    f->next = free_lists[c];
    free_lists[c] = f;
    return;
  }
#endif
  free(p);
}

void node_pool_release(void) {
  for (block *b = blocks, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
  blocks = NULL;
  bump = bump_end = NULL;
  memset(free_lists, 0, sizeof free_lists);
}
