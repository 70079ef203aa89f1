// Package analysisseq is internal/analysis's sequence test on simulated traffic: seeded
// rollouts at low request rates through analysis.Run and the rollout's failure limit, the
// latencies bucketed as the fleet simulator (test/framework/fleet) serves vLLM's histograms.
package analysisseq

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/analysis"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/rollout"
	"github.com/modelship/modelship/test/framework/fleet"
)

// vLLM's histogram buckets, as the fleet simulator serves them.
var (
	ttftBuckets = fleet.TTFTBuckets
	itlBuckets  = fleet.ITLBuckets
	e2eBuckets  = fleet.E2EBuckets
)

// The analysed ModelServer: its candidate (green) and stable (blue) pods, as in
// internal/analysis's own tests.
var (
	candidatePods = metrics.PodRegex("llama-green")
	target        = analysis.Target{
		Namespace: "ml",
		Name:      "llama",
		Candidate: analysis.ColorTarget{Color: v1alpha1.Green, Revision: "new", Pods: candidatePods},
		Stable:    analysis.ColorTarget{Color: v1alpha1.Blue, Revision: "old", Pods: metrics.PodRegex("llama-blue")},
	}
	now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
)

// simHist accumulates observations into cumulative-by-query bucket counts.
type simHist struct {
	bounds []float64
	counts []float64 // per bucket, the last being +Inf
}

func newSimHist(bounds []float64) *simHist {
	return &simHist{bounds: bounds, counts: make([]float64, len(bounds)+1)}
}

func (h *simHist) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
}

func (h *simHist) add(o *simHist) {
	for i := range h.counts {
		h.counts[i] += o.counts[i]
	}
}

// series is the answer of `sum by (le) (increase(x_bucket[w]))`.
func (h *simHist) series() []metrics.Series {
	out := make([]metrics.Series, 0, len(h.counts))
	cum := 0.0
	for i, c := range h.counts {
		cum += c
		le := "+Inf"
		if i < len(h.bounds) {
			le = strconv.FormatFloat(h.bounds[i], 'g', -1, 64)
		}
		out = append(out, metrics.Series{Labels: map[string]string{"le": le}, Value: cum})
	}
	return out
}

func (h *simHist) quantile(q float64) metrics.Sample {
	hist, err := metrics.ParseBuckets(h.series())
	if err != nil {
		return metrics.Sample{Status: metrics.NoData, Message: err.Error()}
	}
	v, err := hist.Quantile(q)
	if err != nil {
		return metrics.Sample{Status: metrics.NoData, Message: err.Error()}
	}
	return metrics.Sample{Status: metrics.OK, Value: v}
}

// simPods is how many pods serve each color: the per-unit metrics' units.
const simPods = 4

// podSums are one pod's sums of the vLLM per-request histograms decode-per-token reads: decode
// seconds and decoded tokens.
type podSums struct{ decode, decoded float64 }

// colorTraffic is what one color served in one half-window (one analysis interval).
type colorTraffic struct {
	requests       float64
	ttft, itl, e2e *simHist
	pods           [simPods]podSums
}

// serve simulates n requests of a vLLM server whose latencies are all multiplied by slow:
// lognormal time to first token (median 150ms), 50-300 output tokens, per-request inter-token
// latency (median 30ms, with per-token jitter), e2e = ttft + the tokens' latencies.
func serve(rng *rand.Rand, n int, slow float64) colorTraffic {
	c := colorTraffic{requests: float64(n), ttft: newSimHist(ttftBuckets), itl: newSimHist(itlBuckets), e2e: newSimHist(e2eBuckets)}
	for i := range n {
		ttft := slow * 0.15 * math.Exp(0.6*rng.NormFloat64())
		base := slow * 0.03 * math.Exp(0.3*rng.NormFloat64())
		tokens := 50 + rng.IntN(251)
		e2e := ttft
		for range tokens - 1 {
			itl := base * math.Exp(0.2*rng.NormFloat64())
			c.itl.observe(itl)
			e2e += itl
		}
		c.ttft.observe(ttft)
		c.e2e.observe(e2e)
		// Request i runs on pod i mod simPods.
		p := &c.pods[i%simPods]
		p.decode += e2e - ttft
		p.decoded += float64(tokens - 1)
	}
	return c
}

func merge(a, b colorTraffic) colorTraffic {
	out := colorTraffic{requests: a.requests + b.requests, ttft: newSimHist(ttftBuckets), itl: newSimHist(itlBuckets), e2e: newSimHist(e2eBuckets)}
	for _, x := range []colorTraffic{a, b} {
		out.ttft.add(x.ttft)
		out.itl.add(x.itl)
		out.e2e.add(x.e2e)
		for i, p := range x.pods {
			o := &out.pods[i]
			o.decode, o.decoded = o.decode+p.decode, o.decoded+p.decoded
		}
	}
	return out
}

// perPod answers a per-unit metric's query (`sum by (pod) (...)`) with each pod's sum, or
// false for another query.
func (c colorTraffic) perPod(query string) ([]metrics.Series, bool) {
	var pick func(podSums) float64
	switch {
	case strings.Contains(query, "request_decode_time_seconds_sum"):
		pick = func(p podSums) float64 { return p.decode }
	case strings.Contains(query, "request_generation_tokens_sum"):
		pick = func(p podSums) float64 { return p.decoded }
	default:
		return nil, false
	}
	out := make([]metrics.Series, len(c.pods))
	for i, p := range c.pods {
		out[i] = metrics.Series{Labels: map[string]string{"pod": "pod-" + strconv.Itoa(i)}, Value: pick(p)}
	}
	return out, true
}

// windowQuerier answers the vLLM preset's queries from one window's simulated traffic:
// bucket queries as vectors, p95 queries as histogram_quantile would, the sample query as the
// request count, and no aborts.
type windowQuerier struct {
	cand, stable colorTraffic
}

func (w *windowQuerier) color(query string) colorTraffic {
	if strings.Contains(query, candidatePods) {
		return w.cand
	}
	return w.stable
}

func (w *windowQuerier) hist(query string) *simHist {
	c := w.color(query)
	switch {
	case strings.Contains(query, "time_to_first_token"):
		return c.ttft
	case strings.Contains(query, "inter_token_latency"):
		return c.itl
	case strings.Contains(query, "e2e_request_latency"):
		return c.e2e
	}
	return nil
}

func (w *windowQuerier) Scalar(_ context.Context, query string, _ time.Time) metrics.Sample {
	switch {
	case strings.Contains(query, "abort"), strings.Contains(query, `finished_reason="error"`):
		return metrics.Sample{Status: metrics.OK, Value: 0} // no abort, no engine error
	case strings.Contains(query, "histogram_quantile(0.95"):
		return w.hist(query).quantile(0.95)
	case strings.Contains(query, "request_success_total"):
		return metrics.Sample{Status: metrics.OK, Value: w.color(query).requests}
	}
	return metrics.Sample{Status: metrics.NoData, Message: "unknown query"}
}

func (w *windowQuerier) Vector(_ context.Context, query string, _ time.Time) ([]metrics.Series, error) {
	if series, ok := w.color(query).perPod(query); ok {
		return series, nil
	}
	if h := w.hist(query); h != nil {
		return h.series(), nil
	}
	return nil, fmt.Errorf("unknown vector query %s", query)
}

// rolloutOutcome is how a simulated rollout ended.
type rolloutOutcome struct {
	rolledBack   bool
	measurements int
	inconclusive int
	failures     int
}

// The simulated rollout follows the API's defaults and internal/rollout's rules: steps 10, 25,
// 50 (then 100 promotes), each held 2m with a measurement every 30s over a 1m window (the
// minimum: consecutive windows overlap by half); a step advances once it has lasted 2m and its
// last measurement passed (a Fail or Inconclusive holds it); the first failure (failureLimit
// 0, the API's default) rolls back. A rollout still holding after maxMeasurements is counted
// as not rolled back (and reported as stalled).
const (
	simSteps           = 3
	simPerStep         = 5 // measurements at 0, 30, 60, 90, 120s of a 2m step
	simFailureLimit    = 0
	simMaxMeasurements = 200
)

// simulateRollout drives one rollout through Run and rollout.Verdict with 20-100 requests per 1m
// window per color, the candidate's latencies multiplied by slow.
func simulateRollout(t *testing.T, seed uint64, slow float64, spec v1alpha1.AnalysisSpec) rolloutOutcome {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	half := func(slow float64) colorTraffic { return serve(rng, 10+rng.IntN(41), slow) }
	prevCand, prevStable := half(slow), half(1)
	var out rolloutOutcome
	for step := 0; step < simSteps; step++ {
		for i := 0; ; i++ {
			if out.measurements >= simMaxMeasurements {
				return out
			}
			cand, stable := half(slow), half(1)
			q := &windowQuerier{cand: merge(prevCand, cand), stable: merge(prevStable, stable)}
			prevCand, prevStable = cand, stable
			// This harness slides a fixed 1m window (the controller's grows with the step, see
			// rollout.MeasureWindow): each measurement is judged at its step's first band, two
			// measurements per window.
			tg := target
			tg.Look = analysis.Look{Step: step + 1, Info: 1, Looks: 2}
			rs, err := analysis.Run(context.Background(), q, spec, tg, 30*time.Second, now)
			if err != nil {
				t.Fatal(err)
			}
			out.measurements++
			v, _ := rollout.Verdict(rs)
			switch v {
			case v1alpha1.VerdictFail:
				out.failures++
				if out.failures > simFailureLimit {
					out.rolledBack = true
					return out
				}
			case v1alpha1.VerdictInconclusive:
				out.inconclusive++
			}
			if i >= simPerStep-1 && v == v1alpha1.VerdictPass {
				break
			}
		}
	}
	return out
}

// bareRatioSpec is the vLLM preset as it was before histogram judgement: each latency's p95
// from histogram_quantile, judged candidate <= 1.2 x stable.
func bareRatioSpec(minSamples int32) v1alpha1.AnalysisSpec {
	ms, _ := metrics.Preset(v1alpha1.AnalysisPresetVLLM)
	for i := range ms {
		ms[i].Histogram = nil
	}
	return v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, MinSamples: minSamples, Metrics: ms}
}

type simSummary struct {
	rolledBack, stalled, measurements, inconclusive, failures int
}

func runRollouts(t *testing.T, runs int, slow float64, spec v1alpha1.AnalysisSpec) simSummary {
	var s simSummary
	for seed := range uint64(runs) {
		o := simulateRollout(t, seed, slow, spec)
		if o.rolledBack {
			s.rolledBack++
		} else if o.measurements >= simMaxMeasurements {
			s.stalled++
		}
		s.measurements += o.measurements
		s.inconclusive += o.inconclusive
		s.failures += o.failures
	}
	return s
}

// TestSequenceLowTrafficRollouts drives 200 seeded rollouts at 20-100 requests per window per
// color through Run and the rollout's failure limit: identical candidates (A/A) are never
// rolled back, a candidate 1.5x slower is rolled back in at least 95% of runs, 1.25x and 1.3x
// slower in at least 80%. The bare ratio judge's A/A false rollbacks on the same traffic are
// printed for contrast.
func TestSequenceLowTrafficRollouts(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 600 rollouts")
	}
	const runs = 200
	spec := v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, MinSamples: 20}

	aa := runRollouts(t, runs, 1, spec)
	t.Logf("FIGURE: A/A rollouts at 20-100 requests/window, histogram test, minSamples 20: %d/%d rolled back, %d stalled, %.1f measurements per rollout, %.1f%% of measurements inconclusive, %d failed measurements",
		aa.rolledBack, runs, aa.stalled, float64(aa.measurements)/runs, 100*float64(aa.inconclusive)/float64(aa.measurements), aa.failures)
	if aa.rolledBack != 0 {
		t.Errorf("%d of %d identical candidates rolled back, want 0", aa.rolledBack, runs)
	}
	if aa.stalled != 0 {
		t.Errorf("%d of %d identical candidates still held after %d measurements, want 0", aa.stalled, runs, simMaxMeasurements)
	}

	slow := runRollouts(t, runs, 1.5, spec)
	t.Logf("FIGURE: 1.5x-slower rollouts at 20-100 requests/window, histogram test, minSamples 20: %d/%d (%.1f%%) rolled back, %.1f measurements per rollout",
		slow.rolledBack, runs, 100*float64(slow.rolledBack)/runs, float64(slow.measurements)/runs)
	if slow.rolledBack*100 < 95*runs {
		t.Errorf("%d of %d 1.5x-slower candidates rolled back, want at least 95%%", slow.rolledBack, runs)
	}

	for _, factor := range []float64{1.25, 1.3} {
		s := runRollouts(t, runs, factor, spec)
		t.Logf("FIGURE: %gx-slower rollouts at 20-100 requests/window, histogram test, minSamples 20: %d/%d (%.1f%%) rolled back, %d promoted",
			factor, s.rolledBack, runs, 100*float64(s.rolledBack)/runs, runs-s.rolledBack-s.stalled)
		// A 1.25x slower build is 14% beyond decode-per-token's 1.1x bound (#27: at least 80%
		// rolled back; against the 1.2x bound it had, 13 of 200 were).
		if s.rolledBack*100 < 80*runs {
			t.Errorf("%d of %d %gx-slower candidates rolled back, want at least 80%%", s.rolledBack, runs, factor)
		}
	}

	bare := runRollouts(t, runs, 1, bareRatioSpec(20))
	t.Logf("FIGURE: A/A rollouts at 20-100 requests/window, bare ratio judge (p95 <= 1.2x stable), minSamples 20: %d/%d (%.1f%%) rolled back, %d failed measurements of %d",
		bare.rolledBack, runs, 100*float64(bare.rolledBack)/runs, bare.failures, bare.measurements)
}

// sampleOf is a histogram whose every observation is one request.
func sampleOf(h metrics.Histogram) analysis.HistogramSample {
	return analysis.HistogramSample{Histogram: h, Requests: metrics.Sample{Status: metrics.OK, Value: h.Total()}}
}

// BenchmarkJudgeHistogram measures one judgement on vLLM's 22 TTFT buckets.
func BenchmarkJudgeHistogram(b *testing.B) {
	cand, stable := newSimHist(ttftBuckets), newSimHist(ttftBuckets)
	for i := range 100 {
		cand.observe(0.02 * float64(i))
		stable.observe(0.015 * float64(i))
	}
	c, err := metrics.ParseBuckets(cand.series())
	if err != nil {
		b.Fatal(err)
	}
	s, err := metrics.ParseBuckets(stable.series())
	if err != nil {
		b.Fatal(err)
	}
	m := v1alpha1.AnalysisMetric{
		Name: "ttft-p95", Query: "q", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: "b", Percentile: 95},
	}
	b.ResetTimer()
	for b.Loop() {
		analysis.JudgeHistogram(m, sampleOf(c), sampleOf(s), 20, analysis.Look{}, now)
	}
}
