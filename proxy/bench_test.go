package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// BenchmarkConnectTLS measures one new tunnel as the peer benchmark's
// new-conn test makes it: a new TCP connection, CONNECT, a full TLS 1.3
// handshake through the tunnel (no resumption) and one small GET. Client,
// proxy and origin share the process, so the CPU profile shows the proxy's
// share next to the TLS endpoints':
//
//	go test -run '^$' -bench ConnectTLS -benchtime 3000x -cpuprofile cpu.out ./proxy/
func BenchmarkConnectTLS(b *testing.B) {
	e := newEnv(b, envOpt{discardAudit: true, maxConns: -1})
	target := fmt.Sprintf("models.test:%d", e.tlsPort)
	connectReq := []byte("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	getReq := []byte("GET /small HTTP/1.1\r\nHost: models.test\r\nConnection: close\r\n\r\n")
	tcfg := &tls.Config{ServerName: "models.test", RootCAs: e.ca.CertPool(), NextProtos: []string{"http/1.1"},
		ClientSessionCache: nil}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(podIP)}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := connectOnce(&d, e.addr, connectReq, getReq, tcfg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	// CPU of the whole process (client, proxy and origin) per request: on a
	// shared machine a steadier figure than the wall-clock rate.
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func connectOnce(d *net.Dialer, addr string, connectReq, getReq []byte, tcfg *tls.Config) error {
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(connectReq); err != nil {
		return err
	}
	// The 200 is read byte by byte up to the blank line, as a client that
	// hands the socket to TLS must (nothing of the tunnel may be buffered).
	var hdr [64]byte
	n := 0
	for n < 4 || string(hdr[n-4:n]) != "\r\n\r\n" {
		if n == len(hdr) {
			return fmt.Errorf("CONNECT answer too long: %q", hdr[:n])
		}
		if _, err := io.ReadFull(c, hdr[n:n+1]); err != nil {
			return err
		}
		n++
	}
	if string(hdr[:12]) != "HTTP/1.1 200" {
		return fmt.Errorf("CONNECT answer %q", hdr[:n])
	}
	tc := tls.Client(c, tcfg)
	if _, err := tc.Write(getReq); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}
