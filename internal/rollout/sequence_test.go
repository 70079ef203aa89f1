package rollout

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// outcomes counts what the random runs went through, so that a run that never exercises a
// rule fails instead of passing vacuously.
type outcomes struct {
	promotions, rollbacks, aborts, supersedes, advances, inconclusiveHolds, pauses, keptOps, awaiting int
	// capped: passes where the candidate held less than its step because of its Ready pods;
	// drains: passes where a rolled-back candidate still held weight; unreadyRollbacks:
	// rollbacks at the progress deadline of a candidate below its step; routeHolds: passes held
	// by a rejected route; stalls: passes Stalled on inconclusive analysis.
	capped, drains, unreadyRollbacks, routeHolds, stalls int
	// supersedeDrains: passes where a superseded candidate still held weight.
	supersedeDrains int
	// drainedRollbacks: rollbacks (not aborts) that kept the candidate's pods for RollbackDrain.
	drainedRollbacks int
	// drainedSupersedes: passes where a superseded candidate at weight 0 kept its pods.
	drainedSupersedes int
}

func TestSequencesKeepInvariants(t *testing.T) {
	seeds, passes := 2000, 300
	if testing.Short() {
		seeds = 100
	}
	var total outcomes
	for seed := range seeds {
		var log passLog
		o, err := runRandom(uint64(seed), passes, &log)
		if err != nil {
			t.Fatalf("seed %d: %v\nlast passes:\n%s", seed, err, log.String())
		}
		total.promotions += o.promotions
		total.rollbacks += o.rollbacks
		total.aborts += o.aborts
		total.supersedes += o.supersedes
		total.advances += o.advances
		total.inconclusiveHolds += o.inconclusiveHolds
		total.pauses += o.pauses
		total.keptOps += o.keptOps
		total.awaiting += o.awaiting
		total.capped += o.capped
		total.drains += o.drains
		total.unreadyRollbacks += o.unreadyRollbacks
		total.routeHolds += o.routeHolds
		total.stalls += o.stalls
		total.supersedeDrains += o.supersedeDrains
		total.drainedRollbacks += o.drainedRollbacks
		total.drainedSupersedes += o.drainedSupersedes
	}
	t.Logf("outcomes over %d seeds: %+v", seeds, total)
	for name, n := range map[string]int{
		"promotions": total.promotions, "rollbacks": total.rollbacks, "aborts": total.aborts, "supersedes": total.supersedes,
		"advances": total.advances, "inconclusive holds": total.inconclusiveHolds, "pauses": total.pauses,
		"kept operations": total.keptOps, "awaiting promotion": total.awaiting,
		"capped weights": total.capped, "drains after rollback": total.drains, "rollbacks of an unready candidate": total.unreadyRollbacks,
		"route holds": total.routeHolds, "inconclusive stalls": total.stalls, "superseded candidates draining": total.supersedeDrains,
		"rollbacks draining the candidate's pods":                 total.drainedRollbacks,
		"superseded candidates' pods kept while the route drains": total.drainedSupersedes,
	} {
		if n < seeds/20 {
			t.Errorf("only %d %s over %d seeds: the random runs do not exercise this rule", n, name, seeds)
		}
	}
}

// runRandom drives one seeded scenario and returns the first broken invariant.
func runRandom(seed uint64, passes int, log *passLog) (outcomes, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	var o outcomes
	stepLists := [][]int32{{10, 25, 50, 100}, {10, 50, 100}, {100}, {5, 100}, {20, 40, 60, 80, 100}}
	ms := newModelServer(
		withSteps(stepLists[rng.IntN(len(stepLists))]...),
		withStepDuration(time.Duration(1+rng.IntN(3))*time.Minute),
		withInterval(time.Duration(15+15*rng.IntN(3))*time.Second),
		withFailureLimit(int32(rng.IntN(3))),
		withAutoPromote(rng.IntN(3) != 0),
	)
	if rng.IntN(2) == 0 {
		ms.Spec.Rollout.Inconclusive.RollbackAfter = &v1alpha1.Duration{Duration: time.Duration(2+rng.IntN(10)) * time.Minute}
	}
	if rng.IntN(2) == 0 {
		ms.Spec.Rollout.ProgressDeadline = v1alpha1.Duration{Duration: time.Duration(1+rng.IntN(4)) * time.Minute}
	}
	if rng.IntN(3) == 0 {
		ms.Spec.Rollout.Inconclusive.ReportAfter = v1alpha1.Duration{Duration: time.Duration(3+rng.IntN(4)) * time.Minute}
	}
	if rng.IntN(3) == 0 {
		ms.Spec.Rollout.LoadMatching = v1alpha1.LoadMatchingStablePods
	}
	pol := policyOf(ms)
	qualities := []quality{good, good, good, bad, noData, broken, coldPods, silent}
	s := newSim(ms, int32(1+rng.IntN(6)), good)
	if seed%3 == 0 {
		s.capacity = int32(3 + rng.IntN(8)) // GPUs for 3..10 pods: often too few for both colors
	}
	s.slowPods = seed%4 == 1
	failedInRollout := 0 // Fail verdicts judged for the current candidate

	drained := map[string]supersededAt{} // superseded candidates' revisions -> their weight's drop to 0
	var drainingSince time.Time          // since when a candidate the spec no longer asks for holds weight
	for pass := range passes {
		// The world changes.
		switch r := rng.IntN(100); {
		case r < 3:
			s.newRevision(qualities[rng.IntN(len(qualities))])
		case r < 4 && ms.Status.Stable != nil:
			s.specRev = ms.Status.Stable.Revision // revert the template
			s.ms.Generation++
		case r < 7:
			ms.Spec.Paused = !ms.Spec.Paused
		case r < 10:
			s.total = int32(rng.IntN(7))
		case r < 16:
			if c := ms.Status.Candidate; c != nil && c.Revision == s.specRev {
				s.op = []Operation{OpPromote, OpPromote, OpPromoteFull, OpAbort}[rng.IntN(4)]
			}
		case r < 18:
			s.route = []metav1.ConditionStatus{"", metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}[rng.IntN(4)]
		case r < 22:
			s.loseCandidatePods(rng.IntN(3) != 0)
		}
		obs := s.observe()
		if MeasureDue(ms, s.now) {
			obs.Measurement = s.measure(rng)
		}
		prev := ms.Status.DeepCopy()
		before := ms.DeepCopy()
		d := next(ms, obs, s.now)
		log.add(loggedPass{pass, s.now, s.start, ms.Spec.Paused, obs, d})
		if !reflect.DeepEqual(before, ms) {
			return o, fmt.Errorf("pass %d: Next modified its input", pass)
		}

		sameRollout := prev.Candidate != nil && prev.Candidate.Revision == obs.Revision && prev.Candidate.Revision != prev.Rollout.RolledBackRevision
		if !sameRollout {
			failedInRollout = 0
		}
		if m := obs.Measurement; m != nil && sameRollout && !ms.Spec.Paused && prev.Phase == v1alpha1.PhaseProgressing {
			if v, _ := Verdict(m.Results); v == v1alpha1.VerdictFail {
				failedInRollout++
			}
		}
		if err := checkPass(ms, pol, prev, obs, d, s.now, failedInRollout, &o); err != nil {
			return o, fmt.Errorf("pass %d: %w", pass, err)
		}
		if err := checkSupersedeDrain(prev, obs, d, s.now, drained, &o); err != nil {
			return o, fmt.Errorf("pass %d: %w", pass, err)
		}
		// Liveness: a candidate the spec no longer asks for (rolled back, aborted or
		// superseded) gives its weight back within drainLimit: the stable color's pods come up,
		// in swap mode on the GPUs the candidate frees.
		if st := d.Status; st.Candidate != nil && st.Weights.Candidate > 0 && (st.Phase == v1alpha1.PhaseRolledBack || st.Candidate.Revision != obs.Revision) {
			if drainingSince.IsZero() {
				drainingSince = s.now
			}
			if held := s.now.Sub(drainingSince); held > drainLimit {
				return o, fmt.Errorf("pass %d: candidate %s still holds %d%% after draining for %s", pass, st.Candidate.Revision, st.Weights.Candidate, held)
			}
		} else {
			drainingSince = time.Time{}
		}
		// An inconclusive measurement must not cause a step or a rollback.
		if m := obs.Measurement; m != nil {
			if v, _ := Verdict(m.Results); v == v1alpha1.VerdictInconclusive {
				without := obs
				without.Measurement = nil
				d0 := next(ms, without, s.now)
				if err := checkInconclusive(prev, d, d0); err != nil {
					return o, fmt.Errorf("pass %d: %w", pass, err)
				}
			}
		}

		s.apply(d)
		s.evolve(rng)
		step := []time.Duration{time.Second, 5 * time.Second, 20 * time.Second, time.Minute, 3 * time.Minute}[rng.IntN(5)]
		if d.RequeueAfter > 0 && rng.IntN(2) == 0 {
			step = d.RequeueAfter
		}
		s.now = s.now.Add(step)
	}
	return o, nil
}

// checkPass checks the invariants of one pass.
// checkContract: the Ready, Reconciling and Stalled conditions are those that the health
// contract (what kubectl wait, Flux, Argo CD and `kubectl modelship wait` read) states for the
// phase.
func checkContract(st v1alpha1.ModelServerStatus) error {
	if st.Phase == v1alpha1.PhaseHealthy && meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionReady) {
		// Scaling up: the revision serves everything but not all its replicas are available yet.
		if !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReconciling) || !meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionStalled) {
			return fmt.Errorf("phase Healthy with Ready False must be Reconciling and not Stalled: %v", st.Conditions)
		}
		return nil
	}
	want := phaseConditions(st.Phase, 0)
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); st.Phase == v1alpha1.PhaseProgressing && c != nil && c.Reason == v1alpha1.ReasonAnalysisInconclusive {
		if st.Rollout.InconclusiveSince == nil {
			return fmt.Errorf("stalled on inconclusive analysis without inconclusiveSince")
		}
		want = stalledProgressing(0)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); st.Phase == v1alpha1.PhaseProgressing && c != nil && c.Reason == v1alpha1.ReasonNoRoomForCandidate {
		want = stalledProgressing(0)
	}
	for _, want := range want {
		got := meta.FindStatusCondition(st.Conditions, want.Type)
		if got == nil || got.Status != want.Status {
			return fmt.Errorf("phase %s: %s is %v, the health contract says %s", st.Phase, want.Type, got, want.Status)
		}
	}
	return nil
}

func checkPass(ms *v1alpha1.ModelServer, pol policy, prev *v1alpha1.ModelServerStatus, obs Observation, d Decision, now time.Time, failedInRollout int, o *outcomes) error {
	if err := checkContract(d.Status); err != nil {
		return err
	}
	st := d.Status
	steps := pol.steps
	if st.Stable == nil {
		return fmt.Errorf("no stable color")
	}
	// Weights sum to 100 over the two colors, mirror the status, and the candidate's is 0 or a step.
	if len(d.Weights) != 2 || d.Weights[v1alpha1.Blue]+d.Weights[v1alpha1.Green] != 100 {
		return fmt.Errorf("weights %v do not split 100 over two colors", d.Weights)
	}
	if d.Weights[st.Stable.Color] != st.Weights.Stable || st.Weights.Stable+st.Weights.Candidate != 100 {
		return fmt.Errorf("status weights %+v do not mirror %v", st.Weights, d.Weights)
	}
	cw := candidateWeightOf(st)
	stepW := stepWeightOf(st, steps)
	// A rolled-back candidate (still st.Rollout.RolledBackRevision) drains from wherever it was, also
	// once a new revision supersedes it.
	drainingRolledBack := st.Candidate != nil && st.Candidate.Revision == st.Rollout.RolledBackRevision
	// With loadMatching StablePods a step may be raised, up to the next step's weight.
	maxW := stepW
	if pol.matchStablePods && stepW > 0 && stepW < 100 {
		maxW = steps[st.Rollout.Step]
	}
	// A stable color that served and has no Ready pod left serves nothing: a live candidate
	// then carries what its Ready, warm pods carry, whatever its step (see stableServesNothing).
	if st.Candidate != nil && st.Candidate.Revision == obs.Revision && stableServesNothingIn(prev, &st, obs) {
		maxW = 100
	}
	// A superseded candidate (the spec asks for another revision) is held to its drain below.
	superseded := st.Candidate != nil && st.Candidate.Revision != obs.Revision
	if st.Weights.Candidate != 0 && (st.Candidate == nil || !superseded && (cw >= 100 && maxW < 100 || st.Phase != v1alpha1.PhaseRolledBack && !drainingRolledBack && cw > maxW)) {
		return fmt.Errorf("candidate weight %d is above its held step %d of %v (at most %d)", st.Weights.Candidate, stepW, steps, maxW)
	}
	if err := checkCarried(st, prev, obs, stepW); err != nil {
		return err
	}
	// The candidate never serves a revision the spec no longer asks for, except a superseded
	// one draining: then only what it held before and the stable color cannot carry yet.
	if cw > 0 && st.Candidate.Revision != obs.Revision {
		stableReady := int32(0)
		if co, ok := obs.Colors[st.Stable.Color]; ok && co.Revision == st.Stable.Revision {
			stableReady = co.ReadyReplicas
		}
		if cw > drainCap(st, prev) || cw > 100-carries(obs.DesiredReplicas, stableReady) || st.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("candidate %s holds %d%% but the spec asks for %s (phase %s, held %d%%, stable %d Ready)", st.Candidate.Revision, cw, obs.Revision, st.Phase, drainCap(st, prev), stableReady)
		}
		if c := cond(st, v1alpha1.ConditionReconciling); c == nil || c.Reason != v1alpha1.ReasonSuperseding {
			return fmt.Errorf("superseded candidate draining without reason Superseding: %+v", c)
		}
		o.supersedeDrains++
	}
	// The stable color is asked for the whole total, on its revision; in swap mode (the
	// cluster cannot hold both colors) it may shrink, but never below its traffic share, and
	// only as far as the candidate needs the room.
	p := d.Plans[st.Stable.Color]
	if p.Revision != st.Stable.Revision {
		return fmt.Errorf("stable plan %+v, want revision %s", p, st.Stable.Revision)
	}
	if obs.Capacity == 0 && p.Replicas != obs.DesiredReplicas {
		return fmt.Errorf("stable plan %+v, want %s×%d", p, st.Stable.Revision, obs.DesiredReplicas)
	}
	if obs.Capacity > 0 {
		// The stable color is planned for its share at the step's weight (the candidate's
		// weight may be capped lower by its Ready pods).
		planned := max(cw, stepW)
		share := need(obs.DesiredReplicas, 100-planned)
		if planned == 0 && obs.DesiredReplicas == 0 {
			share = 0
		}
		if p.Replicas > obs.DesiredReplicas || p.Replicas < min(share, obs.DesiredReplicas) {
			return fmt.Errorf("swap mode: stable plan %d outside [share %d, total %d] at candidate weight %d", p.Replicas, share, obs.DesiredReplicas, cw)
		}
		if c := st.Candidate; c != nil && st.Phase != v1alpha1.PhaseRolledBack {
			// With loadMatching the served weight may be raised above the step's: the stable
			// color then keeps its share at the step's weight, which it carries again if a
			// candidate pod is lost.
			stepShare := need(obs.DesiredReplicas, 100-stepW)
			if cp, ok := d.Plans[c.Color]; ok && p.Replicas < obs.DesiredReplicas && p.Replicas+cp.Replicas > obs.Capacity && p.Replicas != share && (stepW == 0 || p.Replicas != stepShare) {
				return fmt.Errorf("swap mode: stable shrank to %d, not to its share %d, yet %d+%d exceed the capacity %d", p.Replicas, share, p.Replicas, cp.Replicas, obs.Capacity)
			}
		}
		// After a rollback or an abort the candidate keeps pods only for the weight it still
		// carries, or where there is room beside the stable color's total.
		if c := st.Candidate; c != nil && st.Phase == v1alpha1.PhaseRolledBack {
			if cp, ok := d.Plans[c.Color]; ok && cp.Replicas > 0 && cp.Replicas > max(obs.Capacity-obs.DesiredReplicas, 0) && (cw == 0 || cp.Replicas > need(obs.DesiredReplicas, cw)) {
				return fmt.Errorf("swap mode: rolled-back candidate keeps %d pods with weight %d beside a stable total %d in capacity %d", cp.Replicas, cw, obs.DesiredReplicas, obs.Capacity)
			}
		}
	}
	// No double GPUs: the candidate is never asked for more than the total (at least 1).
	if st.Candidate != nil {
		if p, ok := d.Plans[st.Candidate.Color]; ok && p.Revision == st.Candidate.Revision && p.Replicas > max(obs.DesiredReplicas, 1) && st.Phase != v1alpha1.PhaseRolledBack {
			return fmt.Errorf("candidate plan %+v exceeds the total %d", p, obs.DesiredReplicas)
		}
	}

	prevCW := candidateWeightOf(*prev)
	prevStepW := stepWeightOf(*prev, steps)
	promoted := prev.Candidate != nil && prev.Stable != nil && st.Stable.Revision == prev.Candidate.Revision && st.Stable.Color == prev.Candidate.Color && st.Stable.Revision != prev.Stable.Revision
	sameRollout := prev.Candidate != nil && st.Candidate != nil && prev.Candidate.Revision == st.Candidate.Revision &&
		prev.Candidate.Color == st.Candidate.Color && prev.Phase != v1alpha1.PhaseRolledBack && st.Phase != v1alpha1.PhaseRolledBack

	// Within one rollout the step only grows, one at a time, and only onto Ready, warm pods
	// (the weight falls below the step's only when the candidate's Ready pods do not carry it).
	if sameRollout && st.Rollout.Step != prev.Rollout.Step {
		if st.Rollout.Step != prev.Rollout.Step+1 {
			return fmt.Errorf("step jumped %d -> %d over steps %v", prev.Rollout.Step, st.Rollout.Step, steps)
		}
		if err := readyForWeight(obs, st.Candidate.Color, st.Candidate.Revision, stepW); err != nil {
			return err
		}
		if obs.RouteAccepted == metav1.ConditionFalse {
			return fmt.Errorf("advanced to step %d while the route is not accepted", st.Rollout.Step)
		}
		o.advances++
	}
	if promoted {
		o.promotions++
		if obs.Operation != OpPromoteFull {
			last := int32(0)
			if len(steps) > 1 {
				last = steps[len(steps)-2]
			}
			if prevStepW != last {
				return fmt.Errorf("promoted from step weight %d, not from the last held step %d, without PromoteFull", prevStepW, last)
			}
		}
		if obs.Capacity == 0 {
			if err := readyForWeight(obs, st.Stable.Color, st.Stable.Revision, 100); err != nil {
				return fmt.Errorf("promotion: %w", err)
			}
		} else if co := obs.Colors[st.Stable.Color]; !co.Warm || co.ReadyReplicas < 1 {
			return fmt.Errorf("promotion in swap mode onto %d Ready (warm %t)", co.ReadyReplicas, co.Warm)
		}
		if failedInRollout > int(pol.failureLimit) {
			return fmt.Errorf("promoted after %d failed measurements, limit %d", failedInRollout, pol.failureLimit)
		}
		if obs.RouteAccepted == metav1.ConditionFalse {
			return fmt.Errorf("promoted while the route is not accepted")
		}
		if (st.Rollout.KeepWarmUntil == nil && obs.Capacity == 0) || st.Weights.Stable != 100 {
			return fmt.Errorf("promotion left keepWarmUntil %v weights %+v", st.Rollout.KeepWarmUntil, st.Weights)
		}
	}
	// Leaving a held step without a request needs the step's time and a passing measurement
	// taken in it (this holds for entering AwaitingPromotion too).
	leftStep := sameRollout && st.Rollout.Step > prev.Rollout.Step || promoted || st.Phase == v1alpha1.PhaseAwaitingPromotion && prev.Phase == v1alpha1.PhaseProgressing
	if leftStep && prev.Rollout.Step >= 1 && prev.Phase == v1alpha1.PhaseProgressing && obs.Operation != OpPromote && obs.Operation != OpPromoteFull {
		if held := now.Sub(prev.Rollout.StepStartedAt.Time); held < pol.stepDuration {
			return fmt.Errorf("left step %d after %s, before its duration %s", prev.Rollout.Step, held, pol.stepDuration)
		}
		if v, _ := Verdict(st.Rollout.Analysis); st.Rollout.LastMeasuredAt == nil || st.Rollout.LastMeasuredAt.Before(prev.Rollout.StepStartedAt) || v != v1alpha1.VerdictPass {
			return fmt.Errorf("left step %d without a passing measurement in it (last %v %s)", prev.Rollout.Step, st.Rollout.LastMeasuredAt, v)
		}
	}
	// Exceeding the failure limit always ends in a rollback.
	if failedInRollout > int(pol.failureLimit) && prev.Phase != v1alpha1.PhaseRolledBack && st.Phase != v1alpha1.PhaseRolledBack {
		return fmt.Errorf("%d failed measurements (limit %d) but phase %s", failedInRollout, pol.failureLimit, st.Phase)
	}
	// A rollback leaves everything on a stable color that runs the stable revision.
	if st.Phase == v1alpha1.PhaseRolledBack {
		if cw > 0 && cw > drainCap(st, prev) {
			return fmt.Errorf("rolled back with weights %v: the candidate's weight grew from %d", d.Weights, prevCW)
		}
		if st.Candidate == nil || st.Rollout.RolledBackRevision != st.Candidate.Revision || st.Rollout.RolledBackRevision != obs.Revision {
			return fmt.Errorf("rolled back with candidate %+v rolledBackRevision %q spec %s", st.Candidate, st.Rollout.RolledBackRevision, obs.Revision)
		}
		if c := condStatus(st, v1alpha1.ConditionStalled); c != metav1.ConditionTrue {
			return fmt.Errorf("rolled back but Stalled is %s", c)
		}
		if prev.Phase != v1alpha1.PhaseRolledBack {
			switch st.History[0].Outcome {
			case v1alpha1.OutcomeAborted:
				o.aborts++
				if iu := st.Rollout.InspectUntil; iu == nil || !iu.Time.Equal(now.Add(pol.scaleDownDelay)) {
					return fmt.Errorf("abort: inspectUntil %v, want now+%s", iu, pol.scaleDownDelay)
				}
			case v1alpha1.OutcomeRolledBack:
				o.rollbacks++
				if err := checkRollbackDrain(prev, obs, d, now, o); err != nil {
					return err
				}
			default:
				return fmt.Errorf("rollback recorded as %s", st.History[0].Outcome)
			}
		}
	}
	// A rolled-back candidate whose weight goes down keeps its pods (where there is room in swap
	// mode) for RollbackDrain after that (status.rollout.drainUntil), also when drainWeight held
	// weight on it past its first drainUntil, and also when it was aborted and is kept for
	// inspection besides.
	if st.Phase == v1alpha1.PhaseRolledBack && prev.Phase == v1alpha1.PhaseRolledBack && prev.Rollout.RolledBackRevision == st.Rollout.RolledBackRevision && st.Weights.Candidate < prev.Weights.Candidate {
		if du := st.Rollout.DrainUntil; du == nil || du.Time.Before(now.Add(RollbackDrain)) {
			return fmt.Errorf("rolled-back candidate's weight went %d -> %d with drainUntil %v, want at least now+%s", prev.Weights.Candidate, st.Weights.Candidate, du, RollbackDrain)
		}
		if co, ok := obs.Colors[st.Candidate.Color]; ok && co.Exists {
			keep := co.Replicas
			if obs.Capacity > 0 {
				keep = min(keep, max(obs.Capacity-obs.DesiredReplicas, 0))
			}
			if p := d.Plans[st.Candidate.Color]; p.Replicas < keep {
				return fmt.Errorf("rolled-back candidate scaled %d -> %d in the pass its weight went %d -> %d", co.Replicas, p.Replicas, prev.Weights.Candidate, st.Weights.Candidate)
			}
		}
	}
	// RolledBack is sticky until the spec revision changes.
	if prev.Phase == v1alpha1.PhaseRolledBack && prev.Revision == obs.Revision && st.Phase != v1alpha1.PhaseRolledBack {
		return fmt.Errorf("left RolledBack for %s while the spec still asks for %s", st.Phase, obs.Revision)
	}
	if st.Phase == v1alpha1.PhaseRolledBack && prev.Phase != v1alpha1.PhaseRolledBack && prev.Candidate != nil && prev.Candidate.Revision == obs.Revision {
		// Rollback came from this rollout: fine. A rollback of anything else is not.
	} else if st.Phase == v1alpha1.PhaseRolledBack && prev.Phase != v1alpha1.PhaseRolledBack {
		return fmt.Errorf("rolled back %s which was not the candidate being rolled out", st.Rollout.RolledBackRevision)
	}
	// Paused freezes the step and weights.
	if ms.Spec.Paused && prev.Phase == v1alpha1.PhasePaused && st.Phase == v1alpha1.PhasePaused && sameRollout && (st.Rollout.Step != prev.Rollout.Step || cw > max(prevStepW, prevCW)) {
		return fmt.Errorf("paused rollout moved: step %d -> %d, weight %d -> %d", prev.Rollout.Step, st.Rollout.Step, prevCW, cw)
	}
	if ms.Spec.Paused && st.Candidate != nil && st.Candidate.Revision == obs.Revision && st.Phase != v1alpha1.PhaseRolledBack && st.Phase != v1alpha1.PhasePaused {
		return fmt.Errorf("spec paused but phase %s", st.Phase)
	}
	// Ready means the spec's revision has all traffic.
	if condStatus(st, v1alpha1.ConditionReady) == metav1.ConditionTrue && (st.Stable.Revision != obs.Revision || st.Weights.Stable != 100) {
		return fmt.Errorf("Ready while %s serves %d%% and the spec asks for %s", st.Stable.Revision, st.Weights.Stable, obs.Revision)
	}
	if prev.Candidate != nil && prev.Candidate.Revision != prev.Rollout.RolledBackRevision && len(st.History) > 0 && st.History[0].Outcome == v1alpha1.OutcomeSuperseded && (len(prev.History) == 0 || !equality.Semantic.DeepEqual(prev.History[0], st.History[0])) {
		o.supersedes++
	}
	if st.Rollout.InconclusiveSince != nil && prev.Rollout.InconclusiveSince == nil {
		o.inconclusiveHolds++
	}
	if stepW > 0 && cw < stepW && st.Candidate.Revision == obs.Revision {
		o.capped++
		// Held to its share of serving pods is not unready; below what its warm pods carry is.
		if st.Candidate.UnreadySince == nil && cw < min(stepW, parityOf(st, prev, obs)) {
			return fmt.Errorf("candidate capped at %d%% below its step %d%% without unreadySince", cw, stepW)
		}
	}
	if c := st.Candidate; c != nil && c.UnreadySince != nil && (stepW == 0 || cw >= stepW || c.Revision != obs.Revision) {
		return fmt.Errorf("unreadySince %v on a candidate that carries its step (%d%% of %d%%)", c.UnreadySince, cw, stepW)
	}
	if st.Phase == v1alpha1.PhaseRolledBack && cw > 0 {
		o.drains++
	}
	// A candidate below its step is rolled back at the progress deadline from the moment it
	// went below, never later (unless paused), and never earlier for that reason.
	if pc := prev.Candidate; pc != nil && pc.UnreadySince != nil && prev.Phase == v1alpha1.PhaseProgressing && !ms.Spec.Paused && pc.Revision == obs.Revision {
		due := !now.Before(pc.UnreadySince.Add(pol.progressDeadline))
		rolledBack := st.Phase == v1alpha1.PhaseRolledBack && prev.Phase != v1alpha1.PhaseRolledBack
		if due && st.Candidate != nil && st.Candidate.UnreadySince != nil && !rolledBack {
			return fmt.Errorf("candidate below its step since %s is still in the rollout at %s, past the progress deadline %s", pc.UnreadySince.Time, now, pol.progressDeadline)
		}
		if rolledBack && strings.Contains(st.History[0].Reason, "for its") {
			if !due {
				return fmt.Errorf("rolled back before the progress deadline: %s", st.History[0].Reason)
			}
			o.unreadyRollbacks++
		}
	}
	// A rejected route holds the rollout and says so.
	if obs.RouteAccepted == metav1.ConditionFalse && st.Phase == v1alpha1.PhaseProgressing && st.Candidate != nil && prev.Candidate != nil && prev.Candidate.Revision == st.Candidate.Revision && prev.Rollout.Step < len32(steps) && (prev.Phase == v1alpha1.PhaseProgressing) {
		if c := cond(st, v1alpha1.ConditionProgressing); c != nil && c.Reason == v1alpha1.ReasonRouteNotAccepted {
			o.routeHolds++
		}
	}
	if c := cond(st, v1alpha1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonAnalysisInconclusive {
		o.stalls++
		if st.Rollout.InconclusiveSince == nil || now.Sub(st.Rollout.InconclusiveSince.Time) < pol.inconclusiveReport {
			return fmt.Errorf("stalled on inconclusive analysis before %s (since %v)", pol.inconclusiveReport, st.Rollout.InconclusiveSince)
		}
		if !strings.Contains(c.Message, "inconclusive since") || !strings.Contains(c.Message, "(") {
			return fmt.Errorf("stall message does not say why: %q", c.Message)
		}
	} else if st.Phase == v1alpha1.PhaseProgressing && st.Rollout.Step >= 1 && st.Rollout.InconclusiveSince != nil && now.Sub(st.Rollout.InconclusiveSince.Time) >= pol.inconclusiveReport &&
		(c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNoRoomForCandidate) {
		// (A rollout that has no room for its next step reports that instead: it is the cause.)
		return fmt.Errorf("inconclusive since %s, past %s, but not Stalled", st.Rollout.InconclusiveSince.Time, pol.inconclusiveReport)
	}
	if st.Phase == v1alpha1.PhasePaused && prev.Phase != v1alpha1.PhasePaused {
		o.pauses++
	}
	if st.Phase == v1alpha1.PhaseAwaitingPromotion && prev.Phase != v1alpha1.PhaseAwaitingPromotion {
		o.awaiting++
	}
	if d.KeepOperation {
		o.keptOps++
		if obs.Operation == OpNone || obs.Operation == OpAbort {
			return fmt.Errorf("kept operation %q", obs.Operation)
		}
	}
	if d.RequeueAfter < 0 {
		return fmt.Errorf("negative requeue %s", d.RequeueAfter)
	}
	if st.Phase == v1alpha1.PhaseProgressing && d.RequeueAfter == 0 {
		return fmt.Errorf("a progressing rollout with nothing timed")
	}
	return nil
}

// drainLimit bounds how long a rolled-back or superseded candidate holds weight in the random
// sequences: long enough for the stable color's pods to come up through crashes.
const drainLimit = 30 * time.Minute

// supersededAt is where and when a superseded candidate's weight went to 0.
type supersededAt struct {
	color v1alpha1.Color
	at    time.Time
}

// checkSupersedeDrain: a candidate superseded by a spec change (a newer revision, or the
// stable one again) that had weight keeps its pods, on its revision, for RollbackDrain from
// the pass its weight went to 0: requests a Gateway still routes to it meet no terminating
// pod, before the new revision replaces them or the color scales to zero.
func checkSupersedeDrain(prev *v1alpha1.ModelServerStatus, obs Observation, d Decision, now time.Time, drained map[string]supersededAt, o *outcomes) error {
	if c := prev.Candidate; c != nil && c.Revision != prev.Rollout.RolledBackRevision && c.Revision != obs.Revision &&
		prev.Weights.Candidate > 0 && d.Status.Weights.Candidate == 0 {
		drained[c.Revision] = supersededAt{color: c.Color, at: now}
	}
	for rev, s := range drained {
		if !now.Before(s.at.Add(RollbackDrain)) {
			delete(drained, rev)
			continue
		}
		co, ok := obs.Colors[s.color]
		if !ok || !co.Exists || co.Revision != rev {
			continue
		}
		if p := d.Plans[s.color]; p.Revision != rev || p.Replicas < min(co.Replicas, max(obs.DesiredReplicas, 1)) {
			return fmt.Errorf("superseded candidate %s on %s (weight 0 since %s) planned %+v after %s, before its drain of %s", rev, s.color, s.at.Format(time.TimeOnly), p, now.Sub(s.at), RollbackDrain)
		}
		o.drainedSupersedes++
	}
	return nil
}

// checkRollbackDrain: in the pass that rolls a candidate back, its weight goes to the stable
// color (as far as that carries it) but a candidate that had traffic keeps its pods until
// now+RollbackDrain, so that requests a Gateway still routes to it meet no terminating pod; in
// swap mode only where there is room beside the stable color's total. One that never had
// weight scales to zero at once.
func checkRollbackDrain(prev *v1alpha1.ModelServerStatus, obs Observation, d Decision, now time.Time, o *outcomes) error {
	st := d.Status
	if prev.Rollout.Step < 1 && prev.Weights.Candidate == 0 {
		if ro := st.Rollout; ro.DrainUntil != nil || ro.InspectUntil != nil {
			return fmt.Errorf("rollback of a candidate that never had weight keeps it until %v / %v", ro.DrainUntil, ro.InspectUntil)
		}
		return nil
	}
	if du := st.Rollout.DrainUntil; du == nil || !du.Time.Equal(now.Add(RollbackDrain)) {
		return fmt.Errorf("rollback: drainUntil %v, want now+%s", du, RollbackDrain)
	}
	co, ok := obs.Colors[st.Candidate.Color]
	if !ok || !co.Exists {
		return nil
	}
	keep := co.Replicas
	if obs.Capacity > 0 {
		keep = min(keep, max(obs.Capacity-obs.DesiredReplicas, 0))
	}
	if p := d.Plans[st.Candidate.Color]; p.Replicas < keep {
		return fmt.Errorf("rollback scaled the candidate %d -> %d in the pass its weight went to %d%% (capacity %d, total %d)", co.Replicas, p.Replicas, st.Weights.Candidate, obs.Capacity, obs.DesiredReplicas)
	}
	if keep > 0 {
		o.drainedRollbacks++
	}
	return nil
}

// stepWeightOf is the weight of a live rollout's held step (0 before the first step, after a
// rollback and without a rollout).
func stepWeightOf(st v1alpha1.ModelServerStatus, steps []int32) int32 {
	if st.Candidate == nil || st.Rollout.Step < 1 || st.Phase == v1alpha1.PhaseRolledBack || int(st.Rollout.Step) > len(steps) {
		return 0
	}
	return steps[st.Rollout.Step-1]
}

// drainCap is the most a rolled-back candidate may hold: its weight in the previous pass (for
// the same candidate), never more.
func drainCap(st v1alpha1.ModelServerStatus, prev *v1alpha1.ModelServerStatus) int32 {
	c, p := st.Candidate, prev.Candidate
	if c == nil || p == nil || c.Color != p.Color || c.Revision != p.Revision {
		return 0
	}
	return prev.Weights.Candidate
}

// checkCarried: no color holds more weight than its Ready pods carry, except the stable color
// when the candidate already holds all it may (its step's weight, or what it held before a
// rollback) or all its own Ready pods carry: then stable is preferred.
// stableServesNothingIn: the stable color has no Ready pod of a desired total above 0, and had
// served (Degraded before or now).
func stableServesNothingIn(prev, st *v1alpha1.ModelServerStatus, obs Observation) bool {
	co, ok := obs.Colors[st.Stable.Color]
	if obs.DesiredReplicas <= 0 || ok && co.Exists && co.Revision == st.Stable.Revision && co.ReadyReplicas > 0 {
		return false
	}
	if prev == nil || prev.Stable == nil || prev.Stable.Replicas <= 0 {
		return false
	}
	return meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDegraded) || meta.IsStatusConditionTrue(prev.Conditions, v1alpha1.ConditionDegraded)
}

// parityOf is what the candidate's warm Ready pods carry, and at most their share of both
// colors' serving pods (beside the stable color's Ready pods); 100 when stale.
func parityOf(st v1alpha1.ModelServerStatus, prev *v1alpha1.ModelServerStatus, obs Observation) int32 {
	c := st.Candidate
	co, ok := obs.Colors[c.Color]
	if !ok || co.Stale || !co.Exists || co.Revision != c.Revision {
		return 100
	}
	warm := min(co.WarmPods, co.ReadyReplicas)
	if co.Warm {
		warm = co.ReadyReplicas
	}
	warmCarry := carries(obs.DesiredReplicas, warm)
	so, ok := obs.Colors[st.Stable.Color]
	if !ok || !so.Exists || so.Revision != st.Stable.Revision || so.Stale || so.ReadyReplicas <= 0 || stableServesNothingIn(prev, &st, obs) {
		return warmCarry
	}
	return min(warmCarry, warm*100/(warm+so.ReadyReplicas))
}

func checkCarried(st v1alpha1.ModelServerStatus, prev *v1alpha1.ModelServerStatus, obs Observation, stepW int32) error {
	c := st.Candidate
	if c == nil {
		return nil
	}
	total := obs.DesiredReplicas
	readyOn := func(color v1alpha1.Color, rev string) int32 {
		if co, ok := obs.Colors[color]; ok && co.Exists && co.Revision == rev {
			return co.ReadyReplicas
		}
		return 0
	}
	cw := candidateWeightOf(st)
	candCarry := carries(total, readyOn(c.Color, c.Revision))
	if cw > candCarry {
		return fmt.Errorf("candidate holds %d%% but its %d Ready pods carry %d%% of %d", cw, readyOn(c.Color, c.Revision), candCarry, total)
	}
	limit := stepW // with loadMatching too: the candidate never absorbs the stable color's overflow
	draining := st.Phase == v1alpha1.PhaseRolledBack || c.Revision != obs.Revision
	if draining {
		limit = drainCap(st, prev)
		if total <= 0 {
			limit = 0 // scaled to zero: no stable pod is coming to wait for
		}
		// Swap mode: a drain never keeps every pod of the candidate while the stable color
		// waits for a GPU (none free): it gives one pod's worth back.
		stableReady := readyOn(st.Stable.Color, st.Stable.Revision)
		if co, ok := obs.Colors[c.Color]; ok && co.Exists && co.Revision == c.Revision && obs.Capacity > 0 &&
			stableReady < total && obs.Capacity-stableReady-co.Replicas <= 0 {
			limit = min(limit, carries(total, co.Replicas-1))
		}
	}
	// A live candidate holds at most its share of both colors' serving pods: its warm Ready
	// pods beside the stable color's Ready pods (see parityCap).
	parity := int32(100)
	if !draining {
		parity = parityOf(st, prev, obs)
		if cw > parity {
			return fmt.Errorf("candidate holds %d%%, more than its share %d%% of serving pods", cw, parity)
		}
	}
	stableCarry := carries(total, readyOn(st.Stable.Color, st.Stable.Revision))
	if 100-cw > stableCarry && cw < min(limit, candCarry, parity) {
		return fmt.Errorf("stable holds %d%% beyond the %d%% its Ready pods carry while the candidate (limit %d%%, carries %d%%) holds only %d%%", 100-cw, stableCarry, limit, candCarry, cw)
	}
	if !draining && stepW > 0 && cw < min(stepW, candCarry, parity) {
		return fmt.Errorf("candidate holds %d%%, less than its step %d%%, its carry %d%% and its share of serving pods %d%%", cw, stepW, candCarry, parity)
	}
	return nil
}

func readyForWeight(obs Observation, c v1alpha1.Color, rev string, weight int32) error {
	co := obs.Colors[c]
	if co.Revision != rev || !co.Warm || co.ReadyReplicas < need(obs.DesiredReplicas, weight) {
		return fmt.Errorf("%s got %d%% with %d Ready (need %d) warm=%t revision %s (want %s)", c, weight, co.ReadyReplicas, need(obs.DesiredReplicas, weight), co.Warm, co.Revision, rev)
	}
	return nil
}

// checkInconclusive: d is the pass with an inconclusive measurement, d0 the same pass without
// it. Whatever moved with it must also move without it, except a rollback at the inconclusive
// deadline.
func checkInconclusive(prev *v1alpha1.ModelServerStatus, d, d0 Decision) error {
	moved := func(x Decision) string {
		return fmt.Sprintf("stable=%s candidateWeight=%d step=%d", x.Status.Stable.Revision, candidateWeightOf(x.Status), x.Status.Rollout.Step)
	}
	if d.Status.Phase == v1alpha1.PhaseRolledBack && prev.Phase != v1alpha1.PhaseRolledBack {
		if d0.Status.Phase == v1alpha1.PhaseRolledBack || strings.Contains(d.Status.History[0].Reason, "inconclusive for") {
			return nil
		}
		return fmt.Errorf("an inconclusive measurement rolled back: %s", d.Status.History[0].Reason)
	}
	// Ahead of the same pass without the measurement: a later step, more weight, or a promotion
	// it did not make. (Weight the candidate's Ready pods win back at the same step is no
	// advance, and holding where the pass before would have advanced is what it should do.)
	progress := func(x Decision) [3]int32 {
		promoted := int32(0)
		if x.Status.Stable.Revision != prev.Stable.Revision {
			promoted = 1
		}
		return [3]int32{promoted, x.Status.Rollout.Step, candidateWeightOf(x.Status)}
	}
	p, p0 := progress(d), progress(d0)
	ahead := p[0] > p0[0] || p[0] == p0[0] && (p[1] > p0[1] || p[1] == p0[1] && p[2] > p0[2])
	advanced := candidateWeightOf(d.Status) > candidateWeightOf(*prev) || d.Status.Stable.Revision != prev.Stable.Revision
	if advanced && ahead {
		return fmt.Errorf("an inconclusive measurement advanced the rollout: %s, without it %s", moved(d), moved(d0))
	}
	return nil
}

func len32[T any](s []T) int32 { return int32(len(s)) }

func condStatus(st v1alpha1.ModelServerStatus, typ string) metav1.ConditionStatus {
	if c := cond(st, typ); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}

// passLog keeps the last passes of a run, formatted only when a run fails.
type passLog struct{ last []loggedPass }

type loggedPass struct {
	pass       int
	now, start time.Time
	paused     bool
	obs        Observation
	d          Decision
}

func (l *passLog) add(p loggedPass) {
	if len(l.last) == 60 {
		l.last = l.last[1:]
	}
	l.last = append(l.last, p)
}

func (l *passLog) String() string {
	var lines []string
	for _, p := range l.last {
		lines = append(lines, formatPass(p.pass, p.now, p.start, p.paused, p.obs, p.d))
	}
	return strings.Join(lines, "\n")
}

// A candidate that loses all its pods at step 2, with no passing measurement in that step
// (its measurements are inconclusive: nothing reaches it), gives its weight to stable at once
// and is rolled back, reason ProgressDeadlineExceeded, at the progress deadline counted from
// the pass that saw the loss.
func TestCandidateLosingItsPodsAtStep2IsRolledBackAtTheProgressDeadline(t *testing.T) {
	deadline := 5 * time.Minute
	ms := newModelServer(withSteps(10, 50, 100), withStepDuration(2*time.Minute), withInterval(30*time.Second))
	ms.Spec.Rollout.ProgressDeadline = v1alpha1.Duration{Duration: deadline}
	s := newSim(ms, 4, good)
	var log passLog
	var lostAt time.Time
	for i := range 200 {
		if i == 10 {
			s.newRevision(good)
		}
		obs := s.observe()
		if MeasureDue(ms, s.now) {
			verdict := v1alpha1.VerdictPass
			if !lostAt.IsZero() {
				verdict = inc
			}
			obs.Measurement = &Measurement{At: s.now, Results: results(s.now, verdict)}
		}
		d := next(ms, obs, s.now)
		log.add(loggedPass{i, s.now, s.start, false, obs, d})
		st := d.Status
		lose := false
		switch {
		case lostAt.IsZero() && st.Rollout.Step == 2 && st.Phase == v1alpha1.PhaseProgressing && d.Weights[green] == 50:
			lose = true
		case !lostAt.IsZero() && st.Phase == v1alpha1.PhaseRolledBack:
			if s.now.Before(lostAt.Add(deadline)) {
				t.Fatalf("rolled back at %s, before the deadline %s from the loss at %s\n%s", s.now, deadline, lostAt, log.String())
			}
			if s.now.Sub(lostAt.Add(deadline)) > 20*time.Second {
				t.Fatalf("rolled back at %s, more than a pass after the deadline %s\n%s", s.now, lostAt.Add(deadline), log.String())
			}
			r := st.History[0]
			if r.Outcome != v1alpha1.OutcomeRolledBack || !strings.Contains(r.Reason, v1alpha1.ReasonProgressDeadline) {
				t.Fatalf("history[0] = %+v, want RolledBack for %s", r, v1alpha1.ReasonProgressDeadline)
			}
			if d.Weights[blue] != 100 {
				t.Fatalf("rolled back with weights %v", d.Weights)
			}
			t.Logf("FIGURE candidate lost at %s, rolled back %s later (deadline %s)", lostAt.Sub(s.start), s.now.Sub(lostAt), deadline)
			return
		case !lostAt.IsZero():
			if d.Weights[green] != 0 {
				t.Fatalf("pass %d: candidate with no Ready pod holds %d%%\n%s", i, d.Weights[green], log.String())
			}
			if u := st.Candidate.UnreadySince; u == nil || !u.Time.Equal(lostAt) {
				t.Fatalf("pass %d: unreadySince %v, want %s (the pass that saw the loss)", i, u, lostAt)
			}
			if st.Rollout.Step != 2 || st.Phase != v1alpha1.PhaseProgressing {
				t.Fatalf("pass %d: step %d phase %s, want step 2 held", i, st.Rollout.Step, st.Phase)
			}
		}
		s.apply(d)
		if lose {
			s.loseCandidatePods(true) // crash loop: the pods do not come back
			lostAt = s.now.Add(20 * time.Second)
		}
		s.evolveSteady()
		s.now = s.now.Add(20 * time.Second)
	}
	t.Fatalf("never rolled back\n%s", log.String())
}
