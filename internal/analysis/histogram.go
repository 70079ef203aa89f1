package analysis

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

const (
	// minObservations is the fewest (effective) observations per color the rank test is
	// run with: below, its normal approximation is poor and a measurement is inconclusive.
	minObservations = 10
)

// HistogramSample is one color's histogram over the window, as a bucket query returned it.
type HistogramSample struct {
	// Histogram holds the cumulative bucket counts; meaningful when Err is nil.
	Histogram metrics.Histogram
	// Err says why there is no histogram (Prometheus failed, no +Inf bucket).
	Err error
	// Requests is the number of requests the color served over the window (the sample query),
	// when known (Status OK). A histogram that counts several observations per request (one
	// per token for inter-token latency) has correlated observations; the test then counts at
	// most Requests of them.
	Requests metrics.Sample
	// Groups are the histogram's parts per pod (a bucket query grouped by pod and le), when
	// known: the rank test's design effect (DesignEffect) is estimated from them.
	Groups []metrics.Histogram
}

// JudgeHistogram judges a histogram metric (m.Histogram set) from each color's bucket counts.
// It is pure.
//
// Values for people: Candidate is the candidate's quantile, Stable the stable's, read from the
// buckets as histogram_quantile does (linear interpolation within a bucket, the first bucket
// from 0, a rank in the +Inf bucket read as the highest finite bound); Bound is
// "<= ratio x stable"; the message gives both sample counts.
//
// Verdicts, in this order:
//   - Inconclusive when minSamples > 0 and the candidate's request count is unknown or below
//     it, or the candidate histogram is missing or empty.
//   - Fail when the candidate's quantile is above Max or below Min.
//   - For MaxRatioToStable r: Inconclusive when the stable histogram is missing or empty.
//     The rank test below then decides, on the same evidence in both directions: with fewer
//     than minObservations effective observations in either color it is Inconclusive (no
//     Pass on a point estimate from one burst); Fail when its z reaches FailZ(look), the
//     threshold that spends the rollout's error budget Alpha over its steps and looks; Pass
//     when the candidate's quantile is at most r x the stable's; else Inconclusive (the step
//     holds, and the next measurement reads a longer window). A Pass is not a proof that the
//     candidate is as fast: every later step judges it again on more traffic, and the
//     promotion needs every step passed; a Fail rolls back, so it needs the confidence.
//
// The rank test is a one-sided Mann-Whitney test (Kayenta's method) that the candidate's
// latencies divided by r are stochastically larger than the stable's, that is that the
// candidate is slower than r x stable, on the buckets. Assumptions: within a bucket
// observations are spread uniformly (the interpolation histogram_quantile makes), the first
// bucket starting at 0; the +Inf bucket is a point above every finite value (two +Inf
// observations tie). Dividing the candidate's latencies by r divides its bucket bounds by r,
// so the buckets of the two colors no longer line up; U, the expected number of (candidate,
// stable) pairs in which the scaled candidate is slower (ties count half), is the sum over
// bucket pairs of their counts times the probability that a uniform value of one interval
// exceeds one of the other. z = (U - n_c n_s / 2 - 1/2) / sqrt(n_c n_s (n_c + n_s + 1) / 12):
// the variance without ties, larger than with them, so the test errs on the side of passing.
// Observations are not independent: each color's count is divided by the design effect of
// the pods (DesignEffect over HistogramSample.Groups, both colors' pooled, see designEffect),
// and a histogram with several observations per request (per-token inter-token latency) is
// then capped at the color's request count.
//
// The test compares whole distributions: a candidate slower only in its tail, with its bulk
// unchanged, stays Inconclusive (never promoted, never rolled back on this metric) until the
// counts show it.
func JudgeHistogram(m v1alpha1.AnalysisMetric, cand, stable HistogramSample, minSamples int32, look Look, at time.Time) v1alpha1.MetricResult {
	res := v1alpha1.MetricResult{Name: m.Name, At: metav1.NewTime(at)}
	q := 0.95
	if m.Histogram != nil && m.Histogram.Percentile > 0 && m.Histogram.Percentile < 100 {
		q = float64(m.Histogram.Percentile) / 100
	}
	relative := m.MaxRatioToStable != nil
	if relative {
		res.Confident = new(bool) // judged by a test: confident only when it says so
	}
	verdict := func(v v1alpha1.Verdict, msg string) v1alpha1.MetricResult {
		res.Verdict, res.Message = v, msg
		return res
	}

	cq, cErr := quantileOf(cand, q)
	if cErr == nil {
		res.Candidate = format(cq)
	}
	sq, sErr := quantileOf(stable, q)
	if relative && sErr == nil {
		res.Stable = format(sq)
	}
	stableSample := metrics.Sample{Status: metrics.NoData}
	if sErr == nil {
		stableSample = metrics.Sample{Status: metrics.OK, Value: sq}
	}
	res.Bound = describeBounds(m, stableSample)

	look, why := sampleGate(cand.Requests, minSamples, look)
	if why != "" {
		return verdict(v1alpha1.VerdictInconclusive, why)
	}
	if cErr != nil {
		return verdict(v1alpha1.VerdictInconclusive, "candidate: "+cErr.Error())
	}
	if m.Max != nil {
		if bound := m.Max.AsApproximateFloat64(); above(cq, bound) {
			return verdict(v1alpha1.VerdictFail, fmt.Sprintf("%s %s > %s (%s)", m.Name, format(cq), format(bound), counts(cand, nil)))
		}
	}
	if m.Min != nil {
		if bound := m.Min.AsApproximateFloat64(); above(bound, cq) {
			return verdict(v1alpha1.VerdictFail, fmt.Sprintf("%s %s < %s (%s)", m.Name, format(cq), format(bound), counts(cand, nil)))
		}
	}
	if !relative {
		return verdict(v1alpha1.VerdictPass, fmt.Sprintf("%s %s within bounds (%s)", m.Name, format(cq), counts(cand, nil)))
	}
	if sErr != nil {
		return verdict(v1alpha1.VerdictInconclusive, "stable: "+sErr.Error())
	}
	ratio := m.MaxRatioToStable.AsApproximateFloat64()
	bound := ratio * sq
	deff := designEffect(cand, stable)
	z, nc, ns := RankTest(cand.Histogram, stable.Histogram, ratio, effectiveAt(cand, deff), effectiveAt(stable, deff))
	n := counts(cand, &stable)
	if deff > 1 {
		n += fmt.Sprintf("; %s and %s effective at a design effect of %s", format(nc), format(ns), format(deff))
	}
	if nc < minObservations || ns < minObservations {
		return verdict(v1alpha1.VerdictInconclusive, fmt.Sprintf("%s %s vs %s (%sx stable %s) on too few observations to judge (%s)", m.Name, format(cq), format(bound), format(ratio), format(sq), n))
	}
	// The same U read the other way: the continuity correction moves toward the pass side.
	zPass := z + 1/math.Sqrt(nc*ns*(nc+ns+1)/12)
	return relativeVerdict(res, cq, sq, ratio, z, zPass, look, n)
}

// relativeVerdict sets res's verdict, message and confidence from a relative test on the
// candidate's value cv against ratio x the stable color's sv: Fail when its z reaches
// FailZ(look) (the message compares cv with the bound as it is: a test on whole distributions
// can fail a quantile within it), Pass within the bound, else Inconclusive (the step holds and
// the next measurement reads more); n describes the data. zPass is the test's z read toward
// passing (the rank test's continuity correction turned around; z itself for a test without
// one): a Pass is confident when zPass is at or below -FailZ(look), the mirror of a Fail, so
// that a candidate exactly at the bound passes confidently over the whole rollout with at most
// the probability Alpha that one within it fails.
func relativeVerdict(res v1alpha1.MetricResult, cv, sv, ratio, z, zPass float64, look Look, n string) v1alpha1.MetricResult {
	name, bound, zf := res.Name, ratio*sv, FailZ(look)
	confident := false
	switch {
	case z >= zf:
		// The test reads whole distributions: a candidate slower in its bulk fails with its
		// quantile still within the bound, and the message says so rather than "above".
		cmp := ">"
		if !above(cv, bound) {
			cmp = "<="
		}
		res.Verdict, res.Message = v1alpha1.VerdictFail, fmt.Sprintf("%s %s %s %s (%sx stable %s): slower than %sx stable (z %.2f >= %.2f, the threshold of step %d with %sx the data of its first tested window; %s)", name, format(cv), cmp, format(bound), format(ratio), format(sv), format(ratio), z, zf, max(look.Step, 1), format(max(look.Info, 1)), n)
	case above(cv, bound):
		res.Verdict, res.Message = v1alpha1.VerdictInconclusive, fmt.Sprintf("%s %s > %s (%sx stable %s) but not significant (z %.2f < %.2f; %s)", name, format(cv), format(bound), format(ratio), format(sv), z, zf, n)
		if look.Light() && !look.LastStep && z < zf/2 {
			// Futile here: at this z the threshold is four times the data away.
			res.Verdict, res.Message = v1alpha1.VerdictPass, res.Message+"; "+lightNote(look)+", and at this z a Fail is four times the data away: it is left to a later step, where the candidate's pods carry more"
		}
	case zPass <= -zf && look.Light() && look.LastStep:
		res.Verdict, res.Message = v1alpha1.VerdictPass, fmt.Sprintf("%s %s <= %s (%sx stable %s; z %.2f; %s), not confidently: %s, and this step promotes", name, format(cv), format(bound), format(ratio), format(sv), zPass, n, lightNote(look))
	case zPass <= -zf:
		confident = true
		res.Verdict, res.Message = v1alpha1.VerdictPass, fmt.Sprintf("%s %s <= %s (%sx stable %s), confidently (z %.2f <= -%.2f; %s)", name, format(cv), format(bound), format(ratio), format(sv), zPass, zf, n)
	default:
		res.Verdict, res.Message = v1alpha1.VerdictPass, fmt.Sprintf("%s %s <= %s (%sx stable %s; %s)", name, format(cv), format(bound), format(ratio), format(sv), n)
	}
	res.Confident = &confident
	return res
}

// designEffect is the variance inflation the rank test applies to both colors, at least 1: the
// two colors' own design effects (DesignEffect over each color's pods, centred on that color's
// own ranks, so that a candidate slower on every pod does not inflate it) pooled, each weighted
// by its degrees of freedom (serving pods - 1), as a pooled variance is; a color with a single
// serving pod (the candidate at the first step) adds nothing. Under the null hypothesis both
// colors run the same version, so both estimate the same clustering.
//
// Taking the stable color's alone, as the judge once did, assumed the candidate's pods were as
// clustered as the stable's. On long heavy-tailed prompts one long prompt holds up a pod's
// batch: some windows spare every stable pod (a design effect near 1) while it holds up one of
// the candidate's few pods (its own 4-20), and identical candidates were rolled back (z 3.7-4
// against thresholds 3.1-3.3 on the code-bursty workload of the simulator).
func designEffect(cand, stable HistogramSample) float64 {
	var sum, df float64
	for _, s := range []HistogramSample{stable, cand} {
		if e, ok := DesignEffect(s.Groups); ok {
			g := float64(servingGroups(s.Groups) - 1)
			sum += g * e
			df += g
		}
	}
	if df == 0 {
		return 1
	}
	return max(sum/df, 1)
}

// servingGroups is how many of the groups counted an observation.
func servingGroups(groups []metrics.Histogram) int {
	n := 0
	for _, g := range groups {
		if g.Total() > 0 {
			n++
		}
	}
	return n
}

// effectiveAt is the observations the rank test counts for a color at a design effect: its
// histogram's total divided by the design effect, at most its request count when known (an
// inter-token latency histogram's design effect, read from token observations, already holds
// the correlation of one request's tokens).
func effectiveAt(s HistogramSample, deff float64) float64 {
	n := s.Histogram.Total() / deff
	if s.Requests.Status == metrics.OK && s.Requests.Value >= 0 && s.Requests.Value < n {
		n = s.Requests.Value
	}
	return n
}

// quantileOf reads a color's q-quantile, or says why it cannot.
func quantileOf(s HistogramSample, q float64) (float64, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	return s.Histogram.Quantile(q)
}

// effective is the number of observations the rank test counts for a color: the histogram's
// total, at most the color's request count when that is known.
func effective(s HistogramSample) float64 {
	n := s.Histogram.Total()
	if s.Requests.Status == metrics.OK && s.Requests.Value >= 0 && s.Requests.Value < n {
		n = s.Requests.Value
	}
	return n
}

// counts writes the sample counts for a message, e.g. "samples: candidate 40, stable 360".
func counts(cand HistogramSample, stable *HistogramSample) string {
	s := "samples: candidate " + format(effective(cand))
	if stable != nil {
		s += ", stable " + format(effective(*stable))
	}
	return s
}

// RankTest is the one-sided Mann-Whitney test of JudgeHistogram: z is large when the
// candidate's observations divided by ratio are stochastically larger than the stable's. The
// histograms' counts are scaled to nc and ns observations (the effective sample sizes, at most
// their totals), which it returns; z is NaN when either is 0. It is pure.
func RankTest(cand, stable metrics.Histogram, ratio, nc, ns float64) (z, effCand, effStable float64) {
	tc, ts := cand.Total(), stable.Total()
	nc, ns = math.Min(nc, tc), math.Min(ns, ts)
	if nc <= 0 || ns <= 0 || ratio <= 0 {
		return math.NaN(), max(nc, 0), max(ns, 0)
	}
	cb, sb := intervals(cand, 1/ratio), intervals(stable, 1)
	var u float64
	for _, c := range cb {
		for _, s := range sb {
			u += c.count * s.count * c.greater(s)
		}
	}
	u *= (nc / tc) * (ns / ts)
	mean := nc * ns / 2
	sd := math.Sqrt(nc * ns * (nc + ns + 1) / 12)
	return (u - mean - 0.5) / sd, nc, ns
}

// interval is a bucket's observations, spread uniformly over [lo, hi] (a point when lo == hi),
// or a point above every finite value when hi is +Inf.
type interval struct {
	lo, hi, count float64
}

// intervals turns a cumulative histogram into its non-empty buckets, bounds multiplied by
// scale.
func intervals(h metrics.Histogram, scale float64) []interval {
	var out []interval
	lower, below := 0.0, 0.0
	for i, b := range h {
		c := b.Count - below
		lo, hi := lower, b.UpperBound
		if i == 0 && hi < 0 || math.IsInf(hi, 1) {
			lo = hi
		}
		if c > 0 {
			out = append(out, interval{lo: lo * scale, hi: hi * scale, count: c})
		}
		lower, below = b.UpperBound, b.Count
	}
	return out
}

// greater is the probability that a value of x exceeds one of y, ties counting half.
func (x interval) greater(y interval) float64 {
	xInf, yInf := math.IsInf(x.hi, 1), math.IsInf(y.hi, 1)
	switch {
	case xInf && yInf:
		return 0.5
	case xInf:
		return 1
	case yInf:
		return 0
	}
	if x.lo == x.hi && y.lo == y.hi {
		switch {
		case x.lo > y.lo:
			return 1
		case x.lo == y.lo:
			return 0.5
		}
		return 0
	}
	if y.lo == y.hi {
		// P(X > c) for X uniform on [lo, hi].
		return clamp01((x.hi - y.lo) / (x.hi - x.lo))
	}
	if x.lo == x.hi {
		return cdf(y, x.lo)
	}
	// E[F_Y(X)] for X uniform on [x.lo, x.hi].
	return (integralCDF(y, x.hi) - integralCDF(y, x.lo)) / (x.hi - x.lo)
}

// cdf is P(Y <= v) for Y uniform on [y.lo, y.hi] (y.lo < y.hi).
func cdf(y interval, v float64) float64 { return clamp01((v - y.lo) / (y.hi - y.lo)) }

// integralCDF is the integral of cdf(y, t) for t from y.lo to v (0 below y.lo).
func integralCDF(y interval, v float64) float64 {
	w := y.hi - y.lo
	switch {
	case v <= y.lo:
		return 0
	case v < y.hi:
		d := v - y.lo
		return d * d / (2 * w)
	}
	return w/2 + (v - y.hi)
}

func clamp01(v float64) float64 { return math.Max(0, math.Min(1, v)) }
