//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// storyScaleFromZeroOnGatewayRequests: a ModelServer at 0 replicas has no pod to report any load;
// the requests Traefik's routers count for its HTTPRoute (answered by Traefik itself while no
// backend has a ready endpoint) are the signal that brings its first pods up, and they then serve.
func storyScaleFromZeroOnGatewayRequests(t *testing.T) {
	t.Parallel()
	if os.Getenv(simulatedGatewayEnv) != "" {
		t.Skipf("the gateway metrics are Traefik's: this story runs through Traefik (without %s)", simulatedGatewayEnv)
	}
	ns := namespace(t, "story-gateway-zero")
	ms := newModelServer(ns, "llama", imageV1, func(ms *v1alpha1.ModelServer) {
		a := ms.Spec.Autoscaling
		a.MinReplicas, a.MaxReplicas = ptr.To(int32(0)), 4
		ms.Spec.Replicas = ptr.To(int32(0)) // the count it starts from, as a Deployment's for an HPA
		a.Metrics = []v1alpha1.AutoscalingMetric{{Gateway: &v1alpha1.GatewayRequestsMetric{Target: resource.MustParse("1000")}}}
	})
	given(t, "a %s, from 0 replicas, scaled on the requests per second Traefik counts at its HTTPRoute (1000 per replica)", describe(ms))
	when(t, "it is created while the trace sends its requests to the route's hostname")
	began := time.Now()
	if err := st.Client.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating ModelServer: %v", err)
	}
	var sawZero bool
	last := follow(t, ns, ms.Name, 4*time.Minute, "scaled up from 0 on the gateway's count", func(v view) error {
		if v.ms.Status.Autoscaling != nil && v.ms.Status.Autoscaling.DesiredReplicas > 4 {
			return fmt.Errorf("desired %d replicas, above maxReplicas 4", v.ms.Status.Autoscaling.DesiredReplicas)
		}
		if v.desired() == 0 {
			sawZero = true
		}
		return nil
	}, func(v view) bool { return v.ms.Status.ReadyReplicas >= 1 })
	upAt := last.at
	if !sawZero {
		t.Errorf("the ModelServer never stood at 0 replicas: the story did not start from zero")
	}
	waitServing(t, ns, ms.Name, 3*time.Minute)
	served200 := served(t, ns, ms.Name, last.stableColor(), "200", began, settleScrape())

	then(t, "its first pod came up %s after creation (started at 0 replicas: %t) and the Gateway answered %.0f requests from it", secs(upAt.Sub(began)), sawZero, served200)
	if served200 == 0 {
		t.Errorf("no request was answered 200 by the ModelServer's pods")
	}
	if last.ms.Status.Autoscaling == nil {
		t.Fatalf("no autoscaling status")
	}
	and(t, "the autoscaler's reason: %s", describeAutoscaling(last))
	figure(t, "scale from zero on the gateway's request count", "first Ready pod %s after creation", secs(upAt.Sub(began)))
}

// describeAutoscaling says what status.autoscaling reports: the desired count and each metric's
// proposal.
func describeAutoscaling(v view) string {
	a := v.ms.Status.Autoscaling
	out := fmt.Sprintf("desired %d (%s)", a.DesiredReplicas, a.LastScaleReason)
	for _, p := range a.Proposals {
		out += fmt.Sprintf("; %s = %s (target %s)", p.Metric, p.Value, p.Target)
		if p.Replicas != nil {
			out += fmt.Sprintf(" proposes %d", *p.Replicas)
		}
	}
	return out
}
