#!/usr/bin/env bash
# Fails if a class or struct of our own code (common, stoc, logc, ltc, coordinator, client;
# not tests or benchmarks) has more than 25 non-static data members (issue 14). The work is
# done by check_class_size.py with clang's parser (libclang); this finds a Python that has
# its bindings (Debian: python3-clang-14, for /usr/bin/python3).
#
#   tests/check_class_size.sh [ROOT [BUILD_DIR]]  # the tree at ROOT (default: this checkout),
#                                                 # with BUILD_DIR/compile_commands.json's flags
#   tests/check_class_size.sh --self-test         # plants classes in a scratch tree and checks
#                                                 # what is reported
# Options after the arguments: --verbose (also lists every class over 15), --max=N.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=""
for candidate in /usr/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import clang.cindex' >/dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [[ -z "$python" ]]; then
  echo "check_class_size: no Python with libclang's bindings: install python3-clang-14" >&2
  exit 2
fi

if [[ "${1:-}" == "--self-test" ]]; then
  exec "$python" "$here/check_class_size.py" --self-test
fi
root="${1:-$(dirname "$here")}"
shift || true
exec "$python" "$here/check_class_size.py" "$root" "$@"
