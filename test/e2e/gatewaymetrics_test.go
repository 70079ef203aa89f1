//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/gateway"
)

// erroringImage is a build whose pods answer a share of the completions with 500
// (erroringProfile); the vLLM preset is off in the story, so only the Gateway's count of 5xx
// can tell.
const (
	erroringImage   = "vllm/vllm-openai:v0.11.5-errors"
	erroringProfile = "revision=v0.11.5-errors:errors=0.3"
)

func storyGatewayErrorsRolledBack(t *testing.T) {
	t.Parallel()
	if os.Getenv(simulatedGatewayEnv) != "" {
		t.Skipf("the gateway metrics are Traefik's: this story runs through Traefik (without %s)", simulatedGatewayEnv)
	}
	ns := namespace(t, "story-gateway-errors")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(4), steps(20*time.Second, 10, 50, 100),
		func(ms *v1alpha1.ModelServer) {
			ms.Spec.Rollout.Analysis.Preset = v1alpha1.AnalysisPresetNone
			ms.Spec.Rollout.Analysis.Gateway = v1alpha1.GatewayMetricsTraefik
		})
	given(t, "a %s, judged only on %s as Traefik %s counts it (analysis.gateway: Traefik, preset none; the controller reads Traefik's series with --gateway-metrics-namespace=%s)",
		describe(ms), metrics.MetricGatewayErrorRatio, gateway.Version, devenv.TraefikMetricsNamespace)
	v0 := create(t, ms, 3*time.Minute)
	stable := v0.ms.Status.Stable.DeepCopy()
	bad := stable.Color.Other()

	when(t, "the image changes to %s, whose pods answer 30%% of the completions with 500 (%s)", erroringImage, erroringProfile)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, erroringImage)
	var firstWeight time.Time
	maxWeight := int32(0)
	last := follow(t, ns, ms.Name, 4*time.Minute, "rollback of "+rev, func(v view) error {
		if err := weightsInvariant(v); err != nil {
			return err
		}
		s := v.ms.Status
		if s.Stable == nil || s.Stable.Revision != stable.Revision {
			return fmt.Errorf("the stable revision changed: %+v", s.Stable)
		}
		if s.Weights.Candidate > 0 && firstWeight.IsZero() {
			firstWeight = v.at
		}
		maxWeight = max(maxWeight, v.route[bad])
		if s.Phase == v1alpha1.PhaseHealthy && s.Revision == rev {
			return fmt.Errorf("the erroring version was promoted")
		}
		return nil
	}, func(v view) bool {
		return v.ms.Status.ObservedGeneration >= v.ms.Generation && v.phase() == v1alpha1.PhaseRolledBack
	})
	rolledBack := last.at

	then(t, "it is rolled back on the Gateway's error ratio: stable %s has the whole traffic again", stable.Color)
	if last.route[stable.Color] != 100 {
		t.Errorf("after the rollback the route is %v, want stable %s at 100", last.route, stable.Color)
	}
	h := last.ms.Status.History
	if len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeRolledBack {
		t.Fatalf("history %+v, want %s RolledBack first", h, rev)
	}
	and(t, "the reason names the gateway's metric: %s", h[0].Reason)
	if !strings.Contains(h[0].Reason, metrics.MetricGatewayErrorRatio) {
		t.Errorf("rollback reason %q does not name %s", h[0].Reason, metrics.MetricGatewayErrorRatio)
	}
	if c := last.condition(v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled condition %+v, want True after a rollback", c)
	}

	at := settleScrape()
	window := int(at.Sub(began).Seconds()) + 1
	// What Traefik counted for the candidate's Service, and what the load generator got back.
	svc := metrics.TraefikName(ns) + "-" + metrics.TraefikName(ms.ServiceName(bad)) + "-http-[0-9]+@kubernetesgateway"
	traefik5xx := counter(t, fmt.Sprintf(`sum(increase(traefik_service_requests_total{namespace=%q,service=~%q,code=~"5.."}[%ds]))`,
		devenv.TraefikMetricsNamespace, svc, window), at)
	traefikAll := counter(t, fmt.Sprintf(`sum(increase(traefik_service_requests_total{namespace=%q,service=~%q}[%ds]))`,
		devenv.TraefikMetricsNamespace, svc, window), at)
	client5xx := served(t, ns, ms.Name, bad, "5..", began, at)
	if traefik5xx == 0 {
		t.Errorf("Traefik counted no 5xx for the candidate's Service %s: the rollback was not judged on the Gateway's count", svc)
	}
	figure(t, "time to roll back a version answering 30% 5xx, judged by the Gateway", "%s after the release, %s after it first got traffic (highest weight %d%%)",
		secs(rolledBack.Sub(began)), secs(rolledBack.Sub(firstWeight)), maxWeight)
	figure(t, "5xx of the erroring version counted by the Gateway", "Traefik %.0f of %.0f requests to the candidate's Service (%.1f%%); the load generator got %.0f 5xx from it",
		traefik5xx, traefikAll, 100*traefik5xx/max(traefikAll, 1), client5xx)
}
