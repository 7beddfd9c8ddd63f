#!/usr/bin/env bash
# Build the base image from Debian's packages, for machines that cannot pull from Docker Hub:
# debootstrap a bookworm rootfs with Python 3.11, a JRE with ZooKeeper 3.8, and Prometheus, then
# `docker import` it as one layer. One image serves replog, ZooKeeper and Prometheus, so vfs
# (which copies every layer whole) stores the big part once.
#
#   docker/base-image.sh [--force]      -> image replog-base:bookworm (skipped when it exists)
#
# Needs root (debootstrap) and a running Docker engine (docker/start-dockerd.sh).
set -euo pipefail
IMAGE=${REPLOG_DEBIAN_BASE:-replog-base:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
if [ "${1:-}" != --force ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "$IMAGE exists (docker/base-image.sh --force rebuilds it)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "debootstrap needs root" >&2; exit 1; fi
command -v debootstrap >/dev/null || { echo "run 'apt-get install debootstrap' as root" >&2; exit 1; }
root=$(mktemp -d /var/tmp/replog-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "debootstrap bookworm into $root (a few minutes)"
# minbase: no init, no docs tooling; the --include list is all the stack runs on.
debootstrap --variant=minbase \
  --include=python3,python3-venv,ca-certificates,netcat-openbsd,zookeeper,prometheus \
  bookworm "$root" "$MIRROR" >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
tar -C "$root" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' - "$IMAGE" >/dev/null
echo "built $IMAGE"
