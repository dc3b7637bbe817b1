package inject

import (
	"encoding/json"
	"errors"
	"net/netip"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// FuzzMutate: any Pod the API server could send (its JSON decoded as the
// webhook decodes it) gives a patch that applies to that pod, and the
// admitted pod admitted again gives no patch.
func FuzzMutate(f *testing.F) {
	for _, s := range []string{
		`{"spec":{"containers":[{"name":"a"}]}}`,
		`{"metadata":{"annotations":{"egressd.dev/inject-override":"true"}},"spec":{"initContainers":[{"name":"i","env":[{"name":"no_proxy","value":"x"}]}],"containers":[{"name":"a","env":[{"name":"HTTPS_PROXY","valueFrom":{"fieldRef":{"fieldPath":"x"}}},{"name":"HTTPS_PROXY","value":"y"}]}]}}`,
		`{"spec":{"dnsPolicy":"ClusterFirst","dnsConfig":{"searches":["a","a"],"options":[{"name":"ndots"},{"name":"ndots","value":"1"}]},"containers":[{"name":"a"}]}}`,
		`{"metadata":{"annotations":{"egressd.dev/injected":"v1.2.3"}},"spec":{"hostNetwork":true}}`,
		`{"metadata":{"annotations":{"a/b~c":"d"}}}`,
	} {
		f.Add([]byte(s))
	}
	cfg := testConfig()
	cfg.DNS = netip.MustParseAddr("10.96.0.53")
	f.Fuzz(func(t *testing.T, raw []byte) {
		var pod corev1.Pod
		if json.Unmarshal(raw, &pod) != nil {
			return
		}
		res, err := Mutate(&pod, "llm-prod", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.Patch == nil {
			return
		}
		norm, _ := json.Marshal(&pod)
		p, err := jsonpatch.DecodePatch(res.Patch)
		if err != nil {
			t.Fatalf("bad patch %s: %v", res.Patch, err)
		}
		out, err := p.Apply(norm)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", res.Patch, norm, err)
		}
		var got corev1.Pod
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if res2, _ := Mutate(&got, "llm-prod", cfg); res2.Patch != nil {
			t.Fatalf("not idempotent: %s then %s", res.Patch, res2.Patch)
		}
	})
}
