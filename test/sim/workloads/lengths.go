package workloads

import (
	"math"
	"math/rand/v2"
)

// Lengths is a token-length distribution: a lognormal body spliced with a Pareto tail. A draw
// takes a uniform u; below 1-TailShare it is the lognormal's quantile at u, above it a Pareto
// whose scale is the lognormal's quantile at 1-TailShare (so the two meet), and the result is
// rounded and clamped to [Min, Max] (Max is the model's context window or output limit).
type Lengths struct {
	// Median of the lognormal body, in tokens.
	Median float64
	// Sigma is the lognormal body's log-standard deviation.
	Sigma float64
	// TailShare is the share of draws from the Pareto tail (0: a plain lognormal).
	TailShare float64
	// TailAlpha is the Pareto tail's index (smaller is heavier; below 2 its variance is infinite
	// before the clamp).
	TailAlpha float64
	// Min and Max clamp a draw.
	Min, Max int
}

// Quantile is the length at probability u in [0, 1), before rounding.
func (l Lengths) Quantile(u float64) float64 {
	var x float64
	if l.TailShare <= 0 || u < 1-l.TailShare {
		x = l.Median * math.Exp(l.Sigma*normalQuantile(u))
	} else {
		scale := l.Median * math.Exp(l.Sigma*normalQuantile(1-l.TailShare))
		x = scale * math.Pow((1-u)/l.TailShare, -1/l.TailAlpha)
	}
	return math.Min(math.Max(x, float64(l.Min)), float64(l.Max))
}

// Draw returns one length.
func (l Lengths) Draw(rng *rand.Rand) int {
	// u in (0, 1): a u of exactly 0 would be the lognormal's zero.
	u := (float64(rng.Uint64()>>11) + 0.5) / (1 << 53)
	return int(math.Round(l.Quantile(u)))
}

// Mean is the distribution's mean (numerically, over a fine grid of probabilities).
func (l Lengths) Mean() float64 {
	const n = 100000
	var s float64
	for i := range n {
		s += math.Round(l.Quantile((float64(i) + 0.5) / n))
	}
	return s / n
}

// cdf is the probability of a length at most x (before rounding), Quantile's inverse.
func (l Lengths) cdf(x float64) float64 {
	lo, hi := 0.0, 1.0
	for range 60 {
		u := (lo + hi) / 2
		if l.Quantile(u) <= x {
			lo = u
		} else {
			hi = u
		}
	}
	return lo
}

func normalQuantile(u float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*u-1)
}
