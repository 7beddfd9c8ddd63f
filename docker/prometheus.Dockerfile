# Prometheus from Debian's package (the base image from docker/base-image.sh has it already; a
# plain Debian base installs it). Config and rules: docker/prometheus/, mounted by compose.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN command -v prometheus >/dev/null || { apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/*; }
ENTRYPOINT ["prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", "--web.listen-address=0.0.0.0:9090"]
# docker/build-images.sh removes the untagged images a rebuild leaves behind by this label
# (the vfs storage driver keeps each as a full ~1 GB copy).
LABEL org.replog.built-by=build-images.sh
