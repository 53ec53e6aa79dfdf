#!/usr/bin/env bash
# Prints the first Debian mirror this machine's own apt sources name (deb822 or one-line
# format, the security archive skipped), so scripts never write a host of their own.
set -euo pipefail
mirror=$(
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list || true
  } | sed 's/\[[^]]*\]//' | awk '$1 == "URIs:" || $1 == "deb" {print $2}' |
    grep -v -- '-security' | head -n 1 || true
)
[ -n "$mirror" ] || { echo "debian-mirror: no Debian mirror in /etc/apt sources" >&2; exit 1; }
echo "$mirror"
