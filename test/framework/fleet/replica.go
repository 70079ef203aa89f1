package fleet

import (
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// maxPrefillShare is the largest fraction of a step that prefill may take while requests are
// decoding, as vLLM's chunked prefill bounds the prompt tokens of one engine step so that running
// sequences keep producing tokens.
const maxPrefillShare = 0.5

// utilizationTimeConstant smooths GPU utilization the way DCGM averages over its sampling period.
const utilizationTimeConstant = time.Second

// Capacity is what one replica (one model-server pod) can do.
type Capacity struct {
	// PrefillTokensPerSecond is the prompt processing throughput.
	PrefillTokensPerSecond float64
	// DecodeTokensPerSecond is the aggregate generation throughput of a full batch: once the batch
	// is large enough, each sequence gets DecodeTokensPerSecond / batch tokens per second.
	DecodeTokensPerSecond float64
	// MinInterTokenLatency is the time per generated token of a lone sequence.
	MinInterTokenLatency time.Duration
	// MaxBatch is the largest number of requests running at once (vLLM's max_num_seqs).
	MaxBatch int
	// KVCacheTokens is the number of tokens the KV cache holds.
	KVCacheTokens int
}

// DefaultCapacity is roughly an 8B model on one H100 with vLLM.
func DefaultCapacity() Capacity {
	return Capacity{
		PrefillTokensPerSecond: 16000,
		DecodeTokensPerSecond:  3000,
		MinInterTokenLatency:   15 * time.Millisecond,
		MaxBatch:               128,
		KVCacheTokens:          300000,
	}
}

// AtSpeed is the capacity of a GPU running at speed times this one's rates (0.7: a GPU 30%
// slower, prefill, decode and a lone sequence's inter-token latency alike).
func (c Capacity) AtSpeed(speed float64) Capacity {
	c = c.withDefaults()
	if speed <= 0 || speed == 1 {
		return c
	}
	c.PrefillTokensPerSecond *= speed
	c.DecodeTokensPerSecond *= speed
	c.MinInterTokenLatency = time.Duration(float64(c.MinInterTokenLatency) / speed)
	return c
}

// Work is how many replicas' worth of time a load needs, promptTPS prompt tokens and genTPS
// generated tokens per second: prefill time plus decode time at a full batch, and at least the
// prefill time over the share of each step that prefill may take while sequences decode (the
// binding limit when prompts are long). A replica serves well up to a Work of about 0.8; the
// policy simulator's oracle and modelship's token-rate signal both use this model.
func (c Capacity) Work(promptTPS, genTPS float64) float64 {
	c = c.withDefaults()
	prefill := promptTPS / c.PrefillTokensPerSecond
	return math.Max(prefill/maxPrefillShare, prefill+genTPS/c.DecodeTokensPerSecond)
}

// withDefaults fills zero fields from DefaultCapacity.
func (c Capacity) withDefaults() Capacity {
	d := DefaultCapacity()
	if c.PrefillTokensPerSecond <= 0 {
		c.PrefillTokensPerSecond = d.PrefillTokensPerSecond
	}
	if c.DecodeTokensPerSecond <= 0 {
		c.DecodeTokensPerSecond = d.DecodeTokensPerSecond
	}
	if c.MinInterTokenLatency <= 0 {
		c.MinInterTokenLatency = d.MinInterTokenLatency
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = d.MaxBatch
	}
	if c.KVCacheTokens <= 0 {
		c.KVCacheTokens = d.KVCacheTokens
	}
	return c
}

// Profile is a revision's performance relative to the capacity: how a candidate can be made
// slower or error-prone.
type Profile struct {
	// LatencyMultiplier scales prefill time and time per token (2 is twice as slow). Zero means 1.
	LatencyMultiplier float64
	// ErrorProbability is the chance that a request fails (vLLM finished_reason="abort", an HTTP
	// 500 at the gateway) after its prefill.
	ErrorProbability float64
	// After delays the profile: a pod serves at the neutral profile until it has been Ready
	// this long (a build that degrades in service: a leak, a cache that fills). Zero: at once.
	After time.Duration
}

// profileAt is the pod's profile at t: neutral until Profile.After has passed since it became
// Ready.
func (p Pod) profileAt(t time.Time) Profile {
	if a := p.Profile.After; a > 0 && (p.ReadySince.IsZero() || t.Before(p.ReadySince.Add(a))) {
		return Profile{LatencyMultiplier: 1}
	}
	return p.Profile
}

func (p Profile) multiplier() float64 {
	if p.LatencyMultiplier <= 0 {
		return 1
	}
	return p.LatencyMultiplier
}

// Finish reasons, as vLLM's finished_reason label.
const (
	// FinishStop: the model ended the sequence.
	FinishStop = "stop"
	// FinishLength: the sequence reached max_tokens.
	FinishLength = "length"
	// FinishAbort: the request failed.
	FinishAbort = "abort"
)

var finishReasons = []string{FinishStop, FinishLength, FinishAbort}

// Bucket boundaries of vLLM's histograms (vllm/v1/metrics/loggers.py).
var (
	// TTFTBuckets are vllm:time_to_first_token_seconds' boundaries.
	TTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	// ITLBuckets are vllm:inter_token_latency_seconds' boundaries.
	ITLBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	// E2EBuckets are vllm:e2e_request_latency_seconds' boundaries, which vLLM also gives its
	// per-request phase histograms (vllm:request_queue_time_seconds,
	// vllm:request_prefill_time_seconds, vllm:request_decode_time_seconds).
	E2EBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	// TokenBuckets are vllm:request_prompt_tokens' and vllm:request_generation_tokens'
	// boundaries: 1, 2, 5 times the powers of ten up to the model's max_model_len
	// (MaxModelLen), as vLLM's build_1_2_5_buckets.
	TokenBuckets = buckets125(MaxModelLen)
)

// MaxModelLen is the simulated model's context length (vLLM's max_model_len), the top of the
// token histograms' buckets: an 8B model's 128k.
const MaxModelLen = 131072

// buckets125 is 1, 2, 5, 10, 20, 50, ... up to max.
func buckets125(max float64) []float64 {
	var out []float64
	for e := 1.0; ; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*e > max {
				return out
			}
			out = append(out, m*e)
		}
	}
}

// histogram counts observations per bucket (not cumulative; the last slot is +Inf).
type histogram struct {
	bounds []float64
	counts []uint64
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64, n uint64) {
	if n == 0 {
		return
	}
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: v falls in "le" that bound
	h.counts[i] += n
	h.sum += v * float64(n)
	h.count += n
}

// merge adds o's counts (same bounds) to h.
func (h *histogram) merge(o histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.sum += o.sum
	h.count += o.count
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does: linear
// interpolation within the bucket that holds the rank, the upper bound of the last finite
// bucket when the rank falls in +Inf. ok is false without observations.
func (h *histogram) quantile(q float64) (v float64, ok bool) {
	if h.count == 0 {
		return 0, false
	}
	rank := q * float64(h.count)
	var cum float64
	for i, c := range h.counts {
		prev := cum
		cum += float64(c)
		if cum < rank || c == 0 {
			continue
		}
		if i == len(h.bounds) {
			return h.bounds[len(h.bounds)-1], true
		}
		lo := 0.0
		if i > 0 {
			lo = h.bounds[i-1]
		}
		return lo + (h.bounds[i]-lo)*(rank-prev)/float64(c), true
	}
	return h.bounds[len(h.bounds)-1], true
}

// cumulativeCounts returns the cumulative counts per bound, then +Inf.
func (h *histogram) cumulativeCounts() []uint64 {
	out := make([]uint64, len(h.counts))
	var c uint64
	for i, n := range h.counts {
		c += n
		out[i] = c
	}
	return out
}

// cumulative returns the buckets as Prometheus wants them: upper bound -> count <= bound.
func (h *histogram) cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(h.bounds))
	var c uint64
	for i, b := range h.bounds {
		c += h.counts[i]
		out[b] = c
	}
	return out
}

// request is one request on a replica.
type request struct {
	id          uint64
	arrival     time.Time
	context     int
	generate    int // tokens to produce, including the first
	reason      string
	fail        bool
	prefillLeft float64 // prompt tokens still to process
	emitted     int     // tokens produced so far
	progress    float64 // fractional tokens produced in decode
	firstToken  time.Time
	scheduled   time.Time // when the engine took it from the waiting queue into its batch
	// notify, for a request submitted to one pod (Fleet.SubmitTo), receives its first token
	// and its end; such a request is not counted at the simulated Gateway.
	notify   chan Result
	pod      string
	onTokens func(int)
	cancel   <-chan struct{}
	// cancelled: the client went away (Request.Cancel); the request ended as an abort.
	cancelled bool
}

func (r *request) prefilled() bool { return r.prefillLeft <= 0 }

// finished is a request that left a replica, reported to the fleet.
type finished struct {
	req    *request
	at     time.Time
	reason string
}

// replica is the state of one model-server pod.
type replica struct {
	pod      Pod
	loaded   bool
	waiting  []*request
	running  []*request
	reserved int // KV tokens reserved by running requests (context + generation)
	util     float64

	ttft, itl, e2e histogram
	windowITL      histogram // ITL observations since the fleet's last TakeWindow
	// The per-request histograms vLLM v1 observes for each finished request: the time it
	// waited, its prefill (scheduled to first token), its decode (first token to last), and
	// its prompt and generated tokens.
	queueTime, prefillTime, decodeTime histogram
	promptTokensReq, genTokensReq      histogram
	success                            map[string]uint64
	promptTokens, generatedTokens      uint64
}

func newReplica(p Pod) *replica {
	return &replica{
		pod:       p,
		ttft:      newHistogram(TTFTBuckets),
		itl:       newHistogram(ITLBuckets),
		e2e:       newHistogram(E2EBuckets),
		windowITL: newHistogram(ITLBuckets),
		success:   map[string]uint64{},

		queueTime: newHistogram(E2EBuckets), prefillTime: newHistogram(E2EBuckets), decodeTime: newHistogram(E2EBuckets),
		promptTokensReq: newHistogram(TokenBuckets), genTokensReq: newHistogram(TokenBuckets),
	}
}

// clone copies the replica deeply (its requests too).
func (r *replica) clone() *replica {
	c := *r
	c.waiting = cloneRequests(r.waiting)
	c.running = cloneRequests(r.running)
	c.ttft, c.itl, c.e2e, c.windowITL = r.ttft.clone(), r.itl.clone(), r.e2e.clone(), r.windowITL.clone()
	c.queueTime, c.prefillTime, c.decodeTime = r.queueTime.clone(), r.prefillTime.clone(), r.decodeTime.clone()
	c.promptTokensReq, c.genTokensReq = r.promptTokensReq.clone(), r.genTokensReq.clone()
	c.success = maps.Clone(r.success)
	return &c
}

func cloneRequests(qs []*request) []*request {
	if qs == nil {
		return nil
	}
	out := make([]*request, len(qs))
	for i, q := range qs {
		c := *q
		// A what-if must not talk to the original's clients: a request submitted to one pod
		// (SubmitTo) keeps its cancellation but neither its notifications nor its token
		// callback, and the clone counts it at its Gateway.
		c.notify, c.onTokens = nil, nil
		out[i] = &c
	}
	return out
}

func (h histogram) clone() histogram {
	h.counts = slices.Clone(h.counts)
	return h
}

// servingAt says whether the pod takes new requests at t: Ready, not terminating, model loaded.
// Once loaded, a model stays loaded through readiness flaps.
func (r *replica) servingAt(t time.Time) bool {
	return r.pod.Ready && !r.pod.Terminating && (r.loaded || r.pod.loadedAt(t))
}

// load is the number of requests on the replica, for least-loaded routing.
func (r *replica) load() int { return len(r.waiting) + len(r.running) }

// kvUsage is the KV-cache use, 0..1: the tokens the running requests hold the cache for, as
// the engine's scheduler counts them against it. Here a request is admitted with its whole
// sequence reserved (prompt and output, see admit), so that is its reservation, not the tokens
// it holds so far: at 1 nothing more is admitted and requests queue, as vLLM's use reaches 1
// when its blocks run out. (Counting the tokens held so far, a decode-heavy workload's engines
// queued at 0.5: long outputs reserve twice what they hold on average.)
func (r *replica) kvUsage() float64 {
	return math.Min(1, float64(r.reserved)/float64(r.pod.Capacity.KVCacheTokens))
}

// admit moves waiting requests into the batch at t, first come first served, while the batch
// has room and the KV cache can hold their whole sequence; a lone request always runs.
func (r *replica) admit(t time.Time) {
	c := r.pod.Capacity
	for len(r.waiting) > 0 && len(r.running) < c.MaxBatch {
		q := r.waiting[0]
		need := q.context + q.generate
		if len(r.running) > 0 && r.reserved+need > c.KVCacheTokens {
			return
		}
		r.waiting = r.waiting[1:]
		q.scheduled = t
		if q.arrival.After(t) {
			q.scheduled = q.arrival
		}
		r.running = append(r.running, q)
		r.reserved += need
	}
}

// step advances the replica by dt from t0 and returns the requests that finished.
func (r *replica) step(t0 time.Time, dt time.Duration) []finished {
	if !r.loaded && r.pod.loadedAt(t0) {
		r.loaded = true
	}
	if !r.loaded {
		r.decayUtil(0, dt)
		return nil
	}
	cancelled := r.dropCancelled(t0)
	r.admit(t0)
	c := r.pod.Capacity
	mult := r.pod.profileAt(t0).multiplier()
	dts := dt.Seconds()
	prefillRate := c.PrefillTokensPerSecond / mult
	var done []finished

	decoding := 0
	for _, q := range r.running {
		if q.prefilled() {
			decoding++
		}
	}
	budget := dts
	if decoding > 0 {
		budget = dts * maxPrefillShare
	}
	cursor, busy := 0.0, 0.0
	for _, q := range r.running {
		if q.prefilled() {
			continue
		}
		start := math.Max(cursor, q.arrival.Sub(t0).Seconds())
		if start >= budget {
			break
		}
		need := q.prefillLeft / prefillRate
		if start+need > budget {
			q.prefillLeft -= (budget - start) * prefillRate
			busy += budget - start
			cursor = budget
			break
		}
		q.prefillLeft = 0
		busy += need
		cursor = start + need
		at := t0.Add(secondsToDuration(cursor))
		q.firstToken = at
		r.promptTokens += uint64(q.context)
		if q.fail {
			done = append(done, finished{req: q, at: at, reason: FinishAbort})
			continue
		}
		r.ttft.observe(at.Sub(q.arrival).Seconds(), 1)
		q.emitted = 1
		r.generatedTokens++
		if q.notify != nil {
			q.notify <- q.result(false, "", "", time.Time{})
		}
		if q.onTokens != nil {
			q.onTokens(q.emitted)
		}
		if q.emitted >= q.generate {
			done = append(done, finished{req: q, at: at, reason: q.reason})
		}
	}
	r.remove(done)

	// Decode with the time left in the step.
	left := dts - cursor
	var decoders []*request
	for _, q := range r.running {
		if q.prefilled() {
			decoders = append(decoders, q)
		}
	}
	if b := len(decoders); b > 0 && left > 0 {
		minITL := c.MinInterTokenLatency.Seconds()
		// One decode iteration of the whole batch takes itl; prefill work in the same step stalls
		// the batch, which the sequences see as a longer time between their tokens.
		itl := math.Max(minITL, float64(b)/c.DecodeTokensPerSecond) * mult
		observed := itl * dts / left
		var dec []finished
		for _, q := range decoders {
			before := q.emitted
			q.progress += left / itl
			q.emitted = min(q.generate, 1+int(q.progress))
			n := q.emitted - before
			r.itl.observe(observed, uint64(n))
			r.windowITL.observe(observed, uint64(n))
			r.generatedTokens += uint64(n)
			if n > 0 && q.onTokens != nil {
				q.onTokens(q.emitted)
			}
			if q.emitted >= q.generate {
				// The last token came after (generate-1-progressBefore) tokens' worth of time.
				tokensNeeded := float64(q.generate-1) - (q.progress - left/itl)
				at := t0.Add(secondsToDuration(cursor + math.Max(0, tokensNeeded)*itl))
				dec = append(dec, finished{req: q, at: at, reason: q.reason})
			}
		}
		busy += left * math.Min(1, float64(b)/(minITL*c.DecodeTokensPerSecond))
		r.remove(dec)
		done = append(done, dec...)
	}
	done = append(cancelled, done...)
	for _, f := range done {
		r.success[f.reason]++
		if f.reason != FinishAbort {
			r.e2e.observe(f.at.Sub(f.req.arrival).Seconds(), 1)
			r.observeRequest(f)
		}
	}
	r.decayUtil(busy/dts, dt)
	return done
}

// observeRequest records a finished request's phases and tokens as vLLM v1 does when a request
// finishes: queued (arrival to scheduled), prefill (scheduled to first token), decode (first
// token to the last), its prompt tokens and the tokens it generated.
func (r *replica) observeRequest(f finished) {
	q := f.req
	if q.firstToken.IsZero() {
		return // never produced a token
	}
	r.queueTime.observe(q.scheduled.Sub(q.arrival).Seconds(), 1)
	r.prefillTime.observe(q.firstToken.Sub(q.scheduled).Seconds(), 1)
	r.decodeTime.observe(math.Max(0, f.at.Sub(q.firstToken).Seconds()), 1)
	r.promptTokensReq.observe(float64(q.context), 1)
	r.genTokensReq.observe(float64(q.emitted), 1)
}

// dropCancelled ends the requests whose client went away (Request.Cancel closed) as aborts at
// t, as vLLM aborts a request whose connection closed, freeing its batch slot and KV cache.
func (r *replica) dropCancelled(t time.Time) []finished {
	gone := func(q *request) bool {
		if q.cancel == nil {
			return false
		}
		select {
		case <-q.cancel:
			q.cancelled = true
			return true
		default:
			return false
		}
	}
	var out []finished
	kept := r.waiting[:0]
	for _, q := range r.waiting {
		if gone(q) {
			out = append(out, finished{req: q, at: t, reason: FinishAbort})
			continue
		}
		kept = append(kept, q)
	}
	r.waiting = kept
	var running []finished
	for _, q := range r.running {
		if gone(q) {
			running = append(running, finished{req: q, at: t, reason: FinishAbort})
		}
	}
	r.remove(running)
	return append(out, running...)
}

// decayUtil moves the smoothed GPU utilization toward the step's busy fraction.
func (r *replica) decayUtil(busyFraction float64, dt time.Duration) {
	a := 1 - math.Exp(-dt.Seconds()/utilizationTimeConstant.Seconds())
	r.util += (math.Min(1, busyFraction) - r.util) * a
}

// remove drops finished requests from the batch and frees their KV reservation.
func (r *replica) remove(done []finished) {
	if len(done) == 0 {
		return
	}
	gone := make(map[*request]bool, len(done))
	for _, f := range done {
		gone[f.req] = true
		r.reserved -= f.req.context + f.req.generate
	}
	kept := r.running[:0]
	for _, q := range r.running {
		if !gone[q] {
			kept = append(kept, q)
		}
	}
	r.running = kept
}

func secondsToDuration(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
