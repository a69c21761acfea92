#!/usr/bin/env bash
# check_symbols.sh [LIBDIR [INCLUDEDIR]] — checks that libtg exports only its public API and that a user's
# program may use libtg's internal names for its own functions (defaults: build/ and include/, so it checks
# what `make` built; scripts/check_install.sh runs it on an installed copy).
#  1. every defined global symbol of libtg.so (dynamic table) and libtg.a starts with tg_
#  2. every function tg.h declares is defined and global in both
#  3. tests/link/user_program.c, which defines its own buffer_new, uop_new, tmp, ..., links statically and
#     dynamically, and both programs compute the right result and keep their own functions.
# Prints what it checked; exits non-zero on the first failed check.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
libdir="$(cd "${1:-$root/build}" && pwd)"
incdir="$(cd "${2:-$root/include}" && pwd)"
CC="${CC:-cc}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TG_CACHE="${TG_CACHE:-$tmp/cache}"

# Defined global symbols that may lack the tg_ prefix, one "name  reason" a line. None today.
exceptions=""

fail() { echo "FAIL: $*"; exit 1; }
allowed() { [ -n "$exceptions" ] && printf '%s\n' "$exceptions" | awk '{print $1}' | grep -qxF "$1"; }

check_list() {  # check_list WHAT FILE_WITH_NAMES
  local what="$1" names="$2" bad=()
  while read -r s; do
    case "$s" in tg_*) ;; *) allowed "$s" || bad+=("$s") ;; esac
  done < "$names"
  echo "  $what: $(wc -l < "$names") defined global symbols, ${#bad[@]} without the tg_ prefix"
  if [ ${#bad[@]} -gt 0 ]; then
    printf '    %s\n' "${bad[@]:0:40}"
    [ ${#bad[@]} -le 40 ] || echo "    ... and $(( ${#bad[@]} - 40 )) more"
    fail "$what exports internal names"
  fi
}

echo "== symbols of $libdir"
[ -f "$libdir/libtg.so" ] || fail "no $libdir/libtg.so"
[ -f "$libdir/libtg.a" ] || fail "no $libdir/libtg.a"
nm -D --defined-only "$libdir/libtg.so" | awk 'NF >= 3 {sub(/@.*/, "", $3); print $3}' | sort -u > "$tmp/so"
nm -g --defined-only "$libdir/libtg.a" | awk 'NF == 3 {print $3}' | sort -u > "$tmp/a"
check_list libtg.so "$tmp/so"
check_list libtg.a "$tmp/a"

# the functions tg.h declares: every "tg_name(" of the preprocessed header (comments and macros gone) but
# a return type before "(*" (a function pointer type)
$CC -E -P -I"$incdir" -x c "$incdir/tg.h" | grep -o '\btg_[A-Za-z0-9_]*[[:space:]]*([^*]' |
  sed 's/[[:space:]]*(.$//' | sort -u > "$tmp/api"
[ -s "$tmp/api" ] || fail "found no function declarations in $incdir/tg.h"
for lib in so a; do
  missing="$(comm -23 "$tmp/api" "$tmp/$lib")"
  [ -z "$missing" ] || fail "libtg.$lib lacks functions tg.h declares: $(tr "\n" " " <<< "$missing")"
done
extra="$(comm -13 "$tmp/api" "$tmp/so")"
[ -z "$extra" ] || fail "libtg.so exports tg_ names tg.h does not declare: $(tr "\n" " " <<< "$extra")"
echo "  libtg.so and libtg.a export exactly the $(wc -l < "$tmp/api") functions tg.h declares"

# a user's program that names its own functions as libtg's internals
src="$root/tests/link/user_program.c"
echo "== a program defining its own buffer_new, uop_new, tmp, ... ($src)"
# the libraries libtg.a needs, from the tg.pc beside it (-lmpi when built with MPI)
libs_private="$(cat "$libdir/pkgconfig/tg.pc" "$libdir/tg.pc" 2>/dev/null | sed -n 's/^Libs.private: //p' | head -1 || true)"
[ -n "$libs_private" ] || libs_private="-lz -ldl -lm -pthread"
if ! $CC -I"$incdir" -o "$tmp/static" "$src" "$libdir/libtg.a" $libs_private 2> "$tmp/static.log"; then
  head -n 8 "$tmp/static.log"
  fail "linking with libtg.a"
fi
echo "  static: linked with libtg.a"
"$tmp/static" || fail "the statically linked program"
$CC -I"$incdir" -o "$tmp/dynamic" "$src" -L"$libdir" -ltg -Wl,-rpath,"$libdir" -lm ||
  fail "linking with libtg.so"
readelf -d "$tmp/dynamic" | grep -q 'NEEDED.*libtg\.so' || fail "the dynamic program does not need libtg.so"
echo "  dynamic: linked with libtg.so ($(readelf -d "$tmp/dynamic" | sed -n 's/.*NEEDED.*\[\(libtg[^]]*\)\].*/\1/p'))"
"$tmp/dynamic" || fail "the dynamically linked program"
echo "symbols: all checks passed"
