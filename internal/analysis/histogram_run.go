package analysis

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// histogramPlan is the histogram metrics of a measurement (Run's path for metrics with
// Histogram set): their rendered bucket queries and, once judged, their results.
type histogramPlan struct {
	metrics []v1alpha1.AnalysisMetric
	// cand and stable are the rendered bucket queries of each metric; stable is "" when the
	// metric has no relative bound or there is no stable color.
	cand, stable []string
	results      map[string]v1alpha1.MetricResult
}

// renderAdd renders a template and adds it to Run's scalar queries; an error names the field
// the template comes from.
func renderAdd(field, tmpl string, v metrics.Vars, add func(string) int) (int, error) {
	query, err := metrics.Render(tmpl, v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	return add(query), nil
}

// planHistograms renders the bucket queries of the histogram metrics among ms.
func planHistograms(ms []v1alpha1.AnalysisMetric, t Target, candVars, stableVars metrics.Vars) (*histogramPlan, error) {
	p := &histogramPlan{results: map[string]v1alpha1.MetricResult{}}
	for _, m := range ms {
		if m.Histogram == nil {
			continue
		}
		cand, err := metrics.Render(m.Histogram.BucketQuery, candVars)
		if err != nil {
			return nil, fmt.Errorf("metrics[%s].histogram.bucketQuery: %w", m.Name, err)
		}
		stable := ""
		if m.MaxRatioToStable != nil && t.Stable.Pods != "" {
			if stable, err = metrics.Render(m.Histogram.BucketQuery, stableVars); err != nil {
				return nil, fmt.Errorf("metrics[%s].histogram.bucketQuery: %w", m.Name, err)
			}
		}
		p.metrics = append(p.metrics, m)
		p.cand, p.stable = append(p.cand, cand), append(p.stable, stable)
	}
	return p, nil
}

// start runs the plan's bucket queries in the background, a few at a time, and sends their
// histograms once all have answered.
func (p *histogramPlan) start(ctx context.Context, q metrics.Querier, at time.Time) <-chan colors[HistogramSample] {
	return fetchColors(p.cand, p.stable, func(query string) HistogramSample { return fetchHistogram(ctx, q, query, at) },
		HistogramSample{Err: errNoStable})
}

// fetchHistogram runs a bucket query. A Prometheus failure or an answer without a +Inf bucket
// is an Err; no series at all is an empty histogram (no observations).
func fetchHistogram(ctx context.Context, q metrics.Querier, query string, at time.Time) HistogramSample {
	series, err := q.Vector(ctx, query, at)
	if err != nil {
		return HistogramSample{Err: fmt.Errorf("bucket query: %w", err)}
	}
	h, err := metrics.ParseBuckets(series)
	if err != nil {
		return HistogramSample{Err: fmt.Errorf("bucket query: %w", err)}
	}
	return HistogramSample{Histogram: h, Groups: podGroups(series)}
}

// podGroups splits a bucket query's series by their pod label (a query grouped by pod and le,
// as the presets' are) into one histogram per pod; nil when the series have no pod label.
func podGroups(series []metrics.Series) []metrics.Histogram {
	byPod := map[string][]metrics.Series{}
	for _, s := range series {
		if pod, ok := s.Labels["pod"]; ok {
			byPod[pod] = append(byPod[pod], s)
		}
	}
	if len(byPod) == 0 {
		return nil
	}
	pods := make([]string, 0, len(byPod))
	for p := range byPod {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	var out []metrics.Histogram
	for _, p := range pods {
		if h, err := metrics.ParseBuckets(byPod[p]); err == nil && len(h) > 0 {
			out = append(out, h)
		}
	}
	return out
}

// judge judges each histogram metric with the colors' request counts.
func (p *histogramPlan) judge(d colors[HistogramSample], candRequests, stableRequests metrics.Sample, minSamples int32, look Look, at time.Time) {
	for i, m := range p.metrics {
		c, s := d.cand[i], d.stable[i]
		c.Requests, s.Requests = candRequests, stableRequests
		p.results[m.Name] = JudgeHistogram(m, c, s, minSamples, look, at)
	}
}
