/* tokenizer_pre.c — the pre-tokenizers of byte-level BPE vocabularies, each a regex written out as a matcher
 * (no regex library) that gives the length of the next word, trying the alternatives in order as a
 * backtracking regex engine would:
 *   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *           \s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2:  llama3's with \p{N} (one digit at a time) for \p{N}{1,3}
 *   llama.cpp's "default": four regexes, each splitting the words of the one before (what one leaves
 *           between its matches is a word too): [\p{P}$+<=>^~|]+, then gpt2's, then \p{N}+, then [0-9]{3}
 * A byte that is not valid UTF-8 is a character of none of the classes (llama.cpp makes it U+FFFD and loses
 * it; here it stays, so decode(encode(s)) == s for any bytes).
 */
#include <string.h>

#include "nn/tokenizer.h"
#include "nn/unicode.h"

typedef struct ch { int32_t cp; int n, cls; } ch;  /* n == 0: past the end */

static ch char_at(const char *s, int64_t len, int64_t i) {
  ch c = {-1, 0, 0};
  if (i >= len) return c;
  c.n = unicode_next(s, len, i, &c.cp);
  c.cls = unicode_class(c.cp);
  return c;
}

static bool is_l(ch c) { return c.cls == UNI_LETTER; }
static bool is_n(ch c) { return c.cls == UNI_NUMBER; }
static bool is_s(ch c) { return c.cls == UNI_SPACE; }
static bool is_nl(ch c) { return c.cp == '\r' || c.cp == '\n'; }
static bool is_other(ch c) { return c.n && !(c.cls & (UNI_LETTER | UNI_NUMBER | UNI_SPACE)); }  /* [^\s\p{L}\p{N}] */
static bool is_not_nl_l_n(ch c) { return c.n && !is_nl(c) && !is_l(c) && !is_n(c); }  /* [^\r\n\p{L}\p{N}] */

/* the end of the run of characters from i that pred accepts (at most max of them) */
static int64_t run(const char *s, int64_t len, int64_t i, bool (*pred)(ch), int max) {
  for (int k = 0; k < max; k++) {
    ch c = char_at(s, len, i);
    if (!pred(c)) break;
    i += c.n;
  }
  return i;
}

/* 's 't 're 've 'm 'll 'd at i: its length, 0 if none; any case when fold */
static int64_t contraction(const char *s, int64_t len, int64_t i, bool fold) {
  if (s[i] != '\'' || i + 1 >= len) return 0;
  char a = s[i + 1], b = i + 2 < len ? s[i + 2] : 0;
  if (fold) {
    a = a >= 'A' && a <= 'Z' ? (char)(a + 32) : a;
    b = b >= 'A' && b <= 'Z' ? (char)(b + 32) : b;
  }
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

/* \s+(?!\S) then \s+ at i (a space there): the run, less its last space when a non-space follows it and
 * more than one space is left */
static int64_t spaces(const char *s, int64_t len, int64_t i) {
  int64_t e = run(s, len, i, is_s, INT32_MAX);
  if (e == len) return e - i;
  int64_t last = e;  /* the start of the run's last character */
  while (last > i && ((unsigned char)s[last - 1] & 0xC0) == 0x80) last--;
  last--;
  return last > i ? last - i : e - i;
}

static int64_t next_gpt2(const char *s, int64_t len, int64_t i) {
  int64_t k = contraction(s, len, i, false);
  if (k) return k;
  ch c = char_at(s, len, i);
  int64_t j = i;
  if (c.cp == ' ') {  /* " ?" before a letter, a number or another character */
    ch d = char_at(s, len, i + 1);
    if (is_l(d) || is_n(d) || is_other(d)) {
      j = i + 1;
      c = d;
    }
  }
  if (is_l(c)) return run(s, len, j, is_l, INT32_MAX) - i;
  if (is_n(c)) return run(s, len, j, is_n, INT32_MAX) - i;
  if (is_other(c)) return run(s, len, j, is_other, INT32_MAX) - i;
  return spaces(s, len, i);
}

static int64_t next_llama3(const char *s, int64_t len, int64_t i, int digits) {
  int64_t k = contraction(s, len, i, true);
  if (k) return k;
  ch c = char_at(s, len, i);
  if (is_not_nl_l_n(c) && is_l(char_at(s, len, i + c.n))) return run(s, len, i + c.n, is_l, INT32_MAX) - i;
  if (is_l(c)) return run(s, len, i, is_l, INT32_MAX) - i;
  if (is_n(c)) return run(s, len, i, is_n, digits) - i;
  int64_t j = c.cp == ' ' && is_other(char_at(s, len, i + 1)) ? i + 1 : i;
  if (is_other(char_at(s, len, j))) return run(s, len, run(s, len, j, is_other, INT32_MAX), is_nl, INT32_MAX) - i;
  /* \s*[\r\n]+: the spaces up to the run's last newline */
  int64_t e = run(s, len, i, is_s, INT32_MAX), nl = -1;
  for (int64_t p = i; p < e; p++)
    if (s[p] == '\r' || s[p] == '\n') nl = p;
  if (nl >= 0) return nl + 1 - i;
  return spaces(s, len, i);
}

static bool is_p(ch c) { return c.cls == UNI_PUNCT || (c.cp > 0 && c.cp < 128 && strchr("$+<=>^~|", c.cp)); }
static bool is_not_p(ch c) { return c.n && !is_p(c); }
static bool is_not_n(ch c) { return c.n && !is_n(c); }

/* each stage's word is found inside the one before, so the next word from i is the innermost. Starting again
 * inside a word of an earlier stage gives that word's end again: the later stages cut only gpt2's " ?\p{N}+"
 * words (between the space and the digits, and into threes), and gpt2's word from a digit is the digit run */
static int64_t next_default(const char *s, int64_t len, int64_t i) {
  ch c = char_at(s, len, i);
  int64_t e = run(s, len, i, is_p(c) ? is_p : is_not_p, INT32_MAX);
  e = i + next_gpt2(s, e, i);
  e = run(s, e, i, is_n(c) ? is_n : is_not_n, INT32_MAX);
  for (int64_t k = i; k + 3 <= e; k++)  /* the leftmost [0-9]{3}: a word, and what is before it */
    if (s[k] >= '0' && s[k] <= '9' && s[k + 1] >= '0' && s[k + 1] <= '9' && s[k + 2] >= '0' && s[k + 2] <= '9')
      return k == i ? 3 : k - i;
  return e - i;
}

int64_t tok_pre_next(tok_pre pre, const char *text, int64_t len, int64_t at) {
  int64_t n = pre == TOK_PRE_GPT2      ? next_gpt2(text, len, at)
              : pre == TOK_PRE_DEFAULT ? next_default(text, len, at)
                                       : next_llama3(text, len, at, pre == TOK_PRE_QWEN2 ? 1 : 3);
  return n > 0 ? n : 1;
}
