# ZooKeeper 3.8 from Debian's package (the base image from docker/base-image.sh has it
# already; a plain Debian base installs it). Config: docker/zoo.cfg, mounted by compose.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN test -f /usr/share/java/zookeeper.jar || { apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper netcat-openbsd \
 && rm -rf /var/lib/apt/lists/*; }
CMD ["sh", "-c", "exec java -Xmx256m -cp '/usr/share/java/*:/etc/zookeeper/conf' org.apache.zookeeper.server.quorum.QuorumPeerMain /opt/replog/docker/zoo.cfg"]
# docker/build-images.sh removes the untagged images a rebuild leaves behind by this label
# (the vfs storage driver keeps each as a full ~1 GB copy).
LABEL org.replog.built-by=build-images.sh
