package rollout

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The simulation stands in for the controller and the cluster: it observes two Deployments,
// takes a measurement when MeasureDue says so, calls Next, applies the plans (a Deployment
// whose template changes loses its Ready pods, as with maxSurge 0) and lets pods come up.

// quality is how a revision behaves.
type quality int

const (
	good     quality = iota // mostly passes
	bad                     // mostly fails
	noData                  // mostly inconclusive
	broken                  // never Ready
	coldPods                // Ready but never warm
	silent                  // always inconclusive (no samples in the window)
)

func (q quality) String() string {
	return [...]string{"good", "bad", "noData", "broken", "coldPods", "silent"}[q]
}

type simDeployment struct {
	rev      string
	replicas int32
	// scheduled pods hold a GPU (starting or Ready); with a capacity, a pod waits for a free
	// one (Pending) before it can start.
	scheduled int32
	ready     int32
	warm      bool
	// warmPods passed the warm-up check: the Ready pods of the last time all were warm (pods
	// added since load their model), fewer as pods are lost.
	warmPods int32
}

type sim struct {
	ms      *v1alpha1.ModelServer
	now     time.Time
	start   time.Time
	specRev string
	total   int32
	op      Operation
	deps    map[v1alpha1.Color]*simDeployment
	quality map[string]quality
	nextRev int
	// capacity is the pods the cluster holds for both colors (0: unlimited; swap mode below).
	capacity int32
	// route is the HTTPRoute's acceptance by its Gateways ("" : no Gateway answered).
	route metav1.ConditionStatus
	// slowPods: a stable pod comes up in half the passes (a cold start of minutes), so that a
	// drain waits for the stable color's pods over several passes.
	slowPods bool
}

func newSim(ms *v1alpha1.ModelServer, total int32, q quality) *sim {
	s := &sim{ms: ms, now: t0, start: t0, total: total, deps: map[v1alpha1.Color]*simDeployment{}, quality: map[string]quality{}}
	s.newRevision(q)
	return s
}

func (s *sim) newRevision(q quality) {
	s.nextRev++
	s.specRev = fmt.Sprintf("r%d", s.nextRev)
	s.quality[s.specRev] = q
	s.ms.Generation++
}

func (s *sim) observe() Observation {
	o := Observation{Revision: s.specRev, Image: "vllm:" + s.specRev, DesiredReplicas: s.total, Colors: map[v1alpha1.Color]ColorObservation{}, Operation: s.op, Capacity: s.capacity, RouteAccepted: s.route}
	if s.route == metav1.ConditionFalse {
		o.RouteMessage = "parent gw did not accept the HTTPRoute: NotAllowedByListeners: no listener allows this route"
	}
	for c, d := range s.deps {
		co := ColorObservation{Exists: true, Revision: d.rev, Image: "vllm:" + d.rev, Replicas: d.replicas,
			ReadyReplicas: d.ready, AvailableReplicas: d.ready, UpdatedReplicas: d.replicas, Warm: d.warm}
		co.WarmPods = min(d.warmPods, d.ready)
		if d.warm {
			co.WarmPods = d.ready
		}
		o.Colors[c] = co
	}
	return o
}

// measure returns a measurement of the candidate shaped by its quality.
func (s *sim) measure(rng *rand.Rand) *Measurement {
	cand := s.ms.Status.Candidate
	q := s.quality[cand.Revision]
	n := rng.IntN(3) // 0 metrics: the controller signals "no metric configured" with no results
	if q == silent {
		return &Measurement{At: s.now, Results: results(s.now, inc)}
	}
	var vs []v1alpha1.Verdict
	for range n {
		r := rng.Float64()
		v := pass
		switch q {
		case good:
			if r < 0.05 {
				v = fail
			} else if r < 0.15 {
				v = inc
			}
		case bad:
			if r < 0.6 {
				v = fail
			} else if r < 0.7 {
				v = inc
			}
		case noData:
			if r < 0.8 {
				v = inc
			} else if r < 0.85 {
				v = fail
			}
		}
		vs = append(vs, v)
	}
	return &Measurement{At: s.now, Results: results(s.now, vs...)}
}

// apply sets each planned Deployment; a template change starts its pods afresh.
func (s *sim) apply(d Decision) {
	for c, p := range d.Plans {
		dep := s.deps[c]
		if dep == nil {
			dep = &simDeployment{}
			s.deps[c] = dep
		}
		if dep.rev != p.Revision {
			*dep = simDeployment{rev: p.Revision}
		}
		dep.replicas = p.Replicas
		dep.scheduled = min(dep.scheduled, dep.replicas)
		dep.ready = min(dep.ready, dep.replicas)
		dep.warmPods = min(dep.warmPods, dep.ready)
		if dep.ready == 0 {
			dep.warm = false
		}
		if dep.warm && dep.ready < dep.replicas {
			dep.warm = false // pods added for the next step load their model
		}
	}
	s.ms.Status = d.Status
	if !d.KeepOperation {
		s.op = OpNone
	}
}

// evolve lets pods come up (or crash) for elapsed time.
func (s *sim) evolve(rng *rand.Rand) {
	s.schedule()
	for _, c := range []v1alpha1.Color{blue, green} { // in order: a seed replays the same run
		d := s.deps[c]
		if d == nil {
			continue
		}
		q := s.quality[d.rev]
		if q == broken {
			d.ready = 0
			continue
		}
		if d.ready < d.scheduled && (!s.slowPods || !s.isStable(d.rev) || rng.IntN(2) == 0) {
			d.ready += min(int32(rng.IntN(3)), d.scheduled-d.ready)
		}
		if d.ready > 0 && rng.IntN(50) == 0 {
			d.ready-- // a pod crashed
		}
		d.warmPods = min(d.warmPods, d.ready)
		if d.ready == 0 {
			d.warm = false
		} else if q != coldPods && rng.IntN(2) == 0 {
			d.warm = true
		}
		if d.warm {
			d.warmPods = d.ready
		}
	}
}

// schedule gives pods GPUs: all of them without a capacity; with one, the free GPUs (the
// capacity less the pods already holding one) go to the pods still Pending, blue first.
func (s *sim) schedule() {
	var held int32
	for _, d := range s.deps {
		if s.capacity == 0 {
			d.scheduled = d.replicas
		}
		held += d.scheduled
	}
	for _, c := range []v1alpha1.Color{blue, green} {
		if d := s.deps[c]; d != nil && s.capacity > 0 {
			n := min(max(s.capacity-held, 0), d.replicas-d.scheduled)
			d.scheduled += n
			held += n
		}
	}
}

// isStable: rev is the stable revision.
func (s *sim) isStable(rev string) bool {
	st := s.ms.Status.Stable
	return st != nil && st.Revision == rev
}

// loseCandidatePods takes every Ready pod of the live candidate's color away (OOM, crash
// loop, node loss): they come back only through evolve.
func (s *sim) loseCandidatePods(crashLoop bool) bool {
	c := s.ms.Status.Candidate
	if c == nil {
		return false
	}
	d := s.deps[c.Color]
	if d == nil || d.rev != c.Revision || d.ready == 0 {
		return false
	}
	d.ready, d.warm, d.warmPods = 0, false, 0
	if crashLoop {
		s.quality[c.Revision] = broken
	}
	return true
}

// evolveSteady lets every Deployment come up by one pod per pass, warm once complete.
func (s *sim) evolveSteady() {
	s.schedule()
	for _, d := range s.deps {
		q := s.quality[d.rev]
		if q != broken && d.ready < d.scheduled {
			d.ready++
		}
		d.warm = d.ready > 0 && d.ready == d.replicas && q != coldPods && q != broken
		if d.warm {
			d.warmPods = d.ready
		}
	}
}

func planString(m map[v1alpha1.Color]ColorPlan) string {
	var parts []string
	for _, c := range []v1alpha1.Color{blue, green} {
		if p, ok := m[c]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s×%d", c, p.Revision, p.Replicas))
		}
	}
	return strings.Join(parts, " ")
}

// logLine is one readable line of a run.
func (s *sim) logLine(pass int, obs Observation, d Decision) string {
	return formatPass(pass, s.now, s.start, s.ms.Spec.Paused, obs, d)
}

func formatPass(pass int, now, start time.Time, paused bool, obs Observation, d Decision) string {
	var b strings.Builder
	st := d.Status
	fmt.Fprintf(&b, "%3d +%-7s spec=%s total=%d", pass, fmtDur(now.Sub(start)), obs.Revision, obs.DesiredReplicas)
	if paused {
		b.WriteString(" paused")
	}
	if obs.Operation != OpNone {
		fmt.Fprintf(&b, " op=%s", obs.Operation)
	}
	var ready []string
	for _, c := range []v1alpha1.Color{blue, green} {
		if o, ok := obs.Colors[c]; ok {
			w := ""
			if o.Warm {
				w = "w"
			}
			ready = append(ready, fmt.Sprintf("%s:%s %d/%d%s", c, o.Revision, o.ReadyReplicas, o.Replicas, w))
		}
	}
	if len(ready) > 0 {
		fmt.Fprintf(&b, " seen[%s]", strings.Join(ready, " "))
	}
	if m := obs.Measurement; m != nil {
		v, _ := Verdict(m.Results)
		fmt.Fprintf(&b, " measured=%s(%d)", v, len(m.Results))
	}
	fmt.Fprintf(&b, "\n    -> %s step=%d weights=%s plans[%s] requeue=%s", st.Phase, st.Rollout.Step, weightString(d.Weights), planString(d.Plans), fmtDur(d.RequeueAfter))
	if st.Rollout.Failures > 0 {
		fmt.Fprintf(&b, " failures=%d", st.Rollout.Failures)
	}
	if d.KeepOperation {
		b.WriteString(" keepOp")
	}
	for _, e := range d.Events {
		fmt.Fprintf(&b, "\n    event %s %s: %s", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

func weightString(w map[v1alpha1.Color]int32) string {
	keys := make([]string, 0, len(w))
	for c := range w {
		keys = append(keys, string(c))
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, w[v1alpha1.Color(k)])
	}
	return strings.Join(parts, ",")
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// candidateWeightOf is the candidate's weight in a decision's status (0 without candidate).
func candidateWeightOf(st v1alpha1.ModelServerStatus) int32 {
	if st.Candidate == nil {
		return 0
	}
	return st.Weights.Candidate
}
