package metrics

import (
	"errors"
	"math"
	"testing"
)

func le(bound string, v float64) Series {
	return Series{Labels: map[string]string{"le": bound}, Value: v}
}

func TestParseBuckets(t *testing.T) {
	cases := []struct {
		name    string
		series  []Series
		want    Histogram
		wantErr error
	}{
		{
			name:   "sorts buckets by bound whatever the order of the series",
			series: []Series{le("+Inf", 10), le("0.5", 8), le("0.1", 2)},
			want:   Histogram{{0.1, 2}, {0.5, 8}, {math.Inf(1), 10}},
		},
		{
			name:   "is empty without series (a color nobody scraped)",
			series: nil,
			want:   nil,
		},
		{
			name:    "refuses buckets without +Inf: the total is unknown",
			series:  []Series{le("0.1", 2), le("0.5", 8)},
			wantErr: ErrNoInfBucket,
		},
		{
			name:   "turns a negative increase (a counter reset) into 0",
			series: []Series{le("0.1", -3), le("0.5", 4), le("+Inf", 5)},
			want:   Histogram{{0.1, 0}, {0.5, 4}, {math.Inf(1), 5}},
		},
		{
			name:   "raises a count below a lower bucket's (increase extrapolates each bucket alone)",
			series: []Series{le("0.1", 4.2), le("0.5", 4.1), le("+Inf", 6)},
			want:   Histogram{{0.1, 4.2}, {0.5, 4.2}, {math.Inf(1), 6}},
		},
		{
			name:   "drops NaN counts and unparseable or missing le labels",
			series: []Series{le("0.1", math.NaN()), le("fast", 3), {Labels: map[string]string{}, Value: 9}, le("+Inf", 5)},
			want:   Histogram{{math.Inf(1), 5}},
		},
		{
			name:   "adds series of the same bound (pods not summed by the query)",
			series: []Series{le("0.1", 1), le("0.1", 2), le("+Inf", 4), le("+Inf", 4)},
			want:   Histogram{{0.1, 3}, {math.Inf(1), 8}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBuckets(tc.series)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("bucket %d = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		name    string
		h       Histogram
		q       float64
		want    float64
		wantErr bool
	}{
		{
			name: "interpolates linearly within the bucket holding the rank",
			h:    Histogram{{0.1, 50}, {0.5, 90}, {1, 100}, {inf, 100}},
			q:    0.95, want: 0.75, // rank 95: half-way through (0.5, 1]
		},
		{
			name: "starts the first bucket at 0",
			h:    Histogram{{0.2, 100}, {inf, 100}},
			q:    0.95, want: 0.19,
		},
		{
			name: "answers a rank in the +Inf bucket with the highest finite bound",
			h:    Histogram{{0.1, 10}, {0.5, 20}, {inf, 100}},
			q:    0.95, want: 0.5,
		},
		{
			name:    "has no quantile without observations",
			h:       Histogram{{0.1, 0}, {inf, 0}},
			q:       0.95,
			wantErr: true,
		},
		{
			name:    "has no quantile with only the +Inf bucket",
			h:       Histogram{{inf, 7}},
			q:       0.5,
			wantErr: true,
		},
		{
			name:    "has no quantile for an empty histogram",
			q:       0.95,
			wantErr: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.h.Quantile(tc.q)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %t", err, tc.wantErr)
			}
			if err == nil && math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("quantile = %g, want %g", got, tc.want)
			}
		})
	}
}
