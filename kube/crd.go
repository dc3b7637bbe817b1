package kube

import _ "embed"

// CRDYAML is the EgressPolicy CustomResourceDefinition. It is a byte-identical
// copy of charts/egressd/crds/egresspolicies.yaml (the one source of truth;
// TestCRDCopyIdentical holds them equal): go:embed cannot reach outside the
// package directory.
//
//go:embed crd.yaml
var CRDYAML []byte
