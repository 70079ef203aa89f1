package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// loadCRD reads the ModelServer CRD. The generated CRD defaults spec.rollout to {} while the
// rollout's CEL rules read self.steps, and the API server validates that default without
// nested defaulting: it refuses the CRD ("no such key: steps"). Until the API defaults rollout
// with its steps, the test installs it with the same default spelt out ({steps: [10,25,50,100]},
// what nested defaulting yields) and says so.
// TestCommandsAgainstAPIServer runs the command suite against a real kube-apiserver and etcd
// with the ModelServer CRD of config/crd/bases, reaching them through a kubeconfig file and the
// plugin's own --kubeconfig and -n flags. Each case gets its own namespace.
func TestCommandsAgainstAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: run `make envtest-assets` and export KUBEBUILDER_ASSETS=<the folder it prints> to run the envtest suite")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	user, err := env.AddUser(envtest.User{Name: "sre", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("adding a user: %v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("writing a kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatalf("creating a client: %v", err)
	}
	var n atomic.Int64
	newHarness := func(t *testing.T) *harness {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cli-%d", n.Add(1))}}
		if err := c.Create(context.Background(), ns); err != nil {
			t.Fatalf("creating namespace: %v", err)
		}
		h := &harness{t: t, c: c, ns: ns.Name}
		h.command = func(out, errOut *syncBuffer) (*rootRun, error) {
			// An hour between re-reads: everything these tests see comes through the watch.
			cmd := NewCommand(streams(out, errOut), WithPollInterval(time.Hour))
			return &rootRun{
				extraArgs: []string{"--kubeconfig", path, "-n", ns.Name},
				run: func(ctx context.Context, args []string) error {
					cmd.SetArgs(args)
					return cmd.ExecuteContext(ctx)
				},
			}, nil
		}
		return h
	}
	commandSuite(t, newHarness)
	revisionSuite(t, newHarness)
}
