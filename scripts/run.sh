#!/usr/bin/env bash
# run.sh — the main job: builds tgc, fetches MNIST when it is missing (scripts/get_mnist.sh), and trains
# tinygrad's beautiful_mnist network in C (examples/mnist.c). The build shows its progress in one line
# (scripts/build.sh). Arguments go to the example (--steps, --batch, --lr, --seed, --data, --fashion, --out,
# --no-save, --eval; --help explains them). The last line is the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
if ! command -v pip3 >/dev/null 2>&1 && ! python3 -m pip --version >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pip
fi
case " $* " in
  *" --help "* | *" -h "*) ;;
  *" --data "*) ;;
  *" --fashion "*) scripts/get_mnist.sh --fashion ;;
  *) scripts/get_mnist.sh ;;
esac
exec ./build/examples/mnist "$@"
