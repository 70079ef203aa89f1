package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// withGatewayErrors answers the gateway's error ratio (Traefik's counters, read from its own
// scrape target) with the ratio given for each color's Service, and everything else as next.
func withGatewayErrors(ms *v1alpha1.ModelServer, ratio map[v1alpha1.Color]float64, next func(string) promAnswer) func(string) promAnswer {
	return func(q string) promAnswer {
		if !strings.Contains(q, "traefik_service_requests_total") {
			return next(q)
		}
		if !strings.Contains(q, `namespace="traefik"`) {
			return promAnswer{noData: true} // not Traefik's own series
		}
		for c, r := range ratio {
			if strings.Contains(q, `"`+ms.Namespace+"-"+ms.ServiceName(c)+`-http-[0-9]+@kubernetesgateway"`) {
				return promAnswer{value: r}
			}
		}
		return promAnswer{noData: true}
	}
}

// A candidate whose model server answers well by its own counters, but for which the gateway
// answers one request in five with a 5xx (say 502s from a sidecar that resets connections): the
// gateway's error ratio, counted per color at Traefik, rolls it back.
func TestRolloutRollsBackOnTheErrorsTheGatewayCountsForTheCandidate(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "gwerrors", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Analysis.Gateway = v1alpha1.GatewayMetricsTraefik
	})
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, v1 := startServing(t, ms, good)
	// The test Prometheus answers by the first namespace a query names: Traefik's, here (this
	// is the only test whose ModelServer reads it).
	prometheus.set("traefik", withGatewayErrors(ms, map[v1alpha1.Color]float64{v1alpha1.Blue: 0, v1alpha1.Green: 0.2}, func(string) promAnswer { return promAnswer{noData: true} }))
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitRolledBack(t, ms, v2, metrics.MetricGatewayErrorRatio)
	if st := getMS(t, ms).Status; st.Stable == nil || st.Stable.Revision != v1 {
		t.Errorf("stable %+v, want %s", st.Stable, v1)
	}
	tr.waitWeights(t, "100/0")
}

// Without --gateway-metrics-namespace the controller cannot tell the gateway's series from a
// pod's: it refuses the gateway metrics, naming the field and the flag.
func TestGatewayMetricsNeedTheGatewaysNamespace(t *testing.T) {
	r := &ModelServerReconciler{QueryPolicy: metrics.QueryPolicyNamespaced}
	analysisOn := newModelServer("ml", "llama", func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.Analysis.Gateway = v1alpha1.GatewayMetricsTraefik })
	autoscaled := newModelServer("ml", "llama", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(0)), MaxReplicas: 4, Metrics: []v1alpha1.AutoscalingMetric{
			{Gateway: &v1alpha1.GatewayRequestsMetric{Source: v1alpha1.GatewayMetricsTraefik, Target: resource.MustParse("5")}}}}
	})
	for ms, field := range map[*v1alpha1.ModelServer]string{analysisOn: "spec.rollout.analysis.gateway", autoscaled: "spec.autoscaling.metrics[0].gateway"} {
		err := r.validate(ms)
		if err == nil || !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), "--gateway-metrics-namespace") {
			t.Errorf("%s without the flag: %v, want a refusal naming the field and the flag", field, err)
		}
		r2 := &ModelServerReconciler{QueryPolicy: metrics.QueryPolicyNamespaced, GatewayMetricsNamespace: "traefik"}
		if err := r2.validate(ms); err != nil {
			t.Errorf("%s with the flag: %v", field, err)
		}
	}
}
