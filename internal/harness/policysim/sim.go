// Package policysim replays a request trace in virtual time against the fleet model
// (internal/harness/fleet, the same replica model the local environment's simulator runs) under
// one autoscaling policy at a time, and measures what users and the GPU bill see: SLO
// attainment per minute, GPU-hours, scale events and oscillations. modelship's policy is
// internal/autoscale's Decide itself; the peers' policies are written from their documented
// algorithms, each in its own file.
package policysim

import (
	"fmt"
	"math"
	"time"

	"github.com/modelship/modelship/internal/harness/fleet"
)

// View is what a policy sees at a decision: the replicas asked for and the last Prometheus
// scrape of the pods (gauges read at the scrape, as a query at decision time returns them).
type View struct {
	// Current is the replica count asked for; Ready of them are Ready (maybe still loading).
	Current, Ready int32
	// GPUUtilization is DCGM's utilization averaged over the scraped pods (0..100); HasGPU is
	// false when no pod was scraped.
	GPUUtilization float64
	HasGPU         bool
	// Waiting and Running are vLLM's num_requests_waiting and num_requests_running summed over
	// the scraped pods; KVCache is the average of gpu_cache_usage_perc (0..1).
	Waiting, Running, KVCache float64
	// Scraped is the number of pods in the scrape.
	Scraped int32
	// TTFTP95 and ITLP95 are the last minute's p95 latencies at the gateway (0 when none).
	TTFTP95, ITLP95 time.Duration
}

// Policy is an autoscaler: every Interval it asks for a replica count.
type Policy interface {
	// Name identifies the policy in reports.
	Name() string
	// Interval between decisions.
	Interval() time.Duration
	// Decide returns the replica count wanted at now.
	Decide(now time.Time, v View) int32
}

// Options of a run.
type Options struct {
	// Trace to replay, Speed times faster (1 = real time) and RateScale times denser.
	Trace     fleet.Trace
	Speed     float64
	RateScale float64
	// Duration of trace time to replay (0: the whole trace once).
	Duration time.Duration
	// ScrapeInterval of Prometheus (default 15s).
	ScrapeInterval time.Duration
	// ColdStart is how long a new replica takes from creation to serving: scheduling, image
	// pull and model load (default 3m, a real 8B model's load).
	ColdStart time.Duration
	// Initial replicas (default 2).
	Initial int32
	// SLO: a minute meets it when its p95 TTFT and p95 ITL are within these (defaults 2s, 100ms).
	TTFT, ITL time.Duration
	// Capacity of each replica (zero fields: fleet.DefaultCapacity).
	Capacity fleet.Capacity
}

func (o *Options) defaults() {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.RateScale <= 0 {
		o.RateScale = 1
	}
	if o.ScrapeInterval <= 0 {
		o.ScrapeInterval = 15 * time.Second
	}
	if o.ColdStart <= 0 {
		o.ColdStart = 3 * time.Minute
	}
	if o.Initial <= 0 {
		o.Initial = 2
	}
	if o.TTFT <= 0 {
		o.TTFT = 2 * time.Second
	}
	if o.ITL <= 0 {
		o.ITL = 100 * time.Millisecond
	}
	if o.Duration <= 0 {
		o.Duration = time.Duration(float64(o.Trace.Duration()) / o.Speed)
	}
}

// Minute is one minute of a run's timeline.
type Minute struct {
	At                time.Duration // since the start
	Requests, Errors  int
	Replicas, Serving int32
	TTFTP95, ITLP95   time.Duration
	MeetsSLO          bool
	HasTraffic        bool
}

// Result is one policy's run.
type Result struct {
	Policy string
	// Timeline per minute.
	Timeline []Minute
	// SLOAttainment is the share of minutes with traffic whose p95 TTFT and ITL met the SLO.
	SLOAttainment float64
	// GPUHours is the replica-hours held (a replica holds its GPU from creation).
	GPUHours float64
	// ScaleEvents counts changes of the asked count; Oscillations counts reversals of direction
	// per hour.
	ScaleEvents       int
	OscillationsPerHr float64
	// Requests and Refused (503 for lack of a serving pod) over the run.
	Requests, Refused int
}

const (
	namespace = "sim"
	server    = "llm"
	color     = "blue"
)

// Run replays the trace under p.
func Run(p Policy, o Options) (Result, error) {
	o.defaults()
	if len(o.Trace.Requests) == 0 {
		return Result{}, fmt.Errorf("policysim: empty trace")
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := fleet.New(fleet.Config{Step: 20 * time.Millisecond, Seed: 1}, start)
	f.SetWeights(namespace, server, map[string]int32{color: 100})
	s := &state{f: f, start: start, o: o}
	for range o.Initial {
		s.addPod(start, true)
	}
	res := Result{Policy: p.Name()}
	end := start.Add(o.Duration)
	nextScrape, nextDecide, nextMinute := start, start.Add(p.Interval()), start.Add(time.Minute)
	var view View
	var lastDir int
	var reversals int
	i := 0
	reqs := o.Trace.Requests
	for t := start; t.Before(end); t = t.Add(time.Second) {
		// Arrivals of this second, thinned or thickened by RateScale.
		for ; i < len(reqs); i++ {
			at := start.Add(time.Duration(float64(reqs[i].Offset) / o.Speed))
			if !at.Before(t.Add(time.Second)) {
				break
			}
			for _, copyAt := range s.copies(i, at) {
				out := f.Submit(namespace, server, fleet.Request{Arrival: copyAt, ContextTokens: reqs[i].ContextTokens, GeneratedTokens: max(reqs[i].GeneratedTokens, 1)})
				res.Requests++
				if out.Code == fleet.CodeUnavailable {
					res.Refused++
					s.refused++
				}
			}
		}
		f.Advance(t.Add(time.Second))
		now := t.Add(time.Second)
		s.becomeReady(now)
		s.gpuSeconds += float64(len(s.pods))
		if !now.Before(nextScrape) {
			view = s.scrape(view)
			nextScrape = nextScrape.Add(o.ScrapeInterval)
		}
		if !now.Before(nextMinute) {
			m := s.minute(now)
			view.TTFTP95, view.ITLP95 = m.TTFTP95, m.ITLP95
			res.Timeline = append(res.Timeline, m)
			nextMinute = nextMinute.Add(time.Minute)
		}
		if !now.Before(nextDecide) {
			view.Current, view.Ready = int32(len(s.pods)), s.ready(now)
			want := max(p.Decide(now, view), 1)
			if cur := int32(len(s.pods)); want != cur {
				res.ScaleEvents++
				dir := 1
				if want < cur {
					dir = -1
				}
				if lastDir != 0 && dir != lastDir {
					reversals++
				}
				lastDir = dir
				s.scaleTo(now, want)
			}
			nextDecide = nextDecide.Add(p.Interval())
		}
	}
	met, counted := 0, 0
	for _, m := range res.Timeline {
		if !m.HasTraffic {
			continue
		}
		counted++
		if m.MeetsSLO {
			met++
		}
	}
	if counted > 0 {
		res.SLOAttainment = float64(met) / float64(counted)
	}
	res.GPUHours = s.gpuSeconds / 3600
	if hours := o.Duration.Hours(); hours > 0 {
		res.OscillationsPerHr = float64(reversals) / hours
	}
	return res, nil
}

// state is the run's pods and counters.
type state struct {
	f          *fleet.Fleet
	start      time.Time
	o          Options
	pods       []fleet.Pod
	next       int
	gpuSeconds float64
	refused    int // 503s since the last minute
	readyAt    []time.Time
}

// copies spreads RateScale: each trace request becomes floor(scale) or ceil(scale) requests
// (deterministically by index), a little apart.
func (s *state) copies(i int, at time.Time) []time.Time {
	n := int(math.Floor(s.o.RateScale))
	if frac := s.o.RateScale - float64(n); frac > 0 && float64(i%1000)/1000 < frac {
		n++
	}
	out := make([]time.Time, 0, n)
	for k := range n {
		out = append(out, at.Add(time.Duration(k)*37*time.Millisecond))
	}
	return out
}

func (s *state) addPod(now time.Time, warm bool) {
	p := fleet.Pod{
		Namespace: namespace, Name: fmt.Sprintf("%s-%d", server, s.next), UID: fmt.Sprint(s.next),
		ModelServer: server, Color: color, Revision: "v1", ModelName: "llm", Container: "vllm", Node: "node",
		GPUs: 1, Ready: warm, ReadySince: now, Capacity: s.o.Capacity,
	}
	s.next++
	s.pods = append(s.pods, p)
	s.readyAt = append(s.readyAt, now.Add(s.o.ColdStart))
	s.f.SetPod(p)
}

// becomeReady marks the pods whose model loaded by now Ready: vLLM's readiness probe (/health)
// fails while the weights load, so a loading pod takes no traffic and is not scraped as Ready.
func (s *state) becomeReady(now time.Time) {
	for i := range s.pods {
		if !s.pods[i].Ready && !now.Before(s.readyAt[i]) {
			s.pods[i].Ready, s.pods[i].ReadySince = true, now
			s.f.SetPod(s.pods[i])
		}
	}
}

// scaleTo adds cold replicas or removes the newest first (those still loading go first, as a
// ReplicaSet deletes unready pods first).
func (s *state) scaleTo(now time.Time, want int32) {
	for int32(len(s.pods)) < want {
		s.addPod(now, false)
	}
	for int32(len(s.pods)) > want {
		last := s.pods[len(s.pods)-1]
		s.f.DeletePod(last.Namespace, last.Name)
		s.pods = s.pods[:len(s.pods)-1]
		s.readyAt = s.readyAt[:len(s.readyAt)-1]
	}
}

func (s *state) ready(now time.Time) int32 {
	n := int32(0)
	for _, p := range s.pods {
		if p.Ready {
			n++
		}
	}
	return n
}

// scrape reads the pods' gauges as Prometheus would at a scrape.
func (s *state) scrape(prev View) View {
	v := View{Current: prev.Current, Ready: prev.Ready, TTFTP95: prev.TTFTP95, ITLP95: prev.ITLP95}
	var util, kv float64
	for _, p := range s.f.Pods() {
		if !p.Pod.Ready {
			continue
		}
		v.Scraped++
		util += p.GPUUtilization
		kv += p.KVCacheUsage
		v.Waiting += float64(p.Waiting)
		v.Running += float64(p.Running)
	}
	if v.Scraped > 0 {
		v.GPUUtilization, v.KVCache, v.HasGPU = util/float64(v.Scraped), kv/float64(v.Scraped), true
	}
	return v
}

func (s *state) minute(now time.Time) Minute {
	m := Minute{At: now.Sub(s.start), Replicas: int32(len(s.pods))}
	for _, w := range s.f.TakeWindow() {
		if w.Name != server {
			continue
		}
		m.Requests, m.Errors = w.Requests, w.Errors+s.refused
		m.Serving = int32(w.Pods[color].Serving)
		m.HasTraffic = w.Requests > 0
		m.TTFTP95, m.ITLP95 = w.TTFTP95, w.ITLP95
		m.MeetsSLO = m.HasTraffic && w.HasTTFT && w.TTFTP95 <= s.o.TTFT && (!w.HasITL || w.ITLP95 <= s.o.ITL) &&
			float64(m.Errors) <= 0.01*float64(w.Requests)
	}
	s.refused = 0
	return m
}
