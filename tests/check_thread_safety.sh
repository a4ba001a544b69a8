#!/usr/bin/env bash
# Shows that clang's thread-safety analysis is on for real (issue 14): compiles
# tests/thread_safety/probe.cc with -Wthread-safety -Werror, once as is (it must compile)
# and once with an access to a GUARDED_BY member without its lock (it must be rejected).
# Skips (exit 0, saying so) without clang++.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cxx=${NOVA_CLANGXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "thread-safety check skipped: $cxx not found"
  exit 0
fi
flags=(-std=c++20 -fsyntax-only -Wthread-safety -Werror -I "$root")
if ! "$cxx" "${flags[@]}" "$root/tests/thread_safety/probe.cc"; then
  echo "thread-safety check: the correctly locked probe does not compile"
  exit 1
fi
if out=$("$cxx" "${flags[@]}" -DNOVA_PROBE_UNLOCKED "$root/tests/thread_safety/probe.cc" 2>&1); then
  echo "thread-safety check: an unlocked write to a GUARDED_BY member was not rejected"
  exit 1
fi
if [[ "$out" != *"requires holding mutex"* ]]; then
  echo "thread-safety check: rejected, but not by the analysis:"
  echo "$out"
  exit 1
fi
echo "thread-safety check: the analysis rejects an unlocked access to a GUARDED_BY member"
