package controller

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/signals"
)

// The autoscaler's ModelServer-wide queries (the p95 latencies capacity learning reads, a
// prometheus metric's {{.Window}}) span its interval and four scrape intervals at least, as
// the analysis does:
// at Prometheus's default 60s scrape a 1m window holds one sample and every rate in it is
// empty. The scrape interval is the ModelServer's spec.rollout.analysis.scrapeInterval, which
// defaultSpec fills from --prometheus-scrape-interval.
func TestTheServingWindowSpansFourScrapes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spec, flag time.Duration
		interval   time.Duration
		want       string
	}{
		{"four minutes at the controller's default 60s scrape", 0, time.Minute, 0, "4m"},
		{"four minutes when the ModelServer states a 60s scrape", time.Minute, 15 * time.Second, 0, "4m"},
		{"the last minute at a 15s scrape", 0, 15 * time.Second, 0, "1m"},
		{"two minutes at a 30s scrape", 30 * time.Second, 0, 0, "2m"},
		{"four minutes when nothing says (Prometheus's default)", 0, 0, 0, "4m"},
		{"the interval when it is longer than four scrapes", 0, 15 * time.Second, 2 * time.Minute, "2m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := &v1alpha1.ModelServer{}
			ms.Namespace, ms.Name = "ml", "llama"
			ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 4, Interval: v1alpha1.Duration{Duration: tc.interval}}
			if tc.spec > 0 {
				ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: tc.spec}
			}
			r := &ModelServerReconciler{ScrapeInterval: tc.flag}
			r.defaultSpec(ms)
			if got := signals.BothColors(ms).Window; got != tc.want {
				t.Fatalf("window %q, want %q", got, tc.want)
			}
			q, err := metrics.Render(metrics.VLLMTTFTP95, signals.BothColors(ms))
			if err != nil {
				t.Fatal(err)
			}
			if want := "[" + tc.want + "]"; !strings.Contains(q, want) {
				t.Fatalf("the TTFT query %s does not read the window %s", q, want)
			}
		})
	}
}
