package k8stest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/internal/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Versions the harness expects; scripts/k8s-test-env.sh builds them.
const (
	EtcdVersion          = "v3.6.13"
	KubeAPIServerVersion = "v1.37.2"
)

// startTimeout bounds how long the control plane may take to become ready.
const startTimeout = 90 * time.Second

// Env is a running etcd + kube-apiserver.
type Env struct {
	// Config authenticates as an admin (system:masters).
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Dir holds the data, certificates and logs.
	Dir string

	host    string
	caFile  string
	token   string
	bin     string
	apiArgs []string

	mu    sync.Mutex
	procs []*proc // kube-apiserver last, so it is stopped first
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// Start starts a fresh control plane for t and stops it in t.Cleanup. Prefer
// Shared where a test does not need its own (it saves ~3 s per test).
func Start(t testing.TB) *Env {
	t.Helper()
	bin := binDir(t)
	dir := t.TempDir()
	e, err := start(bin, dir)
	if e != nil {
		t.Cleanup(e.Stop)
	}
	if err != nil {
		t.Fatalf("k8stest: %v", err)
	}
	return e
}

var shared struct {
	mu  sync.Mutex
	env *Env
	err error
	dir string
}

// Main runs the tests of a package and stops the shared control plane (if
// any test asked for it) afterwards. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(k8stest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.env != nil {
		shared.env.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the control plane shared by the tests of this binary,
// starting it on first use. Tests isolate themselves with Namespace. Without
// Main in TestMain the processes outlive the tests until the binary exits
// (they die with it: Pdeathsig).
func Shared(t testing.TB) *Env {
	t.Helper()
	bin := binDir(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.env == nil && shared.err == nil {
		dir, err := os.MkdirTemp("", "egressd-k8stest-")
		if err != nil {
			shared.err = err
		} else {
			shared.dir = dir
			shared.env, shared.err = start(bin, dir)
		}
	}
	if shared.err != nil {
		t.Fatalf("k8stest: shared control plane: %v", shared.err)
	}
	return shared.env
}

// binDir finds the binaries or ends the test: Skip with EGRESSD_SKIP_K8S=1,
// Fatal otherwise, naming the command that builds them.
func binDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("EGRESSD_K8S_BIN")
	root, rootErr := repoRoot()
	if dir == "" && rootErr == nil {
		dir = filepath.Join(root, ".tools", "bin")
	}
	var missing []string
	for name, version := range map[string]string{"etcd": EtcdVersion, "kube-apiserver": KubeAPIServerVersion} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, name)
			continue
		}
		if v, err := os.ReadFile(p + ".version"); err == nil && string(bytes.TrimSpace(v)) != version {
			missing = append(missing, fmt.Sprintf("%s %s (found %s)", name, version, bytes.TrimSpace(v)))
		}
	}
	if len(missing) == 0 {
		return dir
	}
	msg := fmt.Sprintf("k8stest: missing %v in %q: run scripts/k8s-test-env.sh (or set EGRESSD_K8S_BIN)", missing, dir)
	if os.Getenv("EGRESSD_SKIP_K8S") == "1" {
		t.Skip(msg + "; skipped because EGRESSD_SKIP_K8S=1")
	}
	t.Fatal(msg)
	return ""
}

// repoRoot is the module's root, where .tools/ lies.
func repoRoot() (string, error) { return testutil.RepoRoot() }

func start(bin, dir string) (*Env, error) {
	e := &Env{Dir: dir}
	token, err := randomHex(16)
	if err != nil {
		return e, err
	}
	if err := writeFiles(dir, token); err != nil {
		return e, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return e, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if err := e.spawn(filepath.Join(bin, "etcd"), dir,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(ports[1]),
		"--unsafe-no-fsync", // test data: durability does not matter, speed does
	); err != nil {
		return e, err
	}
	e.host = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	e.token, e.bin = token, bin
	e.apiArgs = []string{"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(ports[2]),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-key-file", filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/16",
		// It would advertise a loopback address otherwise, which it refuses.
		"--endpoint-reconciler-type", "none",
		// No controller-manager creates default ServiceAccounts.
		"--disable-admission-plugins", "ServiceAccount",
	}
	if err := e.spawn(filepath.Join(bin, "kube-apiserver"), dir, e.apiArgs...); err != nil {
		return e, err
	}
	e.caFile = filepath.Join(dir, "certs", "apiserver.crt")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.waitReady(ctx, token); err != nil {
		return e, err
	}
	e.Config = e.UserConfig(token)
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return e, fmt.Errorf("clientset: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return e, fmt.Errorf("dynamic client: %w", err)
	}
	if err := e.installCRD(ctx); err != nil {
		return e, err
	}
	return e, nil
}

// UserConfig returns a config for the same server that authenticates with
// token (for example a ServiceAccount token from the TokenRequest API).
func (e *Env) UserConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            e.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: e.caFile},
		QPS:             200,
		Burst:           400,
	}
}

func writeFiles(dir, token string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("service account key: %w", err)
	}
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin,system:masters\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return os.MkdirAll(filepath.Join(dir, "certs"), 0o700)
}

// freePorts reserves n distinct loopback ports. The listeners close before
// the servers bind, so another process could steal one in between; on this
// single-user test machine that has not been seen.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (e *Env) spawn(path, dir string, args ...string) error {
	name := filepath.Base(path)
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) // a restart appends
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Die with the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return nil
}

// live returns the latest process of each name.
func (e *Env) live() []*proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	latest := map[string]*proc{}
	var out []*proc
	for _, p := range e.procs {
		latest[p.name] = p
	}
	for _, p := range latest {
		out = append(out, p)
	}
	return out
}

func (e *Env) waitReady(ctx context.Context, token string) error {
	// The server writes its self-signed certificate (and CA) at startup;
	// the client trusts exactly that, once it exists.
	var hc *http.Client
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		for _, p := range e.live() {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited during startup:\n%s", p.name, tail(p.log))
			default:
			}
		}
		var err error
		if hc == nil {
			if _, err = os.Stat(e.caFile); err == nil {
				var tr http.RoundTripper
				if tr, err = rest.TransportFor(e.UserConfig(token)); err != nil {
					return err
				}
				hc = &http.Client{Transport: tr, Timeout: 5 * time.Second}
			}
		}
		var resp *http.Response
		if hc != nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.host+"/readyz", nil)
			resp, err = hc.Do(req)
		}
		if hc != nil && err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %v\n%s", last, tail(e.procs[len(e.procs)-1].log))
		case <-tick.C:
		}
	}
}

// KillAPIServer kills kube-apiserver (SIGKILL: connections drop without a
// goodbye, as when a node or the network goes) and leaves etcd running, to
// test how clients behave when they lose the API server.
func (e *Env) KillAPIServer() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.procs {
		if p.name == "kube-apiserver" {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
}

// RestartAPIServer starts kube-apiserver again after KillAPIServer, on the
// same port with the same certificates, and waits until it is ready.
func (e *Env) RestartAPIServer() error {
	if err := e.spawn(filepath.Join(e.bin, "kube-apiserver"), e.Dir, e.apiArgs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return e.waitReady(ctx, e.token)
}

// Stop stops kube-apiserver, then etcd. It is safe to call twice.
func (e *Env) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.procs) - 1; i >= 0; i-- {
		stopProc(e.procs[i])
	}
}

func stopProc(p *proc) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Namespace creates a namespace with a unique name for t and deletes it in
// t.Cleanup (there is no namespace controller, so its objects stay in etcd;
// that does not matter to a test binary's throwaway control plane).
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns, err := e.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("k8stest: create namespace: %v", err)
	}
	return ns.Name
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Kubeconfig writes a kubeconfig file for the admin of e into t's temporary
// directory, for the CLI and helm, and returns its path.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["test"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthority: e.Config.TLSClientConfig.CAFile,
		CertificateAuthorityData: e.Config.TLSClientConfig.CAData}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: e.Config.BearerToken}
	c.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	c.CurrentContext = "test"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, p); err != nil {
		t.Fatalf("k8stest: write kubeconfig: %v", err)
	}
	return p
}
