//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// storyShadowRollsBackUnseen: with a shadow phase through Traefik (a TraefikService that answers
// from the stable color and mirrors every request to the candidate), a 3x slower version is
// judged on the mirrored requests and rolled back before any user request reaches it: the
// Gateway's answers to the trace's requests come from the stable color only, while the
// candidate's pods did serve the mirrored copies.
func storyShadowRollsBackUnseen(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-shadow")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Shadow = &v1alpha1.ShadowSpec{Percent: 100, Duration: v1alpha1.Duration{Duration: time.Minute}, Mirror: v1alpha1.ShadowMirrorTraefikService}
	})
	given(t, "a %s, with a shadow phase of 1m mirroring 100%% of the requests through a TraefikService", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	stable := v0.ms.Status.Stable.DeepCopy()
	bad := stable.Color.Other()

	when(t, "the image changes to %s, which the simulator makes 3x slower (%s)", imageSlow, slowProfile)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageSlow)
	var shadowAt time.Time
	last := follow(t, ns, ms.Name, 5*time.Minute, "rollback of "+rev+" in its shadow phase", func(v view) error {
		s := v.ms.Status
		if v.route[bad] > 0 || s.Weights.Candidate > 0 {
			return fmt.Errorf("the candidate %s got user weight: route %v, status %+v", bad, v.route, s.Weights)
		}
		if s.Rollout.Step > 0 {
			return fmt.Errorf("the rollout left its shadow phase for step %d", s.Rollout.Step)
		}
		if s.Rollout.Shadow != nil && shadowAt.IsZero() {
			shadowAt = s.Rollout.Shadow.StartedAt.Time
		}
		return nil
	}, func(v view) bool {
		return v.ms.Status.ObservedGeneration >= v.ms.Generation && v.phase() == v1alpha1.PhaseRolledBack
	})
	rolledBack := last.at

	then(t, "it is rolled back in the shadow phase: %s", last.ms.Status.History[0].Reason)
	h := last.ms.Status.History
	if h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(h[0].Reason, "analysis failed") {
		t.Fatalf("history %+v, want %s rolled back on its analysis", h, rev)
	}
	if shadowAt.IsZero() {
		t.Fatal("the shadow phase never started (status.rollout.shadow was never set)")
	}
	at := settleScrape()
	window := int(at.Sub(began).Seconds())
	userServed := served(t, ns, ms.Name, bad, ".*", began, at)
	total := served(t, ns, ms.Name, "", ".*", began, at)
	mirrored := counter(t, fmt.Sprintf(`sum(max_over_time(vllm:request_success_total{namespace=%q,pod=~%q}[%ds]))`, ns, ms.Name+"-"+string(bad)+"-.*", window+1), at)
	and(t, "the Gateway answered %.0f of the trace's requests, %.0f of them from the candidate; its pods served %.0f mirrored requests", total, userServed, mirrored)
	if userServed != 0 {
		t.Errorf("the candidate answered %.0f user requests; want 0: the shadow phase exposes no user", userServed)
	}
	if mirrored == 0 {
		t.Errorf("the candidate's pods served no request: nothing was mirrored to them, so nothing was judged")
	}
	if total == 0 {
		t.Errorf("the Gateway answered no request of the trace during the story")
	}
	figure(t, "shadow phase: time to roll back a 3x slower version", "%s after the release, %s after mirroring started; %.0f mirrored requests served by it, 0 of %.0f user requests",
		secs(rolledBack.Sub(began)), secs(rolledBack.Sub(shadowAt)), mirrored, total)
}
