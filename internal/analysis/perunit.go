package analysis

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// minUnitDF is the fewest degrees of freedom (serving pods less one per color, summed over
// both colors) the per-unit test is run with: below, the pods' spread is not estimated well
// enough to fail anything, and a measurement is inconclusive.
const minUnitDF = 2

// UnitSum is one pod's numerator and denominator over the window (AnalysisPerUnit's queries).
type UnitSum struct {
	Pod                    string
	Numerator, Denominator float64
}

// UnitBlock is a color's numerator and denominator summed over its pods in one block of the
// window: one scrape interval, ending at At.
type UnitBlock struct {
	At                     time.Time
	Numerator, Denominator float64
}

// PerUnitSample is one color's per-pod sums over the window, as the two queries returned them.
type PerUnitSample struct {
	// Units are the pods that did some work (a denominator above 0), in pod-name order;
	// meaningful when Err is nil.
	Units []UnitSum
	// Blocks are the color's sums per scrape interval over the window, in time order, when
	// the pods are too few for PerUnitTest (see PairedBlockTest); empty otherwise.
	Blocks []UnitBlock
	// Err says why there are no sums (Prometheus failed).
	Err error
	// Requests is the number of requests the color served over the window (the sample query).
	Requests metrics.Sample
}

// Mean is the color's mean per unit: the sum of its pods' numerators over the sum of their
// denominators; false without work.
func (s PerUnitSample) Mean() (float64, bool) {
	var num, den float64
	for _, u := range s.Units {
		num += u.Numerator
		den += u.Denominator
	}
	if s.Err != nil || den <= 0 {
		return 0, false
	}
	return num / den, true
}

// JudgePerUnit judges a per-unit metric (m.PerUnit set, e.g. decode seconds per decoded token)
// from each color's per-pod sums. It is pure.
//
// Candidate and Stable are the colors' means (Mean), Bound "<= ratio x stable".
//
// Verdicts, in this order:
//   - Inconclusive when minSamples > 0 and the candidate's request count is unknown or below
//     it, or the candidate did no work.
//   - Fail when the candidate's mean is above Max or below Min.
//   - For MaxRatioToStable r: Inconclusive when the stable color did no work. The test is
//     PerUnitTest, or, with fewer than blockUnitDF of its degrees of freedom, PairedBlockTest
//     on the colors' Blocks where that has minBlockDF. With neither (fewer than minUnitDF
//     degrees of freedom, no blocks: one pod per color, or one beside two), the pods' spread
//     is unknown: Pass when the candidate's mean is at most r x the stable's, else
//     Inconclusive, never Fail. Otherwise Fail when the test's z reaches FailZ(look), the
//     threshold that spends the rollout's error budget Alpha over its steps and the data its
//     windows hold; Pass when the candidate's mean is at most r x the stable's; else
//     Inconclusive (the step holds and the next measurement reads more).
//
// The units are the pods, not the requests or tokens: tokens decoded in one batch share its
// speed, and requests of one burst share its queue, so the only independent observations a
// window holds are the pods' means (see PerUnitTest); with too few pods, the window's scrape
// intervals, each color's pods summed over it (see PairedBlockTest).
func JudgePerUnit(m v1alpha1.AnalysisMetric, cand, stable PerUnitSample, minSamples int32, look Look, at time.Time) v1alpha1.MetricResult {
	res := v1alpha1.MetricResult{Name: m.Name, At: metav1.NewTime(at)}
	relative := m.MaxRatioToStable != nil
	if relative {
		res.Confident = new(bool) // judged by a test: confident only when it says so
	}
	verdict := func(v v1alpha1.Verdict, msg string) v1alpha1.MetricResult {
		res.Verdict, res.Message = v, msg
		return res
	}
	cm, cOK := cand.Mean()
	if cOK {
		res.Candidate = format(cm)
	}
	sm, sOK := stable.Mean()
	stableSample := metrics.Sample{Status: metrics.NoData}
	if sOK {
		stableSample = metrics.Sample{Status: metrics.OK, Value: sm}
		if relative {
			res.Stable = format(sm)
		}
	}
	res.Bound = describeBounds(m, stableSample)

	look, why := sampleGate(cand.Requests, minSamples, look)
	if why != "" {
		return verdict(v1alpha1.VerdictInconclusive, why)
	}
	switch {
	case cand.Err != nil:
		return verdict(v1alpha1.VerdictInconclusive, "candidate: "+cand.Err.Error())
	case !cOK:
		return verdict(v1alpha1.VerdictInconclusive, "candidate: no work in the window")
	}
	units := func(s PerUnitSample) string { return fmt.Sprintf("%d pods", len(s.Units)) }
	if m.Max != nil {
		if bound := m.Max.AsApproximateFloat64(); above(cm, bound) {
			return verdict(v1alpha1.VerdictFail, fmt.Sprintf("%s %s > %s (candidate %s)", m.Name, format(cm), format(bound), units(cand)))
		}
	}
	if m.Min != nil {
		if bound := m.Min.AsApproximateFloat64(); above(bound, cm) {
			return verdict(v1alpha1.VerdictFail, fmt.Sprintf("%s %s < %s (candidate %s)", m.Name, format(cm), format(bound), units(cand)))
		}
	}
	if !relative {
		return verdict(v1alpha1.VerdictPass, fmt.Sprintf("%s %s within bounds (candidate %s)", m.Name, format(cm), units(cand)))
	}
	switch {
	case stable.Err != nil:
		return verdict(v1alpha1.VerdictInconclusive, "stable: "+stable.Err.Error())
	case !sOK:
		return verdict(v1alpha1.VerdictInconclusive, "stable: no work in the window")
	}
	ratio := m.MaxRatioToStable.AsApproximateFloat64()
	bound := ratio * sm
	z, df := PerUnitTest(cand.Units, stable.Units, ratio)
	n := fmt.Sprintf("pods: candidate %d, stable %d", len(cand.Units), len(stable.Units))
	if df < blockUnitDF {
		if bz, bdf, pairs := PairedBlockTest(cand.Blocks, stable.Blocks, ratio); bdf >= minBlockDF && !math.IsNaN(bz) {
			// Too few pods to know their spread: the colors are compared over time instead,
			// each scrape interval a pair.
			return relativeVerdict(res, cm, sm, ratio, bz, bz, look, fmt.Sprintf("%s, too few to judge as units: %d scrape intervals paired, %.1f degrees of freedom", n, pairs, bdf))
		}
	}
	if df < minUnitDF || math.IsNaN(z) {
		if !above(cm, bound) {
			return verdict(v1alpha1.VerdictPass, fmt.Sprintf("%s %s <= %s (%sx stable %s; %s, too few to fail on)", m.Name, format(cm), format(bound), format(ratio), format(sm), n))
		}
		return verdict(v1alpha1.VerdictInconclusive, fmt.Sprintf("%s %s > %s (%sx stable %s) on too few pods to judge (%s)", m.Name, format(cm), format(bound), format(ratio), format(sm), n))
	}
	return relativeVerdict(res, cm, sm, ratio, z, z, look, n)
}

// PerUnitTest is the one-sided test of JudgePerUnit that the candidate's mean per unit is above
// ratio x the stable color's, with the pods as units. It returns a z (the normal quantile of
// the test's p-value, so that FailZ's thresholds apply as they do to the rank test) and the
// degrees of freedom of the variance, NaN and 0 when a color has no work. It is pure.
//
// Each color's mean is R = sum(N)/sum(D) over its pods. On the log scale the test statistic
// is t = (ln Rc - ln Rs - ln ratio) / sqrt(Vc + Vs), where V is the relative variance of a
// color's R. A pod's own mean m = N/D varies around its color's R; the relative deviations
// d = m/R - 1 of both colors' pods are pooled (under the null hypothesis both colors run
// the same version, as the rank test's design effect is pooled), weighted by the pods' work,
// Q = sum over both colors of D d^2 on df = sum over colors of (pods - 1) degrees of freedom;
// a color with a single pod (the candidate at the first step) is judged on the stable pods'
// spread. V is the larger of what two models of a pod's spread give: every pod's mean varies
// alike whatever its work (V = tau^2 sum(D^2)/sum(D)^2 with tau^2 = Q / sum over colors of
// (sum D - sum D^2 / sum D)), or it varies as 1/D, as a mean of independent units would
// (V = Q / df / sum D). Taking the larger holds when a candidate pod did less work than the
// stable pods (a pod that joined mid-window) as well as when the pods differ by more than
// their work explains (load, prompt lengths). t is read on Student's t distribution with df
// degrees of freedom: with few pods the spread itself is uncertain.
func PerUnitTest(cand, stable []UnitSum, ratio float64) (z, df float64) {
	type color struct{ r, w, w2, q float64 }
	var cs [2]color
	for i, units := range [][]UnitSum{cand, stable} {
		c := &cs[i]
		var num float64
		for _, u := range units {
			if u.Denominator > 0 {
				num += u.Numerator
				c.w += u.Denominator
				c.w2 += u.Denominator * u.Denominator
				df++
			}
		}
		if c.w <= 0 || num <= 0 {
			return math.NaN(), 0
		}
		c.r = num / c.w
		for _, u := range units {
			if u.Denominator > 0 {
				d := u.Numerator/u.Denominator/c.r - 1
				c.q += u.Denominator * d * d
			}
		}
		df--
	}
	if df < 1 || ratio <= 0 {
		return math.NaN(), max(df, 0)
	}
	q := cs[0].q + cs[1].q
	spread := cs[0].w - cs[0].w2/cs[0].w + cs[1].w - cs[1].w2/cs[1].w
	variance := func(c color) float64 {
		v := q / df / c.w
		if spread > 0 {
			v = max(v, q/spread*c.w2/(c.w*c.w))
		}
		return v
	}
	se := math.Sqrt(variance(cs[0]) + variance(cs[1]))
	diff := math.Log(cs[0].r) - math.Log(cs[1].r) - math.Log(ratio)
	if se == 0 {
		switch {
		case diff > 0:
			return math.Inf(1), df
		case diff < 0:
			return math.Inf(-1), df
		}
		return 0, df
	}
	return tToZ(diff/se, df), df
}

// maxBlocks bounds the blocks a measurement reads (two queries a color each).
const maxBlocks = 64

// BlockTimes is how PairedBlockTest's blocks are read over a window ending at at: the instants
// they end at, newest first, one scrape interval apart (or as many as keep them to
// maxBlocks), and the span each query reads, one scrape interval more than that:
// an increase over it runs from its first sample, the first after the block before it ended,
// to its last, so the blocks read the window's samples without overlapping. A block whose span
// reaches before the window is left out (it would read requests from before the window
// opened). None where scrape is not positive.
func BlockTimes(at time.Time, window, scrape time.Duration) (ends []time.Time, span time.Duration) {
	if scrape <= 0 || window <= 0 {
		return nil, 0
	}
	every, span := blockSpacing(window, scrape)
	for end := at; !end.Add(-span).Before(at.Add(-window)); end = end.Add(-every) {
		ends = append(ends, end)
	}
	return ends, span
}

// blockSpacing is BlockTimes' spacing of the blocks over a window and the span each query
// reads (scrape positive).
func blockSpacing(window, scrape time.Duration) (every, span time.Duration) {
	every = max(scrape, scrape*((window/maxBlocks+scrape-1)/scrape))
	return every, every + scrape
}

// PairsOverTime says whether a per-unit metric with these pods is judged on the colors paired
// over time (PairedBlockTest) where blocks are read: PerUnitTest's degrees of freedom below
// blockUnitDF. The controller reads the blocks only then, and so does the simulator.
func PairsOverTime(cand, stable []UnitSum) bool {
	_, df := PerUnitTest(cand, stable, 1)
	return df < blockUnitDF
}

// minBlockDF is the fewest degrees of freedom (paired blocks less one) PairedBlockTest is
// judged with.
const minBlockDF = 3

// blockUnitDF: below these degrees of freedom of PerUnitTest (one candidate pod beside up to
// four stable ones, two beside two or three), PairedBlockTest judges where it can: Student's
// t on so few asks a t of 8.6 (3 degrees of freedom) to 636 (1) for the z of a first step.
const blockUnitDF = 4

// PairedBlockTest is JudgePerUnit's test where the pods are too few to estimate their spread
// (PerUnitTest's degrees of freedom below blockUnitDF): that the candidate's mean per unit is above ratio x the stable color's, with the
// window's scrape intervals as units, each a pair of the two colors' sums over it. It returns a
// z (as PerUnitTest), the degrees of freedom and the blocks paired; NaN and 0 with no more
// than minBlockDF pairs. It is pure.
//
// For each block k where both colors did work, x_k = ln Rc_k - ln Rs_k (R a color's numerator
// over its denominator in the block): pairing by time takes out what both colors share (the
// load, the mix of requests arriving), and leaves what differs between their pods in the
// interval (the batch each pod holds). The blocks are weighted by w = Dc Ds / (Dc + Ds), the
// variance of the weighted mean of x is read as PerUnitTest reads a color's (the larger of
// two models: every block varies alike, or as 1/w), on blocks - 1 degrees of freedom, then
// inflated for the blocks' serial correlation: a batch outlives a scrape interval, so
// neighbouring blocks share their deviations, and the mean of correlated blocks varies more
// than independent ones would. The lag-1 autocorrelation of the deviations, corrected for its
// estimate's bias and taken one standard error higher (0 to 0.95), gives the factor
// (1 + rho) / (1 - rho), and the degrees of freedom shrink by its inverse: with few blocks the
// test needs many (at no correlation, 10 blocks give about 3 degrees of freedom, 32 about 17).
// At the bound a window fails within its share of the budget up to a correlation of 0.5; at
// 0.8, three times it (0.4-0.7% of windows; TestPairedBlockTestHoldsItsLevelAtTheBound).
//
// What this cannot see is a difference between pods that lasts the whole window (a slower GPU,
// a pod's own configuration): blocks are paired over time, not over pods. Against a
// relative bound such as 1.2x it would have to be that large to fail an identical candidate.
func PairedBlockTest(cand, stable []UnitBlock, ratio float64) (z, df float64, pairs int) {
	stableAt := make(map[time.Time]UnitBlock, len(stable))
	for _, b := range stable {
		stableAt[b.At] = b
	}
	var xs, ws []float64
	for _, c := range cand {
		s, ok := stableAt[c.At]
		if !ok || !(c.Numerator > 0) || !(c.Denominator > 0) || !(s.Numerator > 0) || !(s.Denominator > 0) {
			continue
		}
		xs = append(xs, math.Log(c.Numerator/c.Denominator)-math.Log(s.Numerator/s.Denominator))
		ws = append(ws, c.Denominator*s.Denominator/(c.Denominator+s.Denominator))
	}
	b := float64(len(xs))
	if b <= minBlockDF || ratio <= 0 {
		return math.NaN(), 0, len(xs)
	}
	var w, w2, wx float64
	for i, x := range xs {
		w += ws[i]
		w2 += ws[i] * ws[i]
		wx += ws[i] * x
	}
	mean := wx / w
	var q, lag, sq float64
	for i, x := range xs {
		d := x - mean
		q += ws[i] * d * d
		sq += d * d
		if i > 0 {
			lag += d * (xs[i-1] - mean)
		}
	}
	df = b - 1
	v := q / df / w
	if spread := w - w2/w; spread > 0 {
		v = max(v, q/spread*w2/(w*w))
	}
	rho := 0.0
	if sq > 0 {
		rho = lag / sq
	}
	// Kendall's correction of the estimate's bias (the sample mean removed, it reads low by
	// about (1 + 3 rho) / blocks), then one standard error above it: on a dozen blocks the
	// estimate is too uncertain to take as it is (measured: at the bound, blocks of true
	// correlation 0.5 failed 0.7-1.4% of windows against a budget of 0.25% with the estimate
	// plus 1/blocks, 0.0-0.3% with this).
	rho = min(max((rho*b+1)/(b-3), 0), 0.95)
	rho = min(rho+math.Sqrt((1-rho*rho)/b), 0.95)
	v *= (1 + rho) / (1 - rho)
	df *= (1 - rho) / (1 + rho)
	diff := mean - math.Log(ratio)
	if v == 0 {
		switch {
		case diff > 0:
			return math.Inf(1), df, len(xs)
		case diff < 0:
			return math.Inf(-1), df, len(xs)
		}
		return 0, df, len(xs)
	}
	return tToZ(diff/math.Sqrt(v), df), df, len(xs)
}

// tToZ is the standard normal quantile of Student's t distribution's CDF at t with df degrees
// of freedom: the z with the same one-sided p-value.
func tToZ(t, df float64) float64 {
	// Upper tail P(T > |t|) = I_x(df/2, 1/2) / 2 with x = df / (df + t^2).
	tail := 0.5 * regIncBeta(df/(df+t*t), df/2, 0.5)
	z := math.Sqrt2 * math.Erfcinv(2*tail) // the upper-tail normal quantile of tail
	if t < 0 {
		return -z
	}
	return z
}

// regIncBeta is the regularized incomplete beta function I_x(a, b), by its continued fraction
// (modified Lentz), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction
// converges slowly.
func regIncBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x > (a+1)/(a+b+2) {
		return 1 - front*betaFraction(1-x, b, a)/b
	}
	return front * betaFraction(x, a, b) / a
}

// betaFraction evaluates the incomplete beta function's continued fraction.
func betaFraction(x, a, b float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1.0; m <= 300; m++ {
		// Even step.
		num := m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		// Odd step.
		num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		d = 1 + num*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + num/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		delta := d * c
		h *= delta
		if math.Abs(delta-1) < eps {
			break
		}
	}
	return h
}
