package autoscale

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// spec.autoscaling.projectionHorizon: a rising total proposes the replicas of the load projected
// a cold start ahead; a flat, falling or unmeasured trend, or no horizon, proposes for the load now.
func TestARisingTotalProposesForTheLoadAColdStartAhead(t *testing.T) {
	spec := func(cold time.Duration) v1alpha1.AutoscalingSpec {
		return v1alpha1.AutoscalingSpec{MinReplicas: ptr.To(int32(1)), MaxReplicas: 100, ProjectionHorizon: v1alpha1.Duration{Duration: cold},
			Metrics: []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{Query: "work", Target: resource.MustParse("1")}}}}
	}
	work := func(trend float64, has bool) []Observation {
		return []Observation{{Metric: MetricPrometheus, Status: sample.OK, Value: 10, Trend: trend, HasTrend: has}}
	}
	for _, c := range []struct {
		name   string
		cold   time.Duration
		obs    []Observation
		want   int32
		reason string
	}{
		// 10 now, +0.02/s for 180s: 13.6 -> 14.
		{"rising, 3m cold start", 3 * time.Minute, work(0.02, true), 14, "rising 0.02/s: 13.6 projected in 3m0s"},
		{"rising, no cold start", 0, work(0.02, true), 10, ""},
		{"flat", 3 * time.Minute, work(0, true), 10, ""},
		{"falling", 3 * time.Minute, work(-0.02, true), 10, ""},
		{"trend not measured (a new series)", 3 * time.Minute, work(0.02, false), 10, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Decide(Input{Spec: spec(c.cold), Current: 10, Ready: 10, Observations: c.obs}, t0)
			if out.Desired != c.want {
				t.Fatalf("desired %d, want %d (%+v)", out.Desired, c.want, out.Status.Proposals)
			}
			if c.reason != "" && !strings.Contains(out.Status.LastScaleReason, c.reason) {
				t.Fatalf("reason %q, want it to say %q", out.Status.LastScaleReason, c.reason)
			}
		})
	}
	// The projection never lowers a proposal the load now asks for.
	out := Decide(Input{Spec: spec(3 * time.Minute), Current: 20, Ready: 20, Observations: work(0.001, true)}, t0)
	if out.Desired != 20 {
		t.Fatalf("desired %d with 20 current and a slight rise, want 20 held (scale-down window)", out.Desired)
	}
}
