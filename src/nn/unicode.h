/* unicode.h — what the BPE pre-tokenizers need of Unicode: UTF-8 decoding that keeps invalid bytes, and the
 * classes \p{L}, \p{N}, \p{P} and \s of a code point (unicode.c, over the generated table unicode_table.c). */
#ifndef TG_NN_UNICODE_H
#define TG_NN_UNICODE_H

#include <stdint.h>

enum { UNI_LETTER = 1, UNI_NUMBER = 2, UNI_SPACE = 4, UNI_PUNCT = 8 };
typedef struct unicode_range { int32_t first, last, cls; } unicode_range;
extern const unicode_range unicode_ranges[];
extern const int32_t unicode_nranges;

/* the code point at s[at] (at < len) into *cp, -1 for a byte that does not start a valid UTF-8 sequence
 * (overlong, surrogate, past U+10FFFF, cut short); its length in bytes (1 for an invalid byte) */
int unicode_next(const char *s, int64_t len, int64_t at, int32_t *cp);
/* UNI_LETTER, UNI_NUMBER, UNI_SPACE, UNI_PUNCT or 0 (-1, an invalid byte: 0) */
int unicode_class(int32_t cp);

#endif
