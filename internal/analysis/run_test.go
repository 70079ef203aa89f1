package analysis

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/window"
)

// fakeQuerier answers each query with the first rule whose every substring it contains, and
// records the rendered queries and times.
type fakeQuerier struct {
	mu      sync.Mutex
	rules   []rule
	queries []string
	times   []time.Time
}

type rule struct {
	contains []string
	sample   metrics.Sample
	// series answers a Vector query (a bucket query); nil is no series, or the sample's error.
	series []metrics.Series
}

func (f *fakeQuerier) Scalar(_ context.Context, query string, at time.Time) metrics.Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, query)
	f.times = append(f.times, at)
	for _, r := range f.rules {
		if containsAll(query, r.contains) {
			return r.sample
		}
	}
	return metrics.Sample{Status: metrics.NoData, Message: "no data"}
}

func (f *fakeQuerier) Vector(_ context.Context, query string, at time.Time) ([]metrics.Series, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, query)
	f.times = append(f.times, at)
	for _, r := range f.rules {
		if containsAll(query, r.contains) {
			if r.sample.Status == metrics.Error {
				return nil, errors.New(r.sample.Message)
			}
			return r.series, nil
		}
	}
	return nil, nil
}

// histAt is a bucket query's answer whose p95 is v: n observations spread over [0, v/0.95].
func histAt(v, n float64) []metrics.Series {
	return []metrics.Series{
		{Labels: map[string]string{"le": strconv.FormatFloat(v/0.95, 'g', -1, 64)}, Value: n},
		{Labels: map[string]string{"le": "+Inf"}, Value: n},
	}
}

// latency is a rule for a latency metric: its p95 is v, as a scalar and from 500 observations.
func latency(v float64, contains ...string) rule {
	return rule{contains: contains, sample: ok(v), series: histAt(v, 500)}
}

func (f *fakeQuerier) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queries)
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// Pod regexes as rendered in queries (PromQL string escaping leaves these alone).
var (
	candidatePods = metrics.PodRegex("llama-green")
	stablePods    = metrics.PodRegex("llama-blue")
)

var target = Target{
	Namespace: "ml",
	Name:      "llama",
	Candidate: ColorTarget{Color: v1alpha1.Green, Revision: "new", Pods: candidatePods},
	Stable:    ColorTarget{Color: v1alpha1.Blue, Revision: "old", Pods: stablePods},
}

// healthyVLLM answers every vLLM preset query with values that pass.
func healthyVLLM() *fakeQuerier {
	return &fakeQuerier{rules: []rule{
		{contains: []string{"request_success_total", "abort"}, sample: ok(0.01)},
		{contains: []string{"request_success_total", `finished_reason="error"`}, sample: ok(0.01)},
		{contains: []string{"sum(increase(vllm:request_success_total", candidatePods}, sample: ok(500)},
		{contains: []string{"sum(increase(vllm:request_success_total", stablePods}, sample: ok(4500)},
		latency(0.3, "time_to_first_token", candidatePods),
		latency(0.35, "time_to_first_token", stablePods),
		latency(0.02, "inter_token_latency", candidatePods),
		latency(0.02, "inter_token_latency", stablePods),
		latency(4, "e2e_request_latency", candidatePods),
		latency(4.5, "e2e_request_latency", stablePods),
		decode(candidatePods, 0.0201)[0],
		decode(stablePods, 0.020, 0.021, 0.019, 0.0205, 0.0195, 0.020, 0.0202, 0.0198)[0],
		decode(stablePods, 0.020, 0.021, 0.019, 0.0205, 0.0195, 0.020, 0.0202, 0.0198)[1],
		decode(candidatePods, 0.0201)[1],
	}}
}

// decode is the rules answering the decode-per-token queries of a color's pods: their decode
// seconds per pod ([0]) and their decoded tokens per pod ([1]), 2,000 tokens on each pod at the
// seconds per token given.
func decode(pods string, perToken ...float64) [2]rule {
	var num, den []metrics.Series
	for i, p := range perToken {
		pod := map[string]string{"pod": "pod-" + strconv.Itoa(i)}
		num = append(num, metrics.Series{Labels: pod, Value: p * 2000})
		den = append(den, metrics.Series{Labels: pod, Value: 2000})
	}
	return [2]rule{
		{contains: []string{"request_decode_time_seconds_sum", pods}, series: num},
		{contains: []string{"request_generation_tokens_sum", pods}, series: den},
	}
}

func vllmSpec() v1alpha1.AnalysisSpec {
	return v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, MinSamples: 50}
}

func verdicts(rs []v1alpha1.MetricResult) map[string]v1alpha1.Verdict {
	out := map[string]v1alpha1.Verdict{}
	for _, r := range rs {
		out[r.Name] = r.Verdict
	}
	return out
}

func TestRunRendersCandidateAndStableQueries(t *testing.T) {
	f := healthyVLLM()
	if _, err := Run(context.Background(), f, vllmSpec(), target, 2*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	queries := f.recorded()
	count := func(subs ...string) int {
		n := 0
		for _, q := range queries {
			if containsAll(q, subs) {
				n++
			}
		}
		return n
	}
	// 2 sample queries (candidate, and stable for the histogram test's sample sizes) + 5
	// candidate queries + 5 stable queries (itl-p95 as a bucket query, decode-per-token's
	// numerator and denominator per pod, the abort ratio and the saturation share).
	if len(queries) != 12 {
		t.Fatalf("%d queries, want 12:\n%s", len(queries), strings.Join(queries, "\n"))
	}
	if n := count("vllm:num_requests_waiting", stablePods); n != 1 {
		t.Errorf("%d saturation queries of the stable color, want 1", n)
	}
	if n := count("vllm:num_requests_waiting", candidatePods); n != 0 {
		t.Errorf("%d saturation queries of the candidate, want 0: only the stable color's saturation holds the verdicts", n)
	}
	for _, part := range []string{"sum by (pod) (increase(vllm:request_decode_time_seconds_sum", "sum by (pod) (increase(vllm:request_generation_tokens_count"} {
		for _, pods := range []string{candidatePods, stablePods} {
			if n := count(part, pods); n != 1 {
				t.Errorf("per-unit metrics: %d queries with %s for %s, want 1", n, part, pods)
			}
		}
	}
	for _, latency := range []string{"inter_token_latency"} {
		if n := count(latency, `namespace="ml",pod=~"`+candidatePods+`"`); n != 1 {
			t.Errorf("%s: %d candidate queries, want 1", latency, n)
		}
		if n := count(latency, `namespace="ml",pod=~"`+stablePods+`"`); n != 1 {
			t.Errorf("%s: %d stable queries, want 1", latency, n)
		}
	}
	if n := count(`finished_reason="error"`, stablePods); n != 0 {
		t.Errorf("the error ratio has an absolute bound but was queried for stable %d times", n)
	}
	if n := count(`finished_reason="abort"`, stablePods); n != 1 {
		t.Errorf("the abort ratio is relative to stable but was queried for stable %d times", n)
	}
	if n := count("sum(increase(vllm:request_success_total", candidatePods); n != 3 {
		t.Errorf("%d candidate request counts (sample query, error and abort ratios), want 3", n)
	}
	if n := count("sum(increase(vllm:request_success_total", stablePods); n != 2 {
		t.Errorf("samples counted on stable %d times, want 2 (sample query, abort ratio)", n)
	}
	if n := count("time_to_first_token") + count("e2e_request_latency"); n != 0 {
		t.Errorf("%d TTFT and e2e queries without an absolute bound; they are not judged relative to stable", n)
	}
	for _, latency := range []string{"inter_token_latency"} {
		if n := count(latency, "sum by (pod, le) (increase("); n != 2 {
			t.Errorf("%s: %d bucket queries, want 2 (the latencies are judged from their histograms)", latency, n)
		}
	}
	for _, q := range queries {
		if !strings.Contains(q, "[2m]") {
			t.Errorf("query without the 2m window: %s", q)
		}
		if strings.Contains(q, "{{") {
			t.Errorf("unrendered query: %s", q)
		}
	}
	for _, at := range f.times {
		if !at.Equal(now) {
			t.Errorf("queried at %s, want %s", at, now)
		}
	}
}

func TestRunJudgesEachMetric(t *testing.T) {
	cases := []struct {
		name  string
		spec  v1alpha1.AnalysisSpec // vllmSpec() when empty
		setup func(f *fakeQuerier)
		want  map[string]v1alpha1.Verdict
		check func(t *testing.T, rs []v1alpha1.MetricResult)
	}{
		{
			name:  "passes a healthy candidate on every metric",
			setup: func(*fakeQuerier) {},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictPass, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictPass, "decode-per-token": v1alpha1.VerdictPass,
			},
		},
		{
			name: "fails a candidate that decodes 1.5x slower per token, on its pods' sums",
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{decode(candidatePods, 0.030)[0]}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictPass, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictPass, "decode-per-token": v1alpha1.VerdictFail,
			},
			check: func(t *testing.T, rs []v1alpha1.MetricResult) {
				r := rs[slices.IndexFunc(rs, func(r v1alpha1.MetricResult) bool { return r.Name == "decode-per-token" })]
				if !strings.HasPrefix(r.Message, "decode-per-token 0.03 > 0.022 (1.1x stable 0.02): slower than 1.1x stable") || r.Candidate != "0.03" || r.Stable != "0.02" {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name: "holds the latency verdicts of a 1.5x slower candidate while the stable color is saturated, and still judges its errors",
			spec: metrics.WithSLO(vllmSpec(), &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 500 * time.Millisecond}}),
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{
					decode(candidatePods, 0.030)[0],
					latency(0.82, "time_to_first_token", candidatePods),
					{contains: []string{"vllm:num_requests_waiting", stablePods}, sample: ok(0.75)},
				}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictInconclusive, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictInconclusive, "ttft-p95": v1alpha1.VerdictInconclusive, "decode-per-token": v1alpha1.VerdictInconclusive,
			},
			check: func(t *testing.T, rs []v1alpha1.MetricResult) {
				r := rs[slices.IndexFunc(rs, func(r v1alpha1.MetricResult) bool { return r.Name == "decode-per-token" })]
				if !strings.HasPrefix(r.Message, "held, decode-per-token would have been a failure (decode-per-token 0.03 > 0.022") ||
					!strings.Contains(r.Message, "the stable color is saturated (the queue never emptied over the window on 75% of its pods)") {
					t.Errorf("message = %q", r.Message)
				}
			},
		},
		{
			name: "fails a 1.5x slower candidate when a minority of the stable pods queue",
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{
					decode(candidatePods, 0.030)[0],
					{contains: []string{"vllm:num_requests_waiting", stablePods}, sample: ok(0.25)},
				}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictPass, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictPass, "decode-per-token": v1alpha1.VerdictFail,
			},
		},
		{
			name: "fails a candidate whose time to first token is above the user's SLO",
			spec: metrics.WithSLO(vllmSpec(), &v1alpha1.LatencySLO{TTFTP95: &v1alpha1.Duration{Duration: 500 * time.Millisecond}}),
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{latency(0.82, "time_to_first_token", candidatePods)}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictPass, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictPass, "ttft-p95": v1alpha1.VerdictFail, "decode-per-token": v1alpha1.VerdictPass,
			},
			check: func(t *testing.T, rs []v1alpha1.MetricResult) {
				r := rs[slices.IndexFunc(rs, func(r v1alpha1.MetricResult) bool { return r.Name == "ttft-p95" })]
				if r.Message != "ttft-p95 0.82 > 0.5 (samples: candidate 500)" {
					t.Errorf("message = %q", r.Message)
				}
			},
		},
		{
			name: "is inconclusive everywhere with too few candidate requests",
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{{contains: []string{"sum(increase(vllm:request_success_total{namespace=\"ml\",pod=~\"" + candidatePods + "\"}[2m]))"}, sample: ok(12)}}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictInconclusive, "error-ratio": v1alpha1.VerdictInconclusive,
				"itl-p95": v1alpha1.VerdictInconclusive, "decode-per-token": v1alpha1.VerdictInconclusive,
			},
			check: func(t *testing.T, rs []v1alpha1.MetricResult) {
				for _, r := range rs {
					if r.Message != "too few samples: 12 < 50" {
						t.Errorf("%s: message = %q", r.Name, r.Message)
					}
				}
			},
		},
		{
			name: "turns Prometheus errors into inconclusive results, not errors",
			setup: func(f *fakeQuerier) {
				f.rules = []rule{{sample: failed("prometheus unreachable: connection refused")}}
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictInconclusive, "error-ratio": v1alpha1.VerdictInconclusive,
				"itl-p95": v1alpha1.VerdictInconclusive, "decode-per-token": v1alpha1.VerdictInconclusive,
			},
		},
		{
			name: "is inconclusive on a relative metric whose stable color has no data",
			setup: func(f *fakeQuerier) {
				f.rules = append([]rule{{contains: []string{"inter_token_latency", stablePods}, sample: noData("no data")}}, f.rules...)
			},
			want: map[string]v1alpha1.Verdict{
				"abort-ratio": v1alpha1.VerdictPass, "error-ratio": v1alpha1.VerdictPass,
				"itl-p95": v1alpha1.VerdictInconclusive, "decode-per-token": v1alpha1.VerdictPass,
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyVLLM()
			tc.setup(f)
			spec := tc.spec
			if spec.Preset == "" {
				spec = vllmSpec()
			}
			rs, err := Run(context.Background(), f, spec, target, 2*time.Minute, now)
			if err != nil {
				t.Fatal(err)
			}
			names := make([]string, len(rs))
			for i, r := range rs {
				names[i] = r.Name
				if !r.At.Time.Equal(now) {
					t.Errorf("%s measured at %s", r.Name, r.At)
				}
			}
			if !slices.IsSorted(names) {
				t.Errorf("results not sorted by name: %v", names)
			}
			got := verdicts(rs)
			if len(got) != len(tc.want) {
				t.Errorf("verdicts = %v, want %v", got, tc.want)
			}
			for name, v := range tc.want {
				if got[name] != v {
					t.Errorf("%s: %s, want %s", name, got[name], v)
				}
			}
			if tc.check != nil {
				tc.check(t, rs)
			}
		})
	}
}

// rangeRE matches a range selector's duration, e.g. [4m].
var rangeRE = regexp.MustCompile(`\[[0-9]+(ms|s|m|h)\]`)

func TestRunWindow(t *testing.T) {
	cases := []struct {
		name   string
		window time.Duration
		want   string
	}{
		{"queries over the 4m window of a 60s scrape interval", window.Of(30*time.Second, time.Minute), "[4m]"},
		{"queries over the 1m window of a 15s scrape interval", window.Of(30*time.Second, 15*time.Second), "[1m]"},
		{"queries over a window of seconds as given", 10 * time.Second, "[10s]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyVLLM()
			if _, err := Run(context.Background(), f, vllmSpec(), target, tc.window, now); err != nil {
				t.Fatal(err)
			}
			qs := f.recorded()
			if len(qs) == 0 {
				t.Fatal("no query ran")
			}
			for _, q := range qs {
				ranges := rangeRE.FindAllString(q, -1)
				if len(ranges) == 0 {
					t.Fatalf("no range in %s", q)
				}
				for _, r := range ranges {
					if r != tc.want {
						t.Fatalf("range %s, want every range %s: %s", r, tc.want, q)
					}
				}
			}
		})
	}
}

func TestRunSampleGate(t *testing.T) {
	custom := v1alpha1.AnalysisMetric{Name: "queue", Query: `max(q{pod=~"{{.Pods}}"})`, Max: q("10")}
	cases := []struct {
		name        string
		spec        v1alpha1.AnalysisSpec
		wantSamples int // sample queries run
		want        v1alpha1.Verdict
	}{
		{
			name:        "skips the sample query when minSamples is 0",
			spec:        v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, SampleQuery: `sum(reqs{pod=~"{{.Pods}}"})`, MinSamples: 0, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantSamples: 0,
			want:        v1alpha1.VerdictPass,
		},
		{
			name:        "runs a user's sample query once and gates on it",
			spec:        v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, SampleQuery: `sum(reqs{pod=~"{{.Pods}}"})`, MinSamples: 50, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantSamples: 1,
			want:        v1alpha1.VerdictInconclusive, // reqs has 3
		},
		{
			name:        "turns the gate off without a sample query (preset none, no spec.sampleQuery)",
			spec:        v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, MinSamples: 50, Metrics: []v1alpha1.AnalysisMetric{custom}},
			wantSamples: 0,
			want:        v1alpha1.VerdictPass,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeQuerier{rules: []rule{
				{contains: []string{"sum(reqs{"}, sample: ok(3)},
				{contains: []string{"max(q{"}, sample: ok(2)},
			}}
			rs, err := Run(context.Background(), f, tc.spec, target, time.Minute, now)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, q := range f.recorded() {
				if strings.Contains(q, "sum(reqs{") {
					n++
				}
			}
			if n != tc.wantSamples {
				t.Errorf("%d sample queries, want %d", n, tc.wantSamples)
			}
			if len(rs) != 1 || rs[0].Verdict != tc.want {
				t.Fatalf("results = %+v, want one %s", rs, tc.want)
			}
		})
	}
}

func TestRunWithoutStableColor(t *testing.T) {
	f := healthyVLLM()
	noStable := target
	noStable.Stable = ColorTarget{}
	rs, err := Run(context.Background(), f, vllmSpec(), noStable, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	got := verdicts(rs)
	for _, name := range []string{"itl-p95", "decode-per-token"} {
		if got[name] != v1alpha1.VerdictInconclusive {
			t.Errorf("%s: %s, want Inconclusive without a stable color", name, got[name])
		}
	}
	if got["error-ratio"] != v1alpha1.VerdictPass {
		t.Errorf("error-ratio: %s, want Pass (absolute bound)", got["error-ratio"])
	}
	if len(f.recorded()) != 6 {
		t.Errorf("%d queries, want 6 (no stable queries)", len(f.recorded()))
	}
}

// TestRunAbsoluteOnlyWhenTheStableServesNothing: a stable color that lost every pod has no
// samples; its queries are not run and the candidate passes on its absolute bounds alone.
func TestRunAbsoluteOnlyWhenTheStableServesNothing(t *testing.T) {
	f := healthyVLLM()
	dead := target
	dead.AbsoluteOnly = true
	rs, err := Run(context.Background(), f, vllmSpec(), dead, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range verdicts(rs) {
		if v != v1alpha1.VerdictPass {
			t.Errorf("%s: %s, want Pass on absolute bounds only", name, v)
		}
	}
	for _, q := range f.recorded() {
		if strings.Contains(q, string(target.Stable.Color)) && !strings.Contains(q, string(target.Candidate.Color)) {
			t.Errorf("query %q reads the stable color, which serves nothing", q)
		}
	}
}

func TestRunRejectsBadTemplatesBeforeQuerying(t *testing.T) {
	cases := []struct {
		name string
		spec v1alpha1.AnalysisSpec
		want string
	}{
		{
			name: "an unknown key in a metric names the metric",
			spec: v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, MinSamples: 50, Metrics: []v1alpha1.AnalysisMetric{
				{Name: "gpu-mem", Query: `x{deployment="{{.Deployment}}"}`, Max: q("1")},
			}},
			want: `metrics[gpu-mem].query: rendering query template`,
		},
		{
			name: "a metric template that does not parse",
			spec: v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{
				{Name: "broken", Query: `x{pod=~"{{.Pods"}`, Max: q("1")},
			}},
			want: `metrics[broken].query: parsing query template`,
		},
		{
			name: "a histogram's bucket query with an unknown key",
			spec: v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{
				{Name: "lat", Query: `x{pod=~"{{.Pods}}"}`, MaxRatioToStable: q("1.2"), Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: `x_bucket{d="{{.Deployment}}"}`}},
			}},
			want: `metrics[lat].histogram.bucketQuery: rendering query template`,
		},
		{
			name: "a per-unit denominator query with an unknown key",
			spec: v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{
				{Name: "per-token", Query: `x{pod=~"{{.Pods}}"}`, MaxRatioToStable: q("1.2"), PerUnit: &v1alpha1.AnalysisPerUnit{NumeratorQuery: `sum by (pod) (n{pod=~"{{.Pods}}"})`, DenominatorQuery: `d{d="{{.Deployment}}"}`}},
			}},
			want: `metrics[per-token].perUnit.denominatorQuery: rendering query template`,
		},
		{
			name: "a bad sample query",
			spec: v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetVLLM, MinSamples: 50, SampleQuery: `sum(x{{.Nope}})`},
			want: `sampleQuery`,
		},
	}
	for _, tc := range cases {
		t.Run("returns an error for "+tc.name, func(t *testing.T) {
			f := healthyVLLM()
			_, err := Run(context.Background(), f, tc.spec, target, time.Minute, now)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if n := len(f.recorded()); n != 0 {
				t.Fatalf("%d queries ran despite the spec error", n)
			}
			if verr := Validate(tc.spec); verr == nil || !strings.Contains(verr.Error(), tc.want) {
				t.Fatalf("Validate = %v, want the same kind of error", verr)
			}
		})
	}
}

func TestValidateAcceptsGoodSpecs(t *testing.T) {
	for name, spec := range map[string]v1alpha1.AnalysisSpec{
		"the default (empty) spec":   {},
		"the vllm preset":            vllmSpec(),
		"the none preset, no metric": {Preset: v1alpha1.AnalysisPresetNone},
		"a custom metric and sample query": {Preset: v1alpha1.AnalysisPresetNone, SampleQuery: `sum(r{pod=~"{{.Pods}}"})`, Metrics: []v1alpha1.AnalysisMetric{
			{Name: "x", Query: `x{namespace="{{.Namespace}}",pod=~"{{.Pods}}",color="{{.Color}}",rev="{{.Revision}}",ms="{{.Name}}"}[{{.Window}}]`, Max: q("1")},
		}},
	} {
		t.Run("accepts "+name, func(t *testing.T) {
			if err := Validate(spec); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRunReadsTheEndpointPickerPerPool: over InferencePools, a metric reads the endpoint
// picker's gauges for each color's pool through {{.Pool}}; a candidate whose pool queues three
// times as much as the stable one fails a 1.5x bound, an equal one passes.
func TestRunReadsTheEndpointPickerPerPool(t *testing.T) {
	spec := v1alpha1.AnalysisSpec{Preset: v1alpha1.AnalysisPresetNone, Metrics: []v1alpha1.AnalysisMetric{{
		Name: "epp-queue", Query: `max(inference_pool_average_queue_size{namespace="{{.Namespace}}",name=~"{{.Pool}}"})`,
		MaxRatioToStable: ptr.To(resource.MustParse("1.5")),
	}}}
	pooled := target
	pooled.Candidate.Pool, pooled.Stable.Pool = "llama-green", "llama-blue"
	for _, tc := range []struct {
		candidate float64
		want      v1alpha1.Verdict
	}{{6, v1alpha1.VerdictFail}, {2, v1alpha1.VerdictPass}} {
		f := &fakeQuerier{rules: []rule{
			{contains: []string{`name=~"llama-green"`}, sample: ok(tc.candidate)},
			{contains: []string{`name=~"llama-blue"`}, sample: ok(2)},
		}}
		res, err := Run(context.Background(), f, spec, pooled, 2*time.Minute, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := verdicts(res)["epp-queue"]; got != tc.want {
			t.Errorf("candidate pool queue %g vs stable 2: %s, want %s (%+v)", tc.candidate, got, tc.want, res)
		}
	}
}
