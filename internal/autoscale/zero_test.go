package autoscale

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/sample"
)

func withPrometheusTotal(perReplica string) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{Query: "sum(rate(gateway_requests_total[1m])) or vector(0)", Target: resource.MustParse(perReplica)}})
	}
}

// At zero replicas, Output.Unserved says whether requests may wait with no pod: only a metric
// that sees load without pods can tell, and only its reading 0 says no request waits.
func TestUnservedAtZeroReplicas(t *testing.T) {
	noGPU := &capacity.FitResult{MaxAdditional: 0, Limited: true, Reason: v1alpha1.ReasonGPUCapacityLimited, GPUsPerReplica: 1, MatchingNodes: 1}
	spec := newSpec(0, 4, withGPU(70), withPrometheusTotal("5"), noWindow)
	cases := []struct {
		name     string
		current  int32
		obs      []Observation
		fit      *capacity.FitResult
		desired  int32
		unserved string // substring; "" means none
	}{
		{name: "idle at zero: the request rate reads 0", obs: []Observation{missingObs(MetricGPUUtilization, sample.NoData), obs(MetricPrometheus, 0, 0)},
			desired: 0},
		{name: "load at zero with no GPU left to scale up: not served", obs: []Observation{missingObs(MetricGPUUtilization, sample.NoData), obs(MetricPrometheus, 12, 0)}, fit: noGPU,
			desired: 0, unserved: "0 replicas while prometheus reads 12: load with no pod to serve it"},
		{name: "the request rate has no data at zero: nothing shows that no request waits", obs: []Observation{missingObs(MetricGPUUtilization, sample.NoData), missingObs(MetricPrometheus, sample.NoData)},
			desired: 0, unserved: "no metric that sees load without pods has data (prometheus: NoData"},
		{name: "load at zero scales up: the count is above zero, nothing to say", obs: []Observation{missingObs(MetricGPUUtilization, sample.NoData), obs(MetricPrometheus, 12, 0)},
			desired: 3},
		{name: "serving replicas: nothing to say", current: 2, obs: []Observation{obs(MetricGPUUtilization, 70, 2), obs(MetricPrometheus, 10, 2)},
			desired: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Decide(Input{Spec: spec, Current: tc.current, Ready: tc.current, Observations: tc.obs, Capacity: tc.fit}, t0)
			if out.Desired != tc.desired {
				t.Fatalf("desired = %d, want %d", out.Desired, tc.desired)
			}
			switch {
			case tc.unserved == "" && out.Unserved != "":
				t.Errorf("Unserved = %q, want none", out.Unserved)
			case !strings.Contains(out.Unserved, tc.unserved) || (tc.unserved != "" && out.Unserved == ""):
				t.Errorf("Unserved = %q, want it to contain %q", out.Unserved, tc.unserved)
			}
		})
	}
}

func TestScalesFromZeroOnlyWithAMetricThatSeesLoadWithoutPods(t *testing.T) {
	q := resource.MustParse("1")
	cases := []struct {
		name string
		m    []v1alpha1.AutoscalingMetric
		want bool
	}{
		{"the default GPU utilization cannot", nil, false},
		{"pod metrics cannot", []v1alpha1.AutoscalingMetric{{KVCacheUsage: &v1alpha1.AverageMetric{Target: q}}, {RequestsWaiting: &v1alpha1.PerReplicaMetric{Target: q}},
			{Saturation: &v1alpha1.SaturationMetric{}}, {Resource: &v1alpha1.ResourceMetric{Name: "cpu", Target: 50}}}, false},
		{"the endpoint picker's per-pod queue and saturation cannot", []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerQueueSize, Target: q}},
			{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerPoolSaturation, Target: q}}}, false},
		{"a prometheus total can", []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{}}, {Prometheus: &v1alpha1.PrometheusMetric{Query: "x", Target: q}}}, true},
		{"an external metric can", []v1alpha1.AutoscalingMetric{{External: &v1alpha1.ExternalMetric{MetricName: "queue", Target: q}}}, true},
		{"the endpoint picker's running requests can", []v1alpha1.AutoscalingMetric{{EndpointPicker: &v1alpha1.EndpointPickerMetric{Signal: v1alpha1.EndpointPickerRunningRequests, Target: q, Objective: "llama"}}}, true},
	}
	for _, tc := range cases {
		if got := ScalesFromZero(tc.m); got != tc.want {
			t.Errorf("%s: ScalesFromZero = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The gateway's request rate at the route is a total that exists with no pod: it brings a
// ModelServer back from zero replicas, ceil(rate / target).
func TestTheGatewayRequestRateScalesFromZero(t *testing.T) {
	gateway := v1alpha1.AutoscalingMetric{Gateway: &v1alpha1.GatewayRequestsMetric{Source: v1alpha1.GatewayMetricsTraefik, Target: resource.MustParse("5")}}
	if !SeesLoadWithoutPods(gateway) || !ScalesFromZero([]v1alpha1.AutoscalingMetric{gateway}) {
		t.Fatal("the gateway metric does not see load without pods")
	}
	if MetricName(gateway) != MetricGateway {
		t.Errorf("MetricName = %q, want %q", MetricName(gateway), MetricGateway)
	}
	spec := newSpec(0, 10, func(s *v1alpha1.AutoscalingSpec) { s.Metrics = append(s.Metrics, gateway) }, noWindow)
	out := Decide(Input{Spec: spec, Observations: []Observation{obs(MetricGateway, 12, 0)}}, t0)
	if out.Desired != 3 {
		t.Errorf("12 requests per second at the route with 0 replicas, 5 per replica: desired %d, want 3", out.Desired)
	}
	if out := Decide(Input{Spec: spec, Observations: []Observation{obs(MetricGateway, 0, 0)}}, t0); out.Desired != 0 || out.Unserved != "" {
		t.Errorf("no request at the route: desired %d unserved %q, want 0 and nothing to say", out.Desired, out.Unserved)
	}
}
