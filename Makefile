# egressd: the README's two commands are `make demo` and `make test`.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
export PATH := $(CURDIR)/.tools/bin:$(PATH)
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: build test deps lint bench soak run demo image image-context release clean

build: ## the egressd binary in bin/
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/egressd ./cmd/egressd

deps: ## test tools: curl, dig, dnsperf, helm, etcd, kube-apiserver, kube-proxy, kube-controller-manager, buildah, podman, runc, skopeo (idempotent, cached in .tools/)
	@# Each script is idempotent; one that fails (a download cut short) runs
	@# once more, and a second failure stops here rather than in a test.
	@for s in scripts/deps/*.sh; do echo "== $$s"; \
		bash "$$s" || { echo "== $$s failed: once more in 10 s"; sleep 10; bash "$$s"; } || \
		{ echo "make deps: $$s failed twice" >&2; exit 1; }; done

# Benchmark peers with dependencies of their own, each in its own module so
# that egressd's module and binary do not gain them.
NESTED_MODULES := bench/inspect/goproxy bench/inspect/h2load

test: deps lint ## everything CI runs
	go test $(GO_TEST_FLAGS) ./...
	@for m in $(NESTED_MODULES); do echo "go test $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...) || exit 1; done

lint: ## gofmt, go vet, a tidy go.mod, package boundaries
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@go mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	go vet ./...
	@for m in $(NESTED_MODULES); do (cd $$m && go mod tidy -diff && go vet ./...) || { echo "$$m: untidy or vet failed"; exit 1; }; done

bench: build ## benchmarks: Decide, proxy vs direct, resolver vs dnsmasq/CoreDNS, report over 1,000,000 records, footprint (size, start, RSS at 10,000 pods)
	go test -run '^$$' -bench . -benchmem ./policy/ ./resolver/ ./dnsserver/ ./proxy/ ./audit/
	go test -run '^$$' -bench . -benchmem ./report/
	bash bench/proxy/run.sh
	bash bench/dns/run.sh
	bash bench/footprint/run.sh

SOAK_DURATION ?= 30m
soak: build ## mixed load with policy and pod churn against bin/egressd; checks one record per request, RSS, goroutines, fds (SOAK_DURATION, default 30m)
	go run ./bench/soak -egressd bin/egressd -duration $(SOAK_DURATION)

run: build ## egressd on the example policy, no cluster; 127.0.0.1 is a pod it selects (Ctrl-C stops it after the lameduck, a second Ctrl-C at once)
	@echo 'egressd on examples/policies. examples/pods.yaml makes 127.0.0.1 the pod'
	@echo 'llm-prod/llm-server-7d9f8b6c5-lcl7h, which policy llm-bootstrap selects. From another terminal:'
	@echo '  allowed (llm-bootstrap rule 0; the example.com names do not exist, so 502 resolve-failed'
	@echo '  after the allow: put a host you can reach in examples/policies/llm-prod.yaml for a 200):'
	@echo '    curl -sS -x http://127.0.0.1:3128 -I https://models.example.com/'
	@echo '  denied before any dial, offline too (403, X-Egressd-Reason: metadata):'
	@echo '    curl -sS -x http://127.0.0.1:3128 -I http://169.254.169.254/latest/meta-data/'
	@echo '  a name outside every policy (NXDOMAIN, EDE 15 Blocked):'
	@echo '    dig @127.0.0.1 -p 5353 example.org'
	@echo 'One JSON record per request follows on stdout; metrics on http://127.0.0.1:9090/metrics.'
	@echo 'Ctrl-C stops it after the 5 s lameduck (--lameduck); a second Ctrl-C stops it at once.'
	./bin/egressd run --policy examples/policies --pods examples/pods.yaml \
	  --proxy-addr 127.0.0.1:3128 --dns-addr 127.0.0.1:5353 --metrics-addr 127.0.0.1:9090

demo: build ## allowed and denied downloads through egressd, offline, with audit records; then inspected: the 302, the 200, a denied path, suggest
	bash examples/demo/demo.sh

image: ## container image, offline (buildah, FROM scratch, no registry): egressd:VERSION in local storage, out/egressd-VERSION.oci.tar and its digest
	@bash scripts/deps/image.sh
	VERSION=$(VERSION) bash scripts/image.sh

release: ## release files in out/ (VERSION=vX.Y.Z, required): linux amd64/arm64 binaries, SHA256SUMS, SBOM, packaged chart (appVersion VERSION), OCI image archive egressd:VERSION; reproducible
	@bash scripts/deps/image.sh
	@bash scripts/deps/sbom.sh
	@bash scripts/deps/helm.sh
	VERSION=$(VERSION) bash scripts/release.sh

image-context: ## the image's build context in out/image-context, for a Docker engine: docker build -f Dockerfile out/image-context
	VERSION=$(VERSION) bash scripts/image.sh context

clean:
	rm -rf bin out
