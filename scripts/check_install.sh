#!/usr/bin/env bash
# check_install.sh — installs tgc as a user would and builds a program against the installed copy only:
#  1. `make install PREFIX=<tmp>/p`: the files, the symlinks libtg.so -> libtg.so.0 -> libtg.so.0.X.Y, the
#     SONAME libtg.so.0, and a tg.pc whose prefix is <tmp>/p and whose version is tg.h's
#  2. `make install DESTDIR=<tmp>/stage PREFIX=/opt/tg` stages under DESTDIR with a tg.pc that says /opt/tg
#  3. tests/link/user_program.c, copied out of the tree, built with `pkg-config --cflags --libs tg` (run with
#     LD_LIBRARY_PATH) and with `pkg-config --static --cflags --libs tg` (libtg.a), both run and checked
#  4. scripts/check_symbols.sh on the installed libraries (exported names, a program's own buffer_new)
#  5. `make uninstall` removes what install put there
# Prints each check; exits non-zero on the first failure. BUILD and CC are passed to make.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
CC="${CC:-cc}"
BUILD="${BUILD:-build}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export TG_CACHE="${TG_CACHE:-$tmp/cache}"

fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "  ok: $*"; }
version_part() { sed -n "s/^#define TG_VERSION_$1  *\([0-9][0-9]*\) *$/\1/p" include/tg.h; }
major="$(version_part MAJOR)"
version="$major.$(version_part MINOR).$(version_part PATCH)"
[ -n "$major" ] && [ "$version" != "$major.." ] || fail "cannot read TG_VERSION_* from include/tg.h"
command -v pkg-config >/dev/null || fail "pkg-config is not installed (scripts/deps.sh installs it)"

prefix="$tmp/p"
echo "== make install PREFIX=$prefix"
make -s -j2 CC="$CC" BUILD="$BUILD" install PREFIX="$prefix" > "$tmp/install.log" 2>&1 ||
  { tail -n 20 "$tmp/install.log"; fail "make install"; }
lib="$prefix/lib"
for f in include/tg.h lib/libtg.a "lib/libtg.so.$version" lib/pkgconfig/tg.pc; do
  [ -f "$prefix/$f" ] && [ ! -L "$prefix/$f" ] || fail "$prefix/$f is not an installed file"
done
ok "installed include/tg.h, lib/libtg.a, lib/libtg.so.$version, lib/pkgconfig/tg.pc"
[ "$(readlink "$lib/libtg.so.$major")" = "libtg.so.$version" ] || fail "libtg.so.$major does not link to libtg.so.$version"
[ "$(readlink "$lib/libtg.so")" = "libtg.so.$major" ] || fail "libtg.so does not link to libtg.so.$major"
ok "symlinks libtg.so -> libtg.so.$major -> libtg.so.$version"
soname="$(readelf -d "$lib/libtg.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')"
[ "$soname" = "libtg.so.$major" ] || fail "SONAME is '$soname', not libtg.so.$major"
ok "SONAME $soname"

export PKG_CONFIG_PATH="$lib/pkgconfig"
pc_prefix="$(pkg-config --variable=prefix tg)"
[ "$pc_prefix" = "$prefix" ] || fail "tg.pc says prefix=$pc_prefix, not $prefix"
pc_version="$(pkg-config --modversion tg)"
[ "$pc_version" = "$version" ] || fail "tg.pc says version $pc_version, tg.h $version"
ok "tg.pc: prefix=$pc_prefix, version $pc_version"

echo "== make install DESTDIR=$tmp/stage PREFIX=/opt/tg"
make -s -j2 CC="$CC" BUILD="$BUILD" install DESTDIR="$tmp/stage" PREFIX=/opt/tg > "$tmp/stage.log" 2>&1 ||
  { tail -n 20 "$tmp/stage.log"; fail "make install DESTDIR=..."; }
[ -f "$tmp/stage/opt/tg/lib/libtg.so.$version" ] && [ -L "$tmp/stage/opt/tg/lib/libtg.so" ] &&
  [ -f "$tmp/stage/opt/tg/include/tg.h" ] || fail "DESTDIR install is incomplete"
grep -qx 'prefix=/opt/tg' "$tmp/stage/opt/tg/lib/pkgconfig/tg.pc" || fail "staged tg.pc does not say prefix=/opt/tg"
ok "staged under DESTDIR, tg.pc says prefix=/opt/tg"

echo "== a program built outside the tree with pkg-config (tests/link/user_program.c)"
mkdir "$tmp/user"
cp tests/link/user_program.c "$tmp/user/main.c"
cd "$tmp/user"
# dynamic: exactly what pkg-config says; the loader finds libtg.so.$major through LD_LIBRARY_PATH
flags="$(pkg-config --cflags --libs tg)"
echo "  cc main.c $flags"
$CC -o dynamic main.c $flags || fail "building with pkg-config --cflags --libs tg"
needed="$(readelf -d dynamic | sed -n 's/.*(NEEDED).*\[\(libtg[^]]*\)\].*/\1/p')"
[ "$needed" = "libtg.so.$major" ] || fail "the dynamic program needs '$needed', not libtg.so.$major"
LD_LIBRARY_PATH="$lib" ./dynamic > dynamic.out || { cat dynamic.out; fail "the dynamically linked program"; }
sed 's/^/    /' dynamic.out
ok "dynamic build needs $needed and runs"
# static: pkg-config --static adds Libs.private; -l:libtg.a picks the archive where libtg.so sits beside it
flags="$(pkg-config --static --cflags --libs tg | sed 's/-ltg\b/-l:libtg.a/')"
echo "  cc main.c $flags"
$CC -o static main.c $flags || fail "building with pkg-config --static --cflags --libs tg"
! readelf -d static | grep -q 'NEEDED.*libtg' || fail "the static program still needs libtg.so"
./static > static.out || { cat static.out; fail "the statically linked program"; }
sed 's/^/    /' static.out
ok "static build needs no libtg.so and runs"
cd "$root"

"$root/scripts/check_symbols.sh" "$lib" "$prefix/include" > "$tmp/symbols.log" ||
  { cat "$tmp/symbols.log"; fail "scripts/check_symbols.sh on the installed libraries"; }
grep -v '^ok \|^     ' "$tmp/symbols.log"

echo "== make uninstall PREFIX=$prefix"
make -s CC="$CC" BUILD="$BUILD" uninstall PREFIX="$prefix" > /dev/null
left="$(find "$prefix" \( -type f -o -type l \) | sed "s|^$prefix/||")"
[ -z "$left" ] || fail "uninstall left: $left"
ok "nothing left but empty folders"
echo "install: all checks passed"
