package webhook

import "encoding/json"

// The AdmissionReview v1 wire format, as far as the webhook reads and
// writes it. Hand-written instead of k8s.io/api/admission/v1: that package
// links authentication/v1 (the request's userInfo), and the two cost
// 254 kB of the stripped binary on the lean build of issue 17 (whose goal
// is 25 MB): the webhook added 454 kB with them, 200 kB without
// (`go tool nm -size`: admission/v1 39 kB and authentication/v1 76 kB of
// named code, the rest their type data). The tests encode requests and
// decode answers with the k8s.io/api types, so both stay in step.
const (
	reviewAPIVersion = "admission.k8s.io/v1"
	reviewKind       = "AdmissionReview"
	opCreate         = "CREATE"
	patchTypeJSON    = "JSONPatch"
)

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type groupVersionResource struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type admissionRequest struct {
	UID         string               `json:"uid"`
	Resource    groupVersionResource `json:"resource"`
	SubResource string               `json:"subResource,omitempty"`
	Name        string               `json:"name,omitempty"`
	Namespace   string               `json:"namespace,omitempty"`
	Operation   string               `json:"operation"`
	Object      json.RawMessage      `json:"object,omitempty"`
}

type admissionResponse struct {
	UID       string  `json:"uid"`
	Allowed   bool    `json:"allowed"`
	Patch     []byte  `json:"patch,omitempty"` // base64 in JSON, as []byte is
	PatchType *string `json:"patchType,omitempty"`
}
