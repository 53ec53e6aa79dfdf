#!/usr/bin/env bash
# The one list of Debian 12 packages floodgate needs to build, test and run its demo.
# CI, Docker and the README call this; it installs only what is missing.
# Boost comes as the 1.81 pieces: the default 1.74 -dev packages (libboost-dev,
# libboost-all-dev) conflict with them, so nothing here may pull those in.
# clang, its libFuzzer/sanitizer runtimes and llvm (llvm-symbolizer, for readable stacks) are
# for scripts/fuzz.sh; lintian, debootstrap and systemd (systemd-analyze) for
# scripts/package.sh.
# HTTP/3 needs ngtcp2 >= 1.0 and nghttp3 >= 1.0, which Debian 12 has only in bookworm-backports:
# that suite is added from this machine's own Debian mirror (scripts/debian-mirror.sh) and pinned
# for those packages alone; nothing else is taken from it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

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
  libgnutls28-dev
)
# From bookworm-backports (1.x APIs; bookworm's own are 0.x). ngtcp2-client is gtlsclient,
# the HTTP/3 client of the tests.
backports=(
  libngtcp2-dev libngtcp2-16 libngtcp2-crypto-gnutls-dev libngtcp2-crypto-gnutls8
  libnghttp3-dev libnghttp3-9 ngtcp2-client
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# A backports package counts as missing below version 1.0 (bookworm's own 0.x is not enough).
missing_bp=()
for p in "${backports[@]}"; do
  v=$( (dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null || true) | awk '/install ok installed/ {print $4}')
  if [ -z "$v" ] || dpkg --compare-versions "$v" lt 1.0; then
    missing_bp+=("$p")
  fi
done

total=$((${#packages[@]} + ${#backports[@]}))
if [ "${#missing[@]}" -eq 0 ] && [ "${#missing_bp[@]}" -eq 0 ]; then
  echo "install-deps: all $total packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]} ${missing_bp[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
if [ "${#missing_bp[@]}" -gt 0 ]; then
  # The suite from this machine's own mirror, once; the pin (by codename: the suite is called
  # oldstable-backports once trixie is stable) raises only these packages above bookworm's.
  if ! grep -qs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/*; then
    mirror=$("$here/debian-mirror.sh")
    printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$mirror" | "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/floodgate-backports.sources >/dev/null
  fi
  printf 'Package: %s\nPin: release n=bookworm-backports\nPin-Priority: 990\n' "${backports[*]}" |
    "${sudo_cmd[@]}" tee /etc/apt/preferences.d/floodgate-backports >/dev/null
fi
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
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" "${missing_bp[@]}"
