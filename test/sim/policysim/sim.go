package policysim

import (
	"fmt"
	"math"
	"time"

	"github.com/modelship/modelship/test/framework/fleet"
)

// Config is one simulation's setting, shared by every policy of a run.
type Config struct {
	// Arrivals are the replayed requests, sorted by At (fleet.Replay's output).
	Arrivals []fleet.Arrival
	// Duration of the run (virtual time).
	Duration time.Duration
	// Capacity of every replica (the shared GPU-replica model).
	Capacity fleet.Capacity
	// ColdStart is how long a new pod takes from creation to serving (scheduling, image pull,
	// model load), minutes for a real model.
	ColdStart time.Duration
	// Initial is the replica count at the start.
	Initial int32
	// ScrapeInterval is Prometheus's scrape interval (15s).
	ScrapeInterval time.Duration
	// Step is the fleet's time step (50ms keeps an hour well under a minute per policy).
	Step time.Duration
	// SLOTTFT and SLOITL are the latency SLO: a minute meets it when its p95 TTFT and p95 ITL
	// are within them and fewer than 1% of its requests failed.
	SLOTTFT, SLOITL time.Duration
	// Seed for the fleet's draws.
	Seed uint64
	// Outages are spans during which the pods' metrics are missing from Prometheus (exporters
	// down, series absent): queries about them return empty results; or, with Outage.NaN, the
	// series are there with NaN values. Pod counts still come from the API server.
	Outages []Outage
}

// Outage is a span [From, To) of virtual time. NaN: the queries answer NaN (an exporter that
// reports NaN, a ratio over no traffic) instead of nothing.
type Outage struct {
	From, To time.Duration
	NaN      bool
}

// outageAt returns the outage in force at t.
func (c Config) outageAt(t time.Duration) (Outage, bool) {
	for _, o := range c.Outages {
		if t >= o.From && t < o.To {
			return o, true
		}
	}
	return Outage{}, false
}

// Minute is one minute of a policy's timeline.
type Minute struct {
	// At is the end of the minute since the start.
	At time.Duration
	// Requests that arrived and Errors (5xx at the gateway).
	Requests, Errors int
	// Pods allocated (GPU-holding, including starting and terminating) and Serving at the end.
	Pods, Serving int
	// TTFTP95 and ITLP95 in seconds; NaN when nothing completed.
	TTFTP95, ITLP95 float64
	// Met is true when the minute meets the SLO.
	Met bool
	// Work is the replica-seconds per second the minute's arrivals need (the load).
	Work float64
}

// Result is one policy's figures.
type Result struct {
	Policy string
	// Timeline per minute.
	Timeline []Minute
	// SLOMinutes is the share of minutes meeting the SLO.
	SLOMinutes float64
	// GPUHours is the GPU time held by pods (one GPU each), from creation to deletion.
	GPUHours float64
	// ScaleEvents counts changes of the replica count.
	ScaleEvents int
	// Oscillations is the number of direction changes (up then down, down then up) per hour.
	Oscillations float64
	// Requests and Errors over the run.
	Requests, Errors int
}

const (
	namespace   = "sim"
	modelServer = "llm"
	podColor    = "blue"
	// drainGrace is how long a terminating pod may finish its requests before it is removed
	// (its remaining requests then fail with 502, as after terminationGracePeriodSeconds).
	drainGrace = 60 * time.Second
)

type simPod struct {
	name        string
	created     time.Duration
	loadDelay   time.Duration
	terminating bool
	termAt      time.Duration
}

// Run replays cfg.Arrivals against a fresh fleet driven by p and returns its figures.
func Run(cfg Config, p Policy) Result {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := fleet.New(fleet.Config{Step: cfg.Step, Seed: cfg.Seed}, start)
	f.SetWeights(namespace, modelServer, map[string]int32{podColor: 100})
	cold := cfg.ColdStart
	var pods []*simPod
	seq := 0
	var gpuSeconds float64
	lastAccount := time.Duration(0)
	account := func(now time.Duration) {
		gpuSeconds += float64(len(pods)) * (now - lastAccount).Seconds()
		lastAccount = now
	}
	setPod := func(sp *simPod) {
		f.SetPod(fleet.Pod{
			Namespace: namespace, Name: sp.name, UID: sp.name, ModelServer: modelServer, Color: podColor,
			Revision: "r1", ModelName: "model", Container: "server", Node: "node", GPUs: 1,
			Ready: true, Terminating: sp.terminating, ReadySince: start.Add(sp.created), LoadDelay: sp.loadDelay,
			Capacity: cfg.Capacity,
		})
	}
	addPod := func(now, delay time.Duration) {
		seq++
		sp := &simPod{name: fmt.Sprintf("llm-%04d", seq), created: now, loadDelay: delay}
		pods = append(pods, sp)
		setPod(sp)
	}
	for range cfg.Initial {
		addPod(0, 0)
	}
	active := func() []*simPod {
		var out []*simPod
		for _, sp := range pods {
			if !sp.terminating {
				out = append(out, sp)
			}
		}
		return out
	}
	// scale applies a new count: new pods pay the cold start; a scale-down removes starting pods
	// first, then the newest (a ReplicaSet's order).
	scale := func(now time.Duration, want int32) {
		act := active()
		for n := int32(len(act)); n < want; n++ {
			addPod(now, cold)
		}
		for n := int32(len(act)); n > want; n-- {
			act = active()
			victim := act[len(act)-1]
			for i := len(act) - 1; i >= 0; i-- {
				if now < act[i].created+act[i].loadDelay {
					victim = act[i]
					break
				}
			}
			victim.terminating, victim.termAt = true, now
			setPod(victim)
		}
	}

	sc := newScraper()
	var sig Signals
	var res Result
	res.Policy = p.Name()
	nextDecide := time.Duration(0)
	lastCount := cfg.Initial
	lastDir := 0
	dirChanges := 0
	arr := cfg.Arrivals
	ai := 0
	for now := time.Duration(0); now < cfg.Duration; {
		next := now + cfg.ScrapeInterval
		for ai < len(arr) && arr[ai].At < next {
			a := arr[ai]
			f.Submit(namespace, modelServer, fleet.Request{Arrival: start.Add(a.At), ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens})
			ai++
		}
		f.Advance(start.Add(next))
		account(next)
		now = next
		// Drained or overdue terminating pods go away.
		status := f.Pods()
		load := map[string]int{}
		for _, ps := range status {
			load[ps.Pod.Name] = ps.Running + ps.Waiting
		}
		kept := pods[:0]
		for _, sp := range pods {
			if sp.terminating && (load[sp.name] == 0 || now-sp.termAt >= drainGrace) {
				f.DeletePod(namespace, sp.name)
				continue
			}
			kept = append(kept, sp)
		}
		pods = kept
		switch o, out := cfg.outageAt(now); {
		case out && o.NaN:
			sig = withNaN(sc.scrape(now, f.Pods(), int32(len(active())), sig))
		case out:
			// Empty results: no gauge, no rate; the pods are still counted from the API.
			sig = Signals{Now: now, Pods: int32(len(active())), Ready: sig.Ready, MetricsMissing: true,
				TTFTP95: sig.TTFTP95, ITLP95: sig.ITLP95, HasLatency: sig.HasLatency}
		default:
			sig = sc.scrape(now, f.Pods(), int32(len(active())), sig)
		}
		if now%time.Minute == 0 {
			m := minuteOf(f, now, cfg, len(pods))
			m.Work = WorkBetween(arr, cfg.Capacity, now-time.Minute, now)
			res.Timeline = append(res.Timeline, m)
		}
		if now >= nextDecide {
			want := p.Decide(sig)
			if want != lastCount {
				res.ScaleEvents++
				dir := 1
				if want < lastCount {
					dir = -1
				}
				if lastDir != 0 && dir != lastDir {
					dirChanges++
				}
				lastDir = dir
				lastCount = want
			}
			scale(now, want)
			nextDecide = now + p.Interval()
		}
	}
	res.GPUHours = gpuSeconds / 3600
	met := 0
	for _, m := range res.Timeline {
		res.Requests += m.Requests
		res.Errors += m.Errors
		if m.Met {
			met++
		}
	}
	if len(res.Timeline) > 0 {
		res.SLOMinutes = float64(met) / float64(len(res.Timeline))
	}
	res.Oscillations = float64(dirChanges) / cfg.Duration.Hours()
	return res
}

// minuteOf closes the minute ending at now.
func minuteOf(f *fleet.Fleet, now time.Duration, cfg Config, pods int) Minute {
	m := Minute{At: now, Pods: pods, TTFTP95: math.NaN(), ITLP95: math.NaN()}
	for _, w := range f.TakeWindow() {
		if w.Namespace != namespace || w.Name != modelServer {
			continue
		}
		m.Requests, m.Errors = w.Requests, w.Errors
		for _, pc := range w.Pods {
			m.Serving += pc.Serving
		}
		if w.HasTTFT {
			m.TTFTP95 = w.TTFTP95.Seconds()
		}
		if w.HasITL {
			m.ITLP95 = w.ITLP95.Seconds()
		}
	}
	okTTFT := math.IsNaN(m.TTFTP95) || m.TTFTP95 <= cfg.SLOTTFT.Seconds()
	okITL := math.IsNaN(m.ITLP95) || m.ITLP95 <= cfg.SLOITL.Seconds()
	okErr := m.Requests == 0 || float64(m.Errors) <= 0.01*float64(m.Requests)
	m.Met = okTTFT && okITL && okErr
	return m
}

// withNaN is what the queries answer when the pods' series carry NaN: every gauge and rate is
// NaN (series present, so HasGPU stays true); the pods are still counted from the API.
func withNaN(s Signals) Signals {
	nan := math.NaN()
	s.GPUUtilization, s.KVCacheUsage, s.Waiting, s.Running, s.PromptTPS, s.GeneratedTPS, s.Served = nan, nan, nan, nan, nan, nan, nan
	pods := make([]PodSignals, len(s.PerPod))
	for i, p := range s.PerPod {
		pods[i] = PodSignals{Name: p.Name, KVCacheUsage: nan, Waiting: nan, Running: nan}
	}
	s.PerPod = pods
	return s
}
