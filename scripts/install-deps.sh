#!/usr/bin/env bash
# The one list of Debian 12 packages floodgate needs to build, test and run its demo.
# CI, Docker and the README call this; it installs only what is missing.
# Boost comes as the 1.81 pieces: the default 1.74 -dev packages (libboost-dev,
# libboost-all-dev) conflict with them, so nothing here may pull those in.
# clang, its libFuzzer/sanitizer runtimes and llvm (llvm-symbolizer, for readable stacks) are
# for scripts/fuzz.sh; lintian, debootstrap and systemd (systemd-analyze) for
# scripts/package.sh.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libhiredis-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libssl-dev zlib1g-dev libnghttp2-dev
  libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev llvm
  redis-server curl ca-certificates tzdata
  nghttp2-client nghttp2-server python3-h2 python3-grpcio python3-grpc-tools
  chromium fonts-dejavu-core
  prometheus
  lintian debootstrap systemd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
# Keep redis-server's packaged service from starting: tests start their own instances.
policy_created=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee /usr/sbin/policy-rc.d >/dev/null
  "${sudo_cmd[@]}" chmod +x /usr/sbin/policy-rc.d
  policy_created=1
fi
cleanup() { if [ "$policy_created" = 1 ]; then "${sudo_cmd[@]}" rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
