package workloads

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Arrivals is an arrival process: bursts of requests whose start rate a two-state Markov chain
// modulates (a Markov-modulated compound Poisson process), optionally self-exciting (each
// request begets children, as in a Hawkes process). With BurstSize 1, no modulation and no
// branching it is a plain Poisson process.
type Arrivals struct {
	// Rate is the long-run mean number of requests per second (before the Shape).
	Rate float64
	// BurstSize is the mean number of requests a burst brings (geometric, at least 1).
	BurstSize float64
	// BurstSpread is the mean delay of a burst's requests after the burst starts (exponential).
	BurstSpread time.Duration
	// HighShare is the long-run share of time the chain spends in its high state (0: no
	// modulation); HighMean the mean stay in it (exponential); HighFactor the burst rate in the
	// high state over the rate in the low state.
	HighShare  float64
	HighMean   time.Duration
	HighFactor float64
	// StayShape is the shape of the stays' Gamma (Erlang) distribution: 0 or 1 is exponential (a
	// Markov chain), k > 1 makes the stays' coefficient of variation 1/sqrt(k) (a semi-Markov
	// chain), so that an hour's share of high time varies less from seed to seed.
	StayShape int
	// Branching is the mean number of children each request begets (Poisson, below 1: a
	// stationary Hawkes process with an exponential kernel); Decay the children's mean delay.
	Branching float64
	Decay     time.Duration
}

// Shape multiplies the arrival rate over time: a flash crowd, a ramp, or both (their product).
type Shape struct {
	// FlashFactor > 1 is a flash crowd: from FlashAt the rate rises linearly to FlashFactor
	// times within FlashRise, holds for FlashHold and falls back linearly within FlashFall.
	FlashFactor                              float64
	FlashAt, FlashRise, FlashHold, FlashFall time.Duration
	// RampOver > 0 is a ramp: the rate goes linearly from RampFrom times at 0 to RampTo times at
	// RampOver, then stays.
	RampFrom, RampTo float64
	RampOver         time.Duration
	// OnFor and OffFor, both positive, switch the traffic on and off: on for OnFor from 0,
	// then none for OffFor, repeating (an idle spell the fleet comes back from).
	OnFor, OffFor time.Duration
}

// At is the rate multiplier at t.
func (s Shape) At(t time.Duration) float64 {
	m := 1.0
	if s.RampOver > 0 {
		x := min(1, max(0, t.Seconds()/s.RampOver.Seconds()))
		m *= s.RampFrom + (s.RampTo-s.RampFrom)*x
	}
	if s.FlashFactor > 1 {
		f := 1.0
		rise := s.FlashAt + s.FlashRise
		hold := rise + s.FlashHold
		fall := hold + s.FlashFall
		switch {
		case t < s.FlashAt || t >= fall:
		case t < rise:
			f = 1 + (s.FlashFactor-1)*(t-s.FlashAt).Seconds()/max(s.FlashRise.Seconds(), 1e-9)
		case t < hold:
			f = s.FlashFactor
		default:
			f = s.FlashFactor - (s.FlashFactor-1)*(t-hold).Seconds()/max(s.FlashFall.Seconds(), 1e-9)
		}
		m *= f
	}
	if s.OnFor > 0 && s.OffFor > 0 && t%(s.OnFor+s.OffFor) >= s.OnFor {
		m = 0
	}
	return m
}

// max is the largest multiplier over [0, d).
func (s Shape) max() float64 {
	m := 1.0
	if s.RampOver > 0 {
		m = max(s.RampFrom, s.RampTo)
	}
	if s.FlashFactor > 1 {
		m *= s.FlashFactor
	}
	return m
}

// times draws the arrival times in [0, d), sorted.
func (a Arrivals) times(rng *rand.Rand, shape Shape, d time.Duration) []time.Duration {
	size := max(a.BurstSize, 1)
	branching := min(max(a.Branching, 0), 0.95)
	// Bursts start at lambda a second on average; the shape thins them from its peak.
	lambda := a.Rate / size * (1 - branching)
	peak := shape.max()
	lo, hi := lambda, lambda
	modulated := a.HighShare > 0 && a.HighShare < 1 && a.HighFactor > 0 && a.HighMean > 0
	exp := func(mean time.Duration) time.Duration {
		return time.Duration(rng.ExpFloat64() * float64(mean))
	}
	// The chain's path first: the ends of its stays, alternating from a drawn first state.
	var ends []time.Duration
	firstHigh := false
	if modulated {
		lowMean := time.Duration(float64(a.HighMean) * (1 - a.HighShare) / a.HighShare)
		stay := func(mean time.Duration) time.Duration {
			k := max(a.StayShape, 1)
			var s time.Duration
			for range k {
				s += exp(mean / time.Duration(k))
			}
			return s
		}
		firstHigh = rng.Float64() < a.HighShare
		var highTime time.Duration
		high := firstHigh
		for t := time.Duration(0); t < d; high = !high {
			mean := lowMean
			if high {
				mean = a.HighMean
			}
			end := min(t+stay(mean), d)
			if high {
				highTime += end - t
			}
			ends = append(ends, end)
			t = end
		}
		// The rates follow the path's own share of high time, so that every sequence carries
		// the mean rate (the path sets where the bursts fall, not how many there are).
		share := highTime.Seconds() / d.Seconds()
		lo = lambda / (share*a.HighFactor + 1 - share)
		hi = lo * a.HighFactor
	} else {
		ends = []time.Duration{d}
	}
	var out []time.Duration
	high, stateEnd, state := firstHigh, ends[0], 0
	for t := time.Duration(0); t < d; {
		rate := lo
		if high {
			rate = hi
		}
		rate *= peak
		next := d
		if rate > 0 {
			next = t + time.Duration(rng.ExpFloat64()/rate*float64(time.Second))
		}
		if next >= stateEnd {
			// Memoryless: restart the draw from the state change.
			t = stateEnd
			state++
			if state == len(ends) {
				break
			}
			high, stateEnd = !high, ends[state]
			continue
		}
		t = next
		if t >= d {
			break
		}
		if rng.Float64()*peak >= shape.At(t) {
			continue
		}
		// Geometric burst size with mean size.
		n := 1
		for rng.Float64() >= 1/size {
			n++
		}
		for k := range n {
			at := t
			if k > 0 {
				at += exp(a.BurstSpread)
			}
			out = append(out, at)
		}
	}
	if branching > 0 {
		// Each request, immigrant or child, begets Poisson(branching) children.
		for i := 0; i < len(out); i++ {
			for range poisson(rng, branching) {
				out = append(out, out[i]+exp(a.Decay))
			}
		}
	}
	kept := out[:0]
	for _, t := range out {
		if t < d {
			kept = append(kept, t)
		}
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i] < kept[j] })
	return kept
}

func poisson(rng *rand.Rand, mean float64) int {
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
