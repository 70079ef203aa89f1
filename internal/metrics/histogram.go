package metrics

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Bucket is one cumulative bucket of a histogram: Count observations were at most UpperBound.
type Bucket struct {
	// UpperBound is the bucket's "le"; +Inf for the last bucket.
	UpperBound float64
	// Count is the cumulative count of observations at most UpperBound.
	Count float64
}

// Histogram is a color's cumulative bucket counts over a window, sorted by UpperBound, the last
// bucket being +Inf. Counts are non-decreasing and not negative.
type Histogram []Bucket

// ErrNoInfBucket is returned by ParseBuckets when the series have no le="+Inf" bucket: the
// total count is unknown, so no quantile can be read.
var ErrNoInfBucket = errors.New(`no le="+Inf" bucket`)

// ParseBuckets reads the series of a bucket query (one per "le" label, e.g.
// `sum by (le) (increase(x_bucket[2m]))`) into a Histogram. Series without a parseable "le" or
// with a NaN count are dropped; series of the same le are added. Like histogram_quantile, it
// repairs what increase() and counter resets do to cumulative counts: a negative count
// becomes 0 and a count below a lower bucket's is raised to it (counts are cumulative). No
// +Inf bucket is ErrNoInfBucket; no series at all is an empty Histogram and no error.
func ParseBuckets(series []Series) (Histogram, error) {
	byBound := map[float64]float64{}
	for _, s := range series {
		le, ok := s.Labels["le"]
		if !ok {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil || math.IsNaN(bound) || math.IsNaN(s.Value) {
			continue
		}
		byBound[bound] += s.Value
	}
	if len(byBound) == 0 {
		return nil, nil
	}
	h := make(Histogram, 0, len(byBound))
	for b, c := range byBound {
		h = append(h, Bucket{UpperBound: b, Count: c})
	}
	sort.Slice(h, func(i, j int) bool { return h[i].UpperBound < h[j].UpperBound })
	if !math.IsInf(h[len(h)-1].UpperBound, 1) {
		return nil, ErrNoInfBucket
	}
	prev := 0.0
	for i := range h {
		c := h[i].Count
		if c < prev || math.IsInf(c, 0) {
			c = prev
		}
		h[i].Count, prev = c, c
	}
	return h, nil
}

// Total is the number of observations (the +Inf bucket's count); 0 for an empty Histogram.
func (h Histogram) Total() float64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].Count
}

// Quantile reads the q-quantile (0 < q < 1) as Prometheus' histogram_quantile does: linear
// interpolation within the bucket that holds rank q x total, the first bucket starting at 0
// (latencies are not negative), and a rank in the +Inf bucket answered with the highest finite
// bound. It is an error when there is no observation or no finite bucket.
func (h Histogram) Quantile(q float64) (float64, error) {
	total := h.Total()
	if total <= 0 {
		return 0, errors.New("no observations")
	}
	if len(h) < 2 {
		return 0, errors.New("only the +Inf bucket: no finite bound to interpolate with")
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for i, b := range h {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return h[i-1].UpperBound, nil
			}
			if i == 0 && b.UpperBound <= 0 {
				return b.UpperBound, nil
			}
			in := b.Count - below
			if in <= 0 {
				return b.UpperBound, nil
			}
			return lower + (b.UpperBound-lower)*(rank-below)/in, nil
		}
		lower, below = b.UpperBound, b.Count
	}
	return 0, fmt.Errorf("rank %g above the total %g", rank, total)
}
