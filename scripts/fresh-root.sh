#!/usr/bin/env bash
# A fresh Debian 12 root file system in ROOT (debootstrap --variant=minbase, about 3 minutes and
# 200 MB), from the Debian mirror this machine's own apt sources name: where
# scripts/package.sh installs the package as a new host would. CI starts it early, in the
# background (it waits on the network, not the CPU).
#   scripts/fresh-root.sh ROOT
set -euo pipefail
root=${1:?usage: scripts/fresh-root.sh ROOT}
[ "$(id -u)" = 0 ] || { echo "fresh-root: needs root (debootstrap)" >&2; exit 1; }
mirror=$("$(dirname "$0")/debian-mirror.sh")
rm -rf "$root"
mkdir -p "$(dirname "$root")"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 || {
  tail -n 20 "$root.log" >&2
  exit 1
}
echo "fresh-root: $root (bookworm minbase from $mirror)"
