package analysis

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// maxConcurrentQueries bounds the queries Run has in flight at once, so that a slow
// Prometheus costs one query timeout per measurement rather than one per query.
const maxConcurrentQueries = 4

// ColorTarget is one color of a ModelServer as the queries see it.
type ColorTarget struct {
	// Color of the Deployment.
	Color v1alpha1.Color
	// Revision it runs.
	Revision string
	// Pods is a regular expression matching exactly the color's pods (metrics.PodRegex of the
	// Deployment's name). Empty for a color that does not exist.
	Pods string
	// Pool is a regular expression matching exactly the color's InferencePool.
	Pool string
	// Service is a regular expression matching exactly the color's Service (for the gateway's
	// metrics).
	Service string
}

// Target is the rollout being analysed.
type Target struct {
	// Namespace and Name of the ModelServer.
	Namespace, Name string
	// Candidate is the color being rolled out; Stable the color it is compared with.
	Candidate, Stable ColorTarget
	// AbsoluteOnly judges the candidate on absolute bounds only (max, min): the stable color
	// serves nothing (it lost every pod), so it has no samples to compare with, and a fix
	// shipped to it must not wait forever on inconclusive relative bounds. A metric with only
	// a relative bound then passes.
	AbsoluteOnly bool
	// Look is which measurement of the rollout this is (rollout.MeasureLook): the rank test's
	// failure threshold rises with the steps and the data the window holds (FailZ).
	Look Look
	// Scrape is Prometheus's scrape interval (spec.rollout.analysis.scrapeInterval): where the
	// pods are too few to judge a per-unit metric on, the window's scrape intervals are (see
	// PairedBlockTest and BlockTimes). 0: not read that way.
	Scrape time.Duration
	// Route is the ModelServer's HTTPRoute name as the gateway names it, and GatewayNamespace
	// the namespace label of the gateway's own series (see metrics.Vars).
	Route, GatewayNamespace string
}

func (t Target) vars(c ColorTarget, window string) metrics.Vars {
	return metrics.Vars{
		Namespace: t.Namespace,
		Name:      t.Name,
		Color:     string(c.Color),
		Revision:  c.Revision,
		Pods:      c.Pods,
		Pool:      c.Pool,
		Window:    window,

		Service: c.Service, Route: t.Route, GatewayNamespace: t.GatewayNamespace,
	}
}

// GatewayQueries are the gateway metrics' queries (metrics.GatewayMetrics of spec.gateway) as
// Run renders them for both colors of t: the controller's own queries, for metrics.Enforce.
func GatewayQueries(spec v1alpha1.AnalysisSpec, t Target, window time.Duration) []string {
	win := metrics.AnalysisWindow(window)
	var out []string
	for _, m := range metrics.GatewayMetrics(spec.Gateway) {
		for _, c := range []ColorTarget{t.Candidate, t.Stable} {
			if q, err := metrics.Render(m.Query, t.vars(c, win)); err == nil {
				out = append(out, q)
			}
		}
	}
	return out
}

// Run takes one measurement: it renders each of the spec's effective metrics
// (metrics.EffectiveMetrics) for the candidate, and for the stable color when the metric has a
// relative bound, runs the sample query once for the candidate, and judges each metric at at.
// A metric with a Histogram runs its bucket query instead of its query, for both colors, and is
// judged by JudgeHistogram; the sample query then also runs for the stable color (the test's
// effective sample size), and for the candidate even when MinSamples is 0. A metric with
// PerUnit runs its numerator and denominator queries instead of its query, for both colors,
// and is judged by JudgePerUnit. Where the preset has a saturation query
// (metrics.SaturationQuery), it runs for the stable color, and the latency verdicts hold while
// the stable color is saturated (HoldIfSaturated).
// window is the analysis window (rollout.AnalysisWindow: at least four scrape intervals); queries
// use it as {{.Window}}.
//
// A template that does not render is an error (a spec error: report it, retrying will not
// help) and no query runs. Prometheus failures are not errors: they are Inconclusive results.
// The sample gate applies only when the spec has a sample query and MinSamples > 0. A
// relative metric with no stable color (empty Stable.Pods) is Inconclusive. Results are sorted
// by name, one per effective metric. q must be safe for concurrent use: up to
// maxConcurrentQueries queries run at once.
func Run(ctx context.Context, q metrics.Querier, spec v1alpha1.AnalysisSpec, t Target, window time.Duration, at time.Time) ([]v1alpha1.MetricResult, error) {
	ms, sampleTmpl := metrics.EffectiveMetrics(spec)
	if t.AbsoluteOnly {
		ms = absoluteOnly(ms)
		t.Stable.Pods = "" // nothing of the stable color is queried
	}
	win := metrics.AnalysisWindow(window)
	candVars, stableVars := t.vars(t.Candidate, win), t.vars(t.Stable, win)

	// Render everything first: a spec error must not leave half a measurement behind.
	var queries []string
	add := func(query string) int { queries = append(queries, query); return len(queries) - 1 }
	const none = -1
	minSamples, sampleIdx := max(spec.MinSamples, 0), none
	if sampleTmpl == "" {
		minSamples = 0
	}
	if minSamples > 0 {
		var err error
		if sampleIdx, err = renderAdd("sampleQuery", sampleTmpl, candVars, add); err != nil {
			return nil, err
		}
	}
	type plan struct{ cand, stable int }
	plans := make([]plan, len(ms))
	hists, err := planHistograms(ms, t, candVars, stableVars)
	if err != nil {
		return nil, err
	}
	perUnit, err := planPerUnit(ms, t, candVars, stableVars, window)
	if err != nil {
		return nil, err
	}
	stableSampleIdx := none
	proportions := slices.ContainsFunc(ms, isProportion)
	if (len(hists.metrics) > 0 || proportions) && sampleTmpl != "" && t.Stable.Pods != "" {
		// The histogram test caps each color's observations at its request count.
		if stableSampleIdx, err = renderAdd("sampleQuery", sampleTmpl, stableVars, add); err != nil {
			return nil, err
		}
		if sampleIdx == none {
			if sampleIdx, err = renderAdd("sampleQuery", sampleTmpl, candVars, add); err != nil {
				return nil, err
			}
		}
	}
	if len(perUnit.metrics) > 0 && sampleIdx == none && sampleTmpl != "" {
		// The per-unit test gates on the candidate's request count even when MinSamples is 0.
		if sampleIdx, err = renderAdd("sampleQuery", sampleTmpl, candVars, add); err != nil {
			return nil, err
		}
	}
	// The stable color's saturation (HoldIfSaturated), where the preset can tell it.
	saturationIdx := none
	if tmpl := metrics.SaturationQuery(spec.Preset); tmpl != "" && t.Stable.Pods != "" {
		if saturationIdx, err = renderAdd("saturationQuery", tmpl, stableVars, add); err != nil {
			return nil, err
		}
	}
	for i, m := range ms {
		if m.Histogram != nil || m.PerUnit != nil {
			continue
		}
		query, err := metrics.Render(m.Query, candVars)
		if err != nil {
			return nil, fmt.Errorf("metrics[%s].query: %w", m.Name, err)
		}
		plans[i] = plan{cand: add(query), stable: none}
		if m.MaxRatioToStable != nil && t.Stable.Pods != "" {
			query, err := metrics.Render(m.Query, stableVars)
			if err != nil {
				return nil, fmt.Errorf("metrics[%s].query: %w", m.Name, err)
			}
			plans[i].stable = add(query)
		}
	}

	vectors := hists.start(ctx, q, at)
	sums := perUnit.start(ctx, q, at)
	got := scalars(ctx, q, queries, at)
	sample := func(i int, missing string) metrics.Sample {
		if i == none {
			return metrics.Sample{Status: metrics.NoData, Message: missing}
		}
		return got[i]
	}
	samples := sample(sampleIdx, "no sample query")
	hists.judge(<-vectors, samples, sample(stableSampleIdx, "no sample query"), minSamples, t.Look, at)
	perUnit.judge(<-sums, samples, minSamples, t.Look, at, hists.results)
	results := make([]v1alpha1.MetricResult, len(ms))
	for i, m := range ms {
		if r, ok := hists.results[m.Name]; ok {
			results[i] = r
			continue
		}
		if isProportion(m) {
			results[i] = JudgeProportion(m, got[plans[i].cand], sample(plans[i].stable, errNoStable.Error()), samples, sample(stableSampleIdx, "no sample query"), minSamples, t.Look, at)
			continue
		}
		results[i] = Judge(m, got[plans[i].cand], sample(plans[i].stable, errNoStable.Error()), samples, minSamples, at)
	}
	results = HoldIfSaturated(ms, results, sample(saturationIdx, "no saturation query"))
	sort.Slice(results, func(i, j int) bool { return results[i].Name < results[j].Name })
	return results, nil
}

// isProportion: the metric is a share of requests judged relative to the stable color as a
// proportion (the vllm preset's abort-ratio, or a metric of that name).
func isProportion(m v1alpha1.AnalysisMetric) bool {
	return m.Name == metrics.MetricAbortRatio && m.MaxRatioToStable != nil && m.Histogram == nil
}

// absoluteOnly returns the metrics without their relative bounds (see Target.AbsoluteOnly).
func absoluteOnly(ms []v1alpha1.AnalysisMetric) []v1alpha1.AnalysisMetric {
	out := make([]v1alpha1.AnalysisMetric, len(ms))
	for i, m := range ms {
		m = *m.DeepCopy()
		m.MaxRatioToStable = nil
		out[i] = m
	}
	return out
}

// scalars runs the queries, a few at a time, and returns their samples in order.
func scalars(ctx context.Context, q metrics.Querier, queries []string, at time.Time) []metrics.Sample {
	out := make([]metrics.Sample, len(queries))
	sem := make(chan struct{}, maxConcurrentQueries)
	var wg sync.WaitGroup
	for i, query := range queries {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = q.Scalar(ctx, query, at)
		})
	}
	wg.Wait()
	return out
}

// Validate checks that every query template of spec (the preset's, the metrics' and the sample
// query, and each histogram's bucket query) renders, so that the controller can reject a bad spec with a clear error
// (naming the metric) before a rollout starts.
func Validate(spec v1alpha1.AnalysisSpec) error {
	ms, sampleTmpl := metrics.EffectiveMetrics(spec)
	for _, m := range ms {
		if err := metrics.Validate(m.Query); err != nil {
			return fmt.Errorf("metrics[%s].query: %w", m.Name, err)
		}
		if m.Histogram != nil {
			if err := metrics.Validate(m.Histogram.BucketQuery); err != nil {
				return fmt.Errorf("metrics[%s].histogram.bucketQuery: %w", m.Name, err)
			}
		}
		if u := m.PerUnit; u != nil {
			if m.Histogram != nil {
				return fmt.Errorf("metrics[%s]: histogram and perUnit are exclusive", m.Name)
			}
			if err := metrics.Validate(u.NumeratorQuery); err != nil {
				return fmt.Errorf("metrics[%s].perUnit.numeratorQuery: %w", m.Name, err)
			}
			if err := metrics.Validate(u.DenominatorQuery); err != nil {
				return fmt.Errorf("metrics[%s].perUnit.denominatorQuery: %w", m.Name, err)
			}
		}
	}
	if sampleTmpl != "" {
		if err := metrics.Validate(sampleTmpl); err != nil {
			return fmt.Errorf("sampleQuery: %w", err)
		}
	}
	return nil
}
