package policysim

import (
	"math"
	"time"
)

// HPA is Kubernetes' HorizontalPodAutoscaler on one metric, as its documentation describes it:
// every 15s desired = ceil(readyPods x current/target), no change within a 10% tolerance, the
// highest recommendation of the last 300s for scale-down (stabilization), scale-up limited to
// +100% or +4 pods per 15s (whichever is more), scale-down to -100% per 15s, within min..max.
// Metric reads the per-pod value it targets from the scrape (GPU utilization for the seeds'
// recipe, queue length per pod for KEDA's Prometheus scaler feeding it).
type HPA struct {
	Label    string
	Min, Max int32
	Target   float64
	// Metric is the current per-pod value, and whether there is one.
	Metric func(View) (float64, bool)
	// SyncPeriod (default 15s), Tolerance (default 0.1), DownWindow (default 300s).
	SyncPeriod, DownWindow time.Duration
	Tolerance              float64

	recs    []rec
	changes []rec // scale events (time, replicas added), for the rate limit
}

type rec struct {
	at time.Time
	n  int32
}

// Name is the label.
func (h *HPA) Name() string { return h.Label }

// Interval is the sync period.
func (h *HPA) Interval() time.Duration {
	if h.SyncPeriod > 0 {
		return h.SyncPeriod
	}
	return 15 * time.Second
}

// Decide is one HPA sync.
func (h *HPA) Decide(now time.Time, v View) int32 {
	tol := h.Tolerance
	if tol == 0 {
		tol = 0.1
	}
	window := h.DownWindow
	if window == 0 {
		window = 300 * time.Second
	}
	cur := v.Current
	want := cur
	if value, ok := h.Metric(v); ok && v.Scraped > 0 {
		ratio := value / h.Target
		if math.Abs(ratio-1) > tol {
			want = int32(math.Ceil(ratio * float64(v.Scraped)))
		}
	}
	want = min(max(want, h.Min), h.Max)
	// Scale-down stabilization: the highest recommendation of the window.
	h.recs = append(h.recs, rec{now, want})
	kept := h.recs[:0]
	stabilized := want
	for _, r := range h.recs {
		if r.at.After(now.Add(-window)) {
			kept = append(kept, r)
			stabilized = max(stabilized, r.n)
		}
	}
	h.recs = kept
	desired := want
	if want < cur {
		desired = min(stabilized, cur)
	}
	// Scale-up rate: +max(100%, 4 pods) per 15s, counted from the replicas 15s ago.
	if desired > cur {
		added := int32(0)
		for _, c := range h.changes {
			if c.at.After(now.Add(-15 * time.Second)) {
				added += c.n
			}
		}
		base := cur - added
		limit := max(2*base, base+4)
		desired = min(desired, max(limit, cur))
	}
	if desired > cur {
		h.changes = append(h.changes, rec{now, desired - cur})
	}
	return desired
}

// HPAOnGPU is the seeds' recipe: an HPA on DCGM GPU utilization at 70%, min 2, max 10.
func HPAOnGPU() *HPA {
	return &HPA{Label: "hpa-gpu70", Min: 2, Max: 10, Target: 70,
		Metric: func(v View) (float64, bool) { return v.GPUUtilization, v.HasGPU }}
}

// KEDAQueue is KEDA's Prometheus scaler on vLLM's queue (sum of num_requests_waiting) with a
// threshold of 5 per replica, feeding the HPA as an AverageValue metric (min 2, max 10). KEDA's
// 30s polling only decides activation from zero; the HPA reads the value every 15s.
func KEDAQueue() *HPA {
	return &HPA{Label: "keda-queue5", Min: 2, Max: 10, Target: 5,
		Metric: func(v View) (float64, bool) {
			if v.Scraped == 0 {
				return 0, false
			}
			return v.Waiting / float64(v.Scraped), true
		}}
}
