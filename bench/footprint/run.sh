#!/usr/bin/env bash
# Footprint figures (issue 17), each printed with the command that gives it:
# binary size, image size, start-to-ready with the example policy, idle
# RSS, and RSS with 10,000 pods in the informer (a real kube-apiserver:
# make deps builds it). EGRESSD_BIN measures another build (the before
# figures); by default the image's binary of this tree.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH=$PWD/.tools/bin:$PATH
out=out/bench
bash scripts/deps/image.sh
VERSION=bench OUT=$out bash scripts/image.sh >/dev/null
bin=${EGRESSD_BIN:-$PWD/$out/image-context/egressd}
echo "== binary: stat -c %s $bin"
echo "$(stat -c %s "$bin") bytes"
echo "== image: stat -c %s $out/egressd-bench.oci.tar (compressed); du -sb --apparent-size $out/image-context (unpacked)"
echo "$(stat -c %s "$out/egressd-bench.oci.tar") bytes compressed, $(du -sb --apparent-size "$out/image-context" | cut -f1) bytes unpacked"
echo "== start-to-ready and idle RSS: EGRESSD_BIN=$bin go test -run '^\$' -bench StartExample -benchtime 5x ./bench/footprint/"
EGRESSD_BIN=$bin go test -run '^$' -bench StartExample -benchtime 5x ./bench/footprint/ | grep '^Benchmark'
echo "== 10,000 pods: EGRESSD_BIN=$bin go test -run '^\$' -bench RSS10k -benchtime 1x -timeout 30m ./bench/footprint/"
EGRESSD_BIN=$bin go test -run '^$' -bench RSS10k -benchtime 1x -timeout 30m ./bench/footprint/ | grep '^Benchmark'
