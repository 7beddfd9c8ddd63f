# ZooKeeper 3.8 from Debian's package (the base image from docker/base-image.sh has it
# already; a plain Debian base installs it). Config: docker/zoo.cfg (the 3-node ensemble) and
# docker/zookeeper-member.sh, mounted by compose; each service's command names its myid.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN test -f /usr/share/java/zookeeper.jar || { apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends zookeeper netcat-openbsd \
 && rm -rf /var/lib/apt/lists/*; }
CMD ["sh", "/opt/replog/docker/zookeeper-member.sh"]
# docker/build-images.sh removes the untagged images a rebuild leaves behind by this label
# (the vfs storage driver keeps each as a full ~1 GB copy).
LABEL org.replog.built-by=build-images.sh
