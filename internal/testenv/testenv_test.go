package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// children lists the command names of this process's direct children (from /proc).
func children(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == self {
			out = append(out, s[strings.IndexByte(s, '(')+1:i])
		}
	}
	return out
}

// A start that fails after the control plane came up (here: a CRD the API server refuses)
// stops etcd and kube-apiserver instead of leaving them running.
func TestAFailedStartLeavesNoProcessBehind(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	dir := t.TempDir()
	bad := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: "this is not CEL"
`
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	env, _, err := Start(dir)
	if err == nil {
		_ = env.Stop()
		t.Fatal("a refused CRD started the environment")
	}
	for _, c := range children(t) {
		if c == "etcd" || c == "kube-apiserver" {
			t.Errorf("after a failed start, %s still runs (children: %v); start error: %v", c, children(t), err)
		}
	}
}
