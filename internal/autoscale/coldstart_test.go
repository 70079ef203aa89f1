package autoscale

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

func withWork(perReplica string) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) {
		s.Metrics = append(s.Metrics, v1alpha1.AutoscalingMetric{Prometheus: &v1alpha1.PrometheusMetric{Query: "work", TargetPerReplica: resource.MustParse(perReplica)}})
	}
}

func withColdStart(d time.Duration) specOpt {
	return func(s *v1alpha1.AutoscalingSpec) { s.ColdStart = v1alpha1.Duration{Duration: d} }
}

func TestColdStartProjectsARisingTotalMetric(t *testing.T) {
	work := func(v, trend float64, has bool) Observation {
		return Observation{Metric: MetricPrometheus, Status: metrics.OK, Value: v, Trend: trend, HasTrend: has}
	}
	cases := []struct {
		name string
		spec v1alpha1.AutoscalingSpec
		obs  Observation
		want int32
	}{
		// 6 of work at 0.6 per replica is 10 replicas; rising 0.01/s for 180s adds 1.8: 7.8 -> 13.
		{name: "scales up for the load projected a cold start ahead when it rises", spec: newSpec(1, 30, withWork("0.6"), withColdStart(3*time.Minute)), obs: work(6, 0.01, true), want: 13},
		{name: "without coldStart the trend is ignored", spec: newSpec(1, 30, withWork("0.6")), obs: work(6, 0.01, true), want: 10},
		{name: "a falling trend never projects a scale-down", spec: newSpec(1, 30, withWork("0.6"), withColdStart(3*time.Minute)), obs: work(6, -0.02, true), want: 10},
		{name: "an unmeasured trend projects nothing", spec: newSpec(1, 30, withWork("0.6"), withColdStart(3*time.Minute)), obs: work(6, 0, false), want: 10},
		{name: "the projection stays within maxReplicas", spec: newSpec(1, 12, withWork("0.6"), withColdStart(3*time.Minute)), obs: work(6, 0.01, true), want: 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := Decide(Input{Spec: c.spec, Current: 8, Ready: 8, Observations: []Observation{c.obs}}, t0)
			if out.Desired != c.want {
				t.Fatalf("Desired = %d, want %d (held %q, proposals %+v)", out.Desired, c.want, out.Held, out.Status.Proposals)
			}
		})
	}
}

func TestWithTrendNeverTurnsNoDataIntoAFlatTrend(t *testing.T) {
	ok := Observation{Metric: MetricPrometheus, Status: metrics.OK, Value: 3}
	if o := WithTrend(ok, metrics.Sample{Status: metrics.NoData}); o.HasTrend {
		t.Fatalf("a trend query without data gave a trend: %+v", o)
	}
	if o := WithTrend(ok, metrics.Sample{Status: metrics.OK, Value: 0.5}); !o.HasTrend || o.Trend != 0.5 {
		t.Fatalf("trend not attached: %+v", o)
	}
	if got, want := TrendQuery("sum(x)"), "deriv((sum(x))[5m:30s])"; got != want {
		t.Fatalf("TrendQuery = %q, want %q", got, want)
	}
}
