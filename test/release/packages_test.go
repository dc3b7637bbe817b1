package release

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReleasePackages runs `scripts/release.sh packages` (what `make
// release` does after the binaries: the packaged chart and the OCI image
// archive, and their SHA256SUMS) twice, seconds apart, into two folders:
// the SHA256SUMS must be equal (every timestamp is the commit's). Then the
// packaged chart, rendered with its defaults, must name the image the
// release archived (its ref name) and the tag `make image` gives that
// version; and the chart in the tree renders egressd:<appVersion>, a
// release tag's form (what `make image` on that tag builds).
func TestReleasePackages(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	helm := helmBin(t, root)
	requireImageTools(t)
	const version = "v0.0.0-reproducible.1"
	conf := filepath.Join(root, ".tools", "containers", "containers.conf")
	if _, err := os.Stat(conf); err != nil {
		t.Fatalf("%s: %v (make deps, scripts/deps/image.sh, writes it)", conf, err)
	}
	var sums []string
	var outs []string
	for range 2 {
		work := t.TempDir()
		out := filepath.Join(work, "out")
		cmd := exec.Command("bash", "scripts/release.sh", "packages")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "VERSION="+version, "OUT="+out, "CONTAINERS_CONF="+conf,
			"IMAGE_ROOT="+filepath.Join(work, "storage"), "IMAGE_RUNROOT="+filepath.Join(work, "run"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if _, err := cmd.Output(); err != nil {
			t.Fatalf("scripts/release.sh packages: %v\n%s", err, stderr.String())
		}
		t.Cleanup(func() {
			_ = exec.Command("buildah", "--storage-driver", "vfs", "--root", filepath.Join(work, "storage"),
				"--runroot", filepath.Join(work, "run"), "rmi", "-f", "egressd:"+version).Run()
		})
		b, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, string(b))
		outs = append(outs, out)
	}
	if sums[0] != sums[1] {
		t.Fatalf("two runs of one commit differ:\n%s\n%s", sums[0], sums[1])
	}
	t.Logf("SHA256SUMS of two runs:\n%s", sums[0])

	cmd := exec.Command("bash", "scripts/image.sh", "tag")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "VERSION="+version)
	want, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	tag := strings.TrimSpace(string(want))
	if tag != "egressd:"+version {
		t.Errorf("scripts/image.sh tag = %q, want egressd:%s", tag, version)
	}
	if got := renderedImage(t, helm, filepath.Join(outs[0], "egressd-"+strings.TrimPrefix(version, "v")+".tgz")); got != tag {
		t.Errorf("the released chart renders image %q; the release made %q", got, tag)
	}
	if ref := archiveRef(t, filepath.Join(outs[0], "egressd-"+version+".oci.tar")); ref != tag {
		t.Errorf("the image archive's ref name is %q, want %q", ref, tag)
	}

	// The chart in the tree: appVersion is a release tag, and the image
	// it renders is the one `make image` builds on that tag.
	chart, err := os.ReadFile(filepath.Join(root, "charts", "egressd", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: "?(v[0-9]+\.[0-9]+\.[0-9]+)"?$`).FindSubmatch(chart)
	if m == nil {
		t.Fatalf("charts/egressd/Chart.yaml: appVersion is not a release tag vX.Y.Z:\n%s", chart)
	}
	cmd = exec.Command("bash", "scripts/image.sh", "tag")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "VERSION="+string(m[1]))
	onTag, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := renderedImage(t, helm, filepath.Join(root, "charts", "egressd")); got != strings.TrimSpace(string(onTag)) {
		t.Errorf("the chart renders image %q; make image on tag %s builds %q", got, m[1], onTag)
	}
}

// renderedImage renders chart with its defaults and returns the image of
// the egressd container.
func renderedImage(t *testing.T, helm, chart string) string {
	t.Helper()
	cmd := exec.Command(helm, "template", "egressd", chart, "--namespace", "llm-prod", "--show-only", "templates/deployment.yaml")
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", chart, err, out)
	}
	m := regexp.MustCompile(`(?m)^\s+image: "?([^"\s]+)"?$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no image in the rendered Deployment:\n%s", out)
	}
	return string(m[1])
}

// archiveRef returns the ref name of the OCI archive's one manifest.
func archiveRef(t *testing.T, archive string) string {
	t.Helper()
	out, err := exec.Command("tar", "-xOf", archive, "index.json").Output()
	if err != nil {
		t.Fatalf("tar %s index.json: %v", archive, err)
	}
	var idx struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(out, &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v: %s", err, out)
	}
	return idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
}

// helmBin finds helm as test/chart does: .tools/bin, then PATH; missing
// fails unless EGRESSD_SKIP_HELM=1.
func helmBin(t *testing.T, root string) string {
	t.Helper()
	if p := filepath.Join(root, ".tools", "bin", "helm"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("EGRESSD_SKIP_HELM") == "1" {
		t.Skip("helm not found (skipped: EGRESSD_SKIP_HELM=1)")
	}
	t.Fatal("helm not found in .tools/bin or PATH: run scripts/deps/helm.sh")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// requireImageTools skips where test/image skips: buildah builds as root
// here.
func requireImageTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: buildah builds as root here (as test/image)")
	}
	for _, tool := range []string{"buildah", "skopeo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not installed (scripts/deps/image.sh installs it)", tool)
		}
	}
}
