#!/usr/bin/env bash
# Gathers the runtime image's whole file system into ROOT (the Dockerfile copies ROOT onto an
# empty image): each BINARY:NAME as /usr/local/bin/NAME, the shared libraries they load (as
# ldd resolves them here, at their Debian paths), the CA bundle where OpenSSL looks by default,
# tzdata's time zones, and the passwd, group and nsswitch entries a non-root process needs. No
# shell, no package manager: what is not listed here is not in the image.
#   docker/gather-runtime.sh ROOT BINARY:NAME...
set -euo pipefail
root=$1
shift
uid=10001

mkdir -p "$root"/usr/local/bin "$root"/usr/lib/x86_64-linux-gnu "$root"/usr/lib64 \
  "$root"/etc/ssl/certs "$root"/usr/lib/ssl "$root"/tmp
# Debian 12's merged /usr: /lib and /lib64 are links into /usr, as the loader's paths expect.
ln -sfn usr/lib "$root"/lib
ln -sfn usr/lib64 "$root"/lib64
chmod 1777 "$root"/tmp

binaries=()
for pair in "$@"; do
  bin=${pair%%:*} name=${pair#*:}
  install -m 0755 "$bin" "$root/usr/local/bin/$name"
  binaries+=("$bin")
done

# ldd prints "libX.so.N => /path (addr)" for each library and "/lib64/ld-linux... (addr)" for
# the loader; each is copied (its content, not a link) to its own path under /usr.
ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(0x/ { print $1 }' |
  sort -u | while read -r lib; do
    case $lib in /usr/*) dest=$root$lib ;; *) dest=$root/usr$lib ;; esac
    mkdir -p "$(dirname "$dest")"
    cp -L "$lib" "$dest"
  done

# OpenSSL's default verify paths (SSL_CTX_set_default_verify_paths) are /usr/lib/ssl/cert.pem
# and /usr/lib/ssl/certs: both lead to the bundle, as on Debian.
cp -L /etc/ssl/certs/ca-certificates.crt "$root"/etc/ssl/certs/
ln -sfn /etc/ssl/certs/ca-certificates.crt "$root"/usr/lib/ssl/cert.pem
ln -sfn /etc/ssl/certs "$root"/usr/lib/ssl/certs

# Time zones, for calendar quotas (`timezone: Europe/Berlin`): tzdata's files, without its
# right/ (leap seconds) and posix/ copies (2 MB).
mkdir -p "$root"/usr/share/zoneinfo
tar -C /usr/share/zoneinfo --exclude=./right --exclude=./posix -cf - . |
  tar -C "$root"/usr/share/zoneinfo -xf -

printf 'root:x:0:0:root:/:/nonexistent\nfloodgate:x:%s:%s:floodgate:/:/nonexistent\n' "$uid" "$uid" \
  >"$root"/etc/passwd
printf 'root:x:0:\nfloodgate:x:%s:\n' "$uid" >"$root"/etc/group
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root"/etc/nsswitch.conf
