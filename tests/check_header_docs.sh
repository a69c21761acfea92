#!/usr/bin/env bash
# check_header_docs.sh — fails when a function declared in include/tg.h (or the header given as $1) has no
# comment that documents it. Run from anywhere; .ci/run runs it after the README's test command.
#
# A function declaration is a statement at file level (outside comments, preprocessor lines and the
# __cplusplus guard) that has a parenthesis and does not start with `typedef`. It may span several lines.
# It counts as documented when one of these holds:
#   1. a comment is on one of its lines (usually to the right of it);
#   2. the line directly above its first line holds a comment and no code (the end of a comment block,
#      with no blank line between);
#   3. it is one of a layer's family, tg_X_init / tg_X_forward / tg_X_params / tg_X_free, and the run of
#      those declarations (nothing else between, not even a blank line) directly follows the
#      `typedef struct tg_X ...` that declares its struct, and that typedef is documented by rule 1 or 2:
#      the struct's comment, with the family contract stated once above the layers, covers the family.
# Nothing else documents a declaration: a comment above a group of other declarations covers only the
# first of them.
set -euo pipefail
header="${1:-$(dirname "$0")/../include/tg.h}"
[ -r "$header" ] || { echo "check_header_docs: cannot read $header" >&2; exit 2; }

awk -v file="$header" '
{
  line = $0
  n = length(line)
  code = ""; has_comment = 0
  i = 1
  while (i <= n) {
    c = substr(line, i, 1); c2 = substr(line, i, 2)
    if (in_comment) {
      has_comment = 1
      if (c2 == "*/") { in_comment = 0; i += 2; continue }
      i++; continue
    }
    if (c2 == "/*") { in_comment = 1; has_comment = 1; i += 2; continue }
    if (c2 == "//") { has_comment = 1; break }
    if (c == "\"") {  # a string literal (extern "C"): keep it whole
      j = i + 1
      while (j <= n && substr(line, j, 1) != "\"") j++
      code = code substr(line, i, j - i + 1); i = j + 1; continue
    }
    code = code c; i++
  }
  commented[NR] = has_comment
  stripped = code; gsub(/[ \t]+/, "", stripped)
  has_code = stripped != ""
  comment_only[NR] = has_comment && !has_code
  if (!has_code) next
  # preprocessor lines and their continuations; the C++ guard between #ifdef __cplusplus and #endif
  if (pp_cont || code ~ /^[ \t]*#/) {
    pp_cont = code ~ /\\[ \t]*$/
    if (code ~ /^[ \t]*#[ \t]*ifdef[ \t]+__cplusplus/) in_cxx = 1
    else if (in_cxx && code ~ /^[ \t]*#[ \t]*endif/) in_cxx = 0
    next
  }
  if (in_cxx) next
  if (!in_stmt) { nst++; in_stmt = 1; stmt_first[nst] = NR; stmt_text[nst] = "" }
  stmt_text[nst] = stmt_text[nst] " " code
  for (k = 1; k <= length(code); k++) {
    ch = substr(code, k, 1)
    if (ch == "{") depth++
    else if (ch == "}") depth--
    else if (ch == ";" && depth == 0) ends = 1
  }
  if (ends && depth == 0) { stmt_last[nst] = NR; in_stmt = 0 }
  ends = 0
}
END {
  # what each statement is: a function (its name), a struct typedef (its name), or something else
  for (s = 1; s <= nst; s++) {
    t = stmt_text[s]
    kind[s] = "other"
    if (t ~ /^[ \t]*typedef[ \t]+struct[ \t]+tg_[a-z0-9_]+/) {
      kind[s] = "struct"
      name[s] = t; sub(/^[ \t]*typedef[ \t]+struct[ \t]+/, "", name[s]); sub(/[^a-z0-9_].*$/, "", name[s])
    } else if (t !~ /^[ \t]*typedef/ && t ~ /\(/) {
      kind[s] = "function"
      name[s] = t; sub(/[ \t]*\(.*$/, "", name[s]); sub(/^.*[^A-Za-z0-9_]/, "", name[s])
    }
  }
  nfun = 0; bad = 0
  for (s = 1; s <= nst; s++) {
    if (kind[s] != "function") continue
    nfun++
    if (documented(s)) continue
    if (family_documented(s)) continue
    printf "%s:%d: %s has no comment (see tests/check_header_docs.sh for what counts)\n", file, stmt_first[s], name[s]
    bad++
  }
  if (bad) { printf "check_header_docs: %d of %d functions undocumented\n", bad, nfun; exit 1 }
  printf "check_header_docs: all %d functions in %s documented\n", nfun, file
}
# rules 1 and 2
function documented(s,   l) {
  for (l = stmt_first[s]; l <= stmt_last[s]; l++) if (commented[l]) return 1
  l = stmt_first[s] - 1
  return l >= 1 && comment_only[l]
}
# rule 3
function member(f, stem) {
  return f == stem "_init" || f == stem "_forward" || f == stem "_params" || f == stem "_free"
}
function family_documented(s,   stem, p) {
  if (name[s] !~ /^tg_[a-z0-9_]+_(init|forward|params|free)$/) return 0
  stem = name[s]; sub(/_(init|forward|params|free)$/, "", stem)
  p = s - 1
  while (p >= 1) {
    if (stmt_last[p] != stmt_first[p + 1] - 1) return 0    # a blank or comment line between
    if (kind[p] == "struct") return name[p] == stem && documented(p)
    if (kind[p] != "function" || !member(name[p], stem)) return 0
    p--
  }
  return 0
}
' "$header"
