package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/revision"
)

// An SRE sees candidate B fail its warm-up and aborts it; CI pushed the fix C a moment before,
// and both land before the controller's next pass. The abort names B: it must not abort C,
// which would then never be retried while the spec asks for it. The request is cleared, and C
// rolls out on its own course (here it holds at step 1: no Prometheus).
func TestAnAbortOfASupersededCandidateNeverAbortsTheNewOne(t *testing.T) {
	r := manualReconciler(t, interceptor.Funcs{})
	ms := newModelServer(manualNamespace, fmt.Sprintf("stale-op-%d", time.Now().UnixNano()%1e6))
	b := manualRollout(t, r, ms, 0)
	clock := time.Now()
	r.Now = func() time.Time { return clock }

	updateMS(t, ms, func(m *v1alpha1.ModelServer) {
		m.Spec.Template.Spec.Containers[0].Image = "vllm/vllm-openai:v0.12.0"
		metav1.SetMetaDataAnnotation(&m.ObjectMeta, v1alpha1.AnnotationAbort, b)
	})
	c := revision.Of(&getMS(t, ms).Spec.Template)
	for i := 0; i < 6; i++ {
		pass(t, r, ms)
		got := getMS(t, ms)
		if got.Status.Phase == v1alpha1.PhaseRolledBack || got.Status.RolledBackRevision == c {
			t.Fatalf("pass %d: revision %s aborted by a request for %s (phase %s, rolled back %q)", i, c, b, got.Status.Phase, got.Status.RolledBackRevision)
		}
		if _, err := getDeployment(ms.Namespace, ms.DeploymentName(v1alpha1.Green)); err == nil {
			markReady(t, ms.Namespace, ms.DeploymentName(v1alpha1.Green))
		}
		clock = clock.Add(5 * time.Second)
	}
	got := getMS(t, ms)
	if cand := got.Status.Candidate; cand == nil || cand.Revision != c || got.Status.Phase != v1alpha1.PhaseProgressing {
		t.Errorf("after the passes: phase %s candidate %+v, want %s's own rollout in progress", got.Status.Phase, cand, c)
	}
	if v, ok := got.Annotations[v1alpha1.AnnotationAbort]; ok {
		t.Errorf("the request for %s is still there (%s=%s): it names no rollout in progress and should be cleared", b, v1alpha1.AnnotationAbort, v)
	}
}
