package rollout

import (
	"fmt"
	"testing"
	"time"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// TestTheSplitOfAnUnchangedTotalNeverGrowsTheStableColor sweeps the state of the e2e story
// "Prometheus stopped mid-rollout" (steps 10/25/50/100, at step 2 with weights 75/25, stable
// blue on 6 Ready pods) over what may change while the total stays 6: the cluster's room
// (swap mode or not), the candidate's size and readiness, an inconclusive measurement or
// none. Blue is never planned above the total and green is sized to carry 50% at a blue pod's
// load (6 pods; need(6, 50%) = 3 where the cluster has no more room). So
// the story's "blue 6 -> 7 with green at 4" is not the split of an unchanged 6: it is the
// split of a total of 7 (need(7, 50%) = 4), a change the autoscaler made. In swap mode green
// gets its 50% pods only where they fit beside blue's 75% share.
func TestTheSplitOfAnUnchangedTotalNeverGrowsTheStableColor(t *testing.T) {
	ms := newModelServer(withSteps(10, 25, 50, 100), withStepDuration(20*time.Second), withInterval(5*time.Second),
		withStatus(phase(v1alpha1.PhaseProgressing), stableOn(blue, revA, 6), inRollout(revB, 2, t0, 25)))
	now := t0.Add(30 * time.Second) // past the step's end: only a passing measurement could move it
	// Green is sized to carry 50% at a stable pod's load: as many pods as blue's total.
	for total, wantGreen := range map[int32]int32{6: 6, 7: 7} {
		for _, capacity := range []int32{0, 6, 7, 8, 9, 10, 12, 16, 20} {
			for size := int32(0); size <= 4; size++ {
				for ready := int32(0); ready <= size; ready++ {
					for _, m := range []string{"none", "inconclusive"} {
						name := fmt.Sprintf("total %d, capacity %d, green %d/%d Ready, measurement %s", total, capacity, ready, size, m)
						opts := []obsOption{deploy(blue, revA, 6, 6), deploy(green, revB, size, ready), withCapacity(capacity)}
						if m == "inconclusive" {
							opts = append(opts, measurement(now, v1alpha1.VerdictInconclusive))
						}
						d := next(ms, newObs(revB, total, opts...), now)
						// Green holds its step's 25% only as far as its Ready pods carry it, and
						// at most its share of both colors' serving pods.
						if want := min(25, carries(total, ready), ready*100/(ready+6)); d.Status.Rollout.Step != 2 || d.Weights[green] != want {
							t.Errorf("%s: step %d, weights %v; want step 2 with green at %d%%", name, d.Status.Rollout.Step, d.Weights, want)
						}
						if got := d.Plans[blue].Replicas; got > total || got < need(total, 75) {
							t.Errorf("%s: blue planned %d, want between its share %d and the total %d", name, got, need(total, 75), total)
						}
						// In swap mode green is sized for 50% only where that fits beside blue's
						// share; else for what fits (at least its 25%), and the rollout reports
						// that it is stalled for room.
						want, stalled := wantGreen, false
						if room := capacity - need(total, 75); capacity > 0 && room < need(total, 50) {
							want, stalled = max(room, need(total, 25)), true
						} else if capacity > 0 {
							// Not swap mode: the parity pods only where they fit beside blue's total.
							want = max(need(total, 50), min(wantGreen, capacity-total))
						}
						if got := d.Plans[green].Replicas; got != want {
							t.Errorf("%s: green planned %d, want %d (50%% of %d, capacity %d)", name, got, want, total, capacity)
						}
						if c := cond(d.Status, v1alpha1.ConditionStalled); stalled != (c != nil && c.Status == "True" && c.Reason == v1alpha1.ReasonNoRoomForCandidate) {
							t.Errorf("%s: Stalled %+v, want NoRoomForCandidate %t", name, c, stalled)
						}
					}
				}
			}
		}
	}
}
