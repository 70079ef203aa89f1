package policysim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/modelship/modelship/internal/analysis"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/fleet"
)

// RolloutConfig is one rollout scenario: a fixed-size fleet serving a trace, a candidate that
// starts at StartAt, followed until Horizon.
type RolloutConfig struct {
	// Arrivals are the replayed requests, sorted by At.
	Arrivals []fleet.Arrival
	// Replicas is the pod count per color (a candidate color is sized to it).
	Replicas int32
	// ColdStart is how long a candidate pod loads its model after it becomes Ready (Ready at
	// once, as with a readiness probe that does not ask the model): until then it serves
	// nothing, and the gateway answers 503 for the candidate's weight while none of its pods
	// serves. Zero: pods serve at once.
	ColdStart time.Duration
	// Capacity of every replica.
	Capacity fleet.Capacity
	// Candidate is the candidate revision's performance (LatencyMultiplier 1.5: 1.5x slower).
	Candidate fleet.Profile
	// StartAt is when the candidate is deployed; Horizon is when the scenario ends.
	StartAt, Horizon time.Duration
	// Tick is how often the strategy looks (5s); Step is the fleet's time step.
	Tick, Step time.Duration
	// Seed for the fleet's draws.
	Seed uint64
	// SLOTTFT is the latency bound the peers' analyses check the candidate against.
	SLOTTFT time.Duration
	// StopWhenDecided ends the run at the promotion or rollback (the A/A runs).
	StopWhenDecided bool
}

// Outcome of a rollout.
type Outcome string

const (
	// OutcomeInProgress means neither promoted nor rolled back by the horizon.
	OutcomeInProgress Outcome = "in-progress"
	// OutcomePromoted means the candidate serves all traffic.
	OutcomePromoted Outcome = "promoted"
	// OutcomeRolledBack means the stable revision serves all traffic again.
	OutcomeRolledBack Outcome = "rolled-back"
)

// RolloutResult is what a strategy did with the candidate.
type RolloutResult struct {
	Strategy string
	Outcome  Outcome
	// DecidedAfter is the time from the start of the rollout to the promotion or rollback.
	DecidedAfter time.Duration
	// CandidateRequests is the number of requests the candidate served up to the horizon.
	CandidateRequests uint64
	// Unavailable is the number of requests routed to the candidate that the gateway refused
	// with 503 because none of its pods served yet (loading its model).
	Unavailable uint64
}

// Canary is a progressive-delivery strategy: each Tick it looks at the fleet and says the
// candidate's weight, how many candidate pods to run, and whether it has decided.
type Canary interface {
	Name() string
	// Tick is called every RolloutConfig.Tick from the start of the rollout. Pods are
	// created Ready; they serve after RolloutConfig.ColdStart (View.Loaded says which do).
	Tick(v *View) (candidateWeight, candidatePods int32, out Outcome)
}

// PodsFor is the candidate pods a weight needs at the stable color's per-pod load.
func PodsFor(total, weight int32) int32 {
	return max(1, int32(math.Ceil(float64(total)*float64(weight)/100-1e-9)))
}

// View is what a strategy can observe: per color latency histograms and request counts over
// a window ending now, as Prometheus's increase() over the pods' counters would give them.
type View struct {
	Now   time.Duration
	since time.Duration
	snaps []snapshot
	cur   snapshot
}

// snapshot holds, per pod, its color and cumulative counters, and the gateway's 503s per color.
type snapshot struct {
	at      time.Duration
	pods    map[string]podCounters
	refused map[string]uint64
}

type podCounters struct {
	color          string
	ttft, itl, e2e []uint64
	ok, failed     uint64
	loaded         bool
	requests       fleet.RequestSums
	// waiting is the pod's queue (vllm:num_requests_waiting) at the snapshot.
	waiting int
}

// ColorWindow is one color's activity over a window.
type ColorWindow struct {
	TTFT, ITL, E2E metrics.Histogram
	// TTFTPods, ITLPods and E2EPods are the same per pod (as a bucket query grouped by pod
	// returns them), in pod-name order.
	TTFTPods, ITLPods, E2EPods []metrics.Histogram
	// Finished requests and Failed among them.
	Finished, Failed float64
	// Refused are the requests routed to the color that the gateway answered 503 (none of its
	// pods served), as a gateway's or mesh's request metrics count them.
	Refused float64
	// PodRequests are the increases of vLLM's per-request histograms' _sum and _count series
	// per pod (vllm:request_queue_time_seconds, _prefill_time_, _decode_time_,
	// vllm:request_prompt_tokens, vllm:request_generation_tokens), in pod-name order, as
	// `sum by (pod) (increase(...))` returns them.
	PodRequests []PodRequests
	// Saturation is the share of the color's pods whose queue never emptied over the window
	// (waiting at every snapshot in it), as metrics.SaturationQuery reads it; NoData without a
	// pod.
	Saturation metrics.Sample
}

// PodRequests is one pod's per-request sums over a window.
type PodRequests struct {
	Pod string
	fleet.RequestSums
}

// DecodeUnits is the per-pod sums of decode-per-token: decode seconds over decoded tokens
// (generated tokens less one per request), pods without a decoded token left out, as
// analysis.Run joins the preset's two queries.
func (w ColorWindow) DecodeUnits() []analysis.UnitSum {
	var out []analysis.UnitSum
	for _, p := range w.PodRequests {
		if d := p.GenerationTokens - float64(p.Requests); d > 0 {
			out = append(out, analysis.UnitSum{Pod: p.Pod, Numerator: p.DecodeSeconds, Denominator: d})
		}
	}
	return out
}

// Loaded returns how many of a color's pods there are now and how many serve (model loaded).
func (v *View) Loaded(color string) (pods, loaded int32) {
	for _, c := range v.cur.pods {
		if c.color == color {
			pods++
			if c.loaded {
				loaded++
			}
		}
	}
	return pods, loaded
}

// Window returns the color's increase over the last d (never before the rollout started).
func (v *View) Window(color string, d time.Duration) ColorWindow {
	from := max(v.Now-d, v.since)
	base := v.snaps[0]
	for _, s := range v.snaps {
		if s.at <= from {
			base = s
		}
	}
	w := ColorWindow{}
	var ttft, itl, e2e []float64
	names := make([]string, 0, len(v.cur.pods))
	for name := range v.cur.pods {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c := v.cur.pods[name]
		if c.color != color {
			continue
		}
		o := base.pods[name]
		ttft = addDelta(ttft, c.ttft, o.ttft)
		itl = addDelta(itl, c.itl, o.itl)
		e2e = addDelta(e2e, c.e2e, o.e2e)
		w.TTFTPods = append(w.TTFTPods, toHistogram(fleet.TTFTBuckets, addDelta(nil, c.ttft, o.ttft)))
		w.ITLPods = append(w.ITLPods, toHistogram(fleet.ITLBuckets, addDelta(nil, c.itl, o.itl)))
		w.E2EPods = append(w.E2EPods, toHistogram(fleet.E2EBuckets, addDelta(nil, c.e2e, o.e2e)))
		w.Finished += float64(c.ok+c.failed) - float64(o.ok+o.failed)
		w.PodRequests = append(w.PodRequests, PodRequests{Pod: name, RequestSums: fleet.RequestSums{
			Requests:         c.requests.Requests - o.requests.Requests,
			QueueSeconds:     c.requests.QueueSeconds - o.requests.QueueSeconds,
			PrefillSeconds:   c.requests.PrefillSeconds - o.requests.PrefillSeconds,
			DecodeSeconds:    c.requests.DecodeSeconds - o.requests.DecodeSeconds,
			PromptTokens:     c.requests.PromptTokens - o.requests.PromptTokens,
			GenerationTokens: c.requests.GenerationTokens - o.requests.GenerationTokens,
		}})
		w.Failed += float64(c.failed) - float64(o.failed)
	}
	w.Saturation = v.saturation(color, from)
	w.Refused = float64(v.cur.refused[color]) - float64(base.refused[color])
	w.TTFT, w.ITL, w.E2E = toHistogram(fleet.TTFTBuckets, ttft), toHistogram(fleet.ITLBuckets, itl), toHistogram(fleet.E2EBuckets, e2e)
	return w
}

// DecodeBlocks is the color's decode seconds and decoded tokens (as DecodeUnits, summed over
// its pods) in each block of analysis.BlockTimes over the last d, as the controller reads them:
// `sum(increase(...[span]))` at each block's end, which runs from the first scrape after the
// span began to the last before its end (the simulated Prometheus scrapes at multiples of
// scrape).
func (v *View) DecodeBlocks(color string, d, scrape time.Duration) []analysis.UnitBlock {
	t0 := time.Unix(0, 0)
	ends, span := analysis.BlockTimes(t0.Add(v.Now), min(d, v.Now-v.since), scrape)
	var out []analysis.UnitBlock
	for i := len(ends) - 1; i >= 0; i-- {
		end := ends[i].Sub(t0)
		var first, last *snapshot
		for k := range v.snaps {
			s := &v.snaps[k]
			if s.at%scrape != 0 || s.at <= end-span || s.at > end {
				continue
			}
			if first == nil {
				first = s
			}
			last = s
		}
		if first == nil || last == first {
			continue
		}
		var num, den float64
		for name, c := range last.pods {
			if c.color != color {
				continue
			}
			o := first.pods[name]
			num += c.requests.DecodeSeconds - o.requests.DecodeSeconds
			den += (c.requests.GenerationTokens - o.requests.GenerationTokens) - float64(c.requests.Requests-o.requests.Requests)
		}
		if den > 0 {
			out = append(out, analysis.UnitBlock{At: ends[i], Numerator: num, Denominator: den})
		}
	}
	return out
}

// saturation is the share of a color's pods (now) that had requests waiting at every snapshot
// after from: min_over_time of their queue over the window above 0.
func (v *View) saturation(color string, from time.Duration) metrics.Sample {
	var pods, queued int
	for name, c := range v.cur.pods {
		if c.color != color {
			continue
		}
		pods++
		never := true
		for _, s := range v.snaps {
			if p, ok := s.pods[name]; ok && s.at > from && p.waiting == 0 {
				never = false
				break
			}
		}
		if never {
			queued++
		}
	}
	if pods == 0 {
		return metrics.Sample{Status: metrics.NoData, Message: "no pod"}
	}
	return metrics.Sample{Status: metrics.OK, Value: float64(queued) / float64(pods)}
}

func addDelta(acc []float64, cur, old []uint64) []float64 {
	if acc == nil {
		acc = make([]float64, len(cur))
	}
	for i, c := range cur {
		var o uint64
		if i < len(old) {
			o = old[i]
		}
		acc[i] += float64(c) - float64(o)
	}
	return acc
}

func toHistogram(bounds []float64, cum []float64) metrics.Histogram {
	h := make(metrics.Histogram, 0, len(bounds)+1)
	for i := range len(bounds) + 1 {
		ub := math.Inf(1)
		if i < len(bounds) {
			ub = bounds[i]
		}
		var c float64
		if i < len(cum) {
			c = max(cum[i], 0)
		}
		h = append(h, metrics.Bucket{UpperBound: ub, Count: c})
	}
	return h
}

// P95 is the color's p95 over the histogram, false without observations.
func P95(h metrics.Histogram) (float64, bool) {
	if h.Total() <= 0 {
		return 0, false
	}
	v, err := h.Quantile(0.95)
	return v, err == nil
}

const (
	stableColor    = "blue"
	candidateColor = "green"
)

// RunRollout runs a rollout scenario for one strategy.
func RunRollout(cfg RolloutConfig, c Canary) RolloutResult {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := fleet.New(fleet.Config{Step: cfg.Step, Seed: cfg.Seed}, start)
	f.SetWeights(namespace, modelServer, map[string]int32{stableColor: 100})
	pod := func(color, rev string, i int32, p fleet.Profile) fleet.Pod {
		return fleet.Pod{Namespace: namespace, Name: fmt.Sprintf("%s-%s-%d", color, rev, i), UID: fmt.Sprintf("%s-%s-%d", color, rev, i),
			ModelServer: modelServer, Color: color, Revision: rev, ModelName: "model", Container: "server", Node: "node",
			GPUs: 1, Ready: true, ReadySince: start, Capacity: cfg.Capacity, Profile: p}
	}
	for i := range cfg.Replicas {
		f.SetPod(pod(stableColor, "r1", i, fleet.Profile{}))
	}
	res := RolloutResult{Strategy: c.Name(), Outcome: OutcomeInProgress}
	view := &View{since: cfg.StartAt}
	snap := func(now time.Duration) snapshot {
		s := snapshot{at: now, pods: map[string]podCounters{}, refused: map[string]uint64{}}
		for _, p := range f.Pods() {
			s.pods[p.Pod.Name] = podCounters{color: p.Pod.Color, ttft: p.TTFT, itl: p.ITL, e2e: p.E2E,
				ok: p.Success[fleet.FinishStop] + p.Success[fleet.FinishLength], failed: p.Success[fleet.FinishAbort], loaded: p.Loaded,
				requests: p.Requests, waiting: p.Waiting}
		}
		for _, color := range []string{stableColor, candidateColor} {
			s.refused[color] = f.GatewayCount(namespace, modelServer, color, fleet.CodeUnavailable)
		}
		return s
	}
	arr := cfg.Arrivals
	ai := 0
	weight := int32(0)
	var candPods int32
	resize := func(now time.Duration, n int32) {
		for i := candPods; i < n; i++ {
			p := pod(candidateColor, "r2", i, cfg.Candidate)
			p.ReadySince, p.LoadDelay = start.Add(now), cfg.ColdStart
			f.SetPod(p)
		}
		for i := n; i < candPods; i++ {
			f.DeletePod(namespace, fmt.Sprintf("%s-%s-%d", candidateColor, "r2", i))
		}
		candPods = n
	}
	for now := time.Duration(0); now < cfg.Horizon; {
		next := now + cfg.Tick
		for ai < len(arr) && arr[ai].At < next {
			a := arr[ai]
			f.Submit(namespace, modelServer, fleet.Request{Arrival: start.Add(a.At), ContextTokens: a.ContextTokens, GeneratedTokens: a.GeneratedTokens})
			ai++
		}
		f.Advance(start.Add(next))
		now = next
		if now < cfg.StartAt {
			continue
		}
		view.Now = now
		view.cur = snap(now)
		view.snaps = append(view.snaps, view.cur)
		for len(view.snaps) > 2 && now-view.snaps[1].at > 10*time.Minute {
			view.snaps = view.snaps[1:]
		}
		if res.Outcome == OutcomeInProgress {
			w, n, out := c.Tick(view)
			weight = min(max(w, 0), 100)
			resize(now, max(n, 0))
			if out != OutcomeInProgress {
				res.Outcome, res.DecidedAfter = out, now-cfg.StartAt
				if out == OutcomePromoted {
					weight = 100
					resize(now, cfg.Replicas)
				} else {
					weight = 0
				}
				if cfg.StopWhenDecided {
					break
				}
			}
			f.SetWeights(namespace, modelServer, map[string]int32{stableColor: 100 - weight, candidateColor: weight})
		}
	}
	for _, code := range []string{fleet.CodeOK, fleet.CodeServerError, fleet.CodeBadGateway} {
		res.CandidateRequests += f.GatewayCount(namespace, modelServer, candidateColor, code)
	}
	res.Unavailable = f.GatewayCount(namespace, modelServer, candidateColor, fleet.CodeUnavailable)
	return res
}
