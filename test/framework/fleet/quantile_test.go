package fleet

import (
	"math"
	"testing"
)

func TestHistogramQuantileInterpolatesLikePrometheus(t *testing.T) {
	cases := []struct {
		name   string
		obs    map[float64]uint64
		q      float64
		want   float64
		wantOK bool
	}{
		{name: "no observation gives no value", q: 0.95, wantOK: false},
		// 100 observations in (0.05, 0.075]: rank 95 lies 95% into that bucket.
		{name: "interpolates within the bucket holding the rank", obs: map[float64]uint64{0.06: 100}, q: 0.95, want: 0.05 + 0.025*0.95, wantOK: true},
		// 90 in the first bucket (<=0.01), 10 in (0.1, 0.15]: rank 95 is half-way through the second.
		{name: "skips to the bucket that holds the rank", obs: map[float64]uint64{0.005: 90, 0.12: 10}, q: 0.95, want: 0.125, wantOK: true},
		{name: "rank in +Inf returns the last finite bound", obs: map[float64]uint64{1000: 10}, q: 0.95, want: 80, wantOK: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHistogram(ITLBuckets)
			for v, n := range c.obs {
				h.observe(v, n)
			}
			got, ok := h.quantile(c.q)
			if ok != c.wantOK || (ok && math.Abs(got-c.want) > 1e-9) {
				t.Fatalf("quantile(%v) = %v, %v; want %v, %v", c.q, got, ok, c.want, c.wantOK)
			}
		})
	}
}
