package stack

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/testenv"
)

// The demo's and the end-to-end stories' ModelServer is accepted by the API server's admission
// rules (the CRD's schema and validation), as every ModelServer the repository shows users is
// (internal/controller's TestAcceptsEveryModelServerTheRepositoryShows).
func TestTheDemosModelServerIsAccepted(t *testing.T) {
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	k8s, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const ns = "demo"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, ModelServer(ns, "demo", "vllm/vllm-openai:v0.10.2"), client.DryRunAll); err != nil {
		t.Errorf("refused: %v", err)
	}
}
