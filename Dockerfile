# egressd image: FROM scratch, nothing but what the static binary needs.
#
# One build definition for buildah/podman (`make image`, offline) and for a
# Docker engine. The build context is not the repository but the folder
# `make image-context` prepares (out/image-context): the static binary
# (CGO_ENABLED=0, -trimpath: the same bytes `make release` ships), Debian's
# CA bundle and the passwd/group files of image/. Building the binary in a
# `FROM golang` stage would need a registry pull (the machines that build
# and test egressd have none) and would give a binary that differs from the
# released one; a scratch base needs no pull at all. So, with a Docker
# engine:
#   make image-context && docker build -f Dockerfile \
#     --build-arg VERSION=... --build-arg REVISION=... --build-arg CREATED=... \
#     -t egressd:dev out/image-context
# (scripts/image.sh passes the same arguments to buildah).
FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="egressd" \
      org.opencontainers.image.description="DNS-aware egress proxy for Kubernetes" \
      org.opencontainers.image.source="https://github.com/egressd/egressd" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="${LICENSES}"
# nonroot (65532) is the only user; there is no shell to log in with.
COPY etc/passwd etc/group /etc/
# TLS to upstreams that egressd itself calls (the API server has its own
# CA from the service account).
COPY etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY egressd /egressd
# Go's scheduler monitor (sysmon) sleeps while every processor is idle and,
# woken by the next system call, polls every 20 µs for a millisecond: a
# proxy that idles between connections pays that thousands of times a
# second (a tenth of its CPU per new connection on the peer bench). With a
# scheduler-trace interval set (the largest, 24.8 days) it never takes that
# sleep and backs off to 10 ms instead. See README, "Decisions". The bench
# scripts run egressd with the same value (TestImageGODEBUG).
ENV GODEBUG=schedtrace=2147483647
# proxy, DNS (UDP and TCP), SNI, HTTP, metrics: the container ports the chart
# and `egressd netpol` share. All above 1024: no capability needed.
EXPOSE 3128/tcp 5353/udp 5353/tcp 8443/tcp 8080/tcp 9090/tcp
USER 65532:65532
ENTRYPOINT ["/egressd"]
CMD ["run"]
