// Package rbac declares the namespaced Role rules egressd needs (RoleRules),
// for the chart, config/rbac and the least-privilege tests on the real API
// server. It imports the rbac/v1 API types and policy (the CRD's group);
// nothing the egressd binary links may import it (internal/archtest), so
// that those types stay out of the binary.
package rbac
