package rollout

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/egressd/egressd/internal/k8stest"
)

const nodeName = "node-0"

// cluster is the control plane, the EndpointSlice controller, kube-proxy
// in the node namespace and the egressd Service.
type cluster struct {
	env *k8stest.Env
	ns  string
	// kubeconfig reaches the API server from inside the test's namespaces
	// (through the forwarder on the node's address).
	kubeconfig string
	clusterIP  string
	dir        string
}

// process is a child the test started; it dies with the test binary.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// spawn starts a command with its output in dir/name.log (stdout to
// stdout, when given) and stops it (SIGTERM, then SIGKILL) in t.Cleanup.
func spawn(t testing.TB, dir, name string, stdout io.Writer, argv ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// kubeBin finds a Kubernetes command next to the harness's binaries.
func kubeBin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("EGRESSD_K8S_BIN")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), ".tools", "bin")
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s missing in %s: run scripts/k8s-test-env.sh (make deps)", name, dir)
	}
	return p
}

// repoRoot is the directory of the module's go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(string(bytes.TrimSpace(out)))
}

// startCluster brings up the node namespace, the control plane, the
// forwarder, the EndpointSlice controller, the Node object, kube-proxy and
// the egressd Service, and waits until kube-proxy has programmed it.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	ctx := context.Background()
	c := &cluster{dir: t.TempDir()}
	newNode(t)
	c.env = k8stest.Start(t)
	c.ns = c.env.Namespace(t)

	// The forwarder: the API server listens on the host's loopback only.
	apiHost := strings.TrimPrefix(c.env.Config.Host, "https://")
	ln := listenIn(t, nodeNS, "tcp", nodeIP+":6443")
	go forward(ln, apiHost)
	c.kubeconfig = c.writeKubeconfig(t, "https://"+nodeIP+":6443")

	kcm := spawn(t, c.dir, "kube-controller-manager", nil, kubeBin(t, "kube-controller-manager"),
		"--kubeconfig", c.env.Kubeconfig(t), "--controllers", "endpointslice-controller",
		"--leader-elect=false", "--secure-port", "0", "--endpointslice-updates-batch-period", "0")

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
	node, err := c.env.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	if _, err := c.env.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kube-proxy as a cluster runs it (iptables mode, --iptables-min-sync-period
	// at its default of 1s); the two flags keep it from sysctls a network
	// namespace does not have.
	kp := spawn(t, c.dir, "kube-proxy", nil, "ip", "netns", "exec", nodeNS, kubeBin(t, "kube-proxy"),
		"--kubeconfig", c.kubeconfig, "--proxy-mode", "iptables", "--conntrack-max-per-core=0", "--oom-score-adj=0",
		"--hostname-override", nodeName, "--cluster-cidr", podCIDR)

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "egressd"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "egressd"},
			Ports: []corev1.ServicePort{
				{Name: "dns-udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(5353)},
				{Name: "proxy", Port: 3128, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(3128)},
			},
		},
	}
	if svc, err = c.env.Client.CoreV1().Services(c.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.clusterIP = svc.Spec.ClusterIP

	// kube-proxy has synced once a rule names the ClusterIP (without
	// endpoints yet: the filter table's REJECT).
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := exec.Command("ip", "netns", "exec", nodeNS, "iptables-save").CombinedOutput()
		if strings.Contains(string(out), c.clusterIP) {
			break
		}
		select {
		case <-kp.done:
			t.Fatalf("kube-proxy exited: %v\n%s", kp.err, kp.tail())
		case <-kcm.done:
			t.Fatalf("kube-controller-manager exited: %v\n%s", kcm.err, kcm.tail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-proxy did not program the Service %s in 60s:\n%s\n%s", c.clusterIP, out, kp.tail())
		}
		time.Sleep(100 * time.Millisecond) // a poll interval
	}
	return c
}

// forward relays every connection of ln to addr (on the host's loopback).
func forward(ln net.Listener, addr string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer out.Close()
			go func() { _, _ = io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(in, out)
		}()
	}
}

// writeKubeconfig writes an admin kubeconfig for server; the API server's
// self-signed certificate names it by DNS name only, so the name checked is
// the certificate's first one.
func (c *cluster) writeKubeconfig(t testing.TB, server string) string {
	t.Helper()
	caFile := c.env.Config.TLSClientConfig.CAFile
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("no PEM in %s", caFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	serverName := cert.Subject.CommonName
	if len(cert.DNSNames) > 0 {
		serverName = cert.DNSNames[0]
	}
	if _, err := url.Parse(server); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: caFile, TLSServerName: serverName}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: c.env.Config.BearerToken}
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	cfg.CurrentContext = "test"
	p := filepath.Join(c.dir, "kubeconfig-node")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// addPod creates a Pod on the node and sets its status: Running, ip, and
// Ready as given.
func (c *cluster) addPod(t testing.TB, name string, labels map[string]string, ip string, ready bool) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1",
			Ports: []corev1.ContainerPort{{ContainerPort: 3128}, {ContainerPort: 5353, Protocol: corev1.ProtocolUDP}, {ContainerPort: 5353}}}}},
	}
	pod, err := c.env.Client.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ip
	pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = readyConditions(ready)
	if _, err := c.env.Client.CoreV1().Pods(c.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func readyConditions(ready bool) []corev1.PodCondition {
	s := corev1.ConditionFalse
	if ready {
		s = corev1.ConditionTrue
	}
	now := metav1.Now()
	return []corev1.PodCondition{
		{Type: corev1.PodReady, Status: s, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: s, LastTransitionTime: now},
	}
}

// setReady writes a Pod's Ready condition, as the kubelet does after a
// readiness probe changed its answer.
func (c *cluster) setReady(ctx context.Context, name string, ready bool) error {
	pod, err := c.env.Client.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Conditions = readyConditions(ready)
	_, err = c.env.Client.CoreV1().Pods(c.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

// readyEndpoint reports whether the egressd Service's EndpointSlices list
// ip as ready.
func (c *cluster) readyEndpoint(ctx context.Context, ip string) (bool, error) {
	slices, err := c.env.Client.DiscoveryV1().EndpointSlices(c.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=egressd"})
	if err != nil {
		return false, err
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && e.Addresses[0] == ip && e.Conditions.Ready != nil && *e.Conditions.Ready {
				return true, nil
			}
		}
	}
	return false, nil
}

// inRules reports whether kube-proxy's rules in the node namespace send
// traffic to ip (a DNAT to it).
func (c *cluster) inRules(t testing.TB, ip string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", nodeNS, "iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	return strings.Contains(string(out), "--to-destination "+ip+":")
}

// applyPolicy creates an EgressPolicy from YAML (namespace filled in).
func (c *cluster) applyPolicy(t testing.TB, doc string) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(c.ns)
	if _, err := c.env.Dynamic.Resource(k8stest.EgressPolicyResource).Namespace(c.ns).Create(context.Background(), &obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create EgressPolicy: %v", err)
	}
}

func (c *cluster) String() string { return fmt.Sprintf("cluster %s, Service %s", c.ns, c.clusterIP) }
