#!/bin/sh
# Runs ensemble member $1 of docker/zoo.cfg (docker-compose.yml's zookeeper-N services):
# QuorumPeerMain reads a member's id from dataDir/myid, so it is written first.
set -eu
case "${1:-}" in
  ''|*[!0-9]*) echo "usage: zookeeper-member.sh MYID (a number)" >&2; exit 2 ;;
esac
echo "$1" > /data/myid
exec java -Xmx256m -cp '/usr/share/java/*:/etc/zookeeper/conf' \
  org.apache.zookeeper.server.quorum.QuorumPeerMain /opt/replog/docker/zoo.cfg
