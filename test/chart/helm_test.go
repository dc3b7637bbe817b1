package chart_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// kubeVersion is the API server version of internal/k8stest: templates are
// rendered for the cluster they are validated against.
const kubeVersion = "v1.37.2"

// releaseName makes the fullname "egressd", the Service name workloads use.
const releaseName = "egressd"

// repoRoot walks up from the package directory to the one holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		p := filepath.Dir(d)
		if p == d {
			t.Fatal("go.mod not found above the working directory")
		}
		d = p
	}
}

func chartDir(t testing.TB) string { return filepath.Join(repoRoot(t), "charts", "egressd") }

// allOnValues is the values file that turns every option on.
func allOnValues(t testing.TB) string { return filepath.Join(chartDir(t), "ci", "all-on-values.yaml") }

// helmBin finds helm: .tools/bin first (scripts/deps/helm.sh), then PATH.
// Missing helm fails the test with the command that installs it; CI must not
// pass by skipping, so only EGRESSD_SKIP_HELM=1 turns that into a skip.
func helmBin(t testing.TB) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), ".tools", "bin", "helm")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	msg := "helm not found in .tools/bin or PATH: run scripts/deps/helm.sh"
	if os.Getenv("EGRESSD_SKIP_HELM") == "1" {
		t.Skip(msg + " (skipped: EGRESSD_SKIP_HELM=1)")
	}
	t.Fatal(msg)
	return ""
}

// runHelm runs helm with args and returns stdout, or an error holding
// stderr. HOME and the helm directories point into a temp dir so that no
// user configuration or repository cache leaks in.
func runHelm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	bin := helmBin(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(),
		"HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// render runs helm template for namespace ns with the given values files and
// --set flags, CRDs included, and returns every object.
func render(t testing.TB, ns string, valuesFiles []string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderErr(t, ns, valuesFiles, sets...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(out)
	if err != nil {
		t.Fatalf("decode rendered manifests: %v", err)
	}
	return objs
}

// renders memoizes helm template runs by their arguments: the same
// configuration is rendered by several tests, and each helm run costs.
var renders sync.Map // args joined by NUL → renderResult

type renderResult struct {
	out []byte
	err error
}

func renderErr(t testing.TB, ns string, valuesFiles []string, sets ...string) ([]byte, error) {
	t.Helper()
	args := []string{"template", releaseName, chartDir(t), "--namespace", ns, "--kube-version", kubeVersion, "--include-crds"}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	key := strings.Join(args, "\x00")
	if r, ok := renders.Load(key); ok {
		return r.(renderResult).out, r.(renderResult).err
	}
	out, err := runHelm(t, args...)
	renders.Store(key, renderResult{out, err})
	return out, err
}

// decodeObjects splits a multi-document YAML stream into objects, dropping
// empty documents.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// find returns the one object of kind and name, failing the test otherwise.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %q among the rendered objects (%s)", kind, name, kinds(objs))
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func kinds(objs []*unstructured.Unstructured) string {
	var s []string
	for _, o := range objs {
		s = append(s, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(s, ", ")
}
