package autoscale

import (
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/sample"
)

// The plant model of the sequence tests, stated:
//   - Load: the Azure conversation trace in 5 s buckets (testdata), scaled 1x..10x. A request's
//     work is its generated tokens plus an eighth of its prompt tokens (prefill is cheaper per
//     token), in token-equivalents; the mean request is about 355.
//   - A Ready replica serves 1000 token-equivalents per second at 100% GPU utilization. Work
//     that does not fit waits in a shared queue (requests waiting = queued work / 355).
//   - GPU utilization of the Ready pods is served work / capacity, plus seeded noise of +-3
//     points, capped at 0..100. Pods not Ready serve nothing and report nothing.
//   - A new pod becomes Ready 90 s after it is asked for (image pull and model load). Scaling
//     down removes starting pods first, then Ready ones, at once.
//   - The run starts with the count sized for the first minute's load at 70% utilization.
//   - Decide runs every 5 s; metric outages (Error) start with probability 1% a tick and last
//     1..24 ticks.
const (
	tick            = 5 * time.Second
	startupDelay    = 90 * time.Second
	replicaCapacity = 1000.0
	workPerRequest  = 355.0
)

type bucket struct{ work float64 }

func loadTrace(t *testing.T) []bucket {
	t.Helper()
	f, err := os.Open("testdata/azure-llm-2023-conv-5s.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []bucket
	for _, r := range rows[1:] {
		ctx, err1 := strconv.ParseFloat(r[2], 64)
		gen, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad row %v", r)
		}
		out = append(out, bucket{work: gen + ctx/8})
	}
	return out
}

// plant is the cluster and the model servers as the autoscaler sees them.
type plant struct {
	readyAt []time.Time
	backlog float64
}

func (p *plant) counts(now time.Time) (ready, starting int32) {
	for _, r := range p.readyAt {
		if !r.After(now) {
			ready++
		} else {
			starting++
		}
	}
	return ready, starting
}

func (p *plant) resize(n int32, now time.Time) {
	for int32(len(p.readyAt)) < n {
		p.readyAt = append(p.readyAt, now.Add(startupDelay))
	}
	for int32(len(p.readyAt)) > n {
		// Remove the pod that would be Ready last (starting ones first).
		last := 0
		for i, r := range p.readyAt {
			if r.After(p.readyAt[last]) {
				last = i
			}
		}
		p.readyAt = append(p.readyAt[:last], p.readyAt[last+1:]...)
	}
}

// serve runs one tick: returns the GPU utilization of the Ready pods (NaN when none) and the
// requests waiting.
func (p *plant) serve(work float64, ready int32) (float64, float64) {
	p.backlog += work
	if ready == 0 {
		return math.NaN(), p.backlog / workPerRequest
	}
	capTick := float64(ready) * replicaCapacity * tick.Seconds()
	served := math.Min(p.backlog, capTick)
	p.backlog -= served
	return 100 * served / capTick, p.backlog / workPerRequest
}

type scenario struct {
	name     string
	spec     v1alpha1.AutoscalingSpec
	partial  bool  // outages hit only the GPU metric (the queue keeps its data)
	pool     int32 // GPU capacity in replicas; 0 = unlimited
	upPer    time.Duration
	upMax    func(start int32) int32 // highest count the scale-up policies allow from start
	downPer  time.Duration
	downMin  func(start int32) int32 // lowest count the scale-down policies allow from start
	upWindow time.Duration
}

func scenarios() []scenario {
	hpaUp := func(s int32) int32 { return max(2*s, s+4) }
	return []scenario{
		{
			name:  "GPU utilization with HPA's default behaviour",
			spec:  newSpec(1, 40, withGPU(70)),
			upPer: 15 * time.Second, upMax: hpaUp,
			downPer: 15 * time.Second, downMin: func(int32) int32 { return 0 },
		},
		{
			name:    "GPU utilization and queue, GPU metric outages",
			spec:    newSpec(1, 40, withGPU(70), withWaiting(10)),
			partial: true,
			upPer:   15 * time.Second, upMax: hpaUp,
			downPer: 15 * time.Second, downMin: func(int32) int32 { return 0 },
		},
		{
			name:  "GPU utilization without a scale-down window",
			spec:  newSpec(1, 40, withGPU(70), withScaleDown(0, "")),
			upPer: 15 * time.Second, upMax: hpaUp,
			downPer: 15 * time.Second, downMin: func(int32) int32 { return 0 },
		},
		{
			name: "GPU utilization with slow custom policies and a 20-replica GPU pool",
			spec: newSpec(2, 40, withGPU(70),
				withScaleUp(30*time.Second, "", pods(2, 30*time.Second)),
				withScaleDown(2*time.Minute, "", pods(1, time.Minute))),
			pool:  20,
			upPer: 30 * time.Second, upMax: func(s int32) int32 { return s + 2 },
			downPer: time.Minute, downMin: func(s int32) int32 { return s - 1 },
			upWindow: 30 * time.Second,
		},
	}
}

type change struct {
	at       time.Time
	from, to int32
}

// countAt is the count in effect at t, from the log of changes.
func countAt(initial int32, log []change, t time.Time) int32 {
	c := initial
	for _, ch := range log {
		if ch.at.After(t) {
			break
		}
		c = ch.to
	}
	return c
}

type recAt struct {
	at time.Time
	n  int32
}

func TestSequenceOnTrace(t *testing.T) {
	trace := loadTrace(t)
	for _, sc := range scenarios() {
		for _, scale := range []float64{1, 3, 10} {
			for seed := uint64(1); seed <= 4; seed++ {
				t.Run(fmt.Sprintf("%s/%gx/seed %d", sc.name, scale, seed), func(t *testing.T) {
					runSequence(t, sc, trace, scale, seed)
				})
			}
		}
	}
}

func runSequence(t *testing.T, sc scenario, trace []bucket, scale float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	s := resolve(sc.spec)
	start := time.Date(2023, 11, 16, 18, 15, 0, 0, time.UTC)
	p := &plant{}
	// The service was already running, sized for the first minute's load at 70%.
	var first float64
	for _, b := range trace[:12] {
		first += b.work * scale
	}
	initial := min(max(ceil(first/60/(0.7*replicaCapacity)), s.min), s.max)
	p.resize(initial, start.Add(-startupDelay))
	cur := initial
	var prev *v1alpha1.AutoscalingStatus
	var log []change
	var hist []recAt
	outage := 0
	var peak, events int32
	var utilSum float64
	var utilN int

	for i, b := range trace {
		now := start.Add(time.Duration(i) * tick)
		ready, starting := p.counts(now)
		util, waiting := p.serve(b.work*scale, ready)
		if !math.IsNaN(util) {
			util = math.Max(0, math.Min(100, util+rng.Float64()*6-3))
			utilSum += util
			utilN++
		}
		if outage > 0 {
			outage--
		} else if rng.Float64() < 0.01 {
			outage = 1 + rng.IntN(24)
		}

		var observations []Observation
		gpuMissing := outage > 0 || math.IsNaN(util)
		if gpuMissing {
			observations = append(observations, Observation{Metric: MetricGPUUtilization, Status: sample.Error, Message: "injected outage"})
		} else {
			observations = append(observations, Observation{Metric: MetricGPUUtilization, Status: sample.OK, Value: util, Pods: ready})
		}
		queueMissing := false
		if sc.partial {
			queueMissing = ready == 0
			if queueMissing {
				observations = append(observations, Observation{Metric: MetricRequestsWaiting, Status: sample.NoData})
			} else {
				observations = append(observations, Observation{Metric: MetricRequestsWaiting, Status: sample.OK, Value: waiting, Pods: ready})
			}
		}
		allMissing := gpuMissing && (!sc.partial || queueMissing)
		anyMissing := gpuMissing || queueMissing

		in := Input{Spec: sc.spec, Current: cur, Ready: ready, Starting: starting, Observations: observations, Previous: prev}
		if sc.pool > 0 {
			in.Capacity = &capacity.FitResult{MaxAdditional: max(sc.pool-cur, 0), Reason: v1alpha1.ReasonGPUCapacityLimited, GPUsPerReplica: 1, FreeGPUs: int64(max(sc.pool-cur, 0)), MatchingNodes: 1}
		}
		out := Decide(in, now)
		d := out.Desired
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("step %d (+%s) %d -> %d (ready %d, starting %d, util %.1f, waiting %.1f, held %q): %s",
				i, now.Sub(start), cur, d, ready, starting, util, waiting, out.Held, fmt.Sprintf(format, args...))
		}

		// Within bounds.
		if d < s.min || d > s.max {
			fail("outside [%d, %d]", s.min, s.max)
		}
		// Missing data holds.
		if allMissing && d != cur {
			fail("changed the count while no metric has data")
		}
		if anyMissing && d < cur {
			fail("scaled down while a metric is missing")
		}
		if anyMissing == out.MetricsAvailable {
			fail("MetricsAvailable = %v with missing = %v", out.MetricsAvailable, anyMissing)
		}
		// Stabilization: the largest proposal of every pass within the window bounds a scale-down.
		maxProp := int32(-1)
		for _, pr := range out.Status.Proposals {
			if pr.Replicas != nil {
				maxProp = max(maxProp, *pr.Replicas)
			}
		}
		if maxProp >= 0 {
			hist = append(hist, recAt{now, maxProp})
		}
		if d < cur {
			for _, h := range hist {
				if h.at.After(now.Add(-s.down.window)) && d < min(cur, h.n) {
					fail("scaled down below %d, recommended %s ago, inside the %s window", h.n, now.Sub(h.at), s.down.window)
				}
			}
		}
		if d > cur && sc.upWindow > 0 && !anyMissing {
			lowest := int32(math.MaxInt32)
			for _, h := range hist {
				if h.at.After(now.Add(-sc.upWindow)) {
					lowest = min(lowest, h.n)
				}
			}
			if d > max(cur, lowest) {
				fail("scaled up above %d, the lowest recommendation of the %s window", lowest, sc.upWindow)
			}
		}
		// Rate limits, from the count in effect at the start of each period.
		if d > cur {
			if from := countAt(initial, log, now.Add(-sc.upPer)); d > sc.upMax(from) {
				fail("scale-up beyond the policies: from %d %s ago, at most %d", from, sc.upPer, sc.upMax(from))
			}
		}
		if d < cur {
			if from := countAt(initial, log, now.Add(-sc.downPer)); d < sc.downMin(from) {
				fail("scale-down beyond the policies: from %d %s ago, at least %d", from, sc.downPer, sc.downMin(from))
			}
		}
		// No cascading scale-up while pods start: the Ready pods alone must need more than the
		// total already asked for.
		if d > cur && starting > 0 {
			need := int32(0)
			if !gpuMissing {
				need = ceil(float64(ready) * util / 70)
			}
			if sc.partial && !queueMissing {
				need = max(need, ceil(waiting/10))
			}
			if need <= cur {
				fail("scaled up again while %d pods start, though the Ready pods need only %d", starting, need)
			}
		}
		// Nor a scale-down of starting pods while the Ready ones run above target.
		if d < cur && starting > 0 && !gpuMissing && util > 70*1.1 {
			fail("scaled down while %d pods start and the Ready ones run at %.0f%%", starting, util)
		}
		// GPU pool.
		if sc.pool > 0 && d > max(cur, sc.pool) {
			fail("beyond the GPU pool of %d", sc.pool)
		}
		if (out.Event != nil) != (d != cur) {
			fail("event %+v", out.Event)
		}

		if d != cur {
			if os.Getenv("SEQ_DEBUG") != "" {
				t.Logf("+%s %d -> %d ready %d starting %d util %.0f waiting %.0f: %s", now.Sub(start), cur, d, ready, starting, util, waiting, out.Status.LastScaleReason)
			}
			log = append(log, change{now, cur, d})
			events++
		}
		peak = max(peak, d)
		p.resize(d, now)
		cur = d
		st := out.Status
		prev = &st
	}

	// The autoscaler must follow the load, not just stay still: peak counts by load level.
	meanUtil := utilSum / float64(max(utilN, 1))
	t.Logf("peak %d replicas, %d changes, mean GPU utilization %.0f%%, final queue %.0f requests", peak, events, meanUtil, p.backlog/workPerRequest)
	switch {
	case scale >= 10 && peak < 15:
		t.Errorf("peak %d at %gx load, want at least 15 (about 19000 token-eq/s at 1000 per replica)", peak, scale)
	case scale <= 1 && peak > 8:
		t.Errorf("peak %d at %gx load, want at most 8", peak, scale)
	}
	if sc.pool > 0 && peak > sc.pool {
		t.Errorf("peak %d beyond the pool of %d", peak, sc.pool)
	}
}
