#!/usr/bin/env bash
# The Debian package, made and checked:
#   1. cpack makes floodgate_<version>_amd64.deb from a built tree (BUILD, default build/;
#      packaging/package.cmake says what it holds);
#   2. lintian reports no error and no warning (the info tags left are explained in
#      packaging/README.md);
#   3. in a fresh Debian 12 root (ROOT, made by scripts/fresh-root.sh; made here when not
#      given), apt installs it with its dependencies next to systemd, as on a new host;
#      systemd-analyze verifies the unit there (and rates its exposure); the postinst made the
#      user and enabled the unit; the installed binary passes --check-config on the installed
#      config and, run as the package's user, serves the demo: a burst to /api/ through it to
#      an origin on :9000 is limited; SIGTERM drains it with exit 0;
#   4. a purge removes the unit and the state, and keeps the user (Debian's policy).
# Needs root (chroot) and the ports of the demo (8080, 9000, 9901) free.
#   scripts/package.sh [BUILD] [ROOT]
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
root=${2:-}
say() { echo "[package] $*"; }
fail() { echo "[package] FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (chroot, mount)"
for port in 8080 9000 9901; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "port $port is taken (the demo's ports must be free: is scripts/demo.sh running?)"
  fi
done
for tool in cpack lintian debootstrap systemd-analyze curl; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
[ -x "$build/floodgate" ] || fail "$build/floodgate is not built"
[ -x "$build/floodgate-test-origin" ] || fail "$build/floodgate-test-origin is not built"

# 1. The package.
rm -f "$build"/floodgate_*_amd64.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/floodgate_*_amd64.deb)
say "$(basename "$deb"): $(stat -c %s "$deb") bytes"
dpkg-deb -f "$deb" Depends | sed 's/^/[package]   Depends: /'

# 2. lintian: warnings and errors fail; info tags are printed.
tags=$(lintian --display-level '>=info' --fail-on error,warning "$deb" 2>&1) ||
  { echo "$tags" >&2; fail "lintian reports errors or warnings"; }
grep -v 'running with root privileges' <<< "$tags" | sed 's/^/[package]   lintian: /' || true
say "lintian: no error, no warning"

# 3. A fresh root, the package installed into it.
if [ -z "$root" ]; then
  root=$(mktemp -d /tmp/floodgate-root.XXXXXX)/root
  scripts/fresh-root.sh "$root"
fi
[ -x "$root/usr/bin/apt-get" ] || fail "$root is not a Debian root"
origin_pid=""
floodgate_pid=""
cleanup() {
  for pid in $floodgate_pid $origin_pid; do
    kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  umount "$root/proc" 2>/dev/null || umount -l "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" "$@"; }
in_root env DEBIAN_FRONTEND=noninteractive sh -c \
  "apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd /tmp/$(basename "$deb")" \
  > "$root/tmp/install.log" 2>&1 || { tail -n 30 "$root/tmp/install.log" >&2; fail "apt cannot install the package"; }
say "installed into a fresh root: $(in_root dpkg-query -W -f '${Package} ${Version} ${Status}' floodgate)"

systemd-analyze verify --root="$root" --man=no floodgate.service || fail "systemd-analyze verify"
say "systemd-analyze verify: clean; $(systemd-analyze security --offline=yes --root="$root" floodgate.service 2>/dev/null | grep 'Overall exposure')"
in_root id floodgate >/dev/null || fail "the postinst made no user floodgate"
[ -L "$root/etc/systemd/system/multi-user.target.wants/floodgate.service" ] || fail "the unit is not enabled"
[ "$(stat -c %a "$root/etc/floodgate/floodgate.yaml")" = 640 ] || fail "floodgate.yaml is not 0640"
[ "$(stat -c %a "$root/etc/default/floodgate")" = 600 ] || fail "/etc/default/floodgate is not 0600"
say "user: $(in_root id floodgate); unit enabled (multi-user.target.wants); floodgate.yaml 0640 and /etc/default/floodgate 0600"
in_root /usr/bin/floodgate --check-config /etc/floodgate/floodgate.yaml | head -n 1 | sed 's/^/[package]   /'

# The demo: the origin on the host, floodgate in the root as the package's user (which reads
# the config only through its group: the postinst's modes).
"$build/floodgate-test-origin" --port 9000 >/dev/null 2>&1 &
origin_pid=$!
chroot --userspec=floodgate:floodgate "$root" /usr/bin/floodgate --config /etc/floodgate/floodgate.yaml \
  > "$root/tmp/floodgate.log" 2>&1 &
floodgate_pid=$!
for _ in $(seq 100); do
  curl -sf -o /dev/null http://127.0.0.1:9901/healthz && break
  sleep 0.1
done
curl -sf -o /dev/null http://127.0.0.1:9901/healthz || { cat "$root/tmp/floodgate.log" >&2; fail "floodgate does not serve"; }
kill -0 "$floodgate_pid" 2>/dev/null || fail "the floodgate answering is not the one started here"
statuses=$(for _ in $(seq 20); do curl -s -o /dev/null -w '%{http_code}\n' http://127.0.0.1:8080/api/hello; done | sort | uniq -c | tr '\n' ' ')
say "20 requests to /api/ (10 at once, 5/s after): $statuses"
grep -q ' 200 ' <<< " $statuses" || fail "nothing was admitted"
grep -q ' 429 ' <<< " $statuses" || fail "nothing was limited"
kill -TERM "$floodgate_pid"
rc=0
wait "$floodgate_pid" || rc=$?
floodgate_pid=""
[ "$rc" = 0 ] || fail "SIGTERM: exit $rc"
say "SIGTERM: drained, exit 0"

# 4. Purge.
in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq floodgate > /dev/null 2>&1 || fail "purge"
[ ! -e "$root/lib/systemd/system/floodgate.service" ] || fail "the unit outlived the purge"
[ ! -e "$root/etc/systemd/system/multi-user.target.wants/floodgate.service" ] || fail "the unit's link outlived the purge"
[ ! -e "$root/var/lib/floodgate" ] || fail "/var/lib/floodgate outlived the purge"
in_root id floodgate >/dev/null || fail "the purge removed the user"
say "purged: unit, link and state gone, the user kept"
say "OK"
