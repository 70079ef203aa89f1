package autoscale

import (
	"fmt"
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// Capacity learning (spec.autoscaling.metrics[*].prometheus.learnCapacity).
//
// A minute whose p95 latency misses the SLO, or whose requests queue (the requestsWaiting
// signal averages at least saturatedAtRequestsWaiting per Ready replica), shows the replicas
// beyond their capacity: the metric's value per Ready replica then is at least the capacity of
// one replica, in the metric's units, and the capacity lies below it (see beyondCapacity).
// Each such bound below the capacity believed so far (at first target /
// targetPercentOfCapacity) moves it halfway toward the bound, and the target becomes
// targetPercentOfCapacity of it;
// a bound above it says nothing new. Nothing is learnt while pods are starting (the rate window
// then mixes fewer serving replicas than are Ready now, and the load per replica reads low) nor
// while both colors have Ready pods (a candidate's latency and idle pods mixed in). A
// load read low anyway (a replica that just left or joined, an uneven queue) lowers the target
// more than needed, which asks for more replicas, never fewer.
const (
	// DefaultLearnTargetPercent is the share of the learnt capacity targeted per replica.
	DefaultLearnTargetPercent = 90
	// DefaultSaturatedAtRequestsWaiting is the requests queued per Ready replica from which
	// the replicas count as beyond capacity.
	DefaultSaturatedAtRequestsWaiting = 1
	// learnWeight is the weight of a new observation in the moving average.
	learnWeight = 0.5
)

// learning is one metric's resolved capacity learning.
type learning struct {
	percent   float64
	saturated float64
	ttft, itl time.Duration
}

func resolveLearning(m v1alpha1.AutoscalingMetric) (learning, bool) {
	if m.Prometheus == nil || m.Prometheus.LearnCapacity == nil {
		return learning{}, false
	}
	lc := m.Prometheus.LearnCapacity
	l := learning{percent: DefaultLearnTargetPercent, saturated: DefaultSaturatedAtRequestsWaiting}
	if lc.TargetPercentOfCapacity != nil && *lc.TargetPercentOfCapacity > 0 {
		l.percent = float64(min(*lc.TargetPercentOfCapacity, 100))
	}
	if lc.SaturatedAtRequestsWaiting != nil && *lc.SaturatedAtRequestsWaiting > 0 {
		l.saturated = float64(*lc.SaturatedAtRequestsWaiting)
	}
	if lc.TimeToFirstTokenP95 != nil {
		l.ttft = lc.TimeToFirstTokenP95.Duration
	}
	if lc.InterTokenLatencyP95 != nil {
		l.itl = lc.InterTokenLatencyP95.Duration
	}
	return l, true
}

// initial is the capacity believed before any observation: the spec's target over the share.
func (l learning) initial(m v1alpha1.AutoscalingMetric) float64 {
	return m.Prometheus.Target.AsApproximateFloat64() * 100 / l.percent
}

// learn returns the learnt capacities after this pass; entries of metrics no longer learning
// are dropped.
func (s settings) learn(in Input, prev []v1alpha1.LearnedCapacity, now time.Time) []v1alpha1.LearnedCapacity {
	obs := make(map[string]Observation, len(in.Observations))
	for _, o := range in.Observations {
		obs[o.Metric] = o
	}
	old := make(map[string]v1alpha1.LearnedCapacity, len(prev))
	for _, c := range prev {
		if in.Revision != "" && c.Revision != "" && c.Revision != in.Revision {
			continue // learnt on the revision before the last promotion
		}
		old[c.Metric] = c
	}
	var out []v1alpha1.LearnedCapacity
	for i, m := range s.metrics {
		l, ok := resolveLearning(m)
		if !ok {
			continue
		}
		name := s.names[i]
		c, had := old[name]
		belief := l.initial(m)
		if v, ok := learntValue(c); had && ok {
			belief = min(v, belief) // the spec's target may have been lowered since
		}
		if u, ok := beyondCapacity(obs[name], in, l); ok && u < belief {
			belief += learnWeight * (u - belief)
			c = v1alpha1.LearnedCapacity{Metric: name, PerReplica: strconv.FormatFloat(belief, 'g', 6, 64), Samples: c.Samples + 1, LastSampleTime: metav1.NewTime(now), Revision: in.Revision}
			had = true
		}
		if had {
			out = append(out, c)
		}
	}
	return out
}

// beyondCapacity returns an upper bound of one replica's capacity when this pass shows the
// replicas beyond it; false otherwise, or when a value is missing. The load per Ready replica u
// misses the SLO, so the capacity is below it: by the ratio of the SLO to the latency seen
// (the worse of TTFT and ITL, as HPA scales a ratio), and, when only the requests queue, by
// queueFactor (a queue shows the throughput limit, which the latency SLO is reached before).
// It is never taken below half of u.
func beyondCapacity(o Observation, in Input, l learning) (float64, bool) {
	if in.Ready <= 0 || in.Starting > 0 || in.Ready < in.Current || in.BothColorsReady || !usable(o) {
		return 0, false
	}
	factor := 1.0
	over := func(x Observation, slo time.Duration) {
		if slo > 0 && usable(x) && x.Value > slo.Seconds() {
			factor = min(factor, slo.Seconds()/x.Value)
		}
	}
	over(in.TTFTP95, l.ttft)
	over(in.ITLP95, l.itl)
	w := in.RequestsWaiting
	if usable(w) && w.Value/float64(in.Ready) >= l.saturated {
		factor = min(factor, queueFactor)
	}
	if factor >= 1 {
		return 0, false
	}
	u := o.Value / float64(in.Ready)
	v := u * max(factor, 0.5)
	return v, v > 0
}

// queueFactor is where the latency SLO is taken to be reached relative to the throughput at
// which requests queue.
const queueFactor = 0.9

// usable: the observation has a finite, non-negative value.
func usable(o Observation) bool {
	return o.Status == sample.OK && !math.IsNaN(o.Value) && !math.IsInf(o.Value, 0) && o.Value >= 0
}

// learntValue parses a learnt capacity; false when it is unusable (a hand-edited status).
func learntValue(c v1alpha1.LearnedCapacity) (float64, bool) {
	v, err := strconv.ParseFloat(c.PerReplica, 64)
	return v, err == nil && v > 0 && !math.IsInf(v, 0)
}

// learntTarget is a learning metric's target from its learnt capacity, with its description
// for the proposal; false when nothing has been learnt yet (the spec's target holds).
func learntTarget(m v1alpha1.AutoscalingMetric, name string, learnt []v1alpha1.LearnedCapacity) (float64, string, bool) {
	l, ok := resolveLearning(m)
	if !ok {
		return 0, "", false
	}
	for _, c := range learnt {
		if c.Metric != name {
			continue
		}
		v, ok := learntValue(c)
		if !ok {
			return 0, "", false
		}
		if v >= l.initial(m) {
			return 0, "", false // the spec's target is lower than what was learnt: it holds
		}
		t := v * l.percent / 100
		return t, fmt.Sprintf("%s (%s%% of %s learnt from the replicas beyond capacity)", strconv.FormatFloat(t, 'g', 4, 64), fmtNum(l.percent), c.PerReplica), true
	}
	return 0, "", false
}
