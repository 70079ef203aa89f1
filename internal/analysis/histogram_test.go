package analysis

import (
	"errors"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// testBounds are some of vLLM's TTFT bucket bounds.
var testBounds = []float64{0.1, 0.25, 0.5, 0.75, 1, 2.5}

// hist builds a histogram over testBounds from per-bucket (not cumulative) counts, the last
// count being the +Inf bucket's; missing counts are 0.
func hist(perBucket ...float64) metrics.Histogram {
	h := make(metrics.Histogram, len(testBounds)+1)
	cum := 0.0
	for i := range h {
		if i < len(perBucket) {
			cum += perBucket[i]
		}
		bound := math.Inf(1)
		if i < len(testBounds) {
			bound = testBounds[i]
		}
		h[i] = metrics.Bucket{UpperBound: bound, Count: cum}
	}
	return h
}

func withRequests(h metrics.Histogram, requests float64) HistogramSample {
	return HistogramSample{Histogram: h, Requests: metrics.Sample{Status: metrics.OK, Value: requests}}
}

func sampleOf(h metrics.Histogram) HistogramSample { return withRequests(h, h.Total()) }

func histogramMetric() v1alpha1.AnalysisMetric {
	return v1alpha1.AnalysisMetric{
		Name: "ttft-p95", Query: "q", MaxRatioToStable: resource.NewMilliQuantity(1200, resource.DecimalSI),
		Histogram: &v1alpha1.AnalysisHistogram{BucketQuery: "b", Percentile: 95},
	}
}

func TestJudgeHistogram(t *testing.T) {
	typical := hist(30, 40, 20, 6, 3, 1) // 100 requests, p95 0.7083 in (0.5, 0.75]
	slower := hist(0, 10, 30, 30, 20, 10)
	absolute := histogramMetric()
	absolute.MaxRatioToStable, absolute.Max = nil, resource.NewMilliQuantity(700, resource.DecimalSI)
	cases := []struct {
		name         string
		metric       v1alpha1.AnalysisMetric
		cand, stable HistogramSample
		minSamples   int32
		want         v1alpha1.Verdict
		wantMessage  string // substring
		wantValue    string
		wantBound    string
	}{
		{
			name:   "passes identical distributions and shows both p95s and the sample counts",
			metric: histogramMetric(), cand: sampleOf(typical), stable: sampleOf(typical), minSamples: 20,
			want: v1alpha1.VerdictPass, wantMessage: "ttft-p95 0.7083 <= 0.85 (1.2x stable 0.7083; samples: candidate 100, stable 100)",
			wantValue: "0.7083", wantBound: "<= 0.85 (1.2x stable 0.7083)",
		},
		{
			name:   "fails a clearly slower candidate at the first look's threshold",
			metric: histogramMetric(), cand: sampleOf(slower), stable: sampleOf(typical), minSamples: 20,
			want: v1alpha1.VerdictFail, wantMessage: "slower than 1.2x stable (z 7.",
			wantValue: "1.75",
		},
		{
			name: "fails a candidate slower in its bulk with its p95 within the bound, and says so",
			// Stable: most requests fast, a tail at 0.75-1; candidate: most at 0.5-0.75, no tail.
			metric: histogramMetric(), cand: sampleOf(hist(0, 0, 0, 200)), stable: sampleOf(hist(150, 0, 0, 0, 50)), minSamples: 20,
			want: v1alpha1.VerdictFail, wantMessage: "ttft-p95 0.7375 <= 1.14 (1.2x stable 0.95): slower than 1.2x stable (z ",
		},
		{
			name:   "is inconclusive when a few requests put the p95 above the bound without significance",
			metric: histogramMetric(), cand: sampleOf(hist(6, 8, 4, 0, 1, 1)), stable: sampleOf(hist(6, 8, 5, 1, 0, 0)), minSamples: 20,
			want: v1alpha1.VerdictInconclusive, wantMessage: "but not significant (z -0.48 < 3.29",
		},
		{
			name:   "is inconclusive below minSamples",
			metric: histogramMetric(), cand: withRequests(slower, 12), stable: sampleOf(typical), minSamples: 20,
			want: v1alpha1.VerdictInconclusive, wantMessage: "too few samples: 12 < 20",
		},
		{
			name:   "is inconclusive when the candidate's buckets are all empty (no request served)",
			metric: histogramMetric(), cand: sampleOf(hist()), stable: sampleOf(typical),
			want: v1alpha1.VerdictInconclusive, wantMessage: "candidate: no observations",
		},
		{
			name:   "is inconclusive when the candidate's bucket query failed",
			metric: histogramMetric(), cand: HistogramSample{Err: errors.New("bucket query: timeout")}, stable: sampleOf(typical),
			want: v1alpha1.VerdictInconclusive, wantMessage: "candidate: bucket query: timeout",
		},
		{
			name:   "is inconclusive when the stable color has no observations",
			metric: histogramMetric(), cand: sampleOf(typical), stable: sampleOf(hist()),
			want: v1alpha1.VerdictInconclusive, wantMessage: "stable: no observations",
		},
		{
			name:   "passes single-bucket data of both colors (the p95s are equal)",
			metric: histogramMetric(), cand: sampleOf(hist(0, 0, 50)), stable: sampleOf(hist(0, 0, 70)), minSamples: 20,
			want: v1alpha1.VerdictPass, wantValue: "0.4875",
		},
		{
			name:   "fails a candidate whose observations are all in the +Inf bucket",
			metric: histogramMetric(), cand: sampleOf(hist(0, 0, 0, 0, 0, 0, 40)), stable: sampleOf(typical), minSamples: 20,
			want: v1alpha1.VerdictFail, wantValue: "2.5",
		},
		{
			name:   "counts at most the requests of a histogram with an observation per token",
			metric: histogramMetric(), cand: withRequests(hist(0, 0, 4000, 6000), 8), stable: withRequests(hist(6000, 4000), 8),
			want: v1alpha1.VerdictInconclusive, wantMessage: "on too few observations to judge (samples: candidate 8, stable 8)",
		},
		{
			name:   "fails an absolute bound on the interpolated p95 without a stable color",
			metric: absolute, cand: sampleOf(typical), stable: HistogramSample{Err: errors.New("no stable color")}, minSamples: 20,
			want: v1alpha1.VerdictFail, wantMessage: "ttft-p95 0.7083 > 0.7 (samples: candidate 100)",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := JudgeHistogram(tc.metric, tc.cand, tc.stable, tc.minSamples, Look{}, now)
			if r.Verdict != tc.want {
				t.Errorf("verdict = %s, want %s (%s)", r.Verdict, tc.want, r.Message)
			}
			if !strings.Contains(r.Message, tc.wantMessage) {
				t.Errorf("message = %q, want it to contain %q", r.Message, tc.wantMessage)
			}
			if tc.wantValue != "" && r.Candidate != tc.wantValue {
				t.Errorf("candidate = %q, want %q", r.Candidate, tc.wantValue)
			}
			if tc.wantBound != "" && r.Bound != tc.wantBound {
				t.Errorf("bound = %q, want %q", r.Bound, tc.wantBound)
			}
			if r.Name != "ttft-p95" || !r.At.Time.Equal(now) {
				t.Errorf("result %s at %s", r.Name, r.At)
			}
		})
	}
}

func TestRankTest(t *testing.T) {
	typical := hist(30, 40, 20, 6, 3, 1)
	cases := []struct {
		name         string
		cand, stable metrics.Histogram
		ratio        float64
		nc, ns       float64
		check        func(z float64) bool
		want         string
	}{
		{
			name: "centres identical distributions at about 0", cand: typical, stable: typical, ratio: 1, nc: 100, ns: 100,
			check: func(z float64) bool { return z < 0 && z > -0.1 }, want: "slightly below 0 (continuity correction)",
		},
		{
			name: "favours an identical candidate once the ratio's margin is applied", cand: typical, stable: typical, ratio: 1.2, nc: 100, ns: 100,
			check: func(z float64) bool { return z < -0.5 }, want: "below -0.5",
		},
		{
			name: "is large for a clearly slower candidate", cand: hist(0, 10, 30, 30, 20, 10), stable: typical, ratio: 1.2, nc: 100, ns: 100,
			check: func(z float64) bool { return z > FailZ(Look{}) }, want: "above the first look's threshold",
		},
		{
			name: "is NaN without observations", cand: hist(), stable: typical, ratio: 1.2, nc: 0, ns: 100,
			check: math.IsNaN, want: "NaN",
		},
		{
			name: "ties two +Inf buckets instead of calling either slower", cand: hist(0, 0, 0, 0, 0, 0, 30), stable: hist(0, 0, 0, 0, 0, 0, 30), ratio: 1, nc: 30, ns: 30,
			check: func(z float64) bool { return z < 0 && z > -0.1 }, want: "about 0",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			z, _, _ := RankTest(tc.cand, tc.stable, tc.ratio, tc.nc, tc.ns)
			if !tc.check(z) {
				t.Errorf("z = %g, want %s", z, tc.want)
			}
		})
	}
}

func TestRankTestShrinksWithTheEffectiveSampleSize(t *testing.T) {
	cand, stable := hist(0, 100, 300, 300, 200, 100), hist(300, 400, 200, 60, 30, 10)
	zFull, nc, ns := RankTest(cand, stable, 1.2, 1000, 1000)
	zCapped, ncCapped, nsCapped := RankTest(cand, stable, 1.2, 30, 40)
	if nc != 1000 || ns != 1000 || ncCapped != 30 || nsCapped != 40 {
		t.Fatalf("effective sizes %g/%g and %g/%g", nc, ns, ncCapped, nsCapped)
	}
	if !(zCapped < zFull) || zCapped <= 0 {
		t.Errorf("z with 30/40 requests = %g, with 1000/1000 = %g: want smaller but positive", zCapped, zFull)
	}
}
