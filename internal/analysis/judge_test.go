package analysis

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

var now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func ok(v float64) metrics.Sample { return metrics.Sample{Status: metrics.OK, Value: v} }

func noData(msg string) metrics.Sample { return metrics.Sample{Status: metrics.NoData, Message: msg} }

func failed(msg string) metrics.Sample { return metrics.Sample{Status: metrics.Error, Message: msg} }

type metricOption func(*v1alpha1.AnalysisMetric)

func withMax(s string) metricOption { return func(m *v1alpha1.AnalysisMetric) { m.Max = q(s) } }
func withMin(s string) metricOption { return func(m *v1alpha1.AnalysisMetric) { m.Min = q(s) } }
func withRatio(s string) metricOption {
	return func(m *v1alpha1.AnalysisMetric) { m.MaxRatioToStable = q(s) }
}

func newMetric(name string, opts ...metricOption) v1alpha1.AnalysisMetric {
	m := v1alpha1.AnalysisMetric{Name: name, Query: "q"}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func TestJudge(t *testing.T) {
	ttft := newMetric("ttft-p95", withRatio("1.2"))
	errRatio := newMetric("error-ratio", withMax("0.05"))
	success := newMetric("success-rate", withMin("0.99"))
	ttftCapped := newMetric("ttft-p95", withRatio("1.2"), withMax("0.5"))
	plenty := ok(500)

	cases := []struct {
		name       string
		metric     v1alpha1.AnalysisMetric
		candidate  metrics.Sample
		stable     metrics.Sample
		samples    metrics.Sample
		minSamples int32
		want       v1alpha1.MetricResult // At and Name are checked apart
	}{
		{
			name: "passes a latency within 1.2x the stable color's", metric: ttft,
			candidate: ok(0.4), stable: ok(0.35), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.4", Stable: "0.35", Bound: "<= 0.42 (1.2x stable 0.35)"},
		},
		{
			name: "passes a latency exactly at 1.2x stable despite floating-point rounding", metric: ttft,
			candidate: ok(0.42), stable: ok(0.35), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.42", Stable: "0.35", Bound: "<= 0.42 (1.2x stable 0.35)"},
		},
		{
			name: "fails a latency above 1.2x stable, naming metric, value and bound", metric: ttft,
			candidate: ok(0.82), stable: ok(0.35), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{
				Verdict: v1alpha1.VerdictFail, Candidate: "0.82", Stable: "0.35", Bound: "<= 0.42 (1.2x stable 0.35)",
				Message: "ttft-p95 0.82 > 0.42 (1.2x stable 0.35)",
			},
		},
		{
			name: "fails an error ratio above its max", metric: errRatio,
			candidate: ok(0.08), stable: failed("ignored"), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictFail, Candidate: "0.08", Bound: "<= 0.05", Message: "error-ratio 0.08 > 0.05"},
		},
		{
			name: "passes an error ratio exactly at its max", metric: errRatio,
			candidate: ok(0.05), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.05", Bound: "<= 0.05"},
		},
		{
			name: "passes a zero error ratio: zero is a value", metric: errRatio,
			candidate: ok(0), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0", Bound: "<= 0.05"},
		},
		{
			name: "fails a success rate below its min", metric: success,
			candidate: ok(0.9), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictFail, Candidate: "0.9", Bound: ">= 0.99", Message: "success-rate 0.9 < 0.99"},
		},
		{
			name: "passes a success rate above its min", metric: success,
			candidate: ok(0.995), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.995", Bound: ">= 0.99"},
		},
		{
			name: "ignores the stable value of a metric without a relative bound", metric: errRatio,
			candidate: ok(0.01), stable: failed("prometheus unreachable"), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.01", Bound: "<= 0.05"},
		},
		{
			name: "is inconclusive when the candidate has no data, with the sample's message", metric: ttft,
			candidate: noData("value is NaN"), stable: ok(0.35), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Stable: "0.35", Bound: "<= 0.42 (1.2x stable 0.35)", Message: "candidate: value is NaN"},
		},
		{
			name: "is inconclusive when the candidate's query failed", metric: errRatio,
			candidate: failed("prometheus timeout after 10s"), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Bound: "<= 0.05", Message: "candidate: prometheus timeout after 10s"},
		},
		{
			name: "is inconclusive with the status when a sample has no message", metric: errRatio,
			candidate: metrics.Sample{Status: metrics.NoData}, samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Bound: "<= 0.05", Message: "candidate: NoData"},
		},
		{
			name: "is inconclusive when the sample count could not be read", metric: errRatio,
			candidate: ok(0.01), samples: failed("prometheus unreachable: connection refused"), minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Candidate: "0.01", Bound: "<= 0.05", Message: "samples: prometheus unreachable: connection refused"},
		},
		{
			name: "is inconclusive with too few samples", metric: ttft,
			candidate: ok(0.3), stable: ok(0.35), samples: ok(12), minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Candidate: "0.3", Stable: "0.35", Bound: "<= 0.42 (1.2x stable 0.35)", Message: "too few samples: 12 < 50"},
		},
		{
			name: "is inconclusive with too few samples even when the value is out of bounds", metric: errRatio,
			candidate: ok(1), samples: ok(49.6), minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Candidate: "1", Bound: "<= 0.05", Message: "too few samples: 49.6 < 50"},
		},
		{
			name: "judges with exactly the minimum number of samples", metric: errRatio,
			candidate: ok(0.01), samples: ok(50), minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.01", Bound: "<= 0.05"},
		},
		{
			name: "ignores samples when the minimum is zero", metric: errRatio,
			candidate: ok(0.01), samples: noData("no sample query"), minSamples: 0,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.01", Bound: "<= 0.05"},
		},
		{
			name: "is inconclusive when the stable value of a relative bound is missing", metric: ttft,
			candidate: ok(0.4), stable: noData("no data"), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Candidate: "0.4", Bound: "<= 1.2x stable", Message: "stable: no data"},
		},
		{
			name: "fails an absolute bound even when the stable value is missing", metric: ttftCapped,
			candidate: ok(0.7), stable: failed("prometheus unreachable"), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictFail, Candidate: "0.7", Bound: "<= 0.5, <= 1.2x stable", Message: "ttft-p95 0.7 > 0.5"},
		},
		{
			name: "fails the relative bound of a metric whose absolute bound holds", metric: ttftCapped,
			candidate: ok(0.45), stable: ok(0.3), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictFail, Candidate: "0.45", Stable: "0.3", Bound: "<= 0.5, <= 0.36 (1.2x stable 0.3)", Message: "ttft-p95 0.45 > 0.36 (1.2x stable 0.3)"},
		},
		{
			name: "passes when stable and candidate are both 0", metric: newMetric("error-ratio", withMax("0.05"), withRatio("1.2")),
			candidate: ok(0), stable: ok(0), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0", Stable: "0", Bound: "<= 0.05, <= 0 (1.2x stable 0)"},
		},
		{
			name: "is inconclusive when stable is 0 and the candidate above 0: there is no ratio", metric: ttft,
			candidate: ok(0.01), stable: ok(0), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictInconclusive, Candidate: "0.01", Stable: "0", Bound: "<= 0 (1.2x stable 0)", Message: "stable is 0 and candidate 0.01: no ratio"},
		},
		{
			name: "writes values with 4 significant digits", metric: ttft,
			candidate: ok(0.123456), stable: ok(0.1111111), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "0.1235", Stable: "0.1111", Bound: "<= 0.1333 (1.2x stable 0.1111)"},
		},
		{
			name: "passes a metric without bounds", metric: newMetric("free"),
			candidate: ok(123), samples: plenty, minSamples: 50,
			want: v1alpha1.MetricResult{Verdict: v1alpha1.VerdictPass, Candidate: "123"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge(tc.metric, tc.candidate, tc.stable, tc.samples, tc.minSamples, now)
			if got.Name != tc.metric.Name {
				t.Errorf("name = %q, want %q", got.Name, tc.metric.Name)
			}
			if !got.At.Time.Equal(now) {
				t.Errorf("at = %s, want %s", got.At, now)
			}
			want := tc.want
			want.Name, want.At = got.Name, got.At
			if got != want {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestJudgeInvariants drives Judge over random metrics and samples and checks what must hold
// whatever the values: no data never passes or fails, a pass is within every bound, a failure
// names its metric.
func TestJudgeInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	statuses := []metrics.Status{metrics.OK, metrics.OK, metrics.OK, metrics.NoData, metrics.Error}
	sample := func(scale float64) metrics.Sample {
		st := statuses[rng.IntN(len(statuses))]
		if st != metrics.OK {
			return metrics.Sample{Status: st, Message: "missing"}
		}
		if rng.IntN(5) == 0 {
			return ok(0)
		}
		return ok(rng.Float64() * scale)
	}
	seen := map[v1alpha1.Verdict]int{}
	for i := range 5000 {
		m := newMetric("m")
		if rng.IntN(2) == 0 {
			m.Max = q("0.5")
		}
		if rng.IntN(3) == 0 {
			m.Min = q("0.1")
		}
		if rng.IntN(2) == 0 {
			m.MaxRatioToStable = q("1.2")
		}
		cand, stable, samples := sample(1), sample(1), sample(100)
		minSamples := int32(rng.IntN(3) * 25)
		r := Judge(m, cand, stable, samples, minSamples, now)
		seen[r.Verdict]++

		switch r.Verdict {
		case v1alpha1.VerdictPass:
			if cand.Status != metrics.OK {
				t.Fatalf("case %d: passed without a candidate value: %+v", i, r)
			}
			c := cand.Value
			if (m.Max != nil && c > 0.5) || (m.Min != nil && c < 0.1) {
				t.Fatalf("case %d: passed out of absolute bounds: %v %+v", i, c, r)
			}
			if m.MaxRatioToStable != nil && (stable.Status != metrics.OK || c > 1.2*stable.Value*(1+1e-9)) {
				t.Fatalf("case %d: passed the relative bound without reason: %+v / %+v", i, cand, stable)
			}
			if minSamples > 0 && (samples.Status != metrics.OK || samples.Value < float64(minSamples)) {
				t.Fatalf("case %d: passed with too few samples: %+v", i, samples)
			}
			if r.Message != "" {
				t.Fatalf("case %d: a pass with a message: %+v", i, r)
			}
		case v1alpha1.VerdictFail:
			if cand.Status != metrics.OK || !strings.HasPrefix(r.Message, "m ") {
				t.Fatalf("case %d: bad failure: %+v", i, r)
			}
		case v1alpha1.VerdictInconclusive:
			if r.Message == "" {
				t.Fatalf("case %d: inconclusive without a message", i)
			}
		default:
			t.Fatalf("case %d: verdict %q", i, r.Verdict)
		}
		if cand.Status != metrics.OK && r.Verdict != v1alpha1.VerdictInconclusive {
			t.Fatalf("case %d: candidate %s gave %s", i, cand.Status, r.Verdict)
		}
	}
	for _, v := range []v1alpha1.Verdict{v1alpha1.VerdictPass, v1alpha1.VerdictFail, v1alpha1.VerdictInconclusive} {
		if seen[v] < 100 {
			t.Errorf("only %d %s verdicts in the generated cases: %v", seen[v], v, seen)
		}
	}
}
