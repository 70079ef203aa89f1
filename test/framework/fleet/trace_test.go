package fleet

import (
	"strings"
	"testing"
	"time"
)

const smallTrace = `TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.0000000,100,10
2023-11-16 18:15:47.0000000,200,20
2023-11-16 18:15:49.0000000,300,30
2023-11-16 18:15:50.0000000,400,40
`

func mustTrace(t *testing.T, s string) Trace {
	t.Helper()
	tr, err := ReadTrace(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ReadTrace: %v", err)
	}
	return tr
}

func TestReadTrace(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
		check   func(t *testing.T, tr Trace)
	}{
		{
			name: "reads offsets from the first timestamp and the token counts",
			in:   smallTrace,
			check: func(t *testing.T, tr Trace) {
				if len(tr.Requests) != 4 {
					t.Fatalf("%d requests, want 4", len(tr.Requests))
				}
				if got := tr.Requests[2]; got.Offset != 3*time.Second || got.ContextTokens != 300 || got.GeneratedTokens != 30 {
					t.Errorf("third request %+v", got)
				}
				if want := 4*time.Second + 4*time.Second/3; tr.Duration() != want {
					t.Errorf("duration %v, want %v (last offset plus the mean gap)", tr.Duration(), want)
				}
			},
		},
		{
			name: "sorts rows that are out of order and finds columns by name",
			in:   "GeneratedTokens,TIMESTAMP,ContextTokens\n5,2023-11-16 18:15:47.5,50\n1,2023-11-16 18:15:46.25,10\n",
			check: func(t *testing.T, tr Trace) {
				if tr.Requests[0].ContextTokens != 10 || tr.Requests[1].Offset != 1250*time.Millisecond {
					t.Errorf("requests %+v", tr.Requests)
				}
			},
		},
		{name: "rejects a header without the token columns", in: "TIMESTAMP,Tokens\n", wantErr: "want TIMESTAMP"},
		{name: "rejects a bad timestamp with its line", in: "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", wantErr: "line 2"},
		{name: "rejects a negative token count", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,-1,1\n", wantErr: "not a count"},
		{name: "rejects an empty trace", in: "TIMESTAMP,ContextTokens,GeneratedTokens\n", wantErr: "no requests"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ReadTrace(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadTrace: %v", err)
			}
			tt.check(t, tr)
		})
	}
}

func TestLoadTraceReadsTheAzureTrace(t *testing.T) {
	tr, err := LoadTrace("testdata/azure-conv-5min.csv")
	if err != nil {
		t.Fatalf("LoadTrace: %v", err)
	}
	if n := len(tr.Requests); n < 1000 || n > 2600 {
		t.Errorf("%d requests in five minutes, want 191 to 507 a minute", n)
	}
	if last := tr.Requests[len(tr.Requests)-1].Offset; last < 4*time.Minute || last > 5*time.Minute {
		t.Errorf("last offset %v, want about 5m", last)
	}
	if _, err := LoadTrace("testdata/missing.csv"); err == nil {
		t.Error("a missing file loaded")
	}
}

func replayAll(t *testing.T, tr Trace, opts ReplayOptions, until time.Duration) []Arrival {
	t.Helper()
	r, err := NewReplay(tr, opts)
	if err != nil {
		t.Fatalf("NewReplay: %v", err)
	}
	var out []Arrival
	// Ask in irregular slices, as a ticker would.
	for at := time.Duration(0); at <= until; at += 137 * time.Millisecond {
		out = append(out, r.Until(at)...)
	}
	return append(out, r.Until(until)...)
}

func TestReplay(t *testing.T) {
	tr := mustTrace(t, smallTrace)
	tests := []struct {
		name  string
		opts  ReplayOptions
		until time.Duration
		check func(t *testing.T, got []Arrival)
	}{
		{
			name: "replays at the trace's pace at speed 1", opts: ReplayOptions{}, until: time.Minute,
			check: func(t *testing.T, got []Arrival) {
				want := []time.Duration{0, time.Second, 3 * time.Second, 4 * time.Second}
				if len(got) != 4 {
					t.Fatalf("%d arrivals, want 4", len(got))
				}
				for i, a := range got {
					if a.At != want[i] || a.ContextTokens != (i+1)*100 {
						t.Errorf("arrival %d = %+v, want at %v", i, a, want[i])
					}
				}
			},
		},
		{
			name: "compresses time by the speed factor", opts: ReplayOptions{Speed: 4}, until: time.Minute,
			check: func(t *testing.T, got []Arrival) {
				if len(got) != 4 || got[3].At != time.Second || got[1].At != 250*time.Millisecond {
					t.Errorf("arrivals %+v, want the 4s trace in 1s", got)
				}
			},
		},
		{
			name: "duplicates every request at rate scale 2, spread before the next one", opts: ReplayOptions{RateScale: 2}, until: time.Minute,
			check: func(t *testing.T, got []Arrival) {
				if len(got) != 8 {
					t.Fatalf("%d arrivals, want 8", len(got))
				}
				if got[1].At != 500*time.Millisecond || got[1].ContextTokens != 100 || got[3].At != 2*time.Second {
					t.Errorf("arrivals %+v", got)
				}
			},
		},
		{
			name: "loops the trace when asked", opts: ReplayOptions{Loop: true}, until: 2*(4*time.Second+4*time.Second/3) + time.Millisecond,
			check: func(t *testing.T, got []Arrival) {
				// Two passes plus the first request of the third.
				cycle := 4*time.Second + 4*time.Second/3
				if len(got) != 9 || got[4].At != cycle || got[8].At != 2*cycle {
					t.Errorf("arrivals %+v", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := replayAll(t, tr, tt.opts, tt.until)
			for i := 1; i < len(got); i++ {
				if got[i].At < got[i-1].At {
					t.Fatalf("arrivals out of order at %d: %+v", i, got)
				}
			}
			tt.check(t, got)
		})
	}
}

func TestReplayThinsDeterministically(t *testing.T) {
	tr, err := LoadTrace("testdata/azure-conv-5min.csv")
	if err != nil {
		t.Fatalf("LoadTrace: %v", err)
	}
	a := replayAll(t, tr, ReplayOptions{Speed: 10, RateScale: 0.3, Seed: 7}, time.Minute)
	b := replayAll(t, tr, ReplayOptions{Speed: 10, RateScale: 0.3, Seed: 7}, time.Minute)
	c := replayAll(t, tr, ReplayOptions{Speed: 10, RateScale: 0.3, Seed: 8}, time.Minute)
	want := 0.3 * float64(len(tr.Requests))
	if n := float64(len(a)); n < 0.9*want || n > 1.1*want {
		t.Errorf("%v arrivals, want about %v", n, want)
	}
	if len(a) != len(b) {
		t.Fatalf("same seed gave %d and %d arrivals", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed differs at %d: %+v vs %+v", i, a[i], b[i])
		}
	}
	same := len(a) == len(c)
	for i := 0; same && i < len(a); i++ {
		same = a[i] == c[i]
	}
	if same {
		t.Error("another seed thinned the same requests")
	}
}

func TestNewReplayRejectsBadOptions(t *testing.T) {
	tr := mustTrace(t, smallTrace)
	for _, o := range []ReplayOptions{{Speed: -1}, {RateScale: -2}} {
		if _, err := NewReplay(tr, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := NewReplay(Trace{}, ReplayOptions{}); err == nil {
		t.Error("an empty trace replayed")
	}
}
