package cli

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func newFakeHarness(t *testing.T) *harness {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&v1alpha1.ModelServer{}).
		WithIndex(&corev1.Event{}, "involvedObject.kind", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Kind}
		}).
		WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
			return []string{o.(*corev1.Event).InvolvedObject.Name}
		}).
		Build()
	h := &harness{t: t, c: c, ns: "ml"}
	h.command = func(out, errOut *syncBuffer) (*rootRun, error) {
		cmd := NewCommand(streams(out, errOut), WithClient(c, "ml"), WithPollInterval(100*time.Millisecond))
		return &rootRun{run: func(ctx context.Context, args []string) error {
			cmd.SetArgs(args)
			return cmd.ExecuteContext(ctx)
		}}, nil
	}
	return h
}

func TestCommandsWithAFakeClient(t *testing.T) {
	commandSuite(t, newFakeHarness)
}
