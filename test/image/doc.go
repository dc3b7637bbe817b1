// Package image tests the egressd image as it ships (issue 17): built by
// scripts/image.sh (what `make image` runs, offline), its OCI archive read
// file by file (nothing but the binary, the CA bundle, passwd and group; no
// shell, no package manager), then run by podman with runc the way the
// chart runs it (read-only root filesystem, every capability dropped,
// no-new-privileges, uid 65532) on the host network, listening on loopback
// only, in front of the demo world (examples/demo/origin).
//
// It needs root, buildah, podman, runc and skopeo (scripts/deps/image.sh,
// part of `make deps`); it skips, saying which, where one is missing.
package image
