package analysis

import (
	"fmt"
	"math"
	"strings"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	sampletypes "github.com/modelship/modelship/internal/sample" // not "sample": a judge helper of that name
)

// Inference on the right units, and an error budget spent over the whole rollout.
//
// Requests are not independent: a burst puts tens of requests through one pod's prefill queue
// at once, and one long prompt delays every request behind it. Counted as independent, 60
// requests from two bursts on one candidate pod look like strong evidence when they are
// worth a handful of observations (lag-1 autocorrelation 0.7-0.99 measured on a production
// trace). The rank test therefore divides each color's count by a design effect, estimated
// from how much the pods' latency distributions differ within the window (DesignEffect).
//
// A rollout looks many times: every analysis interval of every step, on a window that grows
// with the step. Judged at a fixed 99% on each look, an identical candidate fails one of them
// far more often than 1%. The failure threshold rises with the evidence instead (FailZ): the
// error budget Alpha is spent over the steps and, within a step, over each doubling of the
// data the window holds, so that the chance that an identical candidate ever fails a metric
// over the whole rollout is at most Alpha, however long it holds. The threshold depends on how
// much data the window holds, never on how many times it was looked at: an analysis interval
// of 5 s and one of 30 s judge the same window against the same threshold (counted per look,
// a 5 s interval raised it from 2.8 to 4.5 in four minutes, and a 1.5x slower release at
// z 4.4 was never rolled back). A clear regression still fails at the first look: its z grows
// with the square root of the samples, the threshold only with the logarithm of the data.

// Alpha is the error budget of one metric over a whole rollout: the largest probability that a
// candidate no slower than the bound ever fails the metric's rank test, over every look of
// every step.
const Alpha = 0.01

// Look is which measurement of the rollout a judgement is (sample.Look: the decision packages
// fill it without a client, rollout.MeasureLook).
type Look = sampletypes.Look

// lightNote is what a result at a light look adds to its message.
func lightNote(l Look) string {
	return fmt.Sprintf("at a lighter load than the stable color's (a candidate pod carries %.2fx a stable pod's load), a faster read proves nothing", l.Load)
}

// sampleGate is the sample gate of the histogram and per-unit judges: why the candidate's
// request count leaves the measurement Inconclusive (unknown, or below minSamples), or "" and
// look counted from the first tested look (Tested). minSamples 0: no gate, look unchanged.
func sampleGate(requests metrics.Sample, minSamples int32, look Look) (Look, string) {
	switch {
	case minSamples <= 0:
		return look, ""
	case requests.Status != metrics.OK:
		return look, "samples: " + messageOf(requests)
	case requests.Value < float64(minSamples):
		return look, fmt.Sprintf("too few samples: %s < %d", format(requests.Value), minSamples)
	}
	return look.Tested(requests.Value, minSamples), ""
}

// FailZ is the one-sided threshold of the rank test's z at a look of step s whose window holds
// Info in doubling band j = floor(log2(Info)) (j = 0 from 1 to 2, 1 from 2 to 4, ...): the z
// that the looks of the band cross with probability at most a = Alpha / (s(s+1) (j+1)(j+2)).
// Since the sum over s and j of 1/(s(s+1) (j+1)(j+2)) is 1, the thresholds spend at most Alpha
// over the whole rollout (a union bound over the bands). Within a band, the smaller of two
// bounds: a z watched without pause (bandTail; first step: 3.29 up to twice the first window's
// data, 3.63 up to four times, 3.83 up to eight), and a union bound over the band's looks when
// they are few (n = ceil(2^j Looks) looks: the 1 - a/n quantile; a single look per window at
// the first step: 2.81).
func FailZ(l Look) float64 {
	s := float64(max(l.Step, 1))
	j := 0.0
	if l.Info > 1 {
		j = math.Floor(math.Log2(l.Info))
	}
	a := Alpha / (s * (s + 1) * (j + 1) * (j + 2))
	z := bandThreshold(a)
	if l.Looks > 0 {
		n := math.Ceil(math.Pow(2, j) * max(l.Looks, 1))
		z = min(z, normalQuantile(1-a/n))
	}
	return z
}

// bandTail bounds the probability that a standardized statistic on growing data, z(t) =
// B(t)/sqrt(t) for a Brownian motion B in information time t, is at least c somewhere over one
// doubling of t, looked at continuously: the chance it starts there, plus the rate at which it
// crosses (in log time z is a stationary Ornstein-Uhlenbeck process with correlation
// exp(-|d|/2), and a band is ln 2 long; Pickands' bound: ln 2 / 2 * c * phi(c)). Looks at
// discrete instants cross less often.
func bandTail(c float64) float64 {
	return 0.5*math.Erfc(c/math.Sqrt2) + math.Ln2/2*c*math.Exp(-c*c/2)/math.Sqrt(2*math.Pi)
}

// bandThreshold is the c at which bandTail(c) is a (bisection: bandTail falls for c above 1).
func bandThreshold(a float64) float64 {
	lo, hi := 1.0, 40.0
	for range 80 {
		mid := (lo + hi) / 2
		if bandTail(mid) > a {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// DesignEffect is how much the clustering of observations in groups (one histogram per pod
// over the window) inflates the variance of a mean rank, against independent observations:
// sum over groups of (the group's sum of centred mid-ranks)^2, over the sum of the squared
// centred mid-ranks, with a small-sample factor G/(G-1). 1 for independent observations; the
// mean group size for groups that differ completely. ok is false with fewer than two non-empty
// groups (a single group says nothing of its own variance). Mid-ranks are read from the pooled
// buckets, each bucket's observations spread uniformly within it (as in RankTest).
func DesignEffect(groups []metrics.Histogram) (deff float64, ok bool) {
	var pooled []float64 // non-cumulative counts per bucket of the pooled histogram
	var bounds []float64
	var per [][]float64
	for _, g := range groups {
		if g.Total() <= 0 {
			continue
		}
		counts := make([]float64, len(g))
		below := 0.0
		for i, b := range g {
			counts[i] = max(b.Count-below, 0)
			below = max(below, b.Count)
		}
		if bounds == nil {
			bounds = make([]float64, len(g))
			for i, b := range g {
				bounds[i] = b.UpperBound
			}
			pooled = make([]float64, len(g))
		}
		if len(g) != len(bounds) {
			continue // buckets that do not line up: not one histogram's pods
		}
		for i := range counts {
			pooled[i] += counts[i]
		}
		per = append(per, counts)
	}
	if len(per) < 2 {
		return 1, false
	}
	h := make(metrics.Histogram, len(bounds))
	cum := 0.0
	for i, b := range bounds {
		cum += pooled[i]
		h[i] = metrics.Bucket{UpperBound: b, Count: cum}
	}
	n := cum
	// Mid-rank (as a fraction of n) of an observation of each bucket among the pooled ones.
	iv := bucketIntervals(h)
	place := make([]float64, len(bounds))
	for i := range bounds {
		if pooled[i] == 0 {
			continue
		}
		for j := range bounds {
			if pooled[j] > 0 {
				place[i] += pooled[j] * iv[i].greater(iv[j])
			}
		}
		place[i] /= n
	}
	mean := 0.0
	for i := range bounds {
		mean += pooled[i] * place[i]
	}
	mean /= n
	var within float64
	for i := range bounds {
		// Deviations of the bucket's mid-ranks from the mean, and the spread of the mid-ranks
		// of its own observations (uniform over a width of its share).
		d := place[i] - mean
		share := pooled[i] / n
		within += pooled[i] * (d*d + share*share/12)
	}
	if within <= 0 {
		return 1, false
	}
	var between float64
	for _, counts := range per {
		s := 0.0
		for i, c := range counts {
			s += c * (place[i] - mean)
		}
		between += s * s
	}
	g := float64(len(per))
	return max(between/within*g/(g-1), 0), true
}

// bucketIntervals is the intervals of every bucket of h, empty ones included, in its order.
func bucketIntervals(h metrics.Histogram) []interval {
	out := make([]interval, len(h))
	lower := 0.0
	for i, b := range h {
		lo, hi := lower, b.UpperBound
		if i == 0 && hi < 0 || math.IsInf(hi, 1) {
			lo = hi
		}
		out[i] = interval{lo: lo, hi: hi}
		lower = b.UpperBound
	}
	return out
}

// normalQuantile is the standard normal quantile of p in (0, 1).
func normalQuantile(p float64) float64 {
	if p <= 0 {
		return math.Inf(-1)
	}
	if p >= 1 {
		return math.Inf(1)
	}
	return -math.Sqrt2 * math.Erfcinv(2*p)
}

// minProportionExcess is the least excess of a candidate's share over the stable color's (one
// percentage point) that a proportion metric fails on, however many requests show it.
const minProportionExcess = 0.01

// JudgeProportion judges a share of requests (abort-ratio: clients that gave up) relative to
// the stable color's, as a proportion rather than a bare ratio of two values: with the stable
// color at 0 aborts and the candidate at 1, a ratio says nothing and held rollouts forever.
// It is pure.
//
// Verdicts, in this order: Inconclusive under the sample gate (as Judge), when a share or a
// color's request count is unknown; Fail on an absolute bound (Max, Min); Fail when the
// candidate's share exceeds MaxRatioToStable r x the stable's by a one-sided two-proportion
// z at least FailZ(look) (pooled variance) and by at least one percentage point; else Pass.
// A candidate whose users give up more often than the stable color's, over enough requests
// to tell, fails; one whose users abort as the stable color's do, at any level, passes.
func JudgeProportion(m v1alpha1.AnalysisMetric, cand, stable, candN, stableN metrics.Sample, minSamples int32, look Look, at time.Time) v1alpha1.MetricResult {
	res := Judge(m, cand, stable, candN, minSamples, at)
	if m.MaxRatioToStable == nil || res.Verdict == v1alpha1.VerdictFail && !strings.Contains(res.Message, "x stable") {
		return res // absolute bounds only, or an absolute bound failed
	}
	inconclusive := func(msg string) v1alpha1.MetricResult {
		res.Verdict, res.Message = v1alpha1.VerdictInconclusive, msg
		return res
	}
	if minSamples > 0 && (candN.Status != metrics.OK || candN.Value < float64(minSamples)) {
		return res // Judge's sample gate: Inconclusive
	}
	switch {
	case cand.Status != metrics.OK:
		return inconclusive("candidate: " + messageOf(cand))
	case stable.Status != metrics.OK:
		return inconclusive("stable: " + messageOf(stable))
	case candN.Status != metrics.OK || stableN.Status != metrics.OK || candN.Value <= 0 || stableN.Value <= 0:
		return inconclusive("request counts unknown: a share needs both colors' counts")
	}
	look = look.Tested(candN.Value, minSamples)
	r := m.MaxRatioToStable.AsApproximateFloat64()
	pc, ps, nc, ns := cand.Value, stable.Value, candN.Value, stableN.Value
	excess := pc - r*ps
	pooled := (pc*nc + ps*ns) / (nc + ns)
	z := 0.0
	if v := pooled * (1 - pooled) * (1/nc + r*r/ns); v > 0 {
		z = excess / math.Sqrt(v)
	}
	desc := fmt.Sprintf("%s %s vs %sx stable %s (z %.2f, threshold %.2f; requests: candidate %s, stable %s)", m.Name, format(pc), format(r), format(ps), z, FailZ(look), format(nc), format(ns))
	if excess > 0 && pc-ps >= minProportionExcess && z >= FailZ(look) {
		res.Verdict, res.Message = v1alpha1.VerdictFail, desc+": more than the stable color's"
		return res
	}
	res.Verdict, res.Message = v1alpha1.VerdictPass, desc
	return res
}
