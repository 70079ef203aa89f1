package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// Two Ready replicas carry 1.2 of a work metric whose target, 0.9 at 90%, believes one replica
// carries 1; their p95 time to first token is 3s against an SLO of 2s. The controller reads the
// TTFT of the ModelServer's pods, learns that a replica carries at most 0.6, and scales up on
// the learnt target; the SLO met again, what was learnt stays.
func TestALatencySLOMissedBelowTheTargetTeachesTheCapacityAndScalesUp(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	node := gpuNode(t, ns, 8)
	var ttft atomic.Value
	ttft.Store(3.0)
	var ttftQueries atomic.Int32
	prometheus.set(ns, func(q string) promAnswer {
		switch {
		case strings.Contains(q, "vllm:time_to_first_token_seconds_bucket") && strings.Contains(q, `pod=~"(?:`):
			ttftQueries.Add(1)
			return promAnswer{value: ttft.Load().(float64)}
		case strings.Contains(q, "work_seconds"):
			return promAnswer{value: 1.2}
		}
		return promAnswer{noData: true}
	})
	t.Cleanup(func() { prometheus.set(ns, nil) })
	ms := newModelServer(ns, "learn", onPool(ns), withReplicas(2), withAutoscaling(1, 6, 70, func(a *v1alpha1.AutoscalingSpec) {
		a.Metrics = []v1alpha1.AutoscalingMetric{{Prometheus: &v1alpha1.PrometheusMetric{
			Query: `sum(rate(work_seconds{namespace="{{.Namespace}}",pod=~"{{.Pods}}"}[{{.Window}}]))`, Target: resource.MustParse("0.9"),
			LearnCapacity: &v1alpha1.CapacityLearning{TargetPercentOfCapacity: ptr.To(int32(90)), TimeToFirstTokenP95: &v1alpha1.Duration{Duration: 2 * time.Second}},
		}}}
	}))
	if err := k8s.Create(ctx, ms); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, ns, "learn-blue", 2)
	runPods(t, ms, v1alpha1.Blue, 2, node)

	// 1.2 over 2 replicas is 0.6 each at 1.5x the SLO: a replica carries at most 0.4. The
	// capacity falls from 1 halfway toward it at each pass (0.7, 0.55), and once the target
	// (90% of it) is well below 0.6, 1.2 asks for 3 replicas.
	eventually(t, 30*time.Second, "learnt and scaled to 3", func() error {
		got := getMS(t, ms)
		a, err := autoscaling(got)
		if err != nil {
			return err
		}
		if len(a.LearnedCapacities) != 1 {
			return fmt.Errorf("learnt %+v; %s", a.LearnedCapacities, describe(got))
		}
		c := a.LearnedCapacities[0]
		v, err := strconv.ParseFloat(c.PerReplica, 64)
		if err != nil || c.Metric != "prometheus" || v >= 0.7 || v < 0.4 || c.Samples < 2 {
			return fmt.Errorf("learnt %+v, want the capacity between 0.4 and 0.7 after 2 samples or more", c)
		}
		if a.DesiredReplicas != 3 || !strings.Contains(a.LastScaleReason, "learnt from the replicas beyond capacity") {
			return fmt.Errorf("desired %d reason %q", a.DesiredReplicas, a.LastScaleReason)
		}
		return nil
	})
	waitReplicas(t, ns, "learn-blue", 3)
	if ttftQueries.Load() == 0 {
		t.Fatal("the TTFT was never queried over the ModelServer's pods")
	}

	// The SLO met again, the third replica Ready: nothing more is learnt, nothing forgotten.
	ttft.Store(0.5)
	eventually(t, 10*time.Second, "the two pods listed", func() error {
		if n := len(podsOf(t, ms, v1alpha1.Blue)); n != 2 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	runPods(t, ms, v1alpha1.Blue, 1, node)
	before := learntOf(t, ms)
	holds(t, 2*time.Second, ms, 3, func(got *v1alpha1.ModelServer) error {
		if a := got.Status.Autoscaling; a == nil || len(a.LearnedCapacities) != 1 || a.LearnedCapacities[0].PerReplica != before.PerReplica {
			return fmt.Errorf("learnt %+v, want %+v kept", a.LearnedCapacities, before)
		}
		return nil
	})
}

func learntOf(t *testing.T, ms *v1alpha1.ModelServer) v1alpha1.LearnedCapacity {
	t.Helper()
	a := getMS(t, ms).Status.Autoscaling
	if a == nil || len(a.LearnedCapacities) != 1 {
		t.Fatalf("learnt %+v", a)
	}
	return a.LearnedCapacities[0]
}
