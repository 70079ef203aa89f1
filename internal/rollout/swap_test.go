package rollout

import (
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
			ms:   ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 6, 3), withCapacity(40)),
			wantStable: 12, wantCand: 6, wantWeight: 25,
		},
		{
			name: "without room the stable color shrinks to what fits beside the candidate, never below its share",
			ms:   ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 12, 12), deploy(green, revB, 3, 3), withCapacity(16)),
			wantStable: 10, wantCand: 6, wantWeight: 25,
		},
		{
			name: "the weight moves once the candidate has what the next step needs in swap mode",
			ms:   ms(1, 25), obs: newObs(revB, 12, deploy(blue, revA, 10, 10), deploy(green, revB, 6, 6), withCapacity(16)),
			wantStable: 6, wantCand: 10, wantWeight: 50,
		},
		{
			name: "the promotion in swap mode needs only what fits beside the stable share and scales the old color down at once",
			ms:   ms(2, 50), obs: newObs(revB, 12, deploy(blue, revA, 6, 6), deploy(green, revB, 10, 10), withCapacity(16)),
			wantStable: 12, wantCand: 0, wantWeight: 100, wantPromote: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Next(tc.ms, tc.obs, later)
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
			if share := need(12, 100-d.Weights[green]); d.Plans[blue].Replicas < share {
				t.Errorf("stable plan %d below its traffic share %d", d.Plans[blue].Replicas, share)
			}
		})
	}
}
