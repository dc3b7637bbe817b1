package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
)

const version = "imagetest"

// built is what scripts/image.sh made: the OCI archive, the build
// context (its binary runs `egressd probe` from the host) and the storage
// podman runs the image from.
type built struct {
	root    string // the repository
	out     string // OUT: archive and context
	archive string
	digest  string
	store   []string // podman's storage flags
	env     []string
}

func requireTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: podman runs the image as root here (rootless podman needs subuid ranges this test does not set up)")
	}
	for _, tool := range []string{"buildah", "podman", "runc", "skopeo"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not installed (scripts/deps/image.sh installs it)", tool)
		}
	}
}

// build runs scripts/image.sh into a private storage, as `make image` does
// into the default one.
func build(t *testing.T) *built {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	b := &built{root: root, out: filepath.Join(work, "out")}
	storage, runroot := filepath.Join(work, "storage"), filepath.Join(work, "run")
	b.store = []string{"--storage-driver", "vfs", "--root", storage, "--runroot", runroot}
	conf := filepath.Join(root, ".tools", "containers", "containers.conf")
	if _, err := os.Stat(conf); err != nil {
		t.Fatalf("%s: %v (make deps, scripts/deps/image.sh, writes it)", conf, err)
	}
	b.env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	cmd := exec.Command("bash", "scripts/image.sh")
	cmd.Dir = root
	cmd.Env = append(slices.Clone(b.env), "VERSION="+version, "OUT="+b.out,
		"IMAGE_ROOT="+storage, "IMAGE_RUNROOT="+runroot)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`digest (sha256:[0-9a-f]{64})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("scripts/image.sh printed no digest: %s", out)
	}
	b.digest = string(m[1])
	b.archive = filepath.Join(b.out, "egressd-"+version+".oci.tar")
	written, err := os.ReadFile(b.archive + ".digest")
	if err != nil || strings.TrimSpace(string(written)) != b.digest {
		t.Fatalf("%s.digest: %q, %v; want %s", b.archive, written, err, b.digest)
	}
	t.Cleanup(func() {
		// vfs leaves plain directories; remove the image so that nothing
		// of it stays mounted or locked when the temporary folder goes.
		_ = exec.Command("podman", append(slices.Clone(b.store), "rmi", "-f", "egressd:"+version)...).Run()
	})
	return b
}

func TestImage(t *testing.T) {
	requireTools(t)
	b := build(t)
	t.Run("contents", func(t *testing.T) { checkContents(t, b) })
	t.Run("runs as shipped", func(t *testing.T) { checkRun(t, b) })
}

// ociIndex, ociManifest and ociConfig are the parts of the image layout
// the test reads (OCI image-spec: index.json, the manifest, the config).
type ociIndex struct {
	Manifests []struct{ Digest string } `json:"manifests"`
}

type ociManifest struct {
	Config struct{ Digest string } `json:"config"`
	Layers []struct {
		Digest    string `json:"digest"`
		MediaType string `json:"mediaType"`
	} `json:"layers"`
}

type ociConfig struct {
	Config struct {
		User         string
		Env          []string
		Entrypoint   []string
		Cmd          []string
		ExposedPorts map[string]struct{}
		Labels       map[string]string
	} `json:"config"`
}

// readArchive returns the blobs of an OCI archive by path ("index.json",
// "blobs/sha256/…").
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	eachEntry(t, path, f, func(name string, h *tar.Header, data func() []byte) {
		if h.Typeflag == tar.TypeReg {
			files[name] = data()
		}
	})
	return files
}

// eachEntry calls fn with every entry of the tar stream r (what names it
// in errors), its name without "./" and a trailing "/", and a reader of
// its content.
func eachEntry(t *testing.T, what string, r io.Reader, fn func(name string, h *tar.Header, data func() []byte)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fn(strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/"), h, func() []byte {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: %s: %v", what, h.Name, err)
			}
			return data
		})
	}
}

func blob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	alg, hex, _ := strings.Cut(digest, ":")
	data, ok := files["blobs/"+alg+"/"+hex]
	if !ok {
		t.Fatalf("archive has no blob %s", digest)
	}
	return data
}

func decode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// checkContents reads the archive: exactly the files the Dockerfile
// copies, and the config the chart relies on.
func checkContents(t *testing.T, b *built) {
	files := readArchive(t, b.archive)
	var idx ociIndex
	decode(t, files["index.json"], &idx)
	if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != b.digest {
		t.Fatalf("index.json manifests %+v, want the one of digest %s", idx.Manifests, b.digest)
	}
	var man ociManifest
	decode(t, blob(t, files, b.digest), &man)
	var cfg ociConfig
	decode(t, blob(t, files, man.Config.Digest), &cfg)

	got := map[string]*tar.Header{}
	content := map[string][]byte{}
	for _, l := range man.Layers {
		data := blob(t, files, l.Digest)
		var r io.Reader = bytes.NewReader(data)
		if strings.HasSuffix(l.MediaType, "+gzip") {
			zr, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = zr
		}
		eachEntry(t, "layer "+l.Digest, r, func(name string, h *tar.Header, data func() []byte) {
			got[name] = h
			if h.Typeflag == tar.TypeReg && name != "egressd" {
				content[name] = data()
			}
		})
	}
	want := map[string]byte{
		"etc": tar.TypeDir, "etc/ssl": tar.TypeDir, "etc/ssl/certs": tar.TypeDir,
		"etc/passwd": tar.TypeReg, "etc/group": tar.TypeReg, "etc/ssl/certs/ca-certificates.crt": tar.TypeReg,
		"egressd": tar.TypeReg,
	}
	for name, h := range got {
		if typ, ok := want[name]; !ok || typ != h.Typeflag {
			t.Errorf("image holds %s (type %c), which it must not: only the binary, the CA bundle, passwd and group", name, h.Typeflag)
		}
	}
	for name := range want {
		if got[name] == nil {
			t.Errorf("image lacks %s", name)
		}
	}
	for _, never := range []string{"bin/sh", "bin/bash", "bin/busybox", "usr/bin/apt", "usr/bin/dpkg", "sbin/apk"} {
		if got[never] != nil {
			t.Errorf("image holds %s", never)
		}
	}
	if h := got["egressd"]; h != nil && h.Mode&0o111 == 0 {
		t.Errorf("/egressd mode %o: not executable", h.Mode)
	}
	if !bytes.Contains(content["etc/passwd"], []byte("nonroot:x:65532:65532:")) || !bytes.Contains(content["etc/group"], []byte("nonroot:x:65532:")) {
		t.Errorf("passwd %q, group %q: want the nonroot user and group 65532", content["etc/passwd"], content["etc/group"])
	}
	if !x509.NewCertPool().AppendCertsFromPEM(content["etc/ssl/certs/ca-certificates.crt"]) {
		t.Error("the CA bundle holds no certificate")
	}

	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/egressd"}) || !slices.Equal(c.Cmd, []string{"run"}) {
		t.Errorf("Entrypoint %q Cmd %q, want [/egressd] [run]", c.Entrypoint, c.Cmd)
	}
	dockerfile, err := os.ReadFile(filepath.Join(b.root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	godebug := regexp.MustCompile(`(?m)^ENV (GODEBUG=\S+)$`).FindSubmatch(dockerfile)
	if godebug == nil || !slices.Contains(c.Env, string(godebug[1])) {
		t.Errorf("Env %q lacks the Dockerfile's %s", c.Env, godebug)
	}
	for _, p := range []string{"3128/tcp", "5353/udp", "5353/tcp", "8443/tcp", "8080/tcp", "9090/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("ExposedPorts %v lacks %s", c.ExposedPorts, p)
		}
	}
	rev := gitOut(t, b.root, "rev-parse", "HEAD")
	epoch, err := strconv.ParseInt(gitOut(t, b.root, "log", "-1", "--format=%ct"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": rev,
		"org.opencontainers.image.created":  time.Unix(epoch, 0).UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":   "https://github.com/egressd/egressd",
	} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if c.Labels["org.opencontainers.image.licenses"] == "" {
		t.Error("no org.opencontainers.image.licenses label")
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago
// (the container's listeners take it; a clash fails the test loudly).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// world is the demo's outside: examples/demo/origin (DNS for *.demo.test
// and the TLS origin, both on 127.0.0.1) and its CA.
type world struct {
	dns, https string
	ca         *x509.CertPool
}

func startWorld(t *testing.T, b *built, dir string) *world {
	t.Helper()
	bin := filepath.Join(dir, "origin")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/demo/origin")
	cmd.Dir = b.root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the demo origin: %v\n%s", err, out)
	}
	w := &world{dns: fmt.Sprintf("127.0.0.1:%d", freePort(t)), https: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	origin := exec.Command(bin, "-dir", dir, "-dns", w.dns, "-https", w.https)
	var stderr testutil.SyncBuffer
	origin.Stderr = &stderr
	if err := origin.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- origin.Wait() }()
	t.Cleanup(func() {
		_ = origin.Process.Signal(os.Interrupt)
		<-exited
	})
	caPath := filepath.Join(dir, "ca.pem")
	waitFor(t, 30*time.Second, "the demo origin's ca.pem", func() bool {
		select {
		case err := <-exited:
			t.Fatalf("the demo origin exited: %v\n%s", err, stderr.String())
		default:
		}
		fi, err := os.Stat(caPath)
		return err == nil && fi.Size() > 0
	})
	pem, err := os.ReadFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	w.ca = x509.NewCertPool()
	if !w.ca.AppendCertsFromPEM(pem) {
		t.Fatal("ca.pem holds no certificate")
	}
	return w
}

// waitFor polls cond until it holds or the limit passes: a wait for a
// process outside the test to reach a state, never a fixed sleep.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, limit)
		}
		<-tick.C
	}
}

// checkRun runs the image under the chart's security settings in front
// of the demo world and drives it from the host.
func checkRun(t *testing.T, b *built) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // uid 65532 reads the config
		t.Fatal(err)
	}
	w := startWorld(t, b, dir)
	_, originPort, _ := net.SplitHostPort(w.https)
	pol, err := os.ReadFile(filepath.Join(b.root, "examples", "demo", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The demo's policy with the origin's port of this run.
	pol = bytes.ReplaceAll(pol, []byte("ports: [23443]"), []byte("ports: ["+originPort+"]"))
	pods, err := os.ReadFile(filepath.Join(b.root, "examples", "demo", "pods.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"policy.yaml": pol, "pods.yaml": pods} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proxyAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"run", "--policy", "/config/policy.yaml", "--pods", "/config/pods.yaml",
		"--upstream-dns", w.dns, "--proxy-addr", proxyAddr, "--dns-addr", dnsAddr, "--metrics-addr", metricsAddr}
	host := filepath.Join(b.out, "image-context", "egressd") // the image's binary, run on the host
	if help, _ := exec.Command(host, "run", "-h").CombinedOutput(); bytes.Contains(help, []byte("-lameduck")) {
		args = append(args, "--lameduck", "0") // SIGTERM stops accepting at once (docs/design.md, Operations)
	}

	name := fmt.Sprintf("egressd-imagetest-%d", os.Getpid())
	podman := func(a ...string) *exec.Cmd {
		cmd := exec.Command("podman", append(slices.Clone(b.store), a...)...)
		cmd.Env = b.env
		return cmd
	}
	run := podman(append([]string{"run", "--rm", "--name", name, "--pull", "never",
		"--read-only", "--read-only-tmpfs=false", "--cap-drop", "all", "--security-opt", "no-new-privileges",
		"--user", "65532:65532", "--network", "host", "-v", dir + ":/config:ro",
		"localhost/egressd:" + version}, args...)...)
	var stdout, stderr testutil.SyncBuffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = podman("rm", "-f", "-t", "0", name).Run()
			<-exited
		}
		if t.Failed() {
			t.Logf("container stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	})

	waitFor(t, 60*time.Second, "answer from /readyz", func() bool {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the container exited: %v", err)
		default:
		}
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	inspect := func(t *testing.T, format string) string {
		t.Helper()
		out, err := podman("inspect", "--format", format, name).Output()
		if err != nil {
			t.Fatalf("podman inspect %s: %v", format, err)
		}
		return strings.TrimSpace(string(out))
	}
	t.Run("confined", func(t *testing.T) {
		pid := inspect(t, "{{.State.Pid}}")
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532",
			"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
			if !bytes.Contains(status, []byte(want+"\n")) {
				t.Errorf("/proc/%s/status lacks %q:\n%s", pid, want, status)
			}
		}
		if ro := inspect(t, "{{.HostConfig.ReadonlyRootfs}}"); ro != "true" {
			t.Errorf("ReadonlyRootfs %s", ro)
		}
	})

	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}
	// No keep-alive: each tunnel closes after its response, so its end
	// record is written then, not at the drain.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: w.ca}, DisableKeepAlives: true}}

	t.Run("allowed download", func(t *testing.T) {
		resp, err := client.Get("https://models.demo.test:" + originPort + "/weights.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || n != 1<<20 {
			t.Fatalf("status %d, %d bytes, %v; want 200 and 1 MiB (via the redirect to eu1.blob.demo.test)", resp.StatusCode, n, err)
		}
	})
	t.Run("metadata refused", func(t *testing.T) {
		resp, err := client.Get("http://169.254.169.254/latest/meta-data/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Egressd-Reason") != "metadata" {
			t.Fatalf("status %d, X-Egressd-Reason %q; want 403 metadata", resp.StatusCode, resp.Header.Get("X-Egressd-Reason"))
		}
	})
	t.Run("records on stdout", func(t *testing.T) {
		var recs []map[string]any
		waitFor(t, 10*time.Second, "records of the download and the metadata request", func() bool {
			recs = records(stdout.String())
			return find(recs, "eu1.blob.demo.test", "allow") != nil && find(recs, "169.254.169.254", "deny") != nil
		})
		if r := find(recs, "models.demo.test", "allow"); r == nil || r["client"].(map[string]any)["pod"] != "llm-server-7d9f8b6c5-x2x8q" {
			t.Errorf("no allow record of models.demo.test for the demo pod: %v", r)
		}
		// Refused without a dial: the guard's decision, no upstream bytes.
		m := find(recs, "169.254.169.254", "deny")
		if m["reason"] != "metadata" || m["outcome"] != "refused" || m["bytes_received"] != float64(0) {
			t.Errorf("metadata record %v: want reason metadata, outcome refused, nothing received", m)
		}
	})
	t.Run("egressd probe from the host", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, host, "probe", "--proxy", proxyURL.String(), "--dns", dnsAddr).CombinedOutput()
		if err != nil {
			t.Fatalf("egressd probe: %v\n%s", err, out)
		}
	})
	t.Run("SIGTERM drains and exits 0", func(t *testing.T) {
		if err := podman("kill", "--signal", "TERM", name).Run(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-exited:
			stopped = true
			if err != nil {
				t.Fatalf("container exit: %v", err)
			}
			if !strings.Contains(stderr.String(), `"msg":"stopped"`) {
				t.Errorf("no \"stopped\" in egressd's log:\n%s", stderr.String())
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the container did not exit within 60 s of SIGTERM")
		}
	})
}

// records parses the audit records among the container's stdout lines.
func records(stdout string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r map[string]any
		if json.Unmarshal(sc.Bytes(), &r) == nil && r["verdict"] != nil {
			out = append(out, r)
		}
	}
	return out
}

func find(recs []map[string]any, host, verdict string) map[string]any {
	for _, r := range recs {
		if r["host"] == host && r["verdict"] == verdict && r["event"] == "end" {
			return r
		}
	}
	return nil
}
