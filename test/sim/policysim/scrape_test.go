package policysim

import (
	"math"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/fleet"
)

func podStatus(name string, loaded bool, util float64, prompt, gen uint64, waiting int) fleet.PodStatus {
	return fleet.PodStatus{Pod: fleet.Pod{Name: name}, Loaded: loaded, GPUUtilization: util, PromptTokens: prompt, GeneratedTokens: gen, Waiting: waiting}
}

func TestScrapeAveragesOverServingPodsAndRatesCountersOverAMinute(t *testing.T) {
	s := newScraper()
	s.scrape(0, []fleet.PodStatus{podStatus("a", true, 50, 0, 0, 0)}, 1, Signals{})
	s.scrape(30*time.Second, []fleet.PodStatus{podStatus("a", true, 50, 3000, 600, 0)}, 1, Signals{})
	sig := s.scrape(60*time.Second, []fleet.PodStatus{
		podStatus("a", true, 80, 6000, 1200, 2),
		podStatus("b", false, 0, 0, 0, 3), // still loading: not in the GPU average, its queue counts
	}, 2, Signals{})
	if !sig.HasGPU || sig.GPUUtilization != 80 || sig.Ready != 1 || sig.Pods != 2 {
		t.Fatalf("gauges: %+v; want GPU 80 over the 1 serving pod of 2", sig)
	}
	if sig.Waiting != 5 {
		t.Fatalf("waiting %v, want 5", sig.Waiting)
	}
	if math.Abs(sig.PromptTPS-100) > 1e-9 || math.Abs(sig.GeneratedTPS-20) > 1e-9 {
		t.Fatalf("rates %v/%v, want 100/20 tokens per second over the minute", sig.PromptTPS, sig.GeneratedTPS)
	}
	// With no serving pod there is no GPU value (never a zero).
	if sig := s.scrape(75*time.Second, []fleet.PodStatus{podStatus("b", false, 0, 0, 0, 0)}, 1, Signals{}); sig.HasGPU {
		t.Fatalf("GPU value without a serving pod: %+v", sig)
	}
}

// A rate over one sample is no result in PromQL: the first scrape says so instead of a 0 that
// the SLO policy would read as a load rising from nothing (its projection then asked for ~1.5x
// the fleet in the third minute of every run).
func TestTheFirstScrapeHasNoRates(t *testing.T) {
	s := newScraper()
	if sig := s.scrape(0, []fleet.PodStatus{podStatus("a", true, 50, 0, 0, 0)}, 1, Signals{}); !sig.NoRates {
		t.Fatalf("first scrape: %+v, want no rates", sig)
	}
	// Prometheus divides by the rate's range (the counter extrapolated to zero at its first
	// sample): 1,500 tokens over a minute, until the range is full.
	if sig := s.scrape(15*time.Second, []fleet.PodStatus{podStatus("a", true, 50, 1500, 300, 0)}, 1, Signals{}); sig.NoRates || sig.PromptTPS != 25 {
		t.Fatalf("second scrape: %+v, want a rate of 25 prompt tokens per second (1,500 over the minute's range)", sig)
	}
	m := &Modelship{Spec: SLOSpec(1, 10, 2*time.Second, 100*time.Millisecond, 3*time.Minute, 3*time.Minute)}
	if got := m.Decide(Signals{Now: 0, Pods: 4, Ready: 4, NoRates: true, HasGPU: true}); got != 4 || len(m.loads.xs) != 0 {
		t.Fatalf("SLO policy on the first scrape: %d, %d load samples; want 4 held and no sample for the trend", got, len(m.loads.xs))
	}
}

// The trend as signals.TrendQuery reads it in Prometheus: after an idle minute, a load's
// samples (one each TrendStep, 30 s) count once it has been positive over the serving window
// before them (45 s of a 1-minute window: four 15 s steps; from 1m45s, so from the step at 2m),
// and the trend needs six of them (TrendMinSpan/TrendStep + 1: the step at 4m30s); a load
// rising 0.01/s has that trend from then on.
func TestTheTrendStartsAWindowAfterTheLoad(t *testing.T) {
	var tr trend
	var got float64
	var ok bool
	for at := time.Duration(0); at <= 10*time.Minute; at += 15 * time.Second {
		v := 0.0
		if at >= time.Minute {
			v = 5 + 0.01*(at-time.Minute).Seconds()
		}
		got, ok = tr.add(at, v, time.Minute)
		if first := 4*time.Minute + 30*time.Second; ok != (at >= first) {
			t.Fatalf("at %s: trend %v (%g), want one from %s", at, ok, got, first)
		}
	}
	if math.Abs(got-0.01) > 1e-9 {
		t.Fatalf("trend %g, want 0.01", got)
	}
}

// A load that stops and comes back, as signals.TrendQuery reads it: 5 until 4m, draining to
// 1 over the minute after (the rate's window emptying), none from 5m to 8m, 5 again from 8m.
// Its samples before the hole are fewer than six from 7m, those after it six at 11m30s (from
// the step at 9m, the first after its window filled): no trend in between, then the steady
// load's zero. (Read as a span, the last samples before the hole and the first after it were a
// trend, the step a rise.) A pause short enough for six samples to hold across it is read
// across, as Prometheus reads it.
func TestTheTrendCountsItsSamplesAcrossAHole(t *testing.T) {
	load := func(at, idle time.Duration) float64 {
		switch {
		case at >= 4*time.Minute && at < 5*time.Minute:
			return 5 - 4*(at-4*time.Minute).Seconds()/60
		case at >= 5*time.Minute && at < 5*time.Minute+idle:
			return 0
		}
		return 5
	}
	var tr trend
	for at := time.Duration(0); at <= 12*time.Minute; at += 15 * time.Second {
		got, ok := tr.add(at, load(at, 3*time.Minute), time.Minute)
		switch {
		case at >= 7*time.Minute && at < 11*time.Minute+30*time.Second && ok:
			t.Fatalf("at %s: trend %g across the hole, want none from 7m until 11m30s", at, got)
		case at >= 11*time.Minute+30*time.Second && (!ok || got != 0):
			t.Fatalf("at %s: trend %g (%v), want the steady load's 0", at, got, ok)
		}
	}
	tr = trend{}
	across := false
	for at := time.Duration(0); at <= 9*time.Minute; at += 15 * time.Second {
		if _, ok := tr.add(at, load(at, 30*time.Second), time.Minute); ok && at > 6*time.Minute && at < 7*time.Minute {
			across = true
		}
	}
	if !across {
		t.Fatal("no trend across a 30 s pause, want it read across")
	}
}

// The slo's load is filling, as signals.FilledQuery tells, until it has been positive at each
// of the four 15 s steps of a one-minute window (the first included): from traffic starting at
// 1m, it is full at 1m45s; a pass without rates starts it over.
func TestTheLoadIsFillingUntilTheTrafficFillsItsWindow(t *testing.T) {
	m := &Modelship{Spec: SLOSpec(1, 10, 2*time.Second, 100*time.Millisecond, 3*time.Minute, 3*time.Minute)}
	for at := time.Duration(0); at <= 3*time.Minute; at += 15 * time.Second {
		s := Signals{Now: at, Ready: 2, Pods: 2}
		if at >= time.Minute {
			s.PromptTPS = 500
		}
		filling := at < time.Minute+45*time.Second
		if at == 2*time.Minute+30*time.Second {
			s.NoRates = true // Prometheus answered nothing
		} else if at > 2*time.Minute+30*time.Second {
			filling = true
		}
		if o := m.load(s); o.Status == metrics.OK && o.Filling != filling {
			t.Fatalf("at %s: filling %v, want %v", at, o.Filling, filling)
		}
	}
}

// The latencies are read at each scrape over the minute before it, as the controller's
// histogram_quantile over a 1m rate of vLLM's buckets reads them: a spike of slow requests
// shows while it is within the minute and is gone a minute after, whatever the minute's
// boundaries (a latency of the last whole minute, read beside a load of the last 60 s, put a
// spike's miss on the quiet minute after it).
func TestTheLatencyIsTheMinuteBeforeEachScrape(t *testing.T) {
	cum := func(bounds []float64, obs map[float64]uint64) []uint64 {
		out := make([]uint64, len(bounds)+1)
		for v, n := range obs {
			for i := range out {
				if i == len(bounds) || v <= bounds[i] {
					out[i] += n
				}
			}
		}
		return out
	}
	pod := func(fast, slow uint64) fleet.PodStatus {
		ps := podStatus("a", true, 50, 0, 0, 0)
		ps.TTFT = cum(fleet.TTFTBuckets, map[float64]uint64{0.08: fast, 4: slow})
		ps.ITL = cum(fleet.ITLBuckets, map[float64]uint64{0.02: 10 * fast, 0.2: 10 * slow})
		return ps
	}
	s := newScraper()
	var sig Signals
	for at := time.Duration(0); at <= 2*time.Minute; at += 15 * time.Second {
		fast, slow := uint64(at/(15*time.Second))*50, uint64(0)
		if at >= 45*time.Second {
			slow = 30 // 30 slow requests between 30 s and 45 s
		}
		sig = s.scrape(at, []fleet.PodStatus{pod(fast, slow)}, 1, sig)
		// Slow requests counted between the scrapes at 30 s and 45 s: in the increase since
		// the scrape a minute before from 45 s to 1m45s (that scrape at 45 s counts them).
		inWindow := at >= 45*time.Second && at < 105*time.Second
		switch {
		case at == 0:
			if sig.HasLatency {
				t.Fatalf("latency on the first scrape: %+v", sig)
			}
		case !sig.HasLatency:
			t.Fatalf("at %s: no latency with requests in the minute before", at)
		case inWindow && (sig.TTFTP95 <= 2.5 || sig.ITLP95 <= 0.15):
			t.Errorf("at %s: p95 TTFT %.3f s, ITL %.3f s with the slow requests in the minute before; want above 2.5 and 0.15", at, sig.TTFTP95, sig.ITLP95)
		case !inWindow && (sig.TTFTP95 > 0.1 || sig.ITLP95 > 0.025):
			t.Errorf("at %s: p95 TTFT %.3f s, ITL %.3f s without slow requests in the minute before; want at most 0.1 and 0.025", at, sig.TTFTP95, sig.ITLP95)
		}
	}
	// No request in the minute before: no latency (not the last one read).
	for _, at := range []time.Duration{135 * time.Second, 150 * time.Second, 165 * time.Second, 180 * time.Second, 195 * time.Second} {
		sig = s.scrape(at, []fleet.PodStatus{pod(8*50, 30)}, 1, sig)
	}
	if sig.HasLatency {
		t.Errorf("a minute without requests still has a latency: %+v", sig)
	}
}
