package rollout

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

const (
	// nsPrefix names every network namespace (and /etc/netns directory)
	// the test makes, so that leftovers of a crashed run can be found.
	nsPrefix = "egrro-"
	nodeNS   = nsPrefix + "node"
	// nodeIP is the node's InternalIP, on the node namespace's lo; every
	// pod namespace routes through it.
	nodeIP = "10.250.255.1"
	// podCIDR holds every address the test gives out (pods, world, node).
	podCIDR = "10.250.0.0/16"
)

// ipRun runs ip(8) and ends the test on failure.
func ipRun(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// removeNetns deletes the test's network namespaces and resolv.conf
// directories, by their names (a crashed run's too).
func removeNetns() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), nsPrefix) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
	dirs, _ := filepath.Glob("/etc/netns/" + nsPrefix + "*")
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// newNode makes the node namespace: lo up with the node's address,
// forwarding on, no other link yet.
func newNode(t testing.TB) {
	t.Helper()
	removeNetns()
	t.Cleanup(removeNetns)
	ipRun(t, "netns", "add", nodeNS)
	ipRun(t, "-n", nodeNS, "link", "set", "lo", "up")
	ipRun(t, "-n", nodeNS, "addr", "add", nodeIP+"/32", "dev", "lo")
	if out, err := exec.Command("ip", "netns", "exec", nodeNS, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("ip_forward in %s: %v: %s", nodeNS, err, out)
	}
}

// addPodNS makes namespace egrro-<role> with eth0 at ip/32, a veth pair to
// the node namespace, a route there to ip and a default route in the pod
// to the node. nameserver, when set, becomes the pod's resolv.conf (ip
// netns exec bind-mounts /etc/netns/NAME/resolv.conf).
func addPodNS(t testing.TB, role, ip, nameserver string) string {
	t.Helper()
	name := nsPrefix + role
	host := "v-" + role // 15 characters at most
	ipRun(t, "netns", "add", name)
	ipRun(t, "-n", name, "link", "set", "lo", "up")
	ipRun(t, "link", "add", host, "netns", nodeNS, "type", "veth", "peer", "name", "eth0", "netns", name)
	ipRun(t, "-n", name, "addr", "add", ip+"/32", "dev", "eth0")
	ipRun(t, "-n", name, "link", "set", "eth0", "up")
	ipRun(t, "-n", name, "route", "add", nodeIP, "dev", "eth0")
	ipRun(t, "-n", name, "route", "add", "default", "via", nodeIP, "dev", "eth0")
	ipRun(t, "-n", nodeNS, "link", "set", host, "up")
	ipRun(t, "-n", nodeNS, "route", "add", ip+"/32", "dev", host)
	if nameserver != "" {
		dir := filepath.Join("/etc/netns", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver "+nameserver+"\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// inNetns runs f on an OS thread moved into network namespace ns; sockets
// f opens stay in ns (a socket belongs to the namespace it was made in).
// The thread goes back to its own namespace afterwards, or, if that fails,
// stays locked and is discarded by the runtime with its goroutine.
func inNetns(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := f()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// dialIn dials from network namespace ns.
func dialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// listenIn opens a TCP listener in network namespace ns.
func listenIn(t testing.TB, ns, network, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := inNetns(ns, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	}); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// listenPacketIn opens a UDP socket in network namespace ns.
func listenPacketIn(t testing.TB, ns, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := inNetns(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen udp %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}
