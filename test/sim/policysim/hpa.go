package policysim

import (
	"math"
	"time"
)

// HPA is the Kubernetes HorizontalPodAutoscaler (autoscaling/v2) with its defaults, as
// documented in "Horizontal Pod Autoscaling" and implemented by the horizontal controller:
//   - every SyncPeriod (15s, --horizontal-pod-autoscaler-sync-period) it computes
//     desired = ceil(current * value / target) for an average metric (Pods/Resource) or
//     desired = ceil(total / targetAverageValue) for an AverageValue external metric;
//   - nothing changes while the ratio is within Tolerance (0.1) of 1;
//   - when scaling up, pods that are not Ready count as 0 in the average (so new pods do not
//     trigger another scale-up), and a scale-up that this turns into a scale-down is dropped;
//   - scale-up: no stabilization, rate policies "100% or 4 pods per 15s, the larger";
//   - scale-down: the highest recommendation of the last 300s (stabilization window, whose
//     history starts with the current count), rate policy 100% per 15s;
//   - then [Min, Max].
type HPA struct {
	// Label names the policy in reports.
	Label string
	// Min and Max bound the count.
	Min, Max int32
	// Target is the metric's target: percent for an average metric, per replica for a total.
	Target float64
	// Total is true for an AverageValue metric whose Value is the total over the pods.
	Total bool
	// Metric reads the metric from the signals; ok false means no data (HPA then holds).
	Metric func(Signals) (v float64, ok bool)
	// SyncPeriod defaults to 15s, Tolerance to 0.1, DownWindow to 300s.
	SyncPeriod time.Duration
	Tolerance  float64
	DownWindow time.Duration

	recs []rec
}

type rec struct {
	at time.Duration
	n  int32
}

// NewHPA is an HPA with the defaults of autoscaling/v2.
func NewHPA(label string, minR, maxR int32, target float64, total bool, metric func(Signals) (float64, bool)) *HPA {
	return &HPA{Label: label, Min: minR, Max: maxR, Target: target, Total: total, Metric: metric,
		SyncPeriod: 15 * time.Second, Tolerance: 0.1, DownWindow: 300 * time.Second}
}

// Name implements Policy.
func (h *HPA) Name() string { return h.Label }

// Interval implements Policy.
func (h *HPA) Interval() time.Duration { return h.SyncPeriod }

// Decide implements Policy.
func (h *HPA) Decide(s Signals) int32 {
	cur := s.Pods
	v, ok := h.Metric(s)
	if !ok || math.IsNaN(v) {
		// No data, or a NaN sample (which the metrics APIs cannot carry as a quantity: the
		// HPA's read fails): the HPA holds.
		return clamp(cur, h.Min, h.Max)
	}
	if h.recs == nil {
		// The horizontal controller starts a new HPA's history with the current count, so that
		// it does not scale down at once.
		h.recs = []rec{{at: s.Now, n: cur}}
	}
	want := h.recommend(v, cur, s.Ready)
	// Scale-down stabilization: the highest recommendation within the window (this one included).
	h.recs = append(h.recs, rec{at: s.Now, n: want})
	keep := h.recs[:0]
	for _, r := range h.recs {
		if r.at > s.Now-h.DownWindow {
			keep = append(keep, r)
		}
	}
	h.recs = keep
	desired := want
	if desired < cur {
		for _, r := range h.recs {
			desired = max(desired, r.n)
		}
		desired = min(desired, cur)
	}
	// Scale-up rate: 100% or 4 pods per 15s, whichever allows more (one sync period per step).
	if desired > cur {
		desired = min(desired, max(2*cur, cur+4))
	}
	return clamp(desired, h.Min, h.Max)
}

// recommend is HPA's replica calculation for one metric.
func (h *HPA) recommend(v float64, cur, ready int32) int32 {
	if h.Total {
		if cur > 0 && math.Abs(v/(h.Target*float64(cur))-1) <= h.Tolerance {
			return cur
		}
		return int32(math.Ceil(v/h.Target - 1e-9))
	}
	if ready <= 0 {
		return cur
	}
	ratio := v / h.Target
	if math.Abs(ratio-1) <= h.Tolerance {
		return cur
	}
	if ratio > 1 && cur > ready {
		// Pods not Ready yet count as 0: re-average over all pods.
		adj := v * float64(ready) / (h.Target * float64(cur))
		if adj <= 1 || math.Abs(adj-1) <= h.Tolerance {
			return cur
		}
		return int32(math.Ceil(adj*float64(cur) - 1e-9))
	}
	return int32(math.Ceil(ratio*float64(ready) - 1e-9))
}

func clamp(n, lo, hi int32) int32 { return min(max(n, lo), hi) }
