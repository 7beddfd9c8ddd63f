#!/usr/bin/env bash
# Start a Docker engine when none answers and we are root (Debian's docker.io: dockerd is not
# started by the package on a machine without an init system). vfs is the one storage driver
# that works everywhere, overlay on overlay included; it is slow, which is why the images keep
# few layers. Exit 0 when an engine answers, 1 with one line on stderr saying why not.
set -euo pipefail
if docker info >/dev/null 2>&1; then exit 0; fi
if ! command -v dockerd >/dev/null; then
  echo "dockerd is not installed: run 'apt-get install docker.io docker-compose' as root" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "no Docker engine answers and starting dockerd needs root" >&2
  exit 1
fi
log=${DOCKERD_LOG:-/var/log/replog-dockerd.log}
# setsid: the engine outlives the make/pytest that started it, so the image cache stays warm
# for the next run instead of every run paying for a cold start.
setsid dockerd --storage-driver vfs >"$log" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "dockerd did not answer within 60 s; last lines of $log:" >&2
tail -5 "$log" >&2
exit 1
