#!/usr/bin/env bash
# Fails on an #include that goes against the allowed dependencies between the folders of the
# tree (docs/architecture.md "Dependencies"). Dependencies go only downward:
#
#   common <- stoc/client, logc/client <- ltc/engine <- ltc/server
#   stoc/server, logc/server: common and their own client side only
#   coordinator: common only; client: common, coordinator, ltc/protocol
#
#   tests/check_layering.sh [ROOT]      # checks the tree at ROOT (default: this checkout)
#   tests/check_layering.sh --self-test # plants an upward include in a scratch tree and
#                                       # checks that it is reported
set -euo pipefail

# folder: the folders its non-test sources may include (besides itself; standard and
# third-party headers are not checked). The longest matching folder applies.
allowed_table() {
  cat <<'TABLE'
common:             common
coordinator:        common
stoc/client:        common
stoc/server:        common stoc/client
logc/client:        common
logc/server:        common logc/client
ltc/protocol:       common
ltc/engine:         common stoc/client logc/client
ltc/server:         common coordinator stoc/client logc/client ltc/protocol ltc/engine
client:             common coordinator ltc/protocol
benchmarks:         *
tests:              *
TABLE
}
# Daemon entry points (*_main.cc) also join the cluster through the coordinator's store.
main_extra="coordinator"
# Tests, fuzzers and test helpers may also run peers in-process and drive through the client.
test_extra="stoc/server logc/server client tests"

folder_of() {  # the table's folder for a path, longest prefix first
  local path=$1 best=""
  while read -r f _; do
    f=${f%:}
    if [[ "$path" == "$f"/* && ${#f} -gt ${#best} ]]; then best=$f; fi
  done < <(allowed_table)
  echo "$best"
}

allowed_for() {
  allowed_table | awk -v f="$1:" '$1 == f { $1 = ""; print }'
}

check_tree() {
  local root=$1 bad=0 n=0
  cd "$root"
  while IFS= read -r file; do
    local from; from=$(folder_of "$file")
    if [[ -z "$from" ]]; then
      echo "layering: $file is in no folder of the table (tests/check_layering.sh)"
      bad=1
      continue
    fi
    local allowed; allowed="$from $(allowed_for "$from")"
    [[ "$allowed" == *'*'* ]] && continue
    case "$file" in
      *_main.cc) allowed="$allowed $main_extra" ;;
      *_test.cc|*_fuzzer.cc|*test_util*) allowed="$allowed $test_extra" ;;
    esac
    while IFS= read -r inc; do
      case "$inc" in common/*|coordinator/*|stoc/*|logc/*|ltc/*|client/*|tests/*|benchmarks/*) ;;
        *) continue ;;  # a third-party header written with quotes
      esac
      n=$((n + 1))
      local to; to=$(folder_of "$inc")
      local ok=0
      for a in $allowed; do
        if [[ "$to" == "$a" || "$inc" == "$a"/* ]]; then ok=1; break; fi
      done
      if [[ $ok -eq 0 ]]; then
        echo "layering: $file includes \"$inc\": $from may not depend on ${to:-$inc}"
        bad=1
      fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
  done < <(find common coordinator stoc logc ltc client -type f \( -name '*.h' -o -name '*.cc' \) \
             2>/dev/null | sort)
  if [[ $bad -ne 0 ]]; then return 1; fi
  echo "layering: $n includes checked, none against the table"
}

self_test() {
  local scratch; scratch=$(mktemp -d /tmp/nova-layering.XXXXXX)
  trap 'rm -rf "$scratch"' RETURN
  mkdir -p "$scratch"/common/lsm "$scratch"/ltc/engine "$scratch"/stoc/server
  echo '#include "common/status.h"' > "$scratch/common/lsm/a.h"
  echo '#include "common/lsm/a.h"' > "$scratch/ltc/engine/b.h"
  if ! (check_tree "$scratch" >/dev/null); then
    echo "self-test: a tree with only downward includes was rejected"; return 1
  fi
  # Planted: the table layer including the engine, and a StoC server including the LTC.
  echo '#include "ltc/engine/b.h"' >> "$scratch/common/lsm/a.h"
  echo '#include "ltc/engine/b.h"' > "$scratch/stoc/server/c.cc"
  local out
  if out=$(check_tree "$scratch"); then
    echo "self-test: planted upward includes were not reported"; return 1
  fi
  for want in 'common/lsm/a.h includes "ltc/engine/b.h"' 'stoc/server/c.cc includes "ltc/engine/b.h"'; do
    if [[ "$out" != *"$want"* ]]; then
      echo "self-test: expected a report of: $want"; echo "$out"; return 1
    fi
  done
  echo "self-test: both planted upward includes were reported"
}

if [[ "${1:-}" == "--self-test" ]]; then
  self_test
else
  check_tree "${1:-$(cd "$(dirname "$0")/.." && pwd)}"
fi
