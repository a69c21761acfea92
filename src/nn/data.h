/* data.h — the file readers of src/nn/ over bytes in memory. The public calls (tg_mnist_load, tg_digits_load,
 * tg_llama_load, tg_tokenizer_load, tg_safetensors_read/load) map or read a file and call these; the fuzz
 * targets (tests/fuzz/) call them directly. name is the file's name for messages. Same results, errors and
 * ownership as the public calls. */
#ifndef TG_NN_DATA_H
#define TG_NN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "tg.h"

/* a file mapped read-only (an empty one is not mapped: b points to ""); data_unmap lets go of it */
typedef struct data_map { const uint8_t *b; size_t n; void *base; } data_map;
/* the regular file at path, mapped; TG_ERR_IO with "<op>: <path>: <why>" otherwise */
tg_status data_map_file(const char *op, const char *path, data_map *m);
void data_unmap(data_map *m);

/* images (N, 1, H, W) uint8 and labels (N) int32 from a pair of IDX files (raw or gzipped); labels below nclasses */
tg_status data_idx_pair(const char *images, const uint8_t *ib, size_t in, const char *labels, const uint8_t *lb,
                        size_t ln, int64_t nclasses, tg_dataset *out);
/* scikit-learn's digits from a CSV file (raw or gzipped) */
tg_status data_digits(const char *name, const uint8_t *bytes, size_t len, tg_dataset *all);
/* llama2.c's tokenizer from the bytes of its file, with vocab pieces */
tg_tokenizer *data_tokenizer(const char *name, const unsigned char *bytes, size_t len, int64_t vocab);
/* a Llama model from the bytes of a llama2.c checkpoint, as tg_llama_load */
tg_llama *data_llama(const char *name, const uint8_t *bytes, size_t len, int64_t max_seq);

#endif
