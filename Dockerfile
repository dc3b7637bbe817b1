# syntax=docker/dockerfile:1
# egressd image: a static binary on distroless static, nonroot, no shell.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t egressd:dev .

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a source change does not refetch them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
# CGO_ENABLED=0: a static binary for a base image without libc.
# -trimpath: no build-machine paths in the binary (reproducible builds).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/egressd ./cmd/egressd

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="egressd" \
      org.opencontainers.image.description="DNS-aware egress proxy for Kubernetes" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/egressd /egressd
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
USER nonroot:nonroot
ENTRYPOINT ["/egressd"]
CMD ["run"]
