/* make_corpus.c — writes the seed corpus of the fuzz targets: small valid files of every reader's format, so a
 * fuzzer starts deep inside each parser. The files are committed under tests/fuzz/corpus/<target>/;
 * `scripts/fuzz.sh --corpus` rebuilds this program and writes them again (byte for byte the same).
 *
 *   make_corpus DIR      writes DIR/safetensors, DIR/idx, DIR/digits, DIR/llama, DIR/tokenizer,
 *                        DIR/tokenizer_gguf, DIR/gguf, DIR/llm_gguf, DIR/onnx, DIR/npy
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "../onnx_pbw.h"

static const char *root;
static bool ok = true;

static void put(const char *target, const char *name, const void *data, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, target);
  if (mkdir(path, 0777) != 0 && errno != EEXIST) ok = false;
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
    fprintf(stderr, "make_corpus: cannot write %s\n", path);
    ok = false;
  }
}

/* a growing byte buffer */
typedef struct buf { uint8_t b[16384]; size_t n; } buf;

static void add(buf *b, const void *p, size_t n) {
  if (b->n + n > sizeof b->b) { fprintf(stderr, "make_corpus: buffer full\n"); exit(1); }
  memcpy(b->b + b->n, p, n);
  b->n += n;
}
static void add_u8(buf *b, uint8_t v) { add(b, &v, 1); }
static void add_i32(buf *b, int32_t v) { add(b, &v, 4); }  /* little-endian machines only, as the readers */
static void add_f32(buf *b, float v) { add(b, &v, 4); }

/* src gzipped (a gzip member with a fixed header: no name, no time, so the output never changes) */
static void gzip_into(buf *out, const uint8_t *src, size_t n) {
  z_stream zs = {0};
  if (deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
  uint8_t tmp[16384];
  zs.next_in = (Bytef *)(uintptr_t)src;
  zs.avail_in = (uInt)n;
  zs.next_out = tmp;
  zs.avail_out = sizeof tmp;
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) exit(1);
  add(out, tmp, sizeof tmp - zs.avail_out);
  deflateEnd(&zs);
}

/* ---- safetensors: 8-byte header length, JSON header padded with spaces, data ---------------------------- */

static void safetensors(const char *name, const char *json, const void *data, size_t n) {
  buf b = {0};
  size_t h = strlen(json), padded = (h + 7) / 8 * 8;
  uint64_t hl = padded;
  add(&b, &hl, 8);
  add(&b, json, h);
  for (size_t i = h; i < padded; i++) add_u8(&b, ' ');
  add(&b, data, n);
  put("safetensors", name, b.b, b.n);
}

static void make_safetensors(void) {
  /* the names and shapes fuzz_safetensors loads into: w F32 (2, 3), b I64 (3,) */
  float w[6] = {0.5f, -1, 2, 3.25f, -4, 1e-3f};
  int64_t bi[3] = {1, -2, 1LL << 40};
  uint8_t d[48];
  memcpy(d, w, 24);
  memcpy(d + 24, bi, 24);
  safetensors("fixed",
              "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
              "\"b\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[24,48]}}", d, sizeof d);
  /* every dtype, a scalar, an empty tensor, names with escapes */
  uint8_t all[256];
  for (size_t i = 0; i < sizeof all; i++) all[i] = (uint8_t)(i * 37 + 11);
  uint8_t bools[4] = {0, 1, 1, 0};
  memcpy(all + 128, bools, 4);
  safetensors("dtypes",
              "{\"f64\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
              "\"f16\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"
              "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[1,1],\"data_offsets\":[22,24]},"
              "\"i32\":{\"dtype\":\"I32\",\"shape\":[2,1,2],\"data_offsets\":[24,40]},"
              "\"u64\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[40,48]},"
              "\"i16\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[48,52]},"
              "\"u16\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[52,56]},"
              "\"u32\":{\"dtype\":\"U32\",\"shape\":[],\"data_offsets\":[56,60]},"
              "\"i8\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[60,63]},"
              "\"u8\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[63,64]},"
              "\"i64\":{\"dtype\":\"I64\",\"shape\":[8],\"data_offsets\":[64,128]},"
              "\"flags\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[128,132]},"
              "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[132,132]},"
              "\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[132,136]},"
              "\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\\\ \\/ \\n\\t\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[136,138]}}",
              all, 138);
  /* a float tensor at an offset not a multiple of 4: copied, not mapped; metadata of every JSON kind */
  safetensors("unaligned",
              "{\"__metadata__\":{\"a\":[1,-2.5e3,true,false,null,{\"k\":\"v\"}],\"b\":{}},"
              "\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
              "\"x\":{\"shape\":[2],\"data_offsets\":[1,9],\"dtype\":\"F32\",\"extra\":[0.5]}}", all, 9);
  safetensors("empty", "{}", NULL, 0);
}

/* ---- IDX: the fuzz input is a 2-byte length, the images file, the labels file -------------------------- */

static void be32(buf *b, uint32_t v) {
  uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
  add(b, x, 4);
}

static void idx_files(buf *img, buf *lab, uint32_t n, uint32_t h, uint32_t w) {
  be32(img, 0x803), be32(img, n), be32(img, h), be32(img, w);
  for (uint32_t i = 0; i < n * h * w; i++) add_u8(img, (uint8_t)(i * 13));
  be32(lab, 0x801), be32(lab, n);
  for (uint32_t i = 0; i < n; i++) add_u8(lab, (uint8_t)(i % 10));
}

static void idx_pair(const char *name, const buf *img, const buf *lab) {
  buf b = {0};
  add_u8(&b, (uint8_t)img->n), add_u8(&b, (uint8_t)(img->n >> 8));
  add(&b, img->b, img->n);
  add(&b, lab->b, lab->n);
  put("idx", name, b.b, b.n);
}

static void make_idx(void) {
  buf img = {0}, lab = {0}, gi = {0}, gl = {0}, two = {0};
  idx_files(&img, &lab, 5, 3, 4);
  idx_pair("raw", &img, &lab);
  gzip_into(&gi, img.b, img.n);
  gzip_into(&gl, lab.b, lab.n);
  idx_pair("gzip", &gi, &gl);
  /* the images as two gzip members one after the other (gzip -c a b > ab), labels raw */
  gzip_into(&two, img.b, 10);
  gzip_into(&two, img.b + 10, img.n - 10);
  idx_pair("gzip-two-members", &two, &lab);
  buf e0 = {0}, e1 = {0};
  idx_files(&e0, &e1, 0, 28, 28);
  idx_pair("empty", &e0, &e1);
}

/* ---- digits CSV ------------------------------------------------------------------------------------------ */

static void make_digits(void) {
  char text[4096];
  size_t k = 0;
  for (int r = 0; r < 4; r++) {
    for (int c = 0; c < 64; c++) k += (size_t)snprintf(text + k, sizeof text - k, "%d,", (r * 7 + c) % 17);
    /* a blank line after the first row, CRLF after the second, no newline after the last */
    k += (size_t)snprintf(text + k, sizeof text - k, "%d%s", r * 3 % 10, r == 0 ? "\n\n" : r == 1 ? "\r\n" : r == 2 ? "\n" : "");
  }
  put("digits", "rows.csv", text, k);
  buf g = {0};
  gzip_into(&g, (const uint8_t *)text, k);
  put("digits", "rows.csv.gz", g.b, g.n);
}

/* ---- llama2.c checkpoints: 7 int32, then the float32 weights ------------------------------------------ */

static void checkpoint(const char *name, int32_t dim, int32_t hidden, int32_t layers, int32_t heads, int32_t kv_heads,
                       int32_t vocab, int32_t seq) {
  buf b = {0};
  int32_t h[7] = {dim, hidden, layers, heads, kv_heads, vocab, seq};
  for (int i = 0; i < 7; i++) add_i32(&b, h[i]);
  int64_t d = dim, hd = hidden, v = vocab < 0 ? -vocab : vocab, kv = dim / heads * kv_heads, head = dim / heads;
  int64_t n = v * d + layers * (2 * d + 2 * d * d + 2 * d * kv + 3 * d * hd) + d + seq * head + (vocab < 0 ? v * d : 0);
  for (int64_t i = 0; i < n; i++) add_f32(&b, (float)((i * 7919) % 201 - 100) / 400.0f);
  put("llama", name, b.b, b.n);
}

static void make_llama(void) {
  checkpoint("shared", 8, 16, 1, 2, 1, 10, 4);
  checkpoint("unshared", 4, 8, 2, 2, 2, -6, 2);
}

/* ---- the tokenizer: int32 max length, per token float32 score, int32 length, bytes ---------------------- */

/* the fuzz input: 2-byte vocabulary size - 3, text length, text, then the file */
static void tokenizer(const char *name, const char *const *pieces, int n, const char *text) {
  buf b = {0};
  int32_t maxlen = 0;
  for (int i = 0; i < n; i++) maxlen = (int32_t)strlen(pieces[i]) > maxlen ? (int32_t)strlen(pieces[i]) : maxlen;
  add_u8(&b, (uint8_t)(n - 3)), add_u8(&b, (uint8_t)((n - 3) >> 8));
  add_u8(&b, (uint8_t)strlen(text));
  add(&b, text, strlen(text));
  add_i32(&b, maxlen);
  for (int i = 0; i < n; i++) {
    add_f32(&b, i < 3 ? 0.0f : -(float)i / 8);
    add_i32(&b, (int32_t)strlen(pieces[i]));
    add(&b, pieces[i], strlen(pieces[i]));
  }
  put("tokenizer", name, b.b, b.n);
}

static void make_tokenizer(void) {
  const char *small[] = {"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", "ab", " ab", "<0x41>"};
  tokenizer("small", small, 9, "abc ab");
  /* llama2.c's layout: <unk> <s> </s>, the 256 byte tokens, then pieces and merges */
  static char bytes[256][7];
  const char *big[300];
  int n = 0;
  big[n++] = "<unk>", big[n++] = "\n<s>\n", big[n++] = "\n</s>\n";
  for (int i = 0; i < 256; i++) {
    snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
    big[n++] = bytes[i];
  }
  const char *more[] = {" ", "a", "b", "c", "h", "e", "l", "o", "ab", " ab", "abc", "he", "ll", "hell", "hello",
                        " hello", "\xc3\xa9", "\xc3\xa9t\xc3\xa9"};
  for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) big[n++] = more[i];
  tokenizer("bytes", big, n, "hello abc \xc3\xa9t\xc3\xa9 \x01z\xf0\x9f\x98\x80");
}

/* ---- tokenizers from GGUF metadata: text length, text, then a GGUF file of tokenizer.ggml.* keys -------------- */

static void add_u64(buf *b, uint64_t v);
static void tg_str(buf *b, const char *s) { add_u64(b, strlen(s)), add(b, s, strlen(s)); }
static void tg_key(buf *b, const char *k, uint32_t type) { tg_str(b, k), add(b, &type, 4); }
static void tg_arr(buf *b, const char *k, uint32_t et, uint64_t n) { tg_key(b, k, 9), add(b, &et, 4), add_u64(b, n); }

/* GPT-2's spelling of byte v (printable bytes as themselves, the other 68 as U+0100 ...) into s, NUL-terminated */
static void gpt2_char(int v, char *s) {
  bool printable = (v >= 33 && v <= 126) || (v >= 161 && v <= 172) || v >= 174;
  int cp = printable ? v : v <= 32 ? 256 + v : v <= 160 ? 256 + 33 + (v - 127) : 256 + 67;
  if (cp < 0x80) s[0] = (char)cp, s[1] = 0;
  else s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 0x3F)), s[2] = 0;
}

static void make_tokenizer_gguf(void) {
  /* byte-level BPE (llama3's pre-tokenizer): the 256 bytes, a few merges, two control tokens */
  buf b = {0};
  const char *text = "Hello  world's 123\n<|eot_id|>\xc3\xa9!";
  add_u8(&b, (uint8_t)strlen(text)), add(&b, text, strlen(text));
  add(&b, "GGUF", 4), add_i32(&b, 3), add_u64(&b, 0), add_u64(&b, 7);
  tg_key(&b, "tokenizer.ggml.model", 8), tg_str(&b, "gpt2");
  tg_key(&b, "tokenizer.ggml.pre", 8), tg_str(&b, "llama-bpe");
  const char *more[] = {"He", "ll", "Hell", "Hello", "\xc4\xa0w", "\xc4\xa0wo", "<|begin_of_text|>", "<|eot_id|>"};
  const char *merges[] = {"H e", "l l", "He ll", "Hell o", "\xc4\xa0 w", "\xc4\xa0w o"};
  tg_arr(&b, "tokenizer.ggml.tokens", 8, 256 + 8);
  for (int v = 0; v < 256; v++) {
    char s[4];
    gpt2_char(v, s);
    tg_str(&b, s);
  }
  for (int i = 0; i < 8; i++) tg_str(&b, more[i]);
  tg_arr(&b, "tokenizer.ggml.token_type", 5, 256 + 8);
  for (int i = 0; i < 256 + 8; i++) add_i32(&b, i >= 256 + 6 ? 3 : 1);
  tg_arr(&b, "tokenizer.ggml.merges", 8, 6);
  for (int i = 0; i < 6; i++) tg_str(&b, merges[i]);
  tg_key(&b, "tokenizer.ggml.bos_token_id", 4), add_i32(&b, 256 + 6);
  tg_key(&b, "tokenizer.ggml.eos_token_id", 4), add_i32(&b, 256 + 7);
  put("tokenizer_gguf", "bpe", b.b, b.n);
  /* SentencePiece-style: <unk> <s> </s>, byte tokens for a few bytes, pieces with "▁" */
  b.n = 0;
  text = "hello abc \xc3\xa9t\xc3\xa9 \x01z";
  add_u8(&b, (uint8_t)strlen(text)), add(&b, text, strlen(text));
  add(&b, "GGUF", 4), add_i32(&b, 3), add_u64(&b, 0), add_u64(&b, 6);
  tg_key(&b, "tokenizer.ggml.model", 8), tg_str(&b, "llama");
  const char *pieces[] = {"<unk>", "<s>", "</s>", "<0x01>", "<0xC3>", "<0xA9>", "\xe2\x96\x81", "a", "b", "c", "h",
                          "e", "l", "o", "ab", "\342\226\201ab", "abc", "he", "ll", "hell", "hello",
                          "\xe2\x96\x81hello", "<|im_end|>"};
  int np = (int)(sizeof pieces / sizeof pieces[0]);
  tg_arr(&b, "tokenizer.ggml.tokens", 8, (uint64_t)np);
  for (int i = 0; i < np; i++) tg_str(&b, pieces[i]);
  tg_arr(&b, "tokenizer.ggml.scores", 6, (uint64_t)np);
  for (int i = 0; i < np; i++) add_f32(&b, i < 6 ? 0.0f : -(float)i / 8);
  tg_arr(&b, "tokenizer.ggml.token_type", 5, (uint64_t)np);
  for (int i = 0; i < np; i++) add_i32(&b, i == 0 ? 2 : i < 3 || i == np - 1 ? 3 : i < 6 ? 6 : 1);
  tg_key(&b, "tokenizer.ggml.bos_token_id", 4), add_i32(&b, 1);
  tg_key(&b, "tokenizer.ggml.eos_token_id", 4), add_i32(&b, 2);
  put("tokenizer_gguf", "spm", b.b, b.n);
}

/* ---- GGUF: "GGUF", version, tensor and key counts, keys and values, tensor infos, aligned data -------------- */

static void add_u64(buf *b, uint64_t v) { add(b, &v, 8); }
static void gguf_str(buf *b, const char *s) { add_u64(b, strlen(s)), add(b, s, strlen(s)); }
static void gguf_key(buf *b, const char *k, uint32_t type) { gguf_str(b, k), add(b, &type, 4); }
static void gguf_pad(buf *b, size_t a) { while (b->n % a) add_u8(b, 0); }

/* tensors: name, ggml type, ne[0], ne[1], bytes (deterministic filler with finite float16 scales) */
typedef struct gguf_t { const char *name; uint32_t type; uint64_t ne0, ne1, nbytes; } gguf_t;

static void gguf_file(const char *name, uint32_t version, uint32_t align, const gguf_t *ts, int nt) {
  buf b = {0};
  add(&b, "GGUF", 4), add(&b, &version, 4), add_u64(&b, (uint64_t)nt), add_u64(&b, 8);
  gguf_key(&b, "general.architecture", 8), gguf_str(&b, "llama");
  gguf_key(&b, "general.alignment", 4), add(&b, &align, 4);
  gguf_key(&b, "a.i8", 1), add_u8(&b, 0x80);
  gguf_key(&b, "a.u16", 2), add_u8(&b, 1), add_u8(&b, 2);
  gguf_key(&b, "a.f64", 12), add_u64(&b, 0x3ff0000000000000ull);
  gguf_key(&b, "a.bool", 7), add_u8(&b, 1);
  gguf_key(&b, "a.tokens", 9), add_i32(&b, 8), add_u64(&b, 3), gguf_str(&b, "<s>"), gguf_str(&b, ""), gguf_str(&b, "\xc4\xa0" "a");
  gguf_key(&b, "a.scores", 9), add_i32(&b, 6), add_u64(&b, 2), add_f32(&b, -1.5f), add_f32(&b, 0.25f);
  uint64_t off = 0;
  for (int i = 0; i < nt; i++) {
    gguf_str(&b, ts[i].name), add_i32(&b, ts[i].ne1 ? 2 : 1), add_u64(&b, ts[i].ne0);
    if (ts[i].ne1) add_u64(&b, ts[i].ne1);
    add(&b, &ts[i].type, 4), add_u64(&b, off);
    off = (off + ts[i].nbytes + align - 1) / align * align;
  }
  gguf_pad(&b, align);
  for (int i = 0; i < nt; i++) {
    size_t start = b.n;
    for (uint64_t k = 0; k < ts[i].nbytes; k++) add_u8(&b, (uint8_t)(k * 37 + 11));
    /* float16 scales of 0.5 where a block format keeps them (Q6_K's last; the others' first two) */
    uint64_t bs = ts[i].type == 2 ? 18 : ts[i].type == 8 ? 34 : ts[i].type == 12 ? 144 : ts[i].type == 14 ? 210 : 0;
    for (uint64_t o = 0; bs && o < ts[i].nbytes; o += bs) {
      size_t at = start + (size_t)o + (ts[i].type == 14 ? 208 : 0);
      b.b[at] = 0x00, b.b[at + 1] = 0x38;
      if (ts[i].type == 12) b.b[at + 2] = 0x00, b.b[at + 3] = 0x38;
    }
    gguf_pad(&b, align);
  }
  put("gguf", name, b.b, b.n);
}

static void make_gguf(void) {
  const gguf_t plain[] = {{"w", 0, 3, 2, 24}, {"h", 1, 4, 0, 8}, {"i", 26, 2, 0, 8}};
  gguf_file("plain", 3, 32, plain, 3);
  const gguf_t quant[] = {{"q4", 2, 32, 2, 36}, {"q8", 8, 64, 0, 68}, {"k4", 12, 256, 0, 144}, {"k6", 14, 256, 0, 210}};
  gguf_file("quant", 3, 32, quant, 4);
  const gguf_t packed[] = {{"b", 30, 3, 0, 6}, {"f", 0, 1, 0, 4}};
  gguf_file("packed-v2", 2, 1, packed, 2);
}

/* ---- GGUF language models (fuzz_llm_gguf): the smallest files tg_llm_from_gguf accepts ---------------------- */

/* one model tensor: name, ggml type (0 F32, 1 F16, 2 Q4_0, 8 Q8_0), ne0 (the row), ne1 (rows; 0: 1-d) */
typedef struct llm_t { char name[40]; uint32_t type; uint64_t ne0, ne1; } llm_t;

static uint64_t llm_bytes(const llm_t *t) {
  uint64_t n = t->ne0 * (t->ne1 ? t->ne1 : 1);
  return t->type == 0 ? 4 * n : t->type == 1 ? 2 * n : t->type == 2 ? n / 32 * 18 : n / 32 * 34;
}

/* a model of architecture arch: dim d, FFN h, one block, 2 heads, 1 KV head, vocab v, context 8; the embedding
 * (tied: no output.weight) of type emb, the block's matrices of type w; qwen2 gets its q/k/v biases */
static void llm_gguf(const char *name, const char *arch, uint64_t d, uint64_t h, uint64_t v, uint32_t emb, uint32_t w) {
  uint64_t kv = d / 2;
  bool qwen2 = !strcmp(arch, "qwen2");
  llm_t ts[16] = {{"token_embd.weight", emb, d, v}, {"output_norm.weight", 0, d, 0}, {"blk.0.attn_norm.weight", 0, d, 0},
                  {"blk.0.attn_q.weight", w, d, d}, {"blk.0.attn_k.weight", w, d, kv}, {"blk.0.attn_v.weight", w, d, kv},
                  {"blk.0.attn_output.weight", w, d, d}, {"blk.0.ffn_norm.weight", 0, d, 0},
                  {"blk.0.ffn_gate.weight", w, d, h}, {"blk.0.ffn_down.weight", w, h, d}, {"blk.0.ffn_up.weight", w, d, h},
                  {"blk.0.attn_q.bias", 0, d, 0}, {"blk.0.attn_k.bias", 0, kv, 0}, {"blk.0.attn_v.bias", 0, kv, 0}};
  int nt = qwen2 ? 14 : 11;
  uint32_t version = 3, align = 32, u32 = 4, f32 = 6;
  buf b = {0};
  add(&b, "GGUF", 4), add(&b, &version, 4), add_u64(&b, (uint64_t)nt), add_u64(&b, 9);
  gguf_key(&b, "general.architecture", 8), gguf_str(&b, arch);
  const char *ks[] = {"embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                      "attention.head_count_kv", "context_length"};
  uint32_t vs[] = {(uint32_t)d, (uint32_t)h, 1, 2, 1, 8};
  char key[96];
  for (int i = 0; i < 6; i++) snprintf(key, sizeof key, "%s.%s", arch, ks[i]), gguf_key(&b, key, u32), add(&b, &vs[i], 4);
  snprintf(key, sizeof key, "%s.rope.freq_base", arch), gguf_key(&b, key, f32), add_f32(&b, 10000);
  snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch), gguf_key(&b, key, f32), add_f32(&b, 1e-5f);
  uint64_t off = 0;
  for (int i = 0; i < nt; i++) {
    gguf_str(&b, ts[i].name), add_i32(&b, ts[i].ne1 ? 2 : 1), add_u64(&b, ts[i].ne0);
    if (ts[i].ne1) add_u64(&b, ts[i].ne1);
    add(&b, &ts[i].type, 4), add_u64(&b, off);
    off = (off + llm_bytes(&ts[i]) + align - 1) / align * align;
  }
  gguf_pad(&b, align);
  for (int i = 0; i < nt; i++) {
    uint64_t n = ts[i].ne0 * (ts[i].ne1 ? ts[i].ne1 : 1), bs = ts[i].type == 2 ? 18 : 34;
    if (ts[i].type == 0)   /* norms near 1, the rest small */
      for (uint64_t k = 0; k < n; k++) add_f32(&b, (ts[i].ne1 ? 0.0f : 1.0f) + (float)((int64_t)((k * 7919) % 201) - 100) / 400.0f);
    else if (ts[i].type == 1)
      for (uint64_t k = 0; k < n; k++) add_u8(&b, (uint8_t)(k * 37)), add_u8(&b, (uint8_t)(0x2c + k % 8));
    else
      for (uint64_t o = 0; o < n / 32; o++) {   /* a float16 scale of 1/64, then the quants */
        add_u8(&b, 0x00), add_u8(&b, 0x24);
        for (uint64_t k = 2; k < bs; k++) add_u8(&b, (uint8_t)(k * 37 + o * 11));
      }
    gguf_pad(&b, align);
  }
  put("llm_gguf", name, b.b, b.n);
}

static void make_llm_gguf(void) {
  llm_gguf("llama-f32", "llama", 8, 16, 10, 0, 0);
  llm_gguf("qwen2-f16", "qwen2", 8, 12, 6, 1, 1);
  llm_gguf("llama-q8-q4", "llama", 32, 32, 5, 8, 2);
}

/* ---- npy: magic, version, header length, a dict padded with spaces to 64 bytes, the elements ----------- */

static void npy(const char *name, int major, const char *dict, const void *data, size_t n) {
  buf b = {0};
  size_t pre = major == 1 ? 10 : 12, hl = strlen(dict), total = (pre + hl + 1 + 63) / 64 * 64;
  add(&b, "\x93NUMPY", 6);
  add_u8(&b, (uint8_t)major);
  add_u8(&b, 0);
  for (size_t i = 0; i < pre - 8; i++) add_u8(&b, (uint8_t)((total - pre) >> (8 * i)));
  add(&b, dict, hl);
  while (b.n < total - 1) add_u8(&b, ' ');
  add_u8(&b, '\n');
  add(&b, data, n);
  put("npy", name, b.b, b.n);
}

static void make_npy(void) {
  float f[6] = {-1.5f, 0, 0.25f, 1e-3f, 65504, 7};
  uint8_t be[12] = {0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3};
  npy("float32", 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
  npy("be_fortran", 1, "{'descr': '>i4', 'fortran_order': True, 'shape': (3, 1), }", be, sizeof be);
  npy("v2", 2, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", f, 6);
  npy("v3_bool_scalar", 3, "{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\1", 1);
  npy("empty", 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 0, 5), }", NULL, 0);
}

/* ---- onnx: small models (the runner's own operators) and TensorProto files ---------------------------------- */

static void put_pbw(const char *name, pbw *w) {
  put("onnx", name, w->b, w->n);
  pbw_free(w);
}

/* a graph with one output Y of elem type, after the nodes already in g */
static void finish_graph(pbw *g, int elem) {
  pbw y = onnx_w_value("Y", elem, -1, NULL, NULL);
  pbw_msg(g, ONNX_G_OUTPUT, &y);
}

static pbw const_branch(int64_t v) {
  pbw g = {0}, n = onnx_w_node("Constant", (const char *[]){NULL, "Y", NULL});
  onnx_w_attr_int(&n, "value_int", v);
  pbw_msg(&g, ONNX_G_NODE, &n);
  finish_graph(&g, ONNX_INT64);
  return g;
}

static void make_onnx(void) {
  static const char *const names[] = {"N", NULL};
  /* Y = Identity(X), X float (N, 3) */
  pbw g = {0}, n = onnx_w_node("Identity", (const char *[]){"X", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw_str(&g, ONNX_G_NAME, "g");
  pbw x = onnx_w_value("X", ONNX_FLOAT, 2, (int64_t[]){-1, 3}, names);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  finish_graph(&g, ONNX_FLOAT);
  pbw m = onnx_w_model(13, &g);
  put_pbw("identity.onnx", &m);
  /* initializers: raw_data, float_data, int64_data, int32_data (float16 bits), double_data */
  float f[4] = {1, -2, 0.5f, 3};
  const char *const io[] = {"A", "B", "C", "D", "E", NULL, "Y", NULL};
  g = (pbw){0};
  n = onnx_w_node("Identity", (const char *[]){"A", NULL, "Y", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  (void)io;
  pbw t = onnx_w_tensor("A", ONNX_FLOAT, 2, (int64_t[]){2, 2}, f, sizeof f);
  pbw_msg(&g, ONNX_G_INIT, &t);
  t = onnx_w_tensor("B", ONNX_FLOAT, 1, (int64_t[]){2}, NULL, 0);
  pbw_bytes(&t, 4, f, 8);
  pbw_msg(&g, ONNX_G_INIT, &t);
  t = onnx_w_tensor("C", ONNX_INT64, 1, (int64_t[]){2}, NULL, 0);
  pbw_int(&t, 7, -5);
  pbw_int(&t, 7, 1ll << 40);
  pbw_msg(&g, ONNX_G_INIT, &t);
  t = onnx_w_tensor("D", ONNX_FLOAT16, 1, (int64_t[]){1}, NULL, 0);
  pbw_int(&t, 5, 0x3c00);
  pbw_msg(&g, ONNX_G_INIT, &t);
  t = onnx_w_tensor("E", ONNX_DOUBLE, 0, NULL, NULL, 0);
  double d = 2.5;
  pbw_key(&t, 10, 1);
  pbw_raw(&t, &d, 8);
  pbw_msg(&g, ONNX_G_INIT, &t);
  finish_graph(&g, ONNX_FLOAT);
  m = onnx_w_model(13, &g);
  put_pbw("initializers.onnx", &m);
  /* Constant of every attribute kind, then If on a bool input */
  g = (pbw){0};
  n = onnx_w_node("Constant", (const char *[]){NULL, "K", NULL});
  onnx_w_attr_ints(&n, "value_ints", 3, (int64_t[]){1, 2, 3});
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("Constant", (const char *[]){NULL, "F", NULL});
  onnx_w_attr_float(&n, "value_float", 1.5f);
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("If", (const char *[]){"C", NULL, "Y", NULL});
  pbw tb = const_branch(1), eb = const_branch(2);
  onnx_w_attr_msg(&n, "then_branch", 5, &tb);
  onnx_w_attr_msg(&n, "else_branch", 5, &eb);
  pbw_msg(&g, ONNX_G_NODE, &n);
  pbw c = onnx_w_value("C", ONNX_BOOL, 0, NULL, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &c);
  finish_graph(&g, ONNX_INT64);
  m = onnx_w_model(16, &g);
  put_pbw("constant_if.onnx", &m);
  /* Loop: 3 iterations carrying V, scanning the iteration number */
  pbw body = {0};
  const char *bin[] = {"i", "ci", "vi"}, *bout[] = {"co", "vo", "s"};
  int bit[] = {ONNX_INT64, ONNX_BOOL, ONNX_FLOAT}, bot[] = {ONNX_BOOL, ONNX_FLOAT, ONNX_INT64};
  for (int k = 0; k < 3; k++) {
    n = onnx_w_node("Identity", (const char *[]){k == 0 ? "ci" : k == 1 ? "vi" : "i", NULL, bout[k], NULL});
    pbw_msg(&body, ONNX_G_NODE, &n);
  }
  for (int k = 0; k < 3; k++) {
    pbw v = onnx_w_value(bin[k], bit[k], -1, NULL, NULL), o = onnx_w_value(bout[k], bot[k], -1, NULL, NULL);
    pbw_msg(&body, ONNX_G_INPUT, &v);
    pbw_msg(&body, ONNX_G_OUTPUT, &o);
  }
  g = (pbw){0};
  n = onnx_w_node("Loop", (const char *[]){"M", "", "V", NULL, "Y", "S", NULL});
  onnx_w_attr_msg(&n, "body", 5, &body);
  pbw_msg(&g, ONNX_G_NODE, &n);
  int64_t three = 3;
  t = onnx_w_tensor("M", ONNX_INT64, 0, NULL, &three, 8);
  pbw_msg(&g, ONNX_G_INIT, &t);
  x = onnx_w_value("V", ONNX_FLOAT, 1, (int64_t[]){2}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  finish_graph(&g, ONNX_FLOAT);
  pbw so = onnx_w_value("S", ONNX_INT64, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &so);
  m = onnx_w_model(16, &g);
  put_pbw("loop.onnx", &m);
  /* sequences: X split into parts of K, one inserted again at P, joined back; its length as a second output */
  g = (pbw){0};
  n = onnx_w_node("SplitToSequence", (const char *[]){"X", "K", NULL, "S", NULL});
  onnx_w_attr_int(&n, "axis", 1);
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("SequenceAt", (const char *[]){"S", "P", NULL, "A", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("SequenceInsert", (const char *[]){"S", "A", "P", NULL, "T", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("SequenceErase", (const char *[]){"T", NULL, "U", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("ConcatFromSequence", (const char *[]){"U", NULL, "Y", NULL});
  onnx_w_attr_int(&n, "axis", 1);
  pbw_msg(&g, ONNX_G_NODE, &n);
  n = onnx_w_node("SequenceLength", (const char *[]){"U", NULL, "L", NULL});
  pbw_msg(&g, ONNX_G_NODE, &n);
  int64_t two = 2, minus_one = -1;
  t = onnx_w_tensor("K", ONNX_INT64, 0, NULL, &two, 8);
  pbw_msg(&g, ONNX_G_INIT, &t);
  t = onnx_w_tensor("P", ONNX_INT64, 0, NULL, &minus_one, 8);
  pbw_msg(&g, ONNX_G_INIT, &t);
  x = onnx_w_value("X", ONNX_FLOAT, 2, (int64_t[]){2, 5}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  finish_graph(&g, ONNX_FLOAT);
  pbw lo = onnx_w_value("L", ONNX_INT64, -1, NULL, NULL);
  pbw_msg(&g, ONNX_G_OUTPUT, &lo);
  m = onnx_w_model(13, &g);
  put_pbw("sequences.onnx", &m);
  /* TfIdfVectorizer over int64 tokens: unigrams and bigrams at distances 1 and 2 */
  g = (pbw){0};
  n = onnx_w_node("TfIdfVectorizer", (const char *[]){"X", NULL, "Y", NULL});
  onnx_w_attr_int(&n, "min_gram_length", 1);
  onnx_w_attr_int(&n, "max_gram_length", 2);
  onnx_w_attr_int(&n, "max_skip_count", 1);
  onnx_w_attr_string(&n, "mode", "TFIDF");
  onnx_w_attr_ints(&n, "ngram_counts", 2, (int64_t[]){0, 3});
  onnx_w_attr_ints(&n, "ngram_indexes", 5, (int64_t[]){4, 0, 1, 3, 2});
  onnx_w_attr_ints(&n, "pool_int64s", 7, (int64_t[]){0, 1, 2, 0, 1, 2, 2});
  pbw_msg(&g, ONNX_G_NODE, &n);
  x = onnx_w_value("X", ONNX_INT64, 2, (int64_t[]){2, 6}, NULL);
  pbw_msg(&g, ONNX_G_INPUT, &x);
  finish_graph(&g, ONNX_FLOAT);
  m = onnx_w_model(13, &g);
  put_pbw("tfidf.onnx", &m);
  /* TensorProto files as the backend tests' input_K.pb */
  t = onnx_w_tensor("x", ONNX_FLOAT, 2, (int64_t[]){2, 2}, f, sizeof f);
  put_pbw("tensor_float.pb", &t);
  t = onnx_w_tensor("y", ONNX_INT64, 1, (int64_t[]){3}, NULL, 0);
  pbw packed = {0};
  pbw_varint(&packed, 1);
  pbw_varint(&packed, (uint64_t)-1);
  pbw_varint(&packed, 300);
  pbw_msg(&t, 7, &packed);
  put_pbw("tensor_int64_packed.pb", &t);
  t = onnx_w_tensor("z", ONNX_BOOL, 1, (int64_t[]){2}, NULL, 0);
  pbw_int(&t, 5, 1);
  pbw_int(&t, 5, 0);
  put_pbw("tensor_bool.pb", &t);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  root = argv[1];
  if (mkdir(root, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "make_corpus: cannot make %s: %s\n", root, strerror(errno));
    return 1;
  }
  make_safetensors();
  make_idx();
  make_digits();
  make_llama();
  make_tokenizer();
  make_tokenizer_gguf();
  make_gguf();
  make_llm_gguf();
  make_npy();
  make_onnx();
  return ok ? 0 : 1;
}
