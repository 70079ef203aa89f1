package autoscale

import (
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"

	"github.com/modelship/modelship/internal/window"
)

// ServingWindow is the window of the ModelServer-wide serving queries the autoscaler runs (the
// p95 latencies capacity learning and an SLO read, the SLO's token work, a prometheus metric's
// {{.Window}}) for an evaluation interval (spec.autoscaling.interval) and a scrape interval,
// derived as the analysis window is (window.Of): the interval, but at least
// window.ScrapesPerWindow scrape intervals. At Prometheus's default 60s scrape interval a 1m
// window holds one sample per series, every rate over it is empty, and learning from latency
// would silently never happen; the window is then 4m. At the default 15s interval and a 15s
// scrape, the last minute.
func ServingWindow(interval, scrapeInterval time.Duration) time.Duration {
	return window.Of(interval, scrapeInterval)
}

// ServingWindowOf is ms's serving window: ServingWindow of its autoscaling interval
// (DefaultInterval when unset) and of spec.rollout.analysis.scrapeInterval, which the
// controller fills from its --prometheus-scrape-interval.
func ServingWindowOf(ms *v1alpha1.ModelServer) time.Duration {
	var interval, scrape time.Duration
	if a := ms.Spec.Autoscaling; a != nil {
		interval = a.Interval.Duration
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if si := ms.Spec.Rollout.Analysis.ScrapeInterval; si != nil {
		scrape = si.Duration
	}
	return ServingWindow(interval, scrape)
}
