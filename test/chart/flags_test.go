package chart_test

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// runFlags builds egressd and reads the flags of `egressd run -h`: the
// chart must render only flags the binary has, or the pod crash-loops on
// "flag provided but not defined" after a rename.
func runFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := buildEgressd(t)
	// -h exits 0 or 2 by flag package convention; the usage is what counts.
	out, _ := exec.Command(bin, "run", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags[m[1]] = true
	}
	if !flags["proxy-addr"] || !flags["audit-failure"] {
		t.Fatalf("no flags read from `egressd run -h`:\n%s", out)
	}
	return flags
}

// TestArgsAreRunFlags: every flag the Deployment passes, with every option
// on, is a flag of `egressd run`.
func TestArgsAreRunFlags(t *testing.T) {
	flags := runFlags(t)
	objs := render(t, "llm-prod", []string{allOnValues(t)})
	d := fromUnstructured[appsv1.Deployment](t, find(t, objs, "Deployment", "egressd"))
	args := d.Spec.Template.Spec.Containers[0].Args
	if len(args) == 0 || args[0] != "run" {
		t.Fatalf("args = %v, want `run` first", args)
	}
	n := 0
	for _, a := range args[1:] {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		n++
		if !flags[name] {
			t.Errorf("the chart passes --%s, which `egressd run` does not have", name)
		}
	}
	if n < 20 {
		t.Errorf("only %d flags in %v: the all-on values should set most of them", n, args)
	}
}
