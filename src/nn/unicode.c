/* unicode.c — UTF-8 decoding and the character classes of the BPE pre-tokenizers (see unicode.h). */
#include <string.h>

#include "nn/unicode.h"

int unicode_next(const char *s, int64_t len, int64_t at, int32_t *cp) {
  const unsigned char *p = (const unsigned char *)s + at;
  int64_t left = len - at;
  unsigned c = p[0];
  int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
  *cp = -1;
  if (n == 1) *cp = (int32_t)c;
  if (n < 2 || n > left) return 1;
  int32_t v = (int32_t)(c & (0x7F >> n));
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 1;
    v = v << 6 | (p[i] & 0x3F);
  }
  static const int32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < least[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 1;
  *cp = v;
  return n;
}

int unicode_class(int32_t cp) {
  if (cp < 0) return 0;
  if (cp < 0x80) {  /* the common case without a search */
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return UNI_SPACE;
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return UNI_LETTER;
    if (cp >= '0' && cp <= '9') return UNI_NUMBER;
    return cp && strchr("!\"#%&'()*,-./:;?@[\\]_{}", cp) ? UNI_PUNCT : 0;
  }
  int32_t lo = 0, hi = unicode_nranges - 1;
  while (lo <= hi) {
    int32_t mid = (lo + hi) / 2;
    if (cp < unicode_ranges[mid].first) hi = mid - 1;
    else if (cp > unicode_ranges[mid].last) lo = mid + 1;
    else return unicode_ranges[mid].cls;
  }
  return 0;
}
