#!/usr/bin/env bash
# deps.sh — installs what building and testing tgc needs on Debian, when it is missing.
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
# zlib: gzipped datasets (src/nn/data.c)
dpkg -s zlib1g-dev >/dev/null 2>&1 || need+=(zlib1g-dev)
# ld -r, objcopy, nm, readelf: the static library's private names and the symbol checks
command -v objcopy >/dev/null 2>&1 || need+=(binutils)
# scripts/check_install.sh builds a program with the installed tg.pc
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# the OpenCL device (src/runtime/opencl.c, loaded at run time): the ICD loader and PoCL, an OpenCL driver for the CPU
dpkg -s ocl-icd-libopencl1 >/dev/null 2>&1 || need+=(ocl-icd-libopencl1)
dpkg -s pocl-opencl-icd >/dev/null 2>&1 || need+=(pocl-opencl-icd)
# ONNX's backend test data (model.onnx + input/output .pb per test) that build/onnx_backend runs
dpkg -s libonnx-testdata >/dev/null 2>&1 || need+=(libonnx-testdata)
# Open MPI: the distributed layer (src/dist/mpi.c, linked when mpicc is found) and tests/mpi.sh's mpirun
dpkg -s libopenmpi-dev >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
if [ "${TG_WITH_CLANG:-0}" = 1 ] && ! command -v clang >/dev/null 2>&1; then need+=(clang); fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
