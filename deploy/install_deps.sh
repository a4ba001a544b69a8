#!/usr/bin/env bash
# Installs, from Debian's packages, whatever Nova-LSM needs to build, test and run.
# Idempotent: packages already present are left alone, and `apt-get update` runs only
# when something is missing. Usage: deploy/install_deps.sh [--quiet]
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config clang libclang-rt-14-dev
  # libraries (DESIGN.md section 12)
  libleveldb-dev libsnappy-dev libgflags-dev libgoogle-glog-dev  # leveldb's CMake config links snappy
  libzookeeper-mt-dev zookeeper
  libibverbs-dev librdmacm-dev
  libssl-dev            # HMAC-SHA256 for peer authentication (never hand-rolled crypto)
  libcpp-httplib-dev    # /metrics endpoint
  nlohmann-json3-dev    # JSON output and config documents
  librocksdb-dev        # nova_ycsb's rocksdb binding (baseline engine, DESIGN.md section 12)
  libisal-dev           # CRC32C, Reed-Solomon parity
  libjemalloc-dev       # the daemons' and tools' allocator (CMakeLists.txt NOVA_WITH_JEMALLOC)
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  gnuplot-nox           # benchmarks/plot_timeseries (nova_ycsb time series -> PNG)
  python3-clang-14      # tests/check_class_size.py: libclang's Python bindings
  # scripts and tools used by tests (ip netns, ps)
  iproute2 procps netcat-openbsd python3
  # deployment across nodes (deploy/ansible) and its test bed of simulated hosts
  # (deploy/testbed: one network namespace with its own sshd per host)
  ansible-core openssh-server openssh-client
)

quiet=0
[[ "${1:-}" == "--quiet" ]] && quiet=1

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  [[ $quiet -eq 1 ]] || echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install_deps: done"
