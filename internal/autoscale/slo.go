package autoscale

import (
	"fmt"
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
	"github.com/modelship/modelship/internal/window"
)

// SLO-first autoscaling (spec.autoscaling.slo).
//
// The load is the token work of the Ready pods (Input.Load, metrics.TokenWork: replicas' worth
// of a nominal replica's time). One replica's capacity in these units, C, is learnt per
// revision, once per serving window (Input.ServingWindow) with one color Ready, from u, the load
// per Ready replica (pods still starting serve nothing; for a window that held, the load per
// replica asked for, a bound below it, as pods may have come Ready within the window), and the
// window's p95 latencies against the SLO. A miss in a window at whose start new pods may not have served yet (a scale-up within
// two windows and a cold start, none starting now) teaches nothing: the window's latencies
// belong to the fewer replicas before them. Nor does a miss while the load read rose since the
// previous pass by more than a doubling of the load arriving adds to it (loadRose): the load
// arriving rose within the window, and its p95 is the requests' after the rise where u is the
// window's average.
//   - a miss (a p95 above the SLO, or at least SLOQueuedPerReplica requests queued per Ready
//     replica) bounds C below u times the SLO's ratio to the latency seen (the queue's, 0.9),
//     never below u/2 (as learnCapacity does); a bound below C moves C halfway to it, but
//     never below the floor;
//   - a window holding the SLO with margin (each p95 at most sloMargin of its SLO, no queue)
//     at a load near C (u at least sloNear of C, or the load asks for more than Ready-1
//     replicas at C: a small fleet cannot come nearer; a fleet held up by minReplicas or the
//     scale-down window says nothing of C), after a
//     window without a scale-down, raises C by sloProbe (twice that with each p95 at most a
//     quarter of sloMargin), up to sloProbeCeiling times the floor: the next passes ask for fewer
//     replicas, and the SLO says whether they hold. The fleet is so never sized for more than
//     sloShare x sloProbeCeiling (1.15) times the load per replica seen holding with margin
//     (before any miss, one replica fewer is allowed where that is more: at 7 replicas or
//     fewer it always is, and a small fleet could otherwise never probe):
//     the cliff where requests queue shows in no latency before it is crossed (measured: p95
//     ITL and TTFT at 0.46 of the SLO one replica before it, 0.57 on it), and a probe that
//     crosses it costs a cold start of missed minutes;
//   - a window that holds the SLO tightly (a p95 above sloMargin of its SLO), even just after a
//     scale-down, shows the replicas at the edge: C comes back to the floor (about u, here the
//     load over the Ready replicas, which carried it), so that the next probe does not step off
//     the cliff (a p95 grows slowly, then at once when requests queue, and the replicas a probe
//     removed take a cold start to come back); but not at a light load, u at most sloLight of
//     the load per replica of the last miss: there the latency is the requests' own (a long
//     prompt's prefill), which no replica added shortens;
//   - margins are read over the latencies' own floor (overFloor): the lowest ratio seen at a
//     light load, where it is above a fifth of the SLO;
//   - the ceiling is the lowest u seen missing the SLO, doubling every sloCeilingDoubling:
//     probing does not take C above it (the replicas were seen beyond capacity there), and
//     after a while probes again (the workload may have changed);
//   - the floor is the highest u seen holding the SLO with margin, halved every
//     sloFloorHalfLife: a replica has carried it, so one odd minute (a burst inside the window,
//     a slow pod) cannot lower C below it, and an old proof fades. A window that held only just
//     proves nothing for the next (on bursty traffic it is the burst that happened to miss it).
//
// Before anything was learnt, the first window with load seeds C: u over sloShare when it held
// the SLO (the fleet is taken as rightly sized), the bound when it missed; but at least
// sloPrior of a nominal replica's work when it held with margin, as HPA starts from its 70%
// utilization target: a fleet started above its need (minReplicas, a start sized for a peak, a
// load that fell before the first window) is not rightly sized, and C, raised only by probes of
// 5-10% a window, each held by the scale-down window, would take hours to climb from there
// (held-out workloads: 1.4x-3.1x the optimum's GPU-hours at equal SLO minutes where GPU-70 ran
// 1.0x-1.4x; docs/bench-sim.md). On a GPU slower than the rates the token work is counted in
// the prior is too high, and the first windows that miss teach C down, as any miss does.
// Before any miss C is only a bound below: a load per Ready replica beyond sloReseed times it
// seeds it again when it misses, and lifts it to what each replica carries when it holds (a
// seed at a smoke test's load). A new revision starts from the capacity of the one before (a
// new model version is rarely far from the old), without its floor.
//
// The traffic's mix: C is in token work, and what a replica carries within a TTFT SLO depends
// on the requests (long prompts' prefills queue behind each other at a fraction of the token
// work short chat runs at). The token work per request served is averaged over the windows
// learnt from (requestWork); a window that misses with requests sloMixChange times as heavy or
// more (a tenant with long prompts come in) learns as a first window does: C at its bound (never
// above where it was), without the floor, ceiling and latency floor the lighter mix proved; one
// that holds with margin with requests sloMixChange times as light or more (the long prompts
// gone) likewise: C up in proportion to how many times lighter they are, to sloPrior at most,
// and at least what the replicas carried over sloShare (never below where it was), without what
// the heavier mix proved.
//
// The proposal is ceil(load / (sloShare x C)) with the tolerance, raised along a rising trend
// beyond the tolerance as a prometheus metric is (spec.autoscaling.projectionHorizon), never
// below the replicas of the load projected along a rising trend (projectSLO), and raised by the
// fast path: when
// the requests queue (SLOQueuedPerReplica or more per Ready replica), the replicas are beyond
// capacity now and the load read (the tokens served) is not the load arriving; the proposal is
// then at least the Ready replicas times 1 + queued/(sloQueueRef x Ready), up to twice them;
// but a queue that shrinks is a backlog on the pods it queued on, which new pods cannot take:
// it holds Current where pods are starting or the backlog is gone within a cold start. While
// requests queue, or a backlog drains, the load read is what the Ready replicas serve: no trend
// of it is projected, and a window's p95 TTFT (the backlog's wait) teaches nothing.
//
// The burst memory: a burst's load arriving (the fast path's arrival rate, in token work) is
// kept, the highest seen, fading by half every sloFloorHalfLife; while anything is served, the
// proposal is at least the replicas that carry it at C (its edge: a burst is short). A burst
// seen is taken to come again: a fleet sized on the minute's average between bursts met a 3x
// spike every 12 minutes with a third of what it needed, missing 4 minutes each time, and no
// pod asked for when the queue shows serves before a short spike is over. A burst whose load is
// still there a cold start after it was seen is a level the fleet follows (a flash crowd), and
// is forgotten: held for the half hour after it, the crowd's fleet cost 1.80x the optimum's
// GPU-hours where 1.58x followed it.
// Decide's cold-start rule keeps this from cascading while the new pods load (a proposal not
// above Current holds), and its scale-down window keeps the replicas after the burst; not a
// count made while a queue was kept in status, once none is and a window holds the SLO with
// margin (Recommendation.Queued): that count was the queue's.
//
// The batch guard, when the engine's batch limit is known (Input.BatchLimit): the requests
// running per Ready replica over the limit count as one more latency ratio for learning (above
// sloMargin no probe), and the proposal is at least the replicas that keep them at sloShare of
// the limit (batchNeed). Requests beyond the limit queue, a cliff no latency shows before. The
// KV guard likewise, on the KV cache's use (Input.KVCacheUsage; kvNeed): a full cache is the
// same cliff for requests whose sequences fill it before the batch.
const (
	// MetricSLO names the slo's proposal and its learnt capacity.
	MetricSLO = "slo"
	// SLOQueuedPerReplica is the requests queued per Ready replica from which the replicas are
	// beyond capacity (a miss for learning, the fast path for the proposal).
	SLOQueuedPerReplica = 1.0

	sloShare           = 0.85
	sloMargin          = 0.6
	sloNear            = 0.7
	sloProbe           = 0.05
	sloProbeCeiling    = 1.35
	sloFloorHalfLife   = 30 * time.Minute
	sloCeilingDoubling = time.Hour
	// sloLight is the share of the load per replica of the last miss at or below which a load
	// is light: its latencies are the requests' own. (Not the ceiling's: it doubles every hour
	// without a miss, and would soon call light the load a fleet runs at.) Below sloShare, the
	// share a fleet runs at once C is near the miss's load, so that a tight window there still
	// teaches; at 0.5, a long-prompt workload's fleet, run at 0.6-0.7 of its last miss's load
	// with a p95 TTFT of 0.6-0.95 of the SLO whatever its size, read every window as tight and
	// brought C down at each (0.14 -> 0.077 in an hour, at maxReplicas, where the optimum runs
	// 5-9 replicas): 1.67x the optimum's GPU-hours, 1.54x at 0.7.
	sloLight = 0.7
	// sloFloorHeadroom is the share of the headroom above the latencies' floor that counts as
	// a margin, where that is more than sloMargin of the SLO.
	sloFloorHeadroom = 0.5
	// sloFloorRise is how far a light window's latency above the latencies' floor raises it.
	sloFloorRise = 0.25
	sloQueueRef  = 8.0
	sloMaxFast   = 2.0
	// sloBacklogWindows is how many serving windows the last queue seen is kept once it is
	// gone: its last requests are served within a pass, and the window read then ends a window
	// later.
	sloBacklogWindows = 2
	// sloBurstMemory is the burst memory's half-life where spec.autoscaling.slo.burstMemory is
	// unset: the floor's.
	sloBurstMemory = sloFloorHalfLife
	// sloMixChange is how many times heavier than the average of the windows learnt from the
	// requests of a window that misses must be for the capacity to be learnt again (see
	// requestWork); sloMixWeight is a window's weight in that average, so that a mix drifting
	// slowly (a few percent a minute) is followed by the learning as any load is; and
	// sloMixRequests the requests a window must have finished to weigh them.
	sloMixChange   = 1.5
	sloMixWeight   = 0.25
	sloMixRequests = 20
	// sloPrior is the least the first window held with margin seeds C at: half a nominal
	// replica's work (the rates the token work's query assumes: 1 is one GPU's time), below
	// what a replica of the nominal GPU carries within the default presets' SLO on the shipped
	// chat trace (about 0.6).
	sloPrior = 0.5
	// sloReseed is how many times the capacity the load per replica must reach, before any miss,
	// to seed it again (the fast path's own bound on a pass's growth).
	sloReseed = sloMaxFast
)

// sloSpec is the resolved SLO, in seconds (0: not set), and the burst memory's half-life (0:
// off).
type sloSpec struct {
	ttft, itl   float64
	burstMemory time.Duration
}

func resolveSLO(spec *v1alpha1.LatencySLO) (sloSpec, bool) {
	if spec == nil {
		return sloSpec{}, false
	}
	s := sloSpec{burstMemory: sloBurstMemory}
	if spec.BurstMemory != nil {
		s.burstMemory = max(spec.BurstMemory.Duration, 0)
	}
	if spec.TTFTP95 != nil && spec.TTFTP95.Duration > 0 {
		s.ttft = spec.TTFTP95.Duration.Seconds()
	}
	if spec.ITLP95 != nil && spec.ITLP95.Duration > 0 {
		s.itl = spec.ITLP95.Duration.Seconds()
	}
	return s, s.ttft > 0 || s.itl > 0
}

// latencyRatio is the worst of the p95 latencies over their SLO, the TTFT left out unless
// withTTFT; false when a latency the SLO states (and judged) has no usable value.
func (s sloSpec) latencyRatio(in Input, withTTFT bool) (float64, bool) {
	r := 0.0
	for i, x := range []struct {
		slo float64
		o   Observation
	}{{s.ttft, in.TTFTP95}, {s.itl, in.ITLP95}} {
		if x.slo <= 0 || (i == 0 && !withTTFT) {
			continue
		}
		if !usable(x.o) {
			return 0, false
		}
		r = max(r, x.o.Value/x.slo)
	}
	return r, true
}

// sloState is the slo's learnt capacity (C) and floor.
type sloState struct {
	capacity, floor float64
	ceiling         float64 // 0: none
	latFloor        float64 // 0: none (see overFloor)
	missLoad        float64 // u of the last miss, 0: none (light loads are below sloLight of it)
	burst           float64 // the highest load seen arriving in a burst, at burstAt; 0: none
	burstAt         time.Time
	reqWork         float64 // the token work per request served, averaged over the windows learnt from; 0: none
	samples         int32
	last            time.Time
	revision        string
	known           bool
}

func sloStateOf(prev []v1alpha1.LearnedCapacity, revision string) sloState {
	for _, c := range prev {
		if c.Metric != MetricSLO {
			continue
		}
		v, ok := learntValue(c)
		if !ok {
			return sloState{}
		}
		st := sloState{capacity: v, samples: c.Samples, last: c.LastSampleTime.Time, revision: c.Revision, known: true}
		st.floor = min(positive(c.Floor), v)
		st.ceiling, st.missLoad = positive(c.Ceiling), positive(c.LastMissLoad)
		if b := positive(c.BurstLoad); b > 0 && c.BurstTime != nil {
			st.burst, st.burstAt = b, c.BurstTime.Time
		}
		st.reqWork = positive(c.RequestWork)
		if f := positive(c.LatencyFloor); f < 1 {
			st.latFloor = f
		}
		if revision != "" && c.Revision != "" && c.Revision != revision {
			// Another revision's capacity: the starting point, not a proof. (The burst memory
			// and the requests' work are the traffic's, and stay.)
			st.unproven()
			st.revision = revision
		}
		return st
	}
	return sloState{revision: revision}
}

// unproven forgets what the windows learnt from proved (the floor, the ceiling, the latency
// floor, the last miss's load, the samples): the capacity is kept as a starting point, and the
// burst memory and the requests' work, the traffic's, stay.
func (st *sloState) unproven() {
	st.floor, st.ceiling, st.latFloor, st.missLoad, st.samples, st.last = 0, 0, 0, 0, 0, time.Time{}
}

func (st sloState) status() v1alpha1.LearnedCapacity {
	c := v1alpha1.LearnedCapacity{Metric: MetricSLO, PerReplica: strconv.FormatFloat(st.capacity, 'g', 6, 64), Samples: st.samples,
		Revision: st.revision, LastSampleTime: metav1.NewTime(st.last)}
	c.Floor, c.Ceiling, c.LatencyFloor, c.LastMissLoad = optional(st.floor), optional(st.ceiling), optional(st.latFloor), optional(st.missLoad)
	c.RequestWork = optional(st.reqWork)
	if st.burst > 0 {
		c.BurstLoad, c.BurstTime = optional(st.burst), &metav1.Time{Time: st.burstAt}
	}
	return c
}

// positive reads an optional figure of the slo's status: 0 when empty, unreadable, not above 0
// or infinite.
func positive(s string) float64 {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && !math.IsInf(f, 0) {
		return f
	}
	return 0
}

// optional writes an optional figure of the slo's status: empty when 0 (none).
func optional(v float64) string {
	if v <= 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// overFloor is a window's worst latency ratio (p95 over SLO) as the learning judges it: where
// the latencies have a floor of their own, it counts the headroom above that floor. A p95 is
// partly the load (the queue, the batch a request shares) and partly the request itself: a
// prompt of 20,000 tokens takes over a second to prefill on an idle replica, so on a
// long-prompt workload the p95 TTFT is most of the SLO at any load, and a margin fixed at
// sloMargin of the SLO would never be seen: every window tight, the capacity brought down to
// the load per replica at each, the fleet grown for nothing to maxReplicas (measured: 2.0x the
// optimum's GPU-hours on such a workload). The floor (latFloor) is the low level of the ratios
// seen with each replica carrying a light load (at most sloLight of the last miss's: the
// lowest at once, a higher one raising it by sloFloorRise); a margin is then
// sloMargin of the SLO or, where more, half the headroom above the floor (the same on
// workloads whose floor is at most a fifth of the SLO), and the ratio is mapped so that this
// margin reads as sloMargin and the SLO as 1: a miss is a miss, and every rule below reads
// one scale.
func (st sloState) overFloor(lat float64) float64 {
	m := sloMargin
	if st.latFloor > 0 && st.latFloor < 1 {
		m = max(m, st.latFloor+sloFloorHeadroom*(1-st.latFloor))
	}
	if m <= sloMargin || lat >= 1 {
		return lat
	}
	if lat <= m {
		return lat * sloMargin / m
	}
	return sloMargin + (lat-m)*(1-sloMargin)/(1-m)
}

// ratio is the window's worst p95 latency over its SLO (lat; withTTFT as latencyRatio) and
// the ratio the learning reads (r): lat over the latencies' floor (overFloor), or the batch's
// share of the engine's batch limit, or the KV cache's use, where higher. The batch and the KV
// cache are judged as the latencies are: running requests at sloMargin of the limit, or a cache
// at sloMargin of full, are a window without margin (no probe), as a p95 at sloMargin of its SLO
// is. Running beyond the limit says the limit read is not the engine's (more engines than
// stated): at most a tight window, never a miss (a queue is what shows one); a full cache
// likewise. False without latencies.
func (st sloState) ratio(s sloSpec, in Input, withTTFT bool) (lat, r float64, ok bool) {
	if lat, ok = s.latencyRatio(in, withTTFT); !ok {
		return 0, 0, false
	}
	return lat, max(st.overFloor(lat), min(batchRatio(in), 1), min(kvRatio(in), 1)), true
}

// withMargin: the window holds the SLO with margin (ratio at most sloMargin), nothing queued.
func (s sloSpec) withMargin(in Input, st sloState) bool {
	_, r, ok := st.ratio(s, in, true)
	return ok && !queuedBeyond(in) && r <= sloMargin
}

// floorAt is the floor decayed to now.
func (st sloState) floorAt(now time.Time) float64 {
	if st.floor <= 0 || st.last.IsZero() || !now.After(st.last) {
		return st.floor
	}
	return st.floor * math.Exp2(-now.Sub(st.last).Seconds()/sloFloorHalfLife.Seconds())
}

// burstLoadAt is the burst's load faded to now (halved every half); 0 when none or the memory
// is off (half 0).
func (st sloState) burstLoadAt(now time.Time, half time.Duration) float64 {
	switch {
	case st.burst <= 0 || half <= 0:
		return 0
	case !now.After(st.burstAt):
		return st.burst
	}
	return st.burst * math.Exp2(-now.Sub(st.burstAt).Seconds()/half.Seconds())
}

// ceilingAt is the ceiling risen to now (doubling every sloCeilingDoubling); 0 when none.
func (st sloState) ceilingAt(now time.Time) float64 {
	if st.ceiling <= 0 || st.last.IsZero() || !now.After(st.last) {
		return st.ceiling
	}
	return st.ceiling * math.Exp2(now.Sub(st.last).Seconds()/sloCeilingDoubling.Seconds())
}

// learnSLO returns the slo's state after this pass (unchanged when nothing is learnt) and
// whether there is one to keep.
// cold is how long a new pod takes to serve (spec.autoscaling.projectionHorizon, else the
// window); interval is the evaluation interval (spec.autoscaling.interval, defaulted).
func learnSLO(s sloSpec, in Input, prev *v1alpha1.AutoscalingStatus, now time.Time, cold, interval time.Duration) (sloState, bool) {
	var learnt []v1alpha1.LearnedCapacity
	if prev != nil {
		learnt = prev.LearnedCapacities
	}
	st := sloStateOf(learnt, in.Revision)
	win := servingWindow(in.ServingWindow)
	if in.Ready <= 0 || in.BothColorsReady || !usable(in.Load) || in.Load.Value <= 0 {
		return st, st.known
	}
	if b, ok := arrivingLoad(in, now); ok && s.burstMemory > 0 && b > st.burstLoadAt(now, s.burstMemory) {
		st.burst, st.burstAt = b, now
	}
	if s.burstMemory <= 0 {
		st.burst, st.burstAt = 0, time.Time{} // the memory turned off
	}
	if in.Load.Filling {
		// A rate over a window the traffic has not filled reads its start, not its level (a
		// quarter of a steady load 15 s after it starts): a capacity seeded there is a
		// fraction of a replica's, and the window filling then asks for replicas in
		// proportion. The burst memory above is a ratio of two such rates, and a maximum.
		return st, st.known
	}
	queued := queuedBeyond(in)
	if since := now.Sub(st.burstAt); st.burst > 0 && since >= cold && since < cold+win && in.Load.Value >= sloShare*st.burst {
		// A cold start after it was seen the load is still the burst's: a level the fleet
		// follows (the pods asked for serve it), not a spike over before they could; nothing
		// to remember.
		st.burst, st.burstAt = 0, time.Time{}
	}
	// The queue shrank since a pass within the window (to nothing, maybe): the Ready replicas
	// serve more than arrives, and what queued is a backlog (left on the pods it queued on
	// while new ones started), not a load beyond their capacity.
	_, backlog := drainTime(in, now, win)
	// After a queue, a p95 TTFT longer than the window is its wait (the backlog's last
	// requests, served after the queue was last seen): the requests it measures arrived before
	// the window began, so it says nothing of the window's load (queueSample keeps the queue in
	// status while the windows read are that long).
	backlog = backlog || (!queued && in.Previous != nil && in.Previous.Queue != nil && waitedBeyond(in, win))
	// A window with requests queued, or a backlog draining, is judged on the queue and the
	// ITL: its p95 TTFT is mostly the queue's wait (minutes after a burst, until the last
	// request queued is served), whose ratio to the SLO says how long the queue was, not how
	// much a replica carries, and would cut the capacity to its lower bound.
	lat, r, ok := st.ratio(s, in, !queued && !backlog)
	if !ok {
		return st, st.known
	}
	if backlog && r <= 1 {
		// A backlog's wait is no lesson either way.
		return st, st.known
	}
	// What each replica carried in a window that held: with pods starting (the minutes a
	// fleet is short are those it scales up in, and those that teach most), some may have come
	// Ready within the window, so it is taken as load/Current, a bound below it (a starting pod
	// serves nothing, so the Ready ones carried at least that).
	carried := in.Load.Value / float64(max(in.Ready, in.Current))
	heldWithMargin := !queued && r <= sloMargin
	u := in.Load.Value / float64(in.Ready) // what each Ready replica carries
	if st.known && st.ceiling <= 0 && u > sloReseed*st.capacity {
		// Before any miss, C is only a bound below: the fleet taken as rightly sized at the
		// seed, then what windows held with margin, probed; it says nothing of loads far above
		// those. Seeded at a light load (a smoke test's requests before the traffic), it sized
		// the traffic's first load, 800 times larger and queued, at 1,784 replicas on the real
		// bench. A load per Ready replica beyond sloReseed times C that misses seeds C again
		// from this pass, as a first window would (the burst memory, the traffic's, stays); one
		// that holds shows the Ready replicas carry it, C at least u: pods still starting
		// served none of it (taken over the replicas asked for, a seed at a light load on
		// minReplicas met a rise 5 times as large, on 2 Ready replicas of 4 asked for, as half
		// what each carried, and 13 replicas were asked for where the 2 held it at a p95 TTFT
		// of 0.1 s). Not after a scale-down within the window: pods gone served part of it.
		switch {
		case queued || r > 1:
			st = sloState{revision: st.revision, burst: st.burst, burstAt: st.burstAt}
		case steadyFor(prev, now, win):
			st.capacity = max(st.capacity, u)
		default:
			st.capacity = max(st.capacity, carried)
		}
	}
	if st.known && !st.last.IsZero() && now.Sub(st.last) < win {
		// One sample per window, but a window that holds with margin proves at every pass
		// that a replica carries its load: the capacity is at least that at once. Otherwise a
		// capacity seeded at a light load (a trace that starts, a rate over a window mostly
		// before it) would be stretched to a load many times larger, in as many replicas,
		// for a whole window. The floor is left to the window's sample: the highest of many
		// overlapping passes would ratchet it, as one odd minute must not.
		if heldWithMargin {
			st.capacity = max(st.capacity, carried)
		}
		return st, true
	}
	// Pods that came Ready within the window served part of it only: the load per Ready
	// replica then reads low, and a miss measured on the fewer replicas before them says
	// nothing of what each carries now (it would set a ceiling far below the capacity, and
	// stop the probing for an hour).
	recentUp := scaledUpWithin(prev, now, 2*win+cold)
	settled := in.Starting > 0 || !recentUp
	floor, ceiling := st.floorAt(now), st.ceilingAt(now)
	light := st.missLoad > 0 && u <= sloLight*st.missLoad
	if !queued && !recentUp && light {
		// A light load's latency: what a replica answers in whatever it carries; from a window
		// the same replicas served throughout, as the last miss's load (with pods come Ready
		// within it, u reads low, and a heavier load's latency would set the floor). A lower
		// one is the floor at once; a higher one raises it sloFloorRise of the way: the floor
		// is the light windows' low level, not the lowest ever seen (on long-context one window
		// of a few short prompts set it at 0.52 of the SLO where light windows read 0.8-0.9,
		// and the margin over it read every window at the real floor as tight: no probe, 1.67x
		// the optimum's GPU-hours; 1.64x risen, 1.51x with sloLight at 0.7). Only a window that
		// held raises it: a miss at a light load is no floor to read margins over.
		switch {
		case st.latFloor <= 0 || lat < st.latFloor:
			st.latFloor = lat
		case lat <= 1:
			st.latFloor += sloFloorRise * (lat - st.latFloor)
		}
	}
	miss := r > 1 || queued
	if miss && st.known && loadRose(prev, in.Load.Value, interval, win) {
		// The load read (a rate over the window) rose since the last pass by more than a
		// doubling of the load arriving adds to it in a pass: the load arriving at least
		// doubled within the window, whose average the rate is. The p95 is the requests' (most
		// of them came after the rise), the load per replica the window's average, a fraction
		// of what the replicas carried when they missed: taken as a lesson it set the ceiling
		// there. On a held-out workload whose
		// conversation traffic rose tenfold in a minute after 20 light ones, the first window
		// after the rise read 0.30 a replica at a p95 TTFT of 5 s, and C, held to that
		// ceiling, sized the traffic at twice the replicas the optimum ran (1.6x its
		// GPU-hours over the hour). The next windows, the rate caught up, teach.
		return st, st.known
	}
	work, weighed := requestWork(in, win)
	mixed := miss && settled && st.known && weighed && st.reqWork > 0 && work >= sloMixChange*st.reqWork
	if mixed {
		// Requests heavier than those the capacity was learnt on (a tenant with long prompts
		// come in): a replica carries less token work within the SLO, and the floor (a load
		// held with margin), the ceiling and the latencies' own floor were proven on the
		// lighter mix. C goes to the window's bound at once, not halfway (measured on a
		// held-out two-tenant workload: halfway, the fleet asked for during the cold start
		// was two thirds of what the new mix needed, and its backlog drained two minutes
		// longer); the window's load per replica is the new mix's last miss, from which a
		// light load's latency (the new requests' own, see overFloor) is told.
		st.unproven()
		st.reqWork, st.missLoad = work, u
		floor, ceiling, light = 0, 0, false
	}
	// Requests lighter than those the capacity was learnt on (the long-prompt tenant gone,
	// short chat come in), in a window that holds with margin: a replica carries more token work
	// within the SLO, and the ceiling (a miss), the floor and the latencies' own floor were
	// proven on the heavier mix, where the capacity is a fraction of the lighter mix's. The
	// window is learnt as a first window is: C goes up as many times as the requests are
	// lighter (a replica carries as many of them a second), to sloPrior at most, and to at
	// least what the replicas carried over sloShare; never lowered. Held to the heavier mix's
	// ceiling, the probes take C up by 5-10% a window: on a held-out workload of long prompts
	// for 25 minutes then short chat, a C of 0.15 learnt on the long prompts sized the chat's
	// token work at 28 replicas where 4 held it, and 19 were still running 25 minutes later
	// (3.0x the optimum's GPU-hours). Not at once to sloPrior: on another, very long prompts
	// then long ones 3x lighter, C 0.05 -> 0.5 sized the long prompts at 5 replicas where 7-8
	// were needed (4 minutes missed); 0.15 met every minute the optimum met.
	lighter := heldWithMargin && st.known && weighed && st.reqWork > 0 && sloMixChange*work <= st.reqWork
	lightened := 1.0 // how many times lighter the requests are
	if lighter {
		lightened = st.reqWork / work
		st.unproven()
		st.reqWork = work
		floor, ceiling = 0, 0
	}
	switch {
	case miss && !settled:
		return st, st.known
	case miss && u < floor:
		// Replicas carried more than this, holding the SLO with margin, within the floor's
		// half-life: the miss is not the load's (a few requests' own latencies, the tail of
		// the traffic that just stopped, a spike inside the window). Taken as a capacity,
		// it set the ceiling at a twenty-fifth of the floor on a workload whose traffic stops
		// for 5 minutes in 15 (the last window before the idle: a handful of requests, a p95
		// TTFT of 3.4 s at 0.019 a replica), and C, held to the ceiling, fell with the floor's
		// decay for the rest of the hour: 2.2x the optimum's GPU-hours. (A heavier mix, which
		// a replica carries less of, is learnt above: its window has no floor.)
		return st, st.known
	case miss:
		factor := 1.0
		if r > 1 {
			factor = 1 / r
		}
		if queued {
			factor = min(factor, queueFactor)
		}
		bound := u * max(factor, 0.5)
		if !recentUp {
			// What a replica carried when it missed, from a window the same replicas served
			// throughout: with new pods come Ready within it, u reads low, and a low figure
			// would leave no load light.
			st.missLoad = u
		}
		if ceiling <= 0 || u < ceiling {
			ceiling = u
		}
		switch {
		case !st.known:
			st.capacity = bound
		case mixed:
			st.capacity = min(st.capacity, bound)
		case bound < st.capacity && u <= st.capacity:
			// A miss at a load per Ready replica beyond C is what C says (the count it asks
			// for answers it); one at a load C says a replica carries is the lesson. On the
			// real bench a doubled load on the 3 Ready replicas of 5 asked for (1.14 each on
			// C 0.833, a p95 TTFT of 3-6 s while the new pods loaded) took C to 0.66 and the
			// fleet to 7 where 5-6 held it (held out, spike30s: 1.61x -> 1.29x the optimum's
			// GPU-hours at equal SLO minutes).
			st.capacity = max(min(st.capacity+learnWeight*(bound-st.capacity), ceiling), floor)
		}
	default:
		// Held (not queued: a queue is a miss), each replica carrying what it carried (at
		// least carried, at most u).
		if heldWithMargin {
			// Held with margin: a replica carried that. A window that held only just (a burst
			// that happened to miss it) is no proof that the next one holds at it.
			floor = max(floor, carried)
		}
		// What each replica Ready through the window carried (for a tight window, below).
		through := in.Load.Value / readyOverWindow(in)
		switch {
		case lighter:
			st.capacity = max(st.capacity, carried/sloShare, min(sloPrior, st.capacity*lightened))
		case !st.known && heldWithMargin:
			st.capacity = max(carried/sloShare, sloPrior)
		case !st.known:
			st.capacity = carried / sloShare
		case r <= sloMargin && (carried >= sloNear*st.capacity || in.Load.Value/(sloShare*st.capacity) > float64(in.Ready-1)) && steadyFor(prev, now, win):
			step := sloProbe
			if r <= sloMargin/4 {
				step *= 2 // far from the SLO: a bolder step
			}
			before := st.capacity
			st.capacity *= 1 + step
			if floor > 0 {
				limit := sloProbeCeiling * floor
				if ceiling <= 0 && in.Ready > 1 {
					// Never seen beyond capacity: a probe may take one replica off even where
					// that is more than the limit (at 7 replicas or fewer it always is, and a
					// small fleet could never probe); the miss it may meet sets the ceiling
					// that holds every later probe within the limit.
					limit = max(limit, in.Load.Value/(sloShare*float64(in.Ready-1)))
				}
				// The limit holds a probe back; it never brings C below where it was: a C
				// above it came from the prior or a miss's bound, and a floor proven at a
				// light load is no bound above (held out, a 30 s spike's miss left C at 0.41,
				// and the window held after it, at half that a replica, took it to 1.35 times
				// that light floor, 0.21, doubling the fleet for the next half hour).
				st.capacity = min(st.capacity, max(limit, before))
			}
			if ceiling > 0 {
				st.capacity = max(min(st.capacity, ceiling), floor)
			}
		case r > sloMargin && !light && through >= floor*lighterBy(st.reqWork, work, weighed):
			// Held, but tightly: the replicas are at the edge, so they are sized for what
			// they carried (u, the load over the Ready replicas, which carried it: over the
			// replicas asked for, each scale-up would lower the next window's figure, and C
			// with it). Probing stops here and C comes back to what was seen to hold: u at
			// sloShare of C, the share the fleet is sized at, or the floor when a window with
			// margin proved more. (C at u itself sized the fleet for less than it had just
			// held: each tight window asked for more replicas, whose lower load per replica
			// the next tight window took as C again; on a long-prompt workload, whose p95
			// TTFT is most of the SLO at any load, C halved in 30 minutes while the latency
			// did not move.)
			//
			// The load per replica is over the replicas Ready through the window (pods come
			// Ready within it served part of it only): over those Ready now, a window read
			// partly on fewer replicas took C to a load they never carried (azure-conv on
			// 1.3x GPUs: 26 Ready where 22 served half the window, C 0.70 -> 0.59).
			//
			// Not at a load per replica below the floor: replicas carried more than this with
			// margin within its half-life, and the tight p95 is the traffic's (a burst inside
			// the window), as a miss there is (above). Taken as the edge on a held-out
			// self-exciting workload (each request bringing 0.7 more within 5 s; a p95 TTFT
			// moving 0.7-1.9 s with the bursts whatever the count), each tight window took C
			// to the load per replica of the moment, the floor decaying under it: 0.55 -> 0.40
			// with no miss, 6-7 replicas where 4 met every minute. The floor is read in the
			// window's requests (lighterBy): on requests heavier than those it was proven on a
			// replica carries less token work, and a mix growing slowly heavier (prompts 8x
			// longer over an hour, held out) is met by tight windows before any miss.
			st.capacity = min(st.capacity, max(floor, through/sloShare))
		}
		st.capacity = max(st.capacity, floor)
	}
	st.floor, st.ceiling = min(floor, st.capacity), ceiling
	if weighed {
		if st.reqWork > 0 {
			work = st.reqWork + sloMixWeight*(work-st.reqWork)
		}
		st.reqWork = work
	}
	st.samples++
	st.last, st.revision, st.known = now, in.Revision, true
	return st, true
}

// lighterBy is how many times lighter than the requests the capacity was learnt on (reqWork,
// the token work per request averaged) the window's (work) are, at most 1: a load per replica
// proven on the average mix is worth that share of it on heavier requests. 1 when either is
// unknown.
func lighterBy(reqWork, work float64, weighed bool) float64 {
	if !weighed || reqWork <= 0 || work <= reqWork {
		return 1
	}
	return reqWork / work
}

// loadRose: the slo's load read now is more than the previous pass's
// (status.autoscaling.proposals[metric=slo].value) by more than a doubling of the load arriving
// adds to a rate over the serving window win in one evaluation interval (the signals are read
// once an interval): 1 + interval/win, a quarter at the default 15 s over a minute; twice when
// the interval is the window.
func loadRose(prev *v1alpha1.AutoscalingStatus, load float64, interval, win time.Duration) bool {
	if prev == nil {
		return false
	}
	rise := 1 + min(interval, win).Seconds()/win.Seconds()
	for _, p := range prev.Proposals {
		if p.Metric != MetricSLO {
			continue
		}
		v, err := strconv.ParseFloat(p.Value, 64)
		return err == nil && v > 0 && load > rise*v
	}
	return false
}

// requestWork is the token work per request served over the window (the load over the
// requests finished per second), false with fewer than sloMixRequests finished in it (a few
// long requests say nothing of the mix) or a signal missing.
func requestWork(in Input, win time.Duration) (float64, bool) {
	if !usable(in.Served) || !usable(in.Load) || in.Served.Value*win.Seconds() < sloMixRequests || !(in.Load.Value > 0) {
		return 0, false
	}
	return in.Load.Value / in.Served.Value, true
}

// queuedBeyond: at least SLOQueuedPerReplica requests queued per Ready replica (the replicas
// are beyond capacity now).
func queuedBeyond(in Input) bool {
	return usable(in.RequestsWaiting) && in.Ready > 0 && in.RequestsWaiting.Value/float64(in.Ready) >= SLOQueuedPerReplica
}

// drainTime is how long the requests queued now take to drain at the rate the queue shrank
// since the last pass that saw one (status.autoscaling.queue, kept sloBacklogWindows: once the
// queue is gone, the windows' latencies are still the backlog's); 0 when none is left. False
// when it did not shrink: no backlog draining.
func drainTime(in Input, now time.Time, win time.Duration) (time.Duration, bool) {
	if in.Previous == nil || in.Previous.Queue == nil || !usable(in.RequestsWaiting) {
		return 0, false
	}
	win = servingWindow(win)
	q := in.Previous.Queue
	dt := now.Sub(q.At.Time)
	shrunk := float64(q.Requests) - in.RequestsWaiting.Value
	if dt <= 0 || dt >= sloBacklogWindows*win || !(shrunk > 0) {
		return 0, false
	}
	return time.Duration(in.RequestsWaiting.Value / shrunk * float64(dt)), true
}

// readyGrewSinceQueue: more replicas are Ready than when status.autoscaling.queue was read.
func readyGrewSinceQueue(in Input) bool {
	q := in.Previous
	return q != nil && q.Queue != nil && q.Queue.Ready > 0 && in.Ready > q.Queue.Ready
}

// readyOverWindow is the Ready replicas averaged over the serving window, at most Ready (a pod
// gone within it is not counted), Ready where unknown.
func readyOverWindow(in Input) float64 {
	if r := in.ReadyOverWindow; r > 0 && r < float64(in.Ready) {
		return r
	}
	return float64(in.Ready)
}

// scaledUpWithin: a scale-up within d before now (its pods may have come Ready since).
func scaledUpWithin(prev *v1alpha1.AutoscalingStatus, now time.Time, d time.Duration) bool {
	if prev == nil {
		return false
	}
	for _, e := range prev.Events {
		if e.To > e.From && now.Sub(e.At.Time) < d {
			return true
		}
	}
	return false
}

// servingWindow is the serving window, a minute where none is known.
func servingWindow(win time.Duration) time.Duration {
	if win <= 0 {
		return time.Minute
	}
	return win
}

// sloColdStart is the time a new pod takes to serve, as the slo assumes it: the projection
// horizon, else the serving window.
func (s settings) sloColdStart(win time.Duration) time.Duration {
	return max(s.projectionHorizon, servingWindow(win))
}

// sloMemory is how long the slo needs the scale events kept: a cold start and two windows
// (the window the latencies were measured over may have ended a window ago).
func (s settings) sloMemory(win time.Duration) time.Duration {
	return 2*servingWindow(win) + s.sloColdStart(win)
}

// steadyFor: no scale-down within the last window, so the window's latencies were not
// measured on more replicas than serve now (after a scale-up they were measured on fewer, which
// only makes them worse, and Ready pods equal to Current says the new ones serve).
func steadyFor(prev *v1alpha1.AutoscalingStatus, now time.Time, win time.Duration) bool {
	if prev == nil {
		return true
	}
	for _, e := range prev.Events {
		if e.To < e.From && now.Sub(e.At.Time) < win {
			return false
		}
	}
	return true
}

// proposeSLO is the slo's proposal on the learnt state: the replicas for the load at sloShare
// of the capacity, projected along a rising trend, at least the fast path's when requests
// queue. Without a capacity yet (no window with load) it holds Current.
func (s settings) proposeSLO(in Input, cur int32, st sloState, known bool, now time.Time) (v1alpha1.Proposal, bool) {
	p := v1alpha1.Proposal{Metric: MetricSLO}
	o := in.Load
	switch {
	case o.Status != sample.OK:
		p.Message = "token work: " + string(o.Status)
		if o.Message != "" {
			p.Message += ": " + o.Message
		}
		return p, false
	case !usable(o):
		p.Value = fmtNum(o.Value)
		p.Message = "token work is not a finite non-negative number"
		return p, false
	}
	p.Value = fmtNum(o.Value)
	queued := queuedBeyond(in)
	drain, backlog := drainTime(in, now, in.ServingWindow)
	var n int32
	if !known || !(st.capacity > 0) {
		n, p.Message = cur, "no capacity learnt yet: holding"
		if o.Filling {
			p.Message = "no capacity learnt yet (the token work's window is still filling): holding"
		}
	} else {
		tgt := sloShare * st.capacity
		p.Target = fmt.Sprintf("%s (%s%% of %s learnt to hold the SLO)", fmtNum(tgt), fmtNum(100*sloShare), fmtNum(st.capacity))
		n, p.Message, _ = replicas(total, o, tgt, s.tolerance, cur, in.Ready)
		if !queued && !backlog {
			// While requests queue, or a backlog drains, the load read (the tokens served) is
			// what the Ready replicas serve, not what arrives: its rise is the new pods' coming
			// Ready, no trend to project (the fast path sizes a burst).
			n, p.Message = s.projectSLO(o, tgt, cur, n, p.Message)
		}
	}
	if b := st.burstLoadAt(now, s.slo.burstMemory); known && st.capacity > 0 && b > 0 && o.Value > 0 {
		// The replicas that carry the burst seen, at the capacity (its edge: a burst is short);
		// not while nothing is served (an idle fleet goes to minReplicas as before).
		if need := ceil(b / st.capacity); need > n {
			n = need
			p.Message = fmt.Sprintf("%s %s arriving %s ago (%s now, fading by half every %s): %d carry it at %s",
				burstPrefix, fmtNum(st.burst), now.Sub(st.burstAt).Round(time.Second), fmtNum(b), s.slo.burstMemory, need, fmtNum(st.capacity))
		}
	}
	if need, ok := batchNeed(in); ok && need > n {
		n = need
		p.Message = fmt.Sprintf("%s %s requests running on %d Ready replicas of batch limit %d: %d keep them within %s%% of it",
			batchPrefix, fmtNum(in.RequestsRunning.Value), in.Ready, in.BatchLimit, need, fmtNum(100*sloShare))
	}
	if need, ok := kvNeed(in); ok && need > n {
		n = need
		p.Message = fmt.Sprintf("%s %s%% used on %d Ready replicas: %d keep it within %s%%",
			kvPrefix, fmtNum(100*in.KVCacheUsage.Value), in.Ready, need, fmtNum(100*sloShare))
	}
	if w := in.RequestsWaiting; queued {
		fast, msg, ok := s.arrivalNeed(in, st, known, now)
		switch {
		case !ok && (readyGrewSinceQueue(in) || backlog && (cur > in.Ready || drain <= s.sloColdStart(in.ServingWindow))):
			// A queue that shrinks is no burst: the Ready replicas serve more than arrives, and
			// what queues is a backlog on the pods it queued on, which new pods cannot take.
			// Pods asked now would serve after the pods starting already, or after it is gone;
			// only a backlog draining slower on a fleet that has all it asked for takes the
			// doubling (new pods take the arrivals off the pods it is on). Nor is a queue last
			// read on fewer Ready replicas: what it did since says nothing of the drain on the
			// replicas that serve now, and the next pass reads it on them. (On the real bench a
			// step's 86 requests queued on 2 Ready replicas had shrunk by one 9 s later, across
			// 4 pods coming Ready: read as a backlog draining slower than a cold start, the
			// doubling took 6 replicas to 8, then to maxReplicas.)
			fast = cur
		case !ok:
			factor := min(1+w.Value/(sloQueueRef*float64(in.Ready)), sloMaxFast)
			fast = max(ceil(float64(in.Ready)*factor), in.Ready+1)
			msg = fmt.Sprintf("%s %s requests queued on %d Ready replicas: %d at once", fastPrefix, fmtNum(w.Value), in.Ready, fast)
		default:
			fast = max(fast, in.Ready+1)
		}
		if fast > n {
			n, p.Message = fast, msg
		}
		if n < cur {
			n = cur // never below Current while requests queue
		}
	}
	p.Replicas = &n
	return p, true
}

// arrivalNeed is the fast path sized on the rate arriving, when a burst is on: the queue grew
// since the last pass (status.autoscaling.queue) by at least SLOQueuedPerReplica per Ready
// replica. The requests arriving per second are those served (Input.Served) plus the queue's
// growth per second; the fleet is sized at once for them plus the queue drained within a cold
// start (sloColdStart, the projection horizon), each request counted at the token work the
// served ones carry (Load / Served), per replica at sloShare of the learnt capacity (the
// proposal's own target), or, before one is learnt, at what each Ready replica serves now (it
// serves at its throughput: requests queue). A queue that holds or shrinks is no burst (the
// served rate is then the rate arriving, and the proposal's own count follows it), nor is a
// queue sample older than the serving window (a controller that was down). False when it does
// not apply or a signal is missing: the fast path then doubles the Ready replicas at most.
func (s settings) arrivalNeed(in Input, st sloState, known bool, now time.Time) (int32, string, bool) {
	growth, arriving, ok := arrival(in, now)
	if !ok {
		return 0, "", false
	}
	w, served, load := in.RequestsWaiting, in.Served, in.Load
	cold := s.sloColdStart(in.ServingWindow)
	// Each engine queues its own requests: new pods cannot take them, so the queue drains at
	// most at the rate the Ready replicas serve, once the new ones carry what arrives.
	drain := min(w.Value/cold.Seconds(), served.Value)
	per := load.Value / float64(in.Ready)
	if known && st.capacity > 0 {
		per = sloShare * st.capacity
	}
	n := ceil(load.Value / served.Value * (arriving + drain) / per)
	return n, fmt.Sprintf("%s %s requests queued on %d Ready replicas, growing %s/s over %s/s served: %d for %s/s arriving and the queue drained within %s",
		fastPrefix, fmtNum(w.Value), in.Ready, fmtNum(growth), fmtNum(served.Value), n, fmtNum(arriving), cold), true
}

// arrival is a burst's queue growth and requests arriving per second (served plus the
// growth), when one is on (see arrivalNeed); false otherwise.
func arrival(in Input, now time.Time) (growth, arriving float64, ok bool) {
	w, served, load := in.RequestsWaiting, in.Served, in.Load
	if in.Previous == nil || in.Previous.Queue == nil || !usable(w) || !usable(served) || !(served.Value > 0) || !usable(load) || !(load.Value > 0) || in.Ready <= 0 {
		return 0, 0, false
	}
	dt := now.Sub(in.Previous.Queue.At.Time)
	win := servingWindow(in.ServingWindow)
	grown := w.Value - float64(in.Previous.Queue.Requests)
	if dt <= 0 || dt > win || grown < SLOQueuedPerReplica*float64(in.Ready) {
		return 0, 0, false
	}
	// The queue is a gauge read at each scrape: two passes closer than a scrape interval (a
	// pass follows any change to the ModelServer or its pods) can read a whole scrape's growth
	// in a few seconds. It is read over at least the shortest scrape interval the window allows
	// (a window spans at least window.ScrapesPerWindow of them).
	growth = grown / max(dt, win/window.ScrapesPerWindow).Seconds()
	return growth, served.Value + growth, true
}

// arrivingLoad is a burst's load arriving (token work): the requests arriving per second, each
// at the token work the served ones carry; false when no burst is on.
func arrivingLoad(in Input, now time.Time) (float64, bool) {
	_, arriving, ok := arrival(in, now)
	if !ok {
		return 0, false
	}
	return in.Load.Value / in.Served.Value * arriving, true
}

// queueSample is the queue to keep in status for the next pass's arrivalNeed and draining:
// this pass's total while requests queue; once none do, the last one seen for
// sloBacklogWindows serving windows (the windows' latencies are then the backlog's that
// drained), and after that while the window's p95 TTFT is at least the window (its requests
// still the backlog's), nil after that.
func queueSample(in Input, now time.Time) *v1alpha1.QueueSample {
	w := in.RequestsWaiting
	if !usable(w) || !(w.Value >= 1) {
		win := servingWindow(in.ServingWindow)
		if q := in.Previous; q != nil && q.Queue != nil && (now.Sub(q.Queue.At.Time) < sloBacklogWindows*win || waitedBeyond(in, win)) {
			return q.Queue
		}
		return nil
	}
	return &v1alpha1.QueueSample{At: metav1.NewTime(now), Requests: int64(math.Round(min(w.Value, math.MaxInt32))), Ready: in.Ready}
}

// waitedBeyond: the window's p95 TTFT is at least the window (its requests arrived before it
// began).
func waitedBeyond(in Input, win time.Duration) bool {
	return usable(in.TTFTP95) && in.TTFTP95.Value >= win.Seconds()
}

// fastPrefix starts the message of a proposal raised by the fast path, which cause repeats.
const fastPrefix = "fast path:"

// burstPrefix starts the message of a proposal raised by the burst memory, which cause repeats.
const burstPrefix = "burst memory:"

// batchPrefix starts the message of a proposal raised by the batch guard, which cause repeats.
const batchPrefix = "batch:"

// batchRatio is the requests running per Ready replica over the engine's batch limit; 0 when
// either is unknown.
func batchRatio(in Input) float64 {
	if in.BatchLimit <= 0 || in.Ready <= 0 || !usable(in.RequestsRunning) {
		return 0
	}
	return in.RequestsRunning.Value / float64(in.Ready) / float64(in.BatchLimit)
}

// batchNeed is the batch guard's count: the replicas that keep the requests running at
// sloShare of the batch limit, as the load is kept at sloShare of the capacity (requests
// beyond the limit queue, and the latencies show nothing before). Scaling up then starts
// before the batch is full, and a scale-down never fills it. False when the batch limit or
// the running requests are unknown, or nothing runs.
func batchNeed(in Input) (int32, bool) {
	if in.BatchLimit <= 0 || !usable(in.RequestsRunning) || !(in.RequestsRunning.Value > 0) {
		return 0, false
	}
	return ceil(in.RequestsRunning.Value / (sloShare * float64(in.BatchLimit))), true
}

// kvPrefix starts the message of a proposal raised by the KV guard, which cause repeats.
const kvPrefix = "kv cache:"

// kvRatio is the Ready pods' KV-cache use, 0..1; 0 when unknown.
func kvRatio(in Input) float64 {
	if in.Ready <= 0 || !usable(in.KVCacheUsage) || !(in.KVCacheUsage.Value > 0) {
		return 0
	}
	return in.KVCacheUsage.Value
}

// kvNeed is the KV guard's count: the replicas that keep the KV cache at sloShare of full, as
// the batch guard keeps the requests running within sloShare of the batch limit. Where the
// requests' sequences fill the cache before the batch (long outputs, long prompts) the engine
// admits nothing more at full, and requests queue with no latency rising before: on a held-out
// workload of reasoning requests (outputs of 1,500 tokens) whose rate rose over the hour, two
// replicas held a p95 TTFT of 0.2 s up to the minute their caches filled, and the 3 minutes of
// cold start that followed were missed (5 minutes, where HPA's GPU-70 missed none). The cache's
// use grows with the load per replica, and reads the cliff coming. False when the use is
// unknown or none.
func kvNeed(in Input) (int32, bool) {
	kv := kvRatio(in)
	if kv <= 0 {
		return 0, false
	}
	return ceil(float64(in.Ready) * kv / sloShare), true
}

// projectSLO is the slo's projection along a rising trend (spec.autoscaling.projectionHorizon,
// the cold start): the replicas for the load a horizon ahead. It raises the proposal when that
// load is beyond the tolerance of Current (project's rule, without which a flat trend's noise
// adds a replica that the next pass removes), and it keeps a scale-down from going below it:
// replicas removed now would be asked back within a cold start, two direction changes for none.
func (s settings) projectSLO(o Observation, tgt float64, cur, n int32, msg string) (int32, string) {
	if s.projectionHorizon <= 0 || !o.HasTrend || !(o.Trend > 0) || math.IsInf(o.Trend, 0) {
		return n, msg
	}
	ahead := o.Value + o.Trend*s.projectionHorizon.Seconds()
	if cur > 0 && ahead/(tgt*float64(cur))-1 > s.tolerance {
		return s.project(o, tgt, cur, n, msg)
	}
	if need := min(ceil(ahead/tgt), cur); need > n {
		return need, fmt.Sprintf("%s %s/s: %d needed in %s", risingPrefix, fmtNum(o.Trend), need, s.projectionHorizon)
	}
	return n, msg
}
