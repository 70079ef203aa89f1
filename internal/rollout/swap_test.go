package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

func withCapacity(n int32) obsOption { return func(o *Observation) { o.Capacity = n } }

func TestSwapModeWhenBothColorsDoNotFit(t *testing.T) {
	ms := func(step int32, weight int32) *v1alpha1.ModelServer {
		return newModelServer(withSteps(25, 50, 100), withStepDuration(time.Minute), withInterval(30*time.Second),
			withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 12), inRollout(revB, step, t0, weight), measured(t0.Add(time.Minute), v1alpha1.VerdictPass)))
	}
	later := t0.Add(2 * time.Minute)
	cases := []struct {
		name        string
		ms          *v1alpha1.ModelServer
		obs         Observation
		wantStable  int32
		wantCand    int32
		wantWeight  int32
		wantPromote bool
	}{
		{
			name: "with room for both colors the stable color keeps the whole total",
			// The candidate is sized to carry the next 50% at a stable pod's load: 12 pods.
			ms: ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 6, 4), withCapacity(40)),
			wantStable: 12, wantCand: 12, wantWeight: 25,
		},
		{
			name: "without room the stable color shrinks to what fits beside the candidate, never below its share",
			ms:   ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 3, 3), withCapacity(16)),
			// 3 candidate pods beside 12 stable ones carry 20% at a stable pod's load; 25% once the
			// stable color has shrunk to its share.
			wantStable: 10, wantCand: 6, wantWeight: 20,
		},
		{
			name: "the weight moves once the candidate has what the next step needs in swap mode",
			ms:   ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 10, 10), deploy(green, revB, 6, 6), withCapacity(16)),
			// At 50% the weight waits for the stable color to shrink: 6 beside 10 carry 37%.
			wantStable: 6, wantCand: 10, wantWeight: 37,
		},
		{
			name: "the promotion in swap mode needs only what fits beside the stable share and scales the old color down at once",
			ms:   ms(2, 50), obs: newObs(revB, 12, deploy(blue, revA, 6, 6), deploy(green, revB, 10, 10), withCapacity(16)),
			wantStable: 12, wantCand: 0, wantWeight: 100, wantPromote: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := next(tc.ms, tc.obs, later)
			if tc.wantPromote {
				if d.Status.Stable.Color != green || d.Status.Candidate != nil {
					t.Fatalf("not promoted: stable %+v candidate %+v", d.Status.Stable, d.Status.Candidate)
				}
				if p, ok := d.Plans[blue]; !ok || p.Replicas != 0 {
					t.Errorf("the old color should scale down at once in swap mode, plan %+v", p)
				}
				if d.Weights[green] != 100 || d.Plans[green].Replicas != tc.wantStable {
					t.Errorf("weights %v plans %v", d.Weights, d.Plans)
				}
				return
			}
			if got := d.Plans[blue].Replicas; got != tc.wantStable {
				t.Errorf("stable plan %d, want %d", got, tc.wantStable)
			}
			if got := d.Plans[green].Replicas; got != tc.wantCand {
				t.Errorf("candidate plan %d, want %d", got, tc.wantCand)
			}
			if got := d.Weights[green]; got != tc.wantWeight {
				t.Errorf("candidate weight %d, want %d", got, tc.wantWeight)
			}
			if tc.obs.Capacity > 0 && d.Plans[blue].Replicas+d.Plans[green].Replicas > tc.obs.Capacity {
				t.Errorf("plans %v exceed the capacity %d", d.Plans, tc.obs.Capacity)
			}
			if share := need(12, 100-d.Status.Rollout.StepWeight); d.Plans[blue].Replicas < share {
				t.Errorf("stable plan %d below its traffic share %d", d.Plans[blue].Replicas, share)
			}
		})
	}
}

// swapCluster is a cluster with GPUs for capacity pods: a planned pod starts only when a GPU
// is free, and a Deployment scaled down frees its GPUs at once.
type swapCluster struct {
	capacity int32
	ready    map[v1alpha1.Color]int32
	replicas map[v1alpha1.Color]int32
	rev      map[v1alpha1.Color]string
}

func (c *swapCluster) observe(spec string, total int32) Observation {
	o := newObs(spec, total, withCapacity(c.capacity))
	for col, rev := range c.rev {
		o.Colors[col] = ColorObservation{Exists: true, Revision: rev, Image: "img:" + rev, Replicas: c.replicas[col], ReadyReplicas: c.ready[col], AvailableReplicas: c.ready[col], UpdatedReplicas: c.replicas[col], Warm: c.ready[col] > 0}
	}
	return o
}

// apply scales the Deployments to their plans; then one pending pod per color starts if a GPU
// is free (scheduling and model loading take a pass).
func (c *swapCluster) apply(d Decision) {
	for col, p := range d.Plans {
		c.rev[col], c.replicas[col] = p.Revision, p.Replicas
		c.ready[col] = min(c.ready[col], p.Replicas)
	}
	for _, col := range []v1alpha1.Color{blue, green} {
		used := c.ready[blue] + c.ready[green]
		if c.ready[col] < c.replicas[col] && used < c.capacity {
			c.ready[col]++
		}
	}
}

func TestSwapModeRollbackAbortAndSupersedeMoveWeightBackInStepWithTheStableColor(t *testing.T) {
	for _, name := range []string{"a rollback", "an abort", "a superseding edit"} {
		abort, supersede := name == "an abort", name == "a superseding edit"
		spec := revB
		if supersede {
			spec = revC
		}
		t.Run(name+" gives weight back as fast as the stable color's Ready pods carry it", func(t *testing.T) {
			const total, capacity = 12, 16
			ms := newModelServer(withSteps(25, 50, 100), withStepDuration(time.Minute), withInterval(30*time.Second), withFailureLimit(0),
				withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 6), inRollout(revB, 2, t0.Add(-time.Minute), 50)))
			c := &swapCluster{capacity: capacity,
				ready:    map[v1alpha1.Color]int32{blue: 6, green: 10},
				replicas: map[v1alpha1.Color]int32{blue: 6, green: 10},
				rev:      map[v1alpha1.Color]string{blue: revA, green: revB}}
			now := t0
			prevW := int32(50)
			passes := 0
			for i := range 40 {
				obs := c.observe(spec, total)
				if i == 0 {
					switch {
					case abort:
						obs.Operation = OpAbort
					case !supersede:
						obs.Measurement = &Measurement{At: now, Results: results(now, fail)}
					}
				}
				d := next(ms, obs, now)
				if want := v1alpha1.PhaseRolledBack; !supersede && d.Status.Phase != want || supersede && d.Status.Phase != v1alpha1.PhaseProgressing {
					t.Fatalf("pass %d: phase %s", i, d.Status.Phase)
				}
				if supersede && d.Status.Candidate.Revision == revC && c.ready[blue] < total && d.Weights[green] == 0 && prevW > 0 {
					t.Fatalf("pass %d: %s started before the stable color carried all traffic (%d/%d Ready)", i, revC, c.ready[blue], total)
				}
				cw := d.Weights[green]
				if cw > prevW {
					t.Fatalf("pass %d: candidate weight grew %d -> %d after the rollback", i, prevW, cw)
				}
				// Stable never holds more than its Ready pods carry while the candidate can take it.
				if sc := carries(total, c.ready[blue]); 100-cw > sc && cw < min(prevW, carries(total, c.ready[green])) {
					t.Fatalf("pass %d: stable holds %d%% with %d Ready (carry %d%%) while the candidate could keep %d%%", i, 100-cw, c.ready[blue], sc, prevW)
				}
				// The candidate's GPUs: no more pods than its weight needs or the room beside stable.
				if p := d.Plans[green].Replicas; p > max(need(total, cw), capacity-total) && cw > 0 || cw == 0 && p > capacity-total {
					t.Fatalf("pass %d: candidate planned %d pods for %d%% in swap mode", i, p, cw)
				}
				if p := d.Plans[blue]; p.Replicas != total || p.Revision != revA {
					t.Fatalf("pass %d: stable plan %+v, want %s×%d", i, p, revA, total)
				}
				prevW = cw
				ms.Status = d.Status
				c.apply(d)
				now = now.Add(10 * time.Second)
				if cw == 0 && c.ready[blue] == total && (!supersede || d.Status.Candidate.Revision == revC) {
					passes = i + 1
					break
				}
			}
			if passes == 0 {
				t.Fatalf("stable never took all traffic back: weights %+v, blue %d/%d Ready", ms.Status.Weights, c.ready[blue], total)
			}
			want := int32(0)
			if abort {
				want = capacity - total // kept for inspection where there is room, until the scale-down delay
			} else if !supersede {
				// Drained where there is room beside the stable total for RollbackDrain after the
				// weight reached 0, then scaled to zero.
				if c.replicas[green] > capacity-total {
					t.Errorf("draining candidate has %d replicas, more than the room %d beside the stable total", c.replicas[green], capacity-total)
				}
				now = now.Add(RollbackDrain)
				d := next(ms, c.observe(spec, total), now)
				ms.Status = d.Status
				c.apply(d)
			}
			if supersede {
				if c.rev[green] != revC {
					t.Errorf("green runs %s, want the superseding %s", c.rev[green], revC)
				}
			} else if c.replicas[green] != want {
				t.Errorf("candidate left with %d replicas, want %d", c.replicas[green], want)
			}
			t.Logf("FIGURE swap-mode %s: all traffic back on a full stable color after %d passes (stable 6 -> %d Ready, never carrying more than its pods)", name, passes, total)
		})
	}
}

func TestSwapModeRollbackDrainYieldsTheGPUsToTheStableColorFirst(t *testing.T) {
	// total 4 at step 1 (25%) of 25,50,100, the analysis fails (failure limit 0).
	ms := func() *v1alpha1.ModelServer {
		return newModelServer(withSteps(25, 50, 100), withFailureLimit(0),
			withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 4), inRollout(revB, 1, t0.Add(-time.Minute), 25)))
	}
	cases := []struct {
		name                 string
		obs                  Observation
		wantCand, wantWeight int32
	}{
		{
			name: "with no room beside the stable total the candidate scales to zero at once, drain or not",
			obs:  newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, fail), withCapacity(4)),
		},
		{
			name:     "the candidate keeps only the pods that fit beside the stable total",
			obs:      newObs(revB, 4, deploy(blue, revA, 4, 4), deploy(green, revB, 2, 2), measurement(t0, fail), withCapacity(5)),
			wantCand: 1,
		},
		{
			name:     "a stable color shrunk to its share keeps the weight it cannot carry on the candidate, sized for just that",
			obs:      newObs(revB, 4, deploy(blue, revA, 3, 3), deploy(green, revB, 2, 2), measurement(t0, fail), withCapacity(5)),
			wantCand: 1, wantWeight: 25,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := next(ms(), tc.obs, t0)
			if d.Status.Phase != v1alpha1.PhaseRolledBack || d.Status.History[0].Outcome != v1alpha1.OutcomeRolledBack {
				t.Fatalf("phase %s history %+v, want RolledBack", d.Status.Phase, d.Status.History)
			}
			if p := d.Plans[blue]; p.Revision != revA || p.Replicas != 4 {
				t.Errorf("stable plan %+v, want %s×4", p, revA)
			}
			if got := d.Plans[green].Replicas; got != tc.wantCand {
				t.Errorf("candidate plan %d, want %d", got, tc.wantCand)
			}
			if got := d.Weights[green]; got != tc.wantWeight {
				t.Errorf("candidate weight %d, want %d", got, tc.wantWeight)
			}
			if sum := d.Plans[blue].Replicas + d.Plans[green].Replicas; sum > tc.obs.Capacity {
				t.Errorf("plans %v exceed the capacity %d", d.Plans, tc.obs.Capacity)
			}
			if du := d.Status.Rollout.DrainUntil; du == nil || !du.Time.Equal(t0.Add(RollbackDrain)) {
				t.Errorf("drainUntil = %v, want now+%s", du, RollbackDrain)
			}
		})
	}
}

// TestSwapModeDrainNeverHoldsTheGPUTheStableColorWaitsFor: capacity exactly the total, rolled
// back at 25%: the stable color has 3 of its 4 pods, the candidate's one pod holds the 4th GPU
// and 25%. Keeping that weight until the stable color carries it would wait forever (its 4th
// pod needs the candidate's GPU): the candidate gives its weight back and its GPU goes to the
// stable color.
func TestSwapModeDrainNeverHoldsTheGPUTheStableColorWaitsFor(t *testing.T) {
	ms := newModelServer(withSteps(25, 50, 100), withStatus(stableOn(blue, revA, 3), rolledBack(revB, v1alpha1.OutcomeRolledBack, "ttft"),
		weights(75, 25), drainingUntil(t0.Add(-time.Second))))
	obs := newObs(revB, 4, deploy(blue, revA, 4, 3), deploy(green, revB, 1, 1), withCapacity(4))
	d := next(ms, obs, t0)
	if got := d.Weights[green]; got != 0 {
		t.Errorf("candidate weight %d, want 0: the stable color's last pod waits for the candidate's GPU", got)
	}
	if p := d.Plans[green]; p.Replicas != 0 {
		t.Errorf("candidate plan %+v, want 0 pods", p)
	}
	if p := d.Plans[blue]; p.Revision != revA || p.Replicas != 4 {
		t.Errorf("stable plan %+v, want %s×4", p, revA)
	}

	// With a free GPU the stable color grows on its own: the candidate keeps its share meanwhile.
	obs = newObs(revB, 4, deploy(blue, revA, 4, 3), deploy(green, revB, 1, 1), withCapacity(5))
	if d := next(ms, obs, t0); d.Weights[green] != 25 || d.Plans[green].Replicas != 1 {
		t.Errorf("with room for the stable color's 4th pod: candidate weight %d plan %+v, want 25%% on its 1 pod", d.Weights[green], d.Plans[green])
	}
}

// TestTightSwapModeRolloutsRollBackWholeOrReportNoRoom plays rollouts on clusters that hold the
// total plus 0 to 2 pods (every rollout swaps), failing at each step in turn, with pods
// scheduled only on free GPUs. Each either rolls back and ends with all traffic on a whole
// stable color and the candidate scaled away (never holding weight for a GPU the stable color
// waits for), or, where the candidate's next step cannot fit beside the stable color's share,
// reports Stalled (NoRoomForCandidate) with the counts that say so: never a silent wait on a
// Pending pod.
func TestTightSwapModeRolloutsRollBackWholeOrReportNoRoom(t *testing.T) {
	steps := []int32{25, 50, 100}
	var whole, noRoom int
	for total := int32(2); total <= 6; total++ {
		for slack := int32(0); slack <= 2; slack++ {
			for failAt := int32(1); failAt < int32(len(steps)); failAt++ {
				name := fmt.Sprintf("total %d, capacity %d, failing at step %d", total, total+slack, failAt)
				ms := newModelServer(withSteps(steps...), withStepDuration(time.Minute), withInterval(20*time.Second), withFailureLimit(0))
				s := newSim(ms, total, good)
				s.capacity = total + slack
				var log passLog
				var rolledBackAt time.Time
				done := false
				for i := 0; i < 300 && !done; i++ {
					if i == 5 {
						s.newRevision(bad)
					}
					obs := s.observe()
					if MeasureDue(ms, s.now) {
						v := v1alpha1.VerdictPass
						if ms.Status.Rollout.Step >= failAt {
							v = v1alpha1.VerdictFail
						}
						obs.Measurement = &Measurement{At: s.now, Results: results(s.now, v)}
					}
					d := next(ms, obs, s.now)
					log.add(loggedPass{i, s.now, s.start, false, obs, d})
					st := d.Status
					if c := cond(st, v1alpha1.ConditionStalled); rolledBackAt.IsZero() && c != nil && c.Status == "True" && c.Reason == v1alpha1.ReasonNoRoomForCandidate {
						next := steps[st.Rollout.Step]
						share := need(total, 100-st.Weights.Candidate)
						if s.capacity-share >= need(total, next) {
							t.Fatalf("%s: NoRoomForCandidate at step %d, but %d candidate pods for %d%% fit beside %d stable in %d: %s", name, st.Rollout.Step, need(total, next), next, share, s.capacity, c.Message)
						}
						noRoom++
						done = true
						break
					}
					if st.Phase == v1alpha1.PhaseRolledBack && rolledBackAt.IsZero() {
						rolledBackAt = s.now
					}
					s.apply(d)
					if !rolledBackAt.IsZero() {
						stable, cand := s.deps[st.Stable.Color], s.deps[st.Candidate.Color]
						if d.Weights[st.Candidate.Color] == 0 && stable.ready == total && (cand == nil || cand.replicas == 0) {
							whole++
							done = true
							break
						}
						if s.now.Sub(rolledBackAt) > 10*time.Minute {
							t.Fatalf("%s: 10 minutes after the rollback: weights %v, stable %d/%d Ready\n%s", name, d.Weights, stable.ready, total, log.String())
						}
					}
					s.evolveSteady()
					s.now = s.now.Add(5 * time.Second)
				}
				if !done {
					t.Fatalf("%s: neither rolled back nor reported NoRoomForCandidate\n%s", name, log.String())
				}
			}
		}
	}
	t.Logf("FIGURE: tight swap-mode rollouts: %d rolled back to a whole stable color, %d reported NoRoomForCandidate", whole, noRoom)
	if whole == 0 || noRoom == 0 {
		t.Errorf("want both outcomes among the cases (whole %d, no room %d)", whole, noRoom)
	}
}

// TestNoRoomForTheNextStepHoldsReportsAndLetsPromoteFullSwap: a total of 3 in room for 4 at
// 75/25 cannot give 50% its 2 pods beside blue's 3. The rollout holds at 25% on the one pod
// that fits, says why, and a person's promote-full still swaps the colors.
func TestNoRoomForTheNextStepHoldsReportsAndLetsPromoteFullSwap(t *testing.T) {
	ms := newModelServer(withSteps(25, 50, 100), withStepDuration(time.Minute),
		withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 3), inRollout(revB, 1, t0.Add(-10*time.Minute), 25)))
	obs := newObs(revB, 3, deploy(blue, revA, 3, 3), deploy(green, revB, 1, 1), withCapacity(4), measurement(t0, pass))
	d := next(ms, obs, t0)
	if d.Status.Rollout.Step != 1 || d.Weights[green] != 25 || d.Plans[green].Replicas != 1 || d.Plans[blue].Replicas != 3 {
		t.Fatalf("step %d weights %v plans %v; want held at step 1 (25%%) on green's 1 pod beside blue's 3", d.Status.Rollout.Step, d.Weights, d.Plans)
	}
	c := cond(d.Status, v1alpha1.ConditionStalled)
	if c == nil || c.Status != "True" || c.Reason != v1alpha1.ReasonNoRoomForCandidate || !strings.Contains(c.Message, "50% needs 2 candidate pods beside the 3") {
		t.Fatalf("Stalled %+v; want True, NoRoomForCandidate, with the counts", c)
	}
	if !slices.ContainsFunc(d.Events, func(e Event) bool { return e.Reason == EventNoRoomForCandidate }) {
		t.Errorf("events %v; want %s", d.Events, EventNoRoomForCandidate)
	}
	ms.Status = d.Status
	obs = newObs(revB, 3, deploy(blue, revA, 3, 3), deploy(green, revB, 1, 1), withCapacity(4), op(OpPromoteFull))
	if d := next(ms, obs, t0.Add(time.Second)); d.Status.Stable.Revision != revB || d.Weights[green] != 100 {
		t.Fatalf("after promote-full: stable %s weights %v; want %s on green with all traffic", d.Status.Stable.Revision, d.Weights, revB)
	}
}
