package scalebench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is one read of the controller's /metrics.
type Scrape map[string]*dto.MetricFamily

// ScrapeMetrics reads a Prometheus text endpoint.
func ScrapeMetrics(ctx context.Context, url string) (Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return nil, fmt.Errorf("%s: %s: %s", url, res.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", url, err)
	}
	return Scrape(fams), nil
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Sum adds the counter or gauge values of name whose labels include match.
func (s Scrape) Sum(name string, match map[string]string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		l := labelsOf(m)
		ok := true
		for k, v := range match {
			if l[k] != v {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// ByLabel adds the counter values of name per value of label.
func (s Scrape) ByLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	f := s[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		out[labelsOf(m)[label]] += m.GetCounter().GetValue()
	}
	return out
}

// Histogram is cumulative bucket counts of a histogram, summed over its series.
type Histogram struct {
	Bounds []float64
	Counts []float64 // cumulative, per bound
	Count  float64
}

// HistogramOf sums the buckets of name over its series.
func (s Scrape) HistogramOf(name string) Histogram {
	f := s[name]
	var h Histogram
	if f == nil {
		return h
	}
	byBound := map[float64]float64{}
	for _, m := range f.GetMetric() {
		hist := m.GetHistogram()
		if hist == nil {
			continue
		}
		h.Count += float64(hist.GetSampleCount())
		for _, b := range hist.GetBucket() {
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h
}

// Minus is the histogram of the observations made between before and h.
func (h Histogram) Minus(before Histogram) Histogram {
	prev := map[float64]float64{}
	for i, b := range before.Bounds {
		prev[b] = before.Counts[i]
	}
	out := Histogram{Bounds: h.Bounds, Count: h.Count - before.Count}
	for i, b := range h.Bounds {
		out.Counts = append(out.Counts, h.Counts[i]-prev[b])
	}
	return out
}

// Quantile is the upper bound of the bucket holding quantile q (a bound, as Prometheus's
// histogram_quantile would interpolate within it; "+Inf" when beyond the last bound).
func (h Histogram) Quantile(q float64) string {
	if h.Count <= 0 {
		return "n/a"
	}
	rank := q * h.Count
	for i, c := range h.Counts {
		if c >= rank {
			return fmt.Sprintf("<= %gms", h.Bounds[i]*1000)
		}
	}
	return "> " + fmt.Sprintf("%gms", h.Bounds[len(h.Bounds)-1]*1000)
}

// Verbs formats request counts by method, e.g. "GET 12, PATCH 3".
func Verbs(counts map[string]float64) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
