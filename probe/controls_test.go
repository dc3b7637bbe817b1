package probe

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

func TestControls(t *testing.T) {
	cs, err := Controls(DefaultOutside)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var metadataNamesSeen []string
	for _, c := range cs {
		if err := ValidName(c.Name); err != nil || !strings.HasPrefix(c.Name, controlPrefix) || names[c.Name] {
			t.Errorf("control name %q: %v (want valid, unique, under %s)", c.Name, err, controlPrefix)
		}
		names[c.Name] = true
		if c.Expect != ExpectDeny || c.Reason == "" {
			t.Errorf("%s: expect %s reason %q; every control expects a denial with a reason", c.Name, c.Expect, c.Reason)
		}
		if h, err := policy.NormalizeHost(c.Host); err != nil || h != c.Host {
			t.Errorf("%s: host %q not normalized", c.Name, c.Host)
		}
		switch {
		case strings.HasPrefix(c.Name, controlPrefix+"metadata-name:"):
			// The same names the guard refuses before any lookup.
			if !policy.IsMetadataName(c.Host) || c.Reason != string(policy.ReasonMetadata) || !c.DNS {
				t.Errorf("%+v: not a metadata name control", c)
			}
			metadataNamesSeen = append(metadataNamesSeen, c.Host)
		case c.Name == controlPrefix+"metadata-ip", c.Name == controlPrefix+"link-local":
			a, ok := parseIP(c.Host)
			if !ok || c.DNS {
				t.Fatalf("%+v: want an IP literal, no DNS step", c)
			}
			// Classified as the guard does: the reason expected is the
			// reason the guard gives.
			if _, reason := policy.Classify(a); string(reason) != c.Reason {
				t.Errorf("%s: guard says %s for %s, control expects %s", c.Name, reason, a, c.Reason)
			}
		case c.Name == controlPrefix+"outside":
			if c.Host != DefaultOutside || c.Reason != string(policy.ReasonNotAllowlisted) || !c.DNS {
				t.Errorf("outside control %+v", c)
			}
		default:
			t.Errorf("unexpected control %+v", c)
		}
	}
	if len(metadataNamesSeen) != 5 {
		t.Errorf("metadata names %v, want the five of docs/design.md", metadataNamesSeen)
	}
	if !names[controlPrefix+"metadata-ip"] || !names[controlPrefix+"link-local"] || !names[controlPrefix+"outside"] {
		t.Errorf("controls %v lack one of metadata-ip, link-local, outside", names)
	}

	t.Run("no outside", func(t *testing.T) {
		cs, err := Controls("")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Name == controlPrefix+"outside" {
				t.Error("outside control with an empty host")
			}
		}
	})
	t.Run("outside normalized", func(t *testing.T) {
		cs, err := Controls("Nowhere.Example.")
		if err != nil || cs[len(cs)-1].Host != "nowhere.example" {
			t.Fatalf("%v %+v", err, cs[len(cs)-1])
		}
	})
	for _, bad := range []string{"203.0.113.1", "*.example.com", "a b"} {
		t.Run("outside "+bad, func(t *testing.T) {
			if _, err := Controls(bad); err == nil {
				t.Errorf("Controls(%q) accepted", bad)
			}
		})
	}
}
