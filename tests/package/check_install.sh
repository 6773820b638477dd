#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, then builds and runs a consumer against it twice:
# with CMake's find_package(nmkit) and with pkg-config. Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
prefix=$(mktemp -d "${TMPDIR:-/tmp}/nmkit_install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/nmkit/nmkit.h"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$source/tests/package/consumer" -B "$prefix/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$prefix/consumer" -j 2 >/dev/null
"$prefix/consumer/consumer" "$prefix"
libdir=$(dirname "$(find "$prefix" -name nmkit.pc | head -1)")
# shellcheck disable=SC2046
c++ -O1 "$source/tests/package/consumer/main.cc" -o "$prefix/consumer_pc" \
    $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs nmkit)
"$prefix/consumer_pc" "$prefix"
