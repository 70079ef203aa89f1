// Package fleet simulates the model-server replicas of modelship's ModelServers: vLLM-like pods
// with a batch, a queue, a KV cache, a cold start and per-revision performance, a Gateway that
// splits requests between the blue and green colors by the HTTPRoute's weights, and the
// Prometheus metrics that vLLM and NVIDIA's DCGM exporter would expose for them.
//
// The model holds no clock: every call that moves time takes it as a parameter, so the same
// fleet runs in real time (a binary advancing it with time.Now) or in virtual time (a policy
// simulator stepping it). Given the same seed and the same calls, it gives the same results.
package fleet

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"
)

// Strategy chooses a pod within a color.
type Strategy string

const (
	// LeastLoaded sends a request to the serving pod with the fewest requests (running + waiting),
	// ties broken in turn.
	LeastLoaded Strategy = "least-loaded"
	// RoundRobin sends requests to the serving pods in turn.
	RoundRobin Strategy = "round-robin"
)

// Gateway response codes counted per color.
const (
	// CodeOK: the pod answered.
	CodeOK = "200"
	// CodeServerError: the pod failed the request (finished_reason="abort").
	CodeServerError = "500"
	// CodeBadGateway: the pod went away while serving the request.
	CodeBadGateway = "502"
	// CodeUnavailable: no pod of the chosen color serves (none Ready and loaded), or no route.
	CodeUnavailable = "503"
	// CodeClientClosed: the client went away before the answer (Request.Cancel), as nginx
	// logs it.
	CodeClientClosed = "499"
)

// Config is the fleet's behaviour.
type Config struct {
	// Step is the simulation time step. Zero means 10ms.
	Step time.Duration
	// Seed makes the error draws reproducible.
	Seed uint64
	// Strategy chooses pods within a color. Empty means LeastLoaded.
	Strategy Strategy
	// MaxTokens caps generated tokens per request (finished_reason="length" when reached);
	// zero means no cap.
	MaxTokens int
}

// Pod is what the fleet needs to know of a model-server pod.
type Pod struct {
	// Namespace and Name of the pod.
	Namespace, Name string
	// UID of the pod (used to derive stable GPU UUIDs).
	UID string
	// ModelServer is the owning ModelServer's name.
	ModelServer string
	// Color is the pod's color (blue or green).
	Color string
	// Revision is the template revision the pod runs.
	Revision string
	// ModelName is vLLM's served model name (the model_name label).
	ModelName string
	// Container is the model-server container's name (DCGM's container label).
	Container string
	// Node is the node the pod runs on (DCGM's Hostname label).
	Node string
	// GPUs is the number of GPUs the pod holds; zero exposes no DCGM series.
	GPUs int
	// Ready is the pod's Ready condition; only Ready pods take traffic.
	Ready bool
	// Terminating pods take no new traffic but finish what they hold.
	Terminating bool
	// ReadySince is when the pod's containers became ready (the kubelet's ContainersReady):
	// its model starts loading then. Ready may come later, when a readiness gate (modelship's
	// warm-up gate) waits for the model to be loaded.
	ReadySince time.Time
	// LoadDelay is how long after ReadySince the model takes to load (the cold start). Before
	// that the pod serves nothing and its warm-up check fails.
	LoadDelay time.Duration
	// Capacity of the pod; zero fields take DefaultCapacity's.
	Capacity Capacity
	// Profile of the pod's revision.
	Profile Profile
}

// Key is the pod's namespace/name.
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// loadedAt says whether the model is loaded at t, judging from when the containers became ready
// and the load delay (a pod whose Ready waits on its warm-up gate loads before it is Ready).
func (p Pod) loadedAt(t time.Time) bool {
	return !p.ReadySince.IsZero() && !t.Before(p.ReadySince.Add(p.LoadDelay))
}

// Request is one request arriving at a ModelServer's route.
type Request struct {
	// Arrival time.
	Arrival time.Time
	// ContextTokens is the prompt length.
	ContextTokens int
	// GeneratedTokens is the number of tokens the model will generate (at least 1).
	GeneratedTokens int
	// OnTokens, when set, is called with the number of tokens generated so far each time the
	// simulation produces some (a streaming server paces its chunks by it). It runs under the
	// fleet's lock, in the step that produced them: it must not block nor call the fleet.
	OnTokens func(generated int)
	// Cancel, when set, is closed when the client goes away: the pod drops the request at its
	// next step (vLLM counts it finished_reason="abort"; SubmitTo's Result says
	// CodeClientClosed).
	Cancel <-chan struct{}
}

// msKey names a ModelServer.
type msKey struct{ namespace, name string }

// window accumulates a ModelServer's gateway activity between two TakeWindow calls.
type window struct {
	requests int
	errors   int
	ttft     []float64
}

// route is a ModelServer's traffic split and router state.
type route struct {
	weights map[string]int32
	current map[string]int64 // smooth weighted round robin
	turn    map[string]int   // per color, for ties and round robin
}

// Fleet is the simulated fleet. It is safe for concurrent use.
type Fleet struct {
	mu       sync.Mutex
	cfg      Config
	now      time.Time
	src      *rand.PCG // rng's source, kept so that Clone can copy its state
	rng      *rand.Rand
	nextID   uint64
	pods     map[string]*replica // by namespace/name
	routes   map[msKey]*route
	gateway  map[gatewayKey]uint64
	windows  map[msKey]*window
	windowAt time.Time
	pools    []PoolRef
}

// PoolRef is an InferencePool the simulated endpoint picker reports on: the pods of one color of
// one ModelServer.
type PoolRef struct {
	// Namespace and Name of the pool.
	Namespace, Name string
	// ModelServer and Color select the pool's pods.
	ModelServer, Color string
}

// gatewayKey is one gateway response counter.
type gatewayKey struct {
	namespace, modelServer, color, code string
}

// New makes an empty fleet whose clock starts at start.
func New(cfg Config, start time.Time) *Fleet {
	if cfg.Step <= 0 {
		cfg.Step = 10 * time.Millisecond
	}
	if cfg.Strategy == "" {
		cfg.Strategy = LeastLoaded
	}
	src := rand.NewPCG(cfg.Seed, cfg.Seed^0x243f6a8885a308d3)
	return &Fleet{
		cfg:      cfg,
		now:      start,
		src:      src,
		rng:      rand.New(src),
		pods:     map[string]*replica{},
		routes:   map[msKey]*route{},
		gateway:  map[gatewayKey]uint64{},
		windows:  map[msKey]*window{},
		windowAt: start,
	}
}

// Clone returns an independent copy of the fleet: its clock, pods with their queues, batches,
// KV reservations, counters and histograms, routes, gateway counters, the open window and the
// random source's state. The same calls on the fleet and on its clone give the same results, and
// neither sees the other's (a simulator tries alternatives from one state this way). Requests
// submitted to one pod (SubmitTo) are the exception: their clients stay with the original (the
// clone sends them no notification and no token callback, and counts them at its Gateway).
func (f *Fleet) Clone() *Fleet {
	f.mu.Lock()
	defer f.mu.Unlock()
	src := *f.src
	c := &Fleet{
		cfg:      f.cfg,
		now:      f.now,
		src:      &src,
		rng:      rand.New(&src),
		nextID:   f.nextID,
		pods:     make(map[string]*replica, len(f.pods)),
		routes:   make(map[msKey]*route, len(f.routes)),
		gateway:  make(map[gatewayKey]uint64, len(f.gateway)),
		windows:  make(map[msKey]*window, len(f.windows)),
		windowAt: f.windowAt,
		pools:    append([]PoolRef(nil), f.pools...),
	}
	for k, r := range f.pods {
		c.pods[k] = r.clone()
	}
	for k, rt := range f.routes {
		c.routes[k] = &route{weights: maps.Clone(rt.weights), current: maps.Clone(rt.current), turn: maps.Clone(rt.turn)}
	}
	maps.Copy(c.gateway, f.gateway)
	for k, w := range f.windows {
		c.windows[k] = &window{requests: w.requests, errors: w.errors, ttft: slices.Clone(w.ttft)}
	}
	return c
}

// Now is the fleet's simulated time: the last step boundary it reached.
func (f *Fleet) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// SetPod adds a pod or updates what is known of it, keeping its queue, batch and counters.
func (f *Fleet) SetPod(p Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p.Capacity = p.Capacity.withDefaults()
	if r, ok := f.pods[p.Key()]; ok {
		r.pod = p
		return
	}
	f.pods[p.Key()] = newReplica(p)
}

// DeletePod removes a pod: its series disappear and the requests it held fail at the gateway (502).
func (f *Fleet) DeletePod(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.pods[namespace+"/"+name]
	if !ok {
		return
	}
	lost := 0
	for _, q := range append(append([]*request(nil), r.waiting...), r.running...) {
		if q.notify != nil {
			q.finish(CodeBadGateway, "", f.now)
			continue
		}
		lost++
	}
	if direct := len(r.waiting) + len(r.running) - lost; direct > 0 {
		f.windowFor(msKey{namespace, r.pod.ModelServer}).errors += direct
	}
	if lost > 0 {
		f.gateway[gatewayKey{namespace, r.pod.ModelServer, r.pod.Color, CodeBadGateway}] += uint64(lost)
		f.windowFor(msKey{namespace, r.pod.ModelServer}).errors += lost
	}
	delete(f.pods, namespace+"/"+name)
}

// SetPools replaces the InferencePools the simulated endpoint picker reports on (see Collect).
func (f *Fleet) SetPools(pools []PoolRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pools = append([]PoolRef(nil), pools...)
}

// PodKeys lists the pods the fleet knows, as namespace/name, sorted.
func (f *Fleet) PodKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := make([]string, 0, len(f.pods))
	for k := range f.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetWeights sets a ModelServer's traffic split by color (the HTTPRoute's backendRef weights).
// Nil removes the route: the ModelServer's requests then fail with 503.
func (f *Fleet) SetWeights(namespace, modelServer string, weights map[string]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := msKey{namespace, modelServer}
	if weights == nil {
		delete(f.routes, k)
		return
	}
	rt, ok := f.routes[k]
	if !ok {
		rt = &route{current: map[string]int64{}, turn: map[string]int{}}
		f.routes[k] = rt
	}
	if !maps2Equal(rt.weights, weights) {
		rt.current = map[string]int64{}
	}
	rt.weights = make(map[string]int32, len(weights))
	for c, w := range weights {
		rt.weights[c] = w
	}
}

// Weights returns a ModelServer's traffic split, nil without a route.
func (f *Fleet) Weights(namespace, modelServer string) map[string]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	rt, ok := f.routes[msKey{namespace, modelServer}]
	if !ok {
		return nil
	}
	out := make(map[string]int32, len(rt.weights))
	for c, w := range rt.weights {
		out[c] = w
	}
	return out
}

func maps2Equal(a, b map[string]int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Outcome says where a submitted request went.
type Outcome struct {
	// Color chosen by the weights ("" when the ModelServer has no route or all weights are 0).
	Color string
	// Pod that got the request, as namespace/name; "" when it was refused.
	Pod string
	// Code is CodeUnavailable when refused at the gateway, else CodeOK (the pod may still fail it).
	Code string
}

// Submit routes a request of a ModelServer: the fleet first advances to its arrival, then the
// route's weights choose a color and the strategy a serving pod of that color. A color with no
// serving pod answers 503.
func (f *Fleet) Submit(namespace, modelServer string, req Request) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance(req.Arrival)
	if req.Arrival.Before(f.now) {
		req.Arrival = f.now
	}
	k := msKey{namespace, modelServer}
	w := f.windowFor(k)
	w.requests++
	color := f.pickColor(k)
	if color == "" {
		w.errors++
		f.gateway[gatewayKey{namespace, modelServer, "", CodeUnavailable}]++
		return Outcome{Code: CodeUnavailable}
	}
	r := f.pickPod(k, color, req.Arrival)
	if r == nil {
		w.errors++
		f.gateway[gatewayKey{namespace, modelServer, color, CodeUnavailable}]++
		return Outcome{Color: color, Code: CodeUnavailable}
	}
	q := f.newRequest(r, req)
	r.waiting = append(r.waiting, q)
	return Outcome{Color: color, Pod: r.pod.Key(), Code: CodeOK}
}

// pickColor runs smooth weighted round robin over the route's colors (exact proportions, no
// randomness).
func (f *Fleet) pickColor(k msKey) string {
	rt, ok := f.routes[k]
	if !ok {
		return ""
	}
	colors := make([]string, 0, len(rt.weights))
	var total int64
	for c, w := range rt.weights {
		if w > 0 {
			colors = append(colors, c)
			total += int64(w)
		}
	}
	if total == 0 {
		return ""
	}
	sort.Strings(colors)
	best := ""
	for _, c := range colors {
		rt.current[c] += int64(rt.weights[c])
		if best == "" || rt.current[c] > rt.current[best] {
			best = c
		}
	}
	rt.current[best] -= total
	return best
}

// pickPod chooses a serving pod of a color: Ready, not terminating, model loaded at t.
func (f *Fleet) pickPod(k msKey, color string, t time.Time) *replica {
	var serving []*replica
	for _, r := range f.pods {
		p := r.pod
		if p.Namespace == k.namespace && p.ModelServer == k.name && p.Color == color && r.servingAt(t) {
			serving = append(serving, r)
		}
	}
	if len(serving) == 0 {
		return nil
	}
	slices.SortFunc(serving, func(a, b *replica) int { return compareStrings(a.pod.Name, b.pod.Name) })
	rt := f.routes[k]
	turn := rt.turn[color]
	rt.turn[color] = turn + 1
	start := turn % len(serving)
	if f.cfg.Strategy == RoundRobin {
		return serving[start]
	}
	var best *replica
	for i := range serving {
		r := serving[(start+i)%len(serving)]
		if best == nil || r.load() < best.load() {
			best = r
		}
	}
	return best
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Advance runs the fleet up to t (by whole steps; the remainder waits for the next call).
func (f *Fleet) Advance(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advance(t)
}

func (f *Fleet) advance(t time.Time) {
	if !t.After(f.now) {
		return
	}
	keys := make([]string, 0, len(f.pods))
	for k := range f.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for !f.now.Add(f.cfg.Step).After(t) {
		for _, k := range keys {
			r := f.pods[k]
			for _, d := range r.step(f.now, f.cfg.Step) {
				f.record(r, d)
			}
		}
		f.now = f.now.Add(f.cfg.Step)
	}
}

// record accounts a finished request at the gateway.
func (f *Fleet) record(r *replica, d finished) {
	k := msKey{r.pod.Namespace, r.pod.ModelServer}
	if d.req.cancelled {
		if d.req.notify != nil {
			d.req.finish(CodeClientClosed, d.reason, d.at)
			return
		}
		f.gateway[gatewayKey{k.namespace, k.name, r.pod.Color, CodeClientClosed}]++
		return
	}
	code := CodeOK
	w := f.windowFor(k)
	if d.reason == FinishAbort {
		code = CodeServerError
		w.errors++
	} else {
		w.ttft = append(w.ttft, d.req.firstToken.Sub(d.req.arrival).Seconds())
	}
	if d.req.notify != nil {
		d.req.finish(code, d.reason, d.at)
		return
	}
	f.gateway[gatewayKey{k.namespace, k.name, r.pod.Color, code}]++
}

func (f *Fleet) windowFor(k msKey) *window {
	w, ok := f.windows[k]
	if !ok {
		w = &window{}
		f.windows[k] = w
	}
	return w
}

// Loaded says whether a pod's model is loaded at t (its warm-up check passes); known is false
// for a pod the fleet does not hold.
func (f *Fleet) Loaded(namespace, name string, t time.Time) (loaded, known bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.pods[namespace+"/"+name]
	if !ok {
		return false, false
	}
	return r.loaded || r.pod.loadedAt(t), true
}

// PodStatus is a pod's state as its metrics show it.
type PodStatus struct {
	// Pod as last set.
	Pod Pod
	// Loaded is true once the model serves.
	Loaded bool
	// Running and Waiting requests.
	Running, Waiting int
	// KVCacheUsage is 0..1.
	KVCacheUsage float64
	// GPUUtilization is 0..100.
	GPUUtilization float64
	// Success counts finished requests by finished_reason.
	Success map[string]uint64
	// TTFTCount and TTFTSum summarise the time-to-first-token histogram (seconds).
	TTFTCount uint64
	TTFTSum   float64
	// PromptTokens and GeneratedTokens are vLLM's token counters.
	PromptTokens, GeneratedTokens uint64
	// TTFT, ITL and E2E are the latency histograms' cumulative counts, one per bound of
	// TTFTBuckets, ITLBuckets and E2EBuckets, then +Inf.
	TTFT, ITL, E2E []uint64
	// Requests are the sums of the per-request histograms (vllm:request_*), as their _sum and
	// _count series give them.
	Requests RequestSums
}

// RequestSums are the _sum series of vLLM's per-request histograms over the requests a pod
// finished, and their _count (Requests).
type RequestSums struct {
	Requests                                    uint64
	QueueSeconds, PrefillSeconds, DecodeSeconds float64
	PromptTokens, GenerationTokens              float64
}

// Pods returns the status of every pod, sorted by namespace/name.
func (f *Fleet) Pods() []PodStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]PodStatus, 0, len(f.pods))
	for _, r := range f.pods {
		s := PodStatus{
			Pod: r.pod, Loaded: r.loaded, Running: len(r.running), Waiting: len(r.waiting),
			KVCacheUsage: r.kvUsage(), GPUUtilization: 100 * r.util,
			Success: map[string]uint64{}, TTFTCount: r.ttft.count, TTFTSum: r.ttft.sum,
			PromptTokens: r.promptTokens, GeneratedTokens: r.generatedTokens,
			TTFT: r.ttft.cumulativeCounts(), ITL: r.itl.cumulativeCounts(), E2E: r.e2e.cumulativeCounts(),
			Requests: RequestSums{Requests: r.decodeTime.count, QueueSeconds: r.queueTime.sum, PrefillSeconds: r.prefillTime.sum,
				DecodeSeconds: r.decodeTime.sum, PromptTokens: r.promptTokensReq.sum, GenerationTokens: r.genTokensReq.sum},
		}
		for k, v := range r.success {
			s.Success[k] = v
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b PodStatus) int { return compareStrings(a.Pod.Key(), b.Pod.Key()) })
	return out
}

// GatewayCount is how many responses the gateway gave for a ModelServer's color with a code.
func (f *Fleet) GatewayCount(namespace, modelServer, color, code string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gateway[gatewayKey{namespace, modelServer, color, code}]
}

// ModelServerWindow is a ModelServer's activity over a window of simulated time.
type ModelServerWindow struct {
	// Namespace and Name of the ModelServer.
	Namespace, Name string
	// Duration of the window.
	Duration time.Duration
	// Requests that arrived, and Errors among them or earlier ones (5xx at the gateway).
	Requests, Errors int
	// Weights of the route by color (nil without a route).
	Weights map[string]int32
	// Pods by color: all known, Ready, loaded (serving).
	Pods map[string]PodCounts
	// TTFTP95 is the 95th percentile time to first token of the requests that completed in the
	// window; HasTTFT is false when none did.
	TTFTP95 time.Duration
	HasTTFT bool
	// ITLP95 is the 95th percentile inter-token latency of the tokens produced in the window by
	// the pods that still exist, estimated from vLLM's histogram buckets as histogram_quantile
	// would; HasITL is false when no token was produced.
	ITLP95 time.Duration
	HasITL bool
}

// RPS is the arrival rate over the window.
func (w ModelServerWindow) RPS() float64 {
	if w.Duration <= 0 {
		return 0
	}
	return float64(w.Requests) / w.Duration.Seconds()
}

// PodCounts counts one color's pods.
type PodCounts struct {
	// Total pods known, Ready ones and Serving ones (Ready, loaded, not terminating).
	Total, Ready, Serving int
}

// TakeWindow returns each ModelServer's activity since the previous call (or the start) up to
// the fleet's current time, and starts a new window.
func (f *Fleet) TakeWindow() []ModelServerWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[msKey]bool{}
	for k := range f.windows {
		seen[k] = true
	}
	for k := range f.routes {
		seen[k] = true
	}
	for _, r := range f.pods {
		seen[msKey{r.pod.Namespace, r.pod.ModelServer}] = true
	}
	keys := make([]msKey, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b msKey) int {
		return compareStrings(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	out := make([]ModelServerWindow, 0, len(keys))
	for _, k := range keys {
		w := f.windowFor(k)
		mw := ModelServerWindow{
			Namespace: k.namespace, Name: k.name, Duration: f.now.Sub(f.windowAt),
			Requests: w.requests, Errors: w.errors, Pods: map[string]PodCounts{},
		}
		if rt, ok := f.routes[k]; ok {
			mw.Weights = map[string]int32{}
			for c, v := range rt.weights {
				mw.Weights[c] = v
			}
		}
		itl := newHistogram(ITLBuckets)
		for _, r := range f.pods {
			if r.pod.Namespace != k.namespace || r.pod.ModelServer != k.name {
				continue
			}
			itl.merge(r.windowITL)
			r.windowITL = newHistogram(ITLBuckets)
			pc := mw.Pods[r.pod.Color]
			pc.Total++
			if r.pod.Ready {
				pc.Ready++
			}
			if r.servingAt(f.now) {
				pc.Serving++
			}
			mw.Pods[r.pod.Color] = pc
		}
		if len(w.ttft) > 0 {
			mw.TTFTP95, mw.HasTTFT = secondsToDuration(quantile(w.ttft, 0.95)), true
		}
		if v, ok := itl.quantile(0.95); ok {
			mw.ITLP95, mw.HasITL = secondsToDuration(v), true
		}
		out = append(out, mw)
	}
	f.windows = map[msKey]*window{}
	f.windowAt = f.now
	return out
}

// quantile is the nearest-rank quantile of xs (sorted in place).
func quantile(xs []float64, q float64) float64 {
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// String renders a window as one log-friendly line.
func (w ModelServerWindow) String() string {
	ttft := "n/a"
	if w.HasTTFT {
		ttft = w.TTFTP95.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s/%s rps=%.1f errors=%d weights=%v pods=%v ttft_p95=%s",
		w.Namespace, w.Name, w.RPS(), w.Errors, w.Weights, w.Pods, ttft)
}
