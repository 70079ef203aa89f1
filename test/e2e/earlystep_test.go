//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// storyConfidentStepsEndEarly: with spec.rollout.minStepDuration, a good version's steps end
// once the analysis of the simulator's real metrics, scraped by Prometheus, passes with
// confidence, not at their stepDuration; the status says so at each step and at the promotion.
// The story asserts the reasons, not a time: a step that was not confident would end after its
// stepDuration with "analysis passed over 2m0s".
func storyConfidentStepsEndEarly(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-early")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), steps(2*time.Minute, 10, 25, 50, 100),
		func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.MinStepDuration = &v1alpha1.Duration{Duration: 20 * time.Second}
		})
	given(t, "a %s, minStepDuration %s", describe(ms), ms.Spec.Rollout.MinStepDuration.Duration)
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()

	when(t, "the image changes to %s, a version as fast as the stable one", imageGood)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageGood)
	last, weights, firstWeight := followPromotion(t, ns, ms.Name, rev, newColor, 9*time.Minute)
	promoted := time.Since(began)

	then(t, "each step after the first began, and the promotion came, on an analysis that passed with confidence")
	if h := last.ms.Status.History; len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomePromoted || !strings.Contains(h[0].Reason, "passed with confidence") {
		t.Errorf("history %+v; want %s Promoted on an analysis that passed with confidence", h, rev)
	} else {
		and(t, "the promotion: %s", h[0].Reason)
	}
	var list corev1.EventList
	if err := st.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	early, advanced := 0, 0
	for _, e := range list.Items {
		if e.InvolvedObject.Kind != "ModelServer" || e.Reason != "StepAdvanced" || !strings.Contains(e.Message, rev) {
			continue
		}
		advanced++
		if strings.Contains(e.Message, "passed with confidence") {
			early++
		}
	}
	// The first step begins when the candidate is Ready and warm; steps 2 and 3 on the analysis.
	if advanced != 3 || early != 2 {
		t.Errorf("%d StepAdvanced events for %s, %d of them on a confident analysis; want 3 and 2", advanced, rev, early)
	}
	figure(t, "minStepDuration 20s, stepDuration 2m: time to promote a good version", "%s (first weight after %s; weights %v)", secs(promoted), secs(firstWeight.Sub(began)), weights)
}
