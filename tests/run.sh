#!/usr/bin/env bash
# Installs what is missing, builds (incrementally) and runs the whole test suite with ctest.
# Exits non-zero on any failure.
#
#   ./tests/run.sh                  # everything, in build/
#   NOVA_SANITIZE=address,undefined ./tests/run.sh
#                                   # unit tests and fuzzers under ASan+UBSan (clang, libFuzzer),
#                                   # in build-sanitize-address-undefined/
#   NOVA_SANITIZE=thread ./tests/run.sh
#                                   # the same under ThreadSanitizer (tests/tsan.supp), in
#                                   # build-sanitize-thread/; CI runs all three
#   ./tests/run.sh -R transport     # extra arguments go to ctest
#
# Environment: NOVA_BUILD_DIR overrides the build directory; NOVA_TEST_JOBS the number of
# tests run at once (default: number of cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

./deploy/install_deps.sh --quiet

sanitize=${NOVA_SANITIZE:-}
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
ctest_args=()
if [[ -n "$sanitize" ]]; then
  build_dir=${NOVA_BUILD_DIR:-build-sanitize-${sanitize//,/-}}
  # clang: libFuzzer drives the fuzz targets; only unit tests (and fuzzers) are built.
  cmake_args+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
               -DNOVA_SANITIZE="$sanitize" -DNOVA_UNIT_TESTS_ONLY=ON -DNOVA_BUILD_BENCHMARKS=OFF)
  ctest_args+=(-L unit)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$root/tests/tsan.supp:halt_on_error=1}
else
  build_dir=${NOVA_BUILD_DIR:-build}
fi

echo "== configure ($build_dir)"
cmake -S . -B "$build_dir" "${cmake_args[@]}" >/dev/null
echo "== build"
cmake --build "$build_dir" -j "$(nproc)"
echo "== test"
ctest --test-dir "$build_dir" --output-on-failure -j "${NOVA_TEST_JOBS:-$(nproc)}" \
  "${ctest_args[@]}" "$@"
