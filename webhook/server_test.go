package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egressd/egressd/certs"
	"github.com/egressd/egressd/inject"
)

// writePair issues a leaf for 127.0.0.1 from ca into dir and returns it.
func writePair(t *testing.T, ca *certs.CA, dir string) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.IssuePair(certs.LeafConfig{Hosts: []string{"127.0.0.1"}})
	if err == nil {
		err = WritePair(dir, certPEM, keyPEM)
	}
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &leaf
}

type testServer struct {
	s      *Server
	url    string
	client *http.Client
	reg    *prometheus.Registry
	dir    string
	ca     *certs.CA
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	ca, err := certs.NewCA("egressd webhook test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePair(t, ca, dir)
	reg := prometheus.NewRegistry()
	s, err := New(Config{
		Namespace: "llm-prod", CertDir: dir, Registerer: reg, MaxBody: 64 << 10,
		Inject: testInject(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.CertPool()}}
	t.Cleanup(tr.CloseIdleConnections)
	return &testServer{s: s, url: "https://" + ln.Addr().String() + Path, client: &http.Client{Transport: tr}, reg: reg, dir: dir, ca: ca}
}

func reviewBody(t testing.TB, op admissionv1.Operation, ns string, pod *corev1.Pod) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-1"), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: ns,
			Operation: op, Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testPod(annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
}

func TestReview(t *testing.T) {
	ts := startServer(t)
	cases := []struct {
		name        string
		method      string
		contentType string
		body        []byte
		wantCode    int
		wantPatch   bool
		wantResult  string
	}{
		{name: "pod create injected", body: reviewBody(t, admissionv1.Create, "llm-prod", testPod(nil)), wantCode: 200, wantPatch: true, wantResult: "injected"},
		{name: "pod of another namespace", body: reviewBody(t, admissionv1.Create, "other", testPod(nil)), wantCode: 200, wantResult: "other-namespace"},
		{name: "opted out", body: reviewBody(t, admissionv1.Create, "llm-prod", testPod(map[string]string{inject.AnnotationInject: "false"})), wantCode: 200, wantResult: "opted-out"},
		{name: "already injected", body: reviewBody(t, admissionv1.Create, "llm-prod", injectedPod(t)), wantCode: 200, wantResult: "unchanged"},
		{name: "update ignored", body: reviewBody(t, admissionv1.Update, "llm-prod", testPod(nil)), wantCode: 200, wantResult: "ignored"},
		{name: "malformed json", body: []byte(`{"apiVersion":`), wantCode: 400, wantResult: "bad-request"},
		{name: "trailing data", body: append(reviewBody(t, admissionv1.Create, "llm-prod", testPod(nil)), "{}"...), wantCode: 400, wantResult: "bad-request"},
		{name: "wrong kind", body: []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), wantCode: 400, wantResult: "bad-request"},
		{name: "no request", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), wantCode: 400, wantResult: "bad-request"},
		{name: "no uid", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), wantCode: 400, wantResult: "bad-request"},
		{name: "bad pod object is admitted unchanged", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"llm-prod","object":{"spec":{"containers":7}}}}`), wantCode: 200, wantResult: "error"},
		{name: "body over the limit", body: bytes.Repeat([]byte(" "), 65<<10), wantCode: 413, wantResult: "bad-request"},
		{name: "GET", method: http.MethodGet, wantCode: 405, wantResult: "bad-request"},
		{name: "not json", contentType: "text/plain", body: []byte("x"), wantCode: 415, wantResult: "bad-request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, ct := tc.method, tc.contentType
			if method == "" {
				method = http.MethodPost
			}
			if ct == "" {
				ct = "application/json"
			}
			before := counter(t, ts.s.m.requests.WithLabelValues(tc.wantResult))
			req, _ := http.NewRequest(method, ts.url, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", ct)
			resp, err := ts.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, body, tc.wantCode)
			}
			if got := counter(t, ts.s.m.requests.WithLabelValues(tc.wantResult)) - before; got != 1 {
				t.Errorf("result %q counted %v times", tc.wantResult, got)
			}
			if tc.wantCode != 200 {
				return
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			r := out.Response
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || r == nil || !r.Allowed || r.UID == "" {
				t.Fatalf("response %s", body)
			}
			if (len(r.Patch) > 0) != tc.wantPatch || tc.wantPatch && (r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch) {
				t.Fatalf("patch %q type %v, want patch %v", r.Patch, r.PatchType, tc.wantPatch)
			}
		})
	}
}

func injectedPod(t *testing.T) *corev1.Pod {
	p := testPod(nil)
	res, err := inject.Mutate(p, "llm-prod", testInject())
	if err != nil {
		t.Fatal(err)
	}
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(res.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	for _, o := range ops {
		switch o.Path {
		case "/spec/containers/0/env":
			_ = json.Unmarshal(o.Value, &p.Spec.Containers[0].Env)
		case "/metadata/annotations":
			_ = json.Unmarshal(o.Value, &p.Annotations)
		}
	}
	return p
}

// TestCertificateReload: a new pair written to the directory is served
// from the next poll on; a broken write keeps the last good pair.
func TestCertificateReload(t *testing.T) {
	ts := startServer(t)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(ts.url, "https://"), Path), &tls.Config{RootCAs: ts.ca.CertPool()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	next := writePair(t, ts.ca, ts.dir)
	if !ts.s.certs.watcher.Poll() {
		t.Fatal("the new pair was not noticed")
	}
	if got := serial(); got != next.Leaf.SerialNumber.String() || got == first {
		t.Fatalf("serving serial %s after reload, want %s", got, next.Leaf.SerialNumber)
	}
	if err := os.WriteFile(filepath.Join(ts.dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("junk")}), 0o600); err != nil {
		t.Fatal(err)
	}
	ts.s.certs.watcher.Poll()
	if got := serial(); got != next.Leaf.SerialNumber.String() {
		t.Fatalf("a broken pair replaced the good one: serial %s", got)
	}
	if got := counter(t, ts.s.m.reloads.WithLabelValues("error")); got != 1 {
		t.Errorf("reload errors %v, want 1", got)
	}
}

func TestNewWithoutCertificate(t *testing.T) {
	_, err := New(Config{Namespace: "ns", CertDir: t.TempDir(), Inject: testInject()})
	if !errors.Is(err, ErrNoCertificate) {
		t.Fatalf("New on an empty directory: %v, want ErrNoCertificate", err)
	}
}

// FuzzReview: no body makes the handler panic or answer other than 200 with
// an allowing review of the same uid, or a 4xx.
func FuzzReview(f *testing.F) {
	f.Add(reviewBody(f, admissionv1.Create, "llm-prod", testPod(nil)))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"llm-prod","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","resource":{"version":"v1","resource":"pods"},"operation":"CREATE","namespace":"llm-prod","object":{"metadata":{"annotations":null},"spec":{"containers":[{"env":null}]}}}}`))
	s := &Server{cfg: Config{Namespace: "llm-prod", Inject: testInject()}, maxBody: 1 << 20}
	s.log = discardLogger()
	s.m, _ = newMetrics(nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 400 && rec.Code < 500 {
			return
		}
		if rec.Code != 200 {
			t.Fatalf("status %d", rec.Code)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed || out.Response.UID == "" {
			t.Fatalf("response %s (%v)", rec.Body.Bytes(), err)
		}
	})
}

func counter(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func testInject() inject.Config {
	return inject.Config{ProxyURL: "http://egressd.llm-prod.svc:3128", Version: "test",
		Never: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}
}
