#!/usr/bin/env bash
# Fails if a *_test.cc file in the tree is not named in some CMakeLists.txt.
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
missing=0
while IFS= read -r f; do
  b=$(basename "$f" .cc)
  if ! grep -rqs --include=CMakeLists.txt -w "$b" --exclude-dir=build --exclude-dir='build-*' .; then
    echo "not registered in any CMakeLists.txt: $f"
    missing=1
  fi
done < <(find . -name '*_test.cc' -not -path './build*' | sort)
if [[ $missing -ne 0 ]]; then exit 1; fi
echo "every *_test.cc is registered"
