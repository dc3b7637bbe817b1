package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/egressd/egressd/inject"
)

// Path is where the webhook is served (docs/design.md).
const Path = "/inject"

var podResource = groupVersionResource{Version: "v1", Resource: "pods"}

// ServeHTTP answers one AdmissionReview.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.m.seconds.Observe(time.Since(start).Seconds()) }()
	if r.Method != http.MethodPost {
		s.bad(w, r, http.StatusMethodNotAllowed, fmt.Errorf("method %s, want POST", r.Method))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.bad(w, r, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q, want application/json", r.Header.Get("Content-Type")))
		return
	}
	review, err := decodeReview(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		code := http.StatusBadRequest
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			code = http.StatusRequestEntityTooLarge
		}
		s.bad(w, r, code, err)
		return
	}
	resp, result := s.review(review.Request)
	s.m.requests.WithLabelValues(result).Inc()
	out := admissionReview{APIVersion: review.APIVersion, Kind: review.Kind, Response: resp}
	body, err := json.Marshal(&out)
	if err != nil { // cannot happen for these types; answer rather than panic
		s.bad(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// decodeReview reads an AdmissionReview v1 with a request and its uid.
func decodeReview(body io.Reader) (*admissionReview, error) {
	var review admissionReview
	dec := json.NewDecoder(body)
	if err := dec.Decode(&review); err != nil {
		return nil, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the AdmissionReview")
	}
	switch {
	case review.APIVersion != reviewAPIVersion || review.Kind != reviewKind:
		return nil, fmt.Errorf("apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
	case review.Request == nil:
		return nil, errors.New("AdmissionReview without a request")
	case review.Request.UID == "":
		return nil, errors.New("AdmissionReview request without a uid")
	}
	return &review, nil
}

// review decides one request: always allowed, with a patch when the pod is
// injected, and the result label.
func (s *Server) review(req *admissionRequest) (*admissionResponse, string) {
	resp := &admissionResponse{UID: req.UID, Allowed: true}
	if req.Resource != podResource || req.SubResource != "" || req.Operation != opCreate {
		return resp, resultIgnored
	}
	if req.Namespace != s.cfg.Namespace {
		return resp, resultOtherNamespace
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object, &pod); err != nil {
		s.log.Error("webhook: pod not decoded; admitted without injection", "uid", req.UID, "error", err.Error())
		return resp, resultError
	}
	res, err := inject.Mutate(&pod, req.Namespace, s.cfg.Inject)
	switch {
	case err != nil:
		s.log.Error("webhook: mutation failed; admitted without injection", "uid", req.UID, "error", err.Error())
		return resp, resultError
	case res.Skipped != "":
		return resp, res.Skipped
	case res.Patch == nil:
		return resp, resultUnchanged
	}
	pt := patchTypeJSON
	resp.Patch, resp.PatchType = res.Patch, &pt
	s.log.Debug("webhook: pod injected", "namespace", req.Namespace, "name", podName(&pod, req), "uid", req.UID)
	return resp, resultInjected
}

func podName(p *corev1.Pod, req *admissionRequest) string {
	switch {
	case req.Name != "":
		return req.Name
	case p.Name != "":
		return p.Name
	}
	return p.GenerateName
}

// bad answers a request that is not a usable review, and logs it.
func (s *Server) bad(w http.ResponseWriter, r *http.Request, code int, err error) {
	s.m.requests.WithLabelValues(resultBadRequest).Inc()
	s.log.Warn("webhook: bad request", "status", code, "remote", r.RemoteAddr, "error", err.Error())
	http.Error(w, http.StatusText(code)+": "+err.Error(), code)
}
