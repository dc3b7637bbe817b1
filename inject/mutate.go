package inject

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Skip reasons: why a pod was admitted without a patch. Fixed strings, for
// logs and the egressd_webhook_requests_total result label.
const (
	SkipOptedOut    = "opted-out"
	SkipHostNetwork = "host-network"
)

// Result is the outcome of Mutate.
type Result struct {
	// Patch is the RFC 6902 JSON patch; nil when nothing changes.
	Patch []byte
	// Skipped is a Skip* reason when the pod is not injected at all.
	Skipped string
}

// op is one RFC 6902 operation: "add" (on an object member that exists it
// replaces, RFC 6902 §4.1, which the DNS settings and the mark rely on; "-"
// appends to an array) and "replace" for an env entry that override
// changes (add at an array index would insert).
type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// proxyVars are the variable pairs; each pair is one setting (curl reads
// the lower-case spelling first, Go the upper-case one): a container that
// sets either spelling keeps both as they are, so that no tool in it sees
// a different proxy than the one its owner chose.
var proxyVars = [][2]string{
	{"HTTPS_PROXY", "https_proxy"},
	{"HTTP_PROXY", "http_proxy"},
	{"NO_PROXY", "no_proxy"},
}

// Mutate returns the patch that injects pod, which is being created in
// namespace (the request's: a pod's own metadata.namespace may be empty at
// creation). cfg must have passed Validate.
func Mutate(pod *corev1.Pod, namespace string, cfg Config) (Result, error) {
	if strings.EqualFold(pod.Annotations[AnnotationInject], "false") || strings.EqualFold(pod.Labels[AnnotationInject], "false") {
		return Result{Skipped: SkipOptedOut}, nil
	}
	// A host-network pod's requests come from the node's address: egressd
	// cannot tell it from the node's other pods, and NetworkPolicy does not
	// hold it to egressd either. Injecting it would only break it.
	if pod.Spec.HostNetwork {
		return Result{Skipped: SkipHostNetwork}, nil
	}
	override := strings.EqualFold(pod.Annotations[AnnotationOverride], "true")
	want := map[string]string{
		"HTTPS_PROXY": cfg.ProxyURL, "https_proxy": cfg.ProxyURL,
		"HTTP_PROXY": cfg.ProxyURL, "http_proxy": cfg.ProxyURL,
	}
	np := cfg.noProxy()
	want["NO_PROXY"], want["no_proxy"] = np, np

	var ops []op
	for i := range pod.Spec.InitContainers {
		ops = append(ops, envOps(fmt.Sprintf("/spec/initContainers/%d/env", i), pod.Spec.InitContainers[i].Env, want, override)...)
	}
	for i := range pod.Spec.Containers {
		ops = append(ops, envOps(fmt.Sprintf("/spec/containers/%d/env", i), pod.Spec.Containers[i].Env, want, override)...)
	}
	if cfg.DNS.IsValid() {
		ops = append(ops, dnsOps(pod, namespace, cfg)...)
	}
	if pod.Annotations[AnnotationInjected] != cfg.version() {
		ops = append(ops, markOp(pod, cfg.version()))
	}
	if len(ops) == 0 {
		return Result{}, nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return Result{}, fmt.Errorf("inject: encode patch: %w", err)
	}
	return Result{Patch: patch}, nil
}

// envOps adds the proxy variables a container lacks at path (its env
// list), or with override replaces those that differ from want.
func envOps(path string, env []corev1.EnvVar, want map[string]string, override bool) []op {
	index := map[string]int{}
	for i, e := range env {
		index[e.Name] = i // the last wins, as in the kubelet
	}
	var add []corev1.EnvVar
	var ops []op
	for _, pair := range proxyVars {
		_, upper := index[pair[0]]
		_, lower := index[pair[1]]
		if (upper || lower) && !override {
			continue
		}
		for _, name := range pair {
			v := corev1.EnvVar{Name: name, Value: want[name]}
			i, ok := index[name]
			switch {
			case !ok:
				add = append(add, v)
			case env[i].Value != v.Value || env[i].ValueFrom != nil:
				ops = append(ops, op{Op: "replace", Path: fmt.Sprintf("%s/%d", path, i), Value: v})
			}
		}
	}
	if len(env) == 0 && len(add) > 0 {
		return append(ops, op{Op: "add", Path: path, Value: add})
	}
	for _, v := range add {
		ops = append(ops, op{Op: "add", Path: path + "/-", Value: v})
	}
	return ops
}

// markOp sets egressd.dev/injected. An empty map is replaced whole: the
// pod's JSON may leave it out (omitempty) or hold {}, and "add" of the
// member fits both.
func markOp(pod *corev1.Pod, version string) op {
	if len(pod.Annotations) == 0 {
		return op{Op: "add", Path: "/metadata/annotations", Value: map[string]string{AnnotationInjected: version}}
	}
	return op{Op: "add", Path: "/metadata/annotations/" + escape(AnnotationInjected), Value: version}
}

// escape is RFC 6901 §3's escaping of a reference token.
func escape(token string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(token)
}
