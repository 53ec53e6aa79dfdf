#!/usr/bin/env bash
# Builds the image (under 35 MB: README states 27, with its HEALTHCHECK), brings docker/docker-compose.yml up
# (Redis, the demo origin, two floodgate instances), runs the healthcheck in both instances,
# shows that the two instances share one limit through Redis (the sum of their 200s equals
# the limit), and tears everything down.
#
# Engine: podman + podman-compose when present (with runc and cgroupfs, and a debootstrapped
# debian:bookworm base image, built here if missing, since no registry is reachable), else
# docker with its compose plugin. Takes a few minutes the first time (image builds).
set -euo pipefail
cd "$(dirname "$0")/.."

limit=${API_LIMIT:-50}
requests=$((limit * 2 + 20))
export API_LIMIT=$limit

if command -v podman >/dev/null && command -v podman-compose >/dev/null; then
  engine=podman
  compose=(podman-compose -f docker/docker-compose.yml)
  # runc with cgroupfs (crun fails on cgroups here); host networking for the image builds.
  conf=$(mktemp /tmp/floodgate-containers.XXXXXX.conf)
  cat >"$conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
netns = "host"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
CONF
  export CONTAINERS_CONF=$conf
  if ! podman image exists docker.io/library/debian:bookworm; then
    echo "smoke: no debian:bookworm base image; building one with debootstrap (a few minutes)"
    rootfs=$(mktemp -d /tmp/floodgate-rootfs.XXXXXX)
    debootstrap --variant=minbase bookworm "$rootfs" >/dev/null
    tar -C "$rootfs" -c . | podman import - docker.io/library/debian:bookworm >/dev/null
    rm -rf "$rootfs"
  fi
  podman image exists docker.io/library/debian:bookworm-slim ||
    podman tag docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
  # Docker's image format: podman's default (OCI) has no HEALTHCHECK and would drop it.
  build=(podman build --network=host --format docker)
else
  engine=docker
  compose=(docker compose -f docker/docker-compose.yml)
  build=(docker build)
fi
# Host ports of the two instances and their admin listeners.
export A_PORT=${A_PORT:-18481} B_PORT=${B_PORT:-18482} A_ADMIN_PORT=${A_ADMIN_PORT:-19481} B_ADMIN_PORT=${B_ADMIN_PORT:-19482}
a=127.0.0.1:$A_PORT b=127.0.0.1:$B_PORT a_admin=127.0.0.1:$A_ADMIN_PORT b_admin=127.0.0.1:$B_ADMIN_PORT

cleanup() { "${compose[@]}" down >/dev/null 2>&1 || true; [ -n "${conf:-}" ] && rm -f "$conf"; }
trap cleanup EXIT

echo "== build ($engine) =="
"${build[@]}" -t floodgate:latest -f docker/Dockerfile . >/tmp/floodgate-image-build.log 2>&1 ||
  { tail -30 /tmp/floodgate-image-build.log; exit 1; }
"${build[@]}" -t floodgate-redis:latest -f docker/redis.Dockerfile . >>/tmp/floodgate-image-build.log 2>&1 ||
  { tail -30 /tmp/floodgate-image-build.log; exit 1; }
$engine images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^(localhost/)?floodgate' || true
# The runtime image holds only the binaries and what they load (docker/gather-runtime.sh).
size=$($engine image inspect floodgate:latest --format '{{.Size}}')
# README states about 30 MB (the binaries and the libraries they load, 2026-12); 35 leaves room for
# growth and fails an image that picked up a base layer or a build tree by mistake.
echo "  floodgate:latest is $((size / 1000000)) MB (limit 35 MB)"
((size < 35000000)) || { echo "smoke: FAILED (the image is over 35 MB)"; exit 1; }

echo "== up =="
"${compose[@]}" up -d >/tmp/floodgate-compose-up.log 2>&1 || { cat /tmp/floodgate-compose-up.log; exit 1; }
for admin in $a_admin $b_admin; do
  for _ in $(seq 100); do
    curl -fsS "http://$admin/readyz" 2>/dev/null | grep -q '"healthy":true' && break
    sleep 0.2
  done
  echo "  $admin/readyz: $(curl -sS "http://$admin/readyz")"
done

echo "== the image's HEALTHCHECK (floodgate healthcheck, no shell or curl in the image) =="
for service in floodgate-a floodgate-b; do
  answer=$("${compose[@]}" exec -T "$service" floodgate healthcheck 2>&1 | grep healthz) ||
    { echo "smoke: FAILED ($service's healthcheck: $answer)"; exit 1; }
  echo "  $service: $answer"
done
$engine image inspect floodgate:latest --format '{{json .Config.Healthcheck}}' | grep -q healthcheck ||
  { echo "smoke: FAILED (the image has no HEALTHCHECK)"; exit 1; }

echo "== the image's time zones (tzdata, for calendar quotas) =="
answer=$("${compose[@]}" exec -T floodgate-a floodgate --check-config /etc/floodgate/examples/llm-quotas.yaml 2>&1 |
  grep 'Europe/Berlin') || { echo "smoke: FAILED (llm-quotas.yaml in the image: $answer)"; exit 1; }
echo "  $answer"

echo "== $requests requests to /api/demo, alternating between the two instances (limit $limit per minute, shared) =="
ok_a=0 ok_b=0 limited=0 other=0
for i in $(seq "$requests"); do
  if ((i % 2)); then target=$a; else target=$b; fi
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://$target/api/demo")
  case "$code" in
    200) if ((i % 2)); then ok_a=$((ok_a + 1)); else ok_b=$((ok_b + 1)); fi ;;
    429) limited=$((limited + 1)) ;;
    *) other=$((other + 1)) ;;
  esac
done
echo "  instance A: $ok_a x 200, instance B: $ok_b x 200, together $((ok_a + ok_b)) x 200; $limited x 429; $other other"
echo "== /metrics of instance A (excerpt) =="
curl -sS "http://$a_admin/metrics" | grep -E '^floodgate_(requests_total\{route="api"|build_info|store_healthy)' || true

if ((ok_a + ok_b == limit && other == 0)); then
  echo "smoke: OK (the two instances shared one limit of $limit)"
else
  echo "smoke: FAILED (expected $limit admitted in total)"
  exit 1
fi
