package footprint

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/egressd/egressd/internal/k8stest"
)

// binary is the egressd to measure: $EGRESSD_BIN (run.sh passes the
// image's binary; an older build gives the before figures), else the
// shipped build of this tree (scripts/gobuild.sh).
func binary(b *testing.B) string {
	b.Helper()
	if p := os.Getenv("EGRESSD_BIN"); p != "" {
		return p
	}
	out := filepath.Join(b.TempDir(), "egressd")
	cmd := exec.Command("bash", "scripts/gobuild.sh", runtimeArch(b), "bench", out)
	cmd.Dir = filepath.Join("..", "..")
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("scripts/gobuild.sh: %v\n%s", err, o)
	}
	return out
}

func runtimeArch(b *testing.B) string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// started is an egressd run that answered /readyz.
type started struct {
	cmd     *exec.Cmd
	toReady time.Duration
}

// start runs egressd with args (listeners on free loopback ports added)
// and returns once /readyz answers 200.
func start(b *testing.B, bin string, args ...string) *started {
	b.Helper()
	metrics := freeAddr(b)
	args = append(args, "--proxy-addr", freeAddr(b), "--dns-addr", freeAddr(b), "--metrics-addr", metrics)
	cmd := exec.Command(bin, append([]string{"run"}, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG=schedtrace=2147483647") // as the image runs it
	cmd.Dir = filepath.Join("..", "..")
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	client := &http.Client{Timeout: time.Second}
	for deadline := t0.Add(5 * time.Minute); ; {
		resp, err := client.Get("http://" + metrics + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &started{cmd: cmd, toReady: time.Since(t0)}
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("egressd not ready within 5 minutes")
		}
		time.Sleep(5 * time.Millisecond) // the poll interval bounds the figure's resolution
	}
}

// rssMB reads the process's resident set (VmRSS) in MB.
func rssMB(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1000
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// idle is how long a started egressd is left alone before its idle RSS is
// read: the figure is the process at rest after start, not at the instant
// it became ready.
const idle = 2 * time.Second

// measure starts egressd with args b.N times and reports the mean
// start-to-ready time and the RSS after idle, under the unit rssUnit.
func measure(b *testing.B, rssUnit, bin string, args ...string) {
	b.Helper()
	var ready time.Duration
	var rss float64
	for i := 0; i < b.N; i++ {
		s := start(b, bin, args...)
		ready += s.toReady
		time.Sleep(idle)
		rss += rssMB(b, s.cmd.Process.Pid)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ms-to-ready")
	b.ReportMetric(rss/float64(b.N), rssUnit)
	b.ReportMetric(0, "ns/op")
}

// BenchmarkStartExamplePolicy: start-to-ready and idle RSS of `egressd run`
// with examples/policies and examples/pods.yaml, no cluster.
func BenchmarkStartExamplePolicy(b *testing.B) {
	bin := binary(b)
	measure(b, "MB-idle-RSS", bin, "--policy", "examples/policies", "--pods", "examples/pods.yaml")
}

const pods = 10000

// BenchmarkRSS10kPods: `egressd run --kube` on a namespace of 10,000 pods
// with pod IPs on a real kube-apiserver (internal/k8stest): start-to-ready
// (the informers synced) and RSS once ready and idle.
func BenchmarkRSS10kPods(b *testing.B) {
	bin := binary(b)
	env := k8stest.Start(b)
	ns := env.Namespace(b)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000 // setup only: the pods go in as fast as the API server takes them
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	createPods(b, c, ns)
	kubeconfig := env.Kubeconfig(b)
	measure(b, "MB-RSS", bin, "--kube", "--kubeconfig", kubeconfig, "--namespace", ns, "--event-interval", "0")
}

// createPods makes the pods of a large namespace: each with labels, an
// owner, a service account and a pod IP in 10.0.0.0/8 (status written
// through the status subresource, as the kubelet does).
func createPods(b *testing.B, c kubernetes.Interface, ns string) {
	b.Helper()
	ctx := context.Background()
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := createPod(ctx, c, ns, i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func createPod(ctx context.Context, c kubernetes.Interface, ns string, i int) error {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("llm-server-7d9f8b6c5-%05d", i),
			Labels: map[string]string{"app.kubernetes.io/name": "llm-server", "pod-template-hash": "7d9f8b6c5"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llm-server-7d9f8b6c5",
				UID: types.UID("2a8d5f0c-91b4-4c3e-8e7a-5b6c4d3e2f10"), Controller: &yes}},
		},
		Spec: corev1.PodSpec{ServiceAccountName: "llm-server",
			Containers: []corev1.Container{{Name: "server", Image: "llm-server:1"}}},
	}
	p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	ip := fmt.Sprintf("10.%d.%d.%d", 1+i/65536, (i/256)%256, i%256)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue}}}
	_, err = c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}
