package policysim

import (
	"math"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

// rateRange is the range of the scraper's rates (rate(x[1m])).
const rateRange = time.Minute

// scraper turns the fleet's pods into what Prometheus shows: gauges as scraped, token
// counters as rate over the last rateRange (per pod, a pod that appeared counts from zero, as
// rate() extrapolates a counter's first sample to zero).
type scraper struct {
	hist []scrapeSample
}

type scrapeSample struct {
	at     time.Duration
	tokens map[string][2]uint64
	done   map[string]uint64 // vllm:request_success_total per pod, every finished_reason
	// ttft and itl are the pods' cumulative latency histograms (fleet.TTFTBuckets and
	// fleet.ITLBuckets, then +Inf).
	ttft, itl map[string][]uint64
}

func newScraper() *scraper { return &scraper{} }

func (s *scraper) scrape(now time.Duration, pods []fleet.PodStatus, active int32, prev Signals) Signals {
	sig := Signals{Now: now, Pods: active, TTFTP95: prev.TTFTP95, ITLP95: prev.ITLP95, HasLatency: prev.HasLatency}
	cur := scrapeSample{at: now, tokens: map[string][2]uint64{}, done: map[string]uint64{}, ttft: map[string][]uint64{}, itl: map[string][]uint64{}}
	var util, kv float64
	for _, p := range pods {
		cur.tokens[p.Pod.Name] = [2]uint64{p.PromptTokens, p.GeneratedTokens}
		for _, n := range p.Success {
			cur.done[p.Pod.Name] += n
		}
		cur.ttft[p.Pod.Name], cur.itl[p.Pod.Name] = p.TTFT, p.ITL
		sig.Waiting += float64(p.Waiting)
		sig.Running += float64(p.Running)
		if !p.Loaded || p.Pod.Terminating {
			continue
		}
		sig.Ready++
		util += p.GPUUtilization
		kv += p.KVCacheUsage
		sig.PerPod = append(sig.PerPod, PodSignals{Name: p.Pod.Name, KVCacheUsage: p.KVCacheUsage, Waiting: float64(p.Waiting), Running: float64(p.Running)})
	}
	if sig.Ready > 0 {
		sig.GPUUtilization, sig.KVCacheUsage, sig.HasGPU = util/float64(sig.Ready), kv/float64(sig.Ready), true
	}
	s.hist = append(s.hist, cur)
	for len(s.hist) > 1 && now-s.hist[0].at > rateRange {
		s.hist = s.hist[1:]
	}
	old := s.hist[0]
	sig.NoRates = len(s.hist) < 2
	// Over the rate's whole range, as Prometheus divides: a counter that starts at 0 (the run's
	// first scrape, a pod's first) is extrapolated to zero at its first sample, not to the
	// range's start, so a rate reads the increase since it started over the minute (a quarter of
	// the load 15 s after traffic starts) until the range is full.
	if !sig.NoRates {
		span := max(now-old.at, rateRange).Seconds()
		var dp, dg uint64
		for name, c := range cur.tokens {
			o := old.tokens[name]
			dp += c[0] - o[0]
			dg += c[1] - o[1]
		}
		sig.PromptTPS, sig.GeneratedTPS = float64(dp)/span, float64(dg)/span
		var dd uint64
		for name, c := range cur.done {
			dd += c - old.done[name]
		}
		sig.Served = float64(dd) / span
		// The latencies as the controller's queries read them at each pass:
		// histogram_quantile(0.95, sum by (le) (rate(..._bucket[1m]))), over the requests
		// that finished in the minute before now, not the last whole minute's.
		ttft, okT := windowP95(fleet.TTFTBuckets, cur.ttft, old.ttft)
		itl, okI := windowP95(fleet.ITLBuckets, cur.itl, old.itl)
		sig.TTFTP95, sig.ITLP95, sig.HasLatency = ttft, itl, okT && okI
	}
	return sig
}

// windowP95 is histogram_quantile(0.95) of the pods' histograms' increase between two scrapes
// (a pod not in the older one counts from zero), summed by bucket, as the canary's windows are
// (addDelta, toHistogram, P95: the controller's metrics.Histogram.Quantile); false when no
// request was observed in between.
func windowP95(bounds []float64, cur, old map[string][]uint64) (float64, bool) {
	var acc []float64
	for name, c := range cur {
		acc = addDelta(acc, c, old[name])
	}
	v, ok := P95(toHistogram(bounds, acc))
	if !ok {
		return math.NaN(), false
	}
	return v, true
}
