// Package analysis judges a rollout step on Prometheus metrics: Judge holds one candidate value
// to its bounds (pure), Run renders and runs a spec's queries for a candidate and its stable
// color and judges each, and Summarize folds the results into one verdict. No data is never a
// pass and never a failure: it is Inconclusive, which neither promotes nor rolls back.
package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// tolerance is the relative slack of comparisons to a bound, so that a value equal to its bound
// up to floating-point rounding (1.2 * 0.35 is 0.41999999999999993) is within it.
const tolerance = 1e-9

// Judge holds a candidate's value to a metric's bounds. It is pure.
//
//   - Inconclusive, in this order: when minSamples > 0 and the sample count is not OK or below
//     minSamples ("too few samples: 12 < 50"); when the candidate's value is not OK (the
//     sample's message); when the metric has a relative bound (MaxRatioToStable) and an absolute
//     bound did not already fail, and the stable value is not OK, or is 0 while the candidate's
//     is above 0 (no ratio to speak of; 0 and 0 pass).
//   - Fail when the candidate is above Max, below Min, or above MaxRatioToStable times the
//     stable value; the message names the metric, the value and the bound, e.g.
//     "ttft-p95 0.82 > 0.42 (1.2x stable 0.35)". An absolute bound that fails is a failure even
//     when the stable value is missing.
//   - Pass otherwise (a metric without bounds passes).
//
// Candidate, Stable and Bound are filled for people (4 significant digits) whenever known.
func Judge(m v1alpha1.AnalysisMetric, candidate, stable metrics.Sample, samples metrics.Sample, minSamples int32, at time.Time) v1alpha1.MetricResult {
	res := v1alpha1.MetricResult{Name: m.Name, At: metav1.NewTime(at)}
	relative := m.MaxRatioToStable != nil
	if candidate.Status == metrics.OK {
		res.Candidate = format(candidate.Value)
	}
	if relative && stable.Status == metrics.OK {
		res.Stable = format(stable.Value)
	}
	res.Bound = describeBounds(m, stable)

	inconclusive := func(msg string) v1alpha1.MetricResult {
		res.Verdict, res.Message = v1alpha1.VerdictInconclusive, msg
		return res
	}
	fail := func(msg string) v1alpha1.MetricResult {
		res.Verdict, res.Message = v1alpha1.VerdictFail, msg
		return res
	}

	if minSamples > 0 {
		if samples.Status != metrics.OK {
			return inconclusive("samples: " + messageOf(samples))
		}
		if samples.Value < float64(minSamples) {
			return inconclusive(fmt.Sprintf("too few samples: %s < %d", format(samples.Value), minSamples))
		}
	}
	if candidate.Status != metrics.OK {
		return inconclusive("candidate: " + messageOf(candidate))
	}
	c := candidate.Value
	if m.Max != nil {
		if bound := m.Max.AsApproximateFloat64(); above(c, bound) {
			return fail(fmt.Sprintf("%s %s > %s", m.Name, format(c), format(bound)))
		}
	}
	if m.Min != nil {
		if bound := m.Min.AsApproximateFloat64(); above(bound, c) {
			return fail(fmt.Sprintf("%s %s < %s", m.Name, format(c), format(bound)))
		}
	}
	if relative {
		if stable.Status != metrics.OK {
			return inconclusive("stable: " + messageOf(stable))
		}
		s, ratio := stable.Value, m.MaxRatioToStable.AsApproximateFloat64()
		if s == 0 && c > 0 {
			return inconclusive(fmt.Sprintf("stable is 0 and candidate %s: no ratio", format(c)))
		}
		if bound := ratio * s; above(c, bound) {
			return fail(fmt.Sprintf("%s %s > %s (%sx stable %s)", m.Name, format(c), format(bound), format(ratio), format(s)))
		}
	}
	res.Verdict = v1alpha1.VerdictPass
	return res
}

// above reports whether v exceeds bound by more than floating-point rounding.
func above(v, bound float64) bool {
	return v > bound+tolerance*math.Abs(bound)
}

// describeBounds writes a metric's bounds, e.g. "<= 0.05" or "<= 0.42 (1.2x stable 0.35)", or
// "<= 1.2x stable" when the stable value is unknown.
func describeBounds(m v1alpha1.AnalysisMetric, stable metrics.Sample) string {
	var parts []string
	if m.Max != nil {
		parts = append(parts, "<= "+formatQuantity(m.Max))
	}
	if m.Min != nil {
		parts = append(parts, ">= "+formatQuantity(m.Min))
	}
	if m.MaxRatioToStable != nil {
		ratio := m.MaxRatioToStable.AsApproximateFloat64()
		if stable.Status == metrics.OK {
			parts = append(parts, fmt.Sprintf("<= %s (%sx stable %s)", format(ratio*stable.Value), format(ratio), format(stable.Value)))
		} else {
			parts = append(parts, fmt.Sprintf("<= %sx stable", format(ratio)))
		}
	}
	return strings.Join(parts, ", ")
}

func messageOf(s metrics.Sample) string {
	if s.Message != "" {
		return s.Message
	}
	return string(s.Status)
}

func format(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

func formatQuantity(q *resource.Quantity) string { return format(q.AsApproximateFloat64()) }
