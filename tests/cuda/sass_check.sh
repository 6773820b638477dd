#!/usr/bin/env bash
# Compile checks of the GPU kernels (docs/design.md section 14), on the objects nvcc built (no GPU):
# every object has SASS for each target it is built for, the sparse GEMMs hold the sparse tensor-core
# MMA (IMMA.SP for INT8 on sm_80 and sm_90; QMMA.SP for E4M3 on sm_89), and no kernel
# touches local memory (LDL/STL: register spills or arrays indexed at run time).
# Usage: sass_check.sh CUOBJDUMP OBJECT...
set -euo pipefail
cuobjdump=$1; shift
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
for object in "$@"; do
  name=$(basename "$object")
  case $name in
    sparse_gemm_int8_sm80*.cu.o) archs="sm_80 sm_90"; mma="IMMA.SP" ;;
    sparse_gemm_e4m3_sm89.cu.o) archs="sm_89"; mma="QMMA.SP" ;;
    quant_lift.cu.o|epilogue.cu.o) archs="sm_80 sm_90"; mma="" ;;
    *) continue ;;
  esac
  sass=$("$cuobjdump" -sass "$object")
  for arch in $archs; do
    # The SASS of one target: from its "arch = sm_XX" line to the next target's.
    section=$(awk -v a="arch = $arch" '/^arch = /{on = ($0 == a)} on' <<<"$sass")
    if [ -z "$section" ]; then fail "$name has no $arch SASS"; continue; fi
    if [ -n "$mma" ]; then
      count=$(grep -c "$mma" <<<"$section" || true)
      if [ "$count" -eq 0 ]; then fail "$name $arch: no $mma"; else echo "ok: $name $arch: $count $mma"; fi
    fi
    local_ops=$(grep -cE '\b(LDL|STL)(\.|\b)' <<<"$section" || true)
    if [ "$local_ops" -ne 0 ]; then fail "$name $arch: $local_ops local-memory instructions (spills)"; else echo "ok: $name $arch: no local memory"; fi
  done
done
[ "$#" -gt 0 ] || fail "no objects given"
echo "$failures failed"
[ "$failures" -eq 0 ]
