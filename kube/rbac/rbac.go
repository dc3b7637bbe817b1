package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/egressd/egressd/policy"
)

// RoleRules returns the namespaced Role rules egressd needs, and nothing
// more: read Pods (identities) and EgressPolicies, write EgressPolicy status
// (the Accepted condition), create Events on denied pods and patch them (the
// event writer patches the count of a repeated Event). With apply
// (egressd netpol --apply) it may also read, create and patch
// NetworkPolicies (server-side apply is a patch; get and list serve
// --check). config/rbac/role.yaml is the same list as YAML.
func RoleRules(apply bool) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{policy.Group}, Resources: []string{"egresspolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{policy.Group}, Resources: []string{"egresspolicies/status"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}
	if apply {
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"},
			Verbs: []string{"get", "list", "create", "patch"},
		})
	}
	return rules
}
