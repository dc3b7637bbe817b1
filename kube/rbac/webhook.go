package rbac

import rbacv1 "k8s.io/api/rbac/v1"

// WebhookRoleRules are the namespaced rules of the injection webhook's
// self-managed certificate (kube.WebhookSecret): get and update of its own
// Secret only, and create, which RBAC cannot narrow to a name (the API
// server checks create before the object has one).
func WebhookRoleRules(secret string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{secret}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
	}
}

// WebhookClusterRoleRules: get and patch (the caBundle) of the webhook's
// own MutatingWebhookConfiguration only (kube.WebhookConfig).
func WebhookClusterRoleRules(webhookConfig string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"},
		ResourceNames: []string{webhookConfig}, Verbs: []string{"get", "patch"},
	}}
}
