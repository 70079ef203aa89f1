package autoscale

import (
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// changes sums the replicas added and removed by the events within period before now
// (events strictly after now-period count, as in HPA).
func changes(events []v1alpha1.ScaleEvent, period time.Duration, now time.Time) (added, removed int32) {
	cutoff := now.Add(-period)
	for _, e := range events {
		if !e.At.After(cutoff) {
			continue
		}
		if d := e.To - e.From; d > 0 {
			added += d
		} else {
			removed -= d
		}
	}
	return added, removed
}

// scaleUpLimit is the highest count the scale-up policies allow now (HPA's
// calculateScaleUpLimitWithScalingRules): each policy counts from the count at the start of
// its period; Max takes the most permissive policy, Min the least, Disabled allows none.
func scaleUpLimit(cur int32, events []v1alpha1.ScaleEvent, r rules, now time.Time) int32 {
	if r.selected == v1alpha1.SelectDisabled {
		return cur
	}
	result := int32(math.MinInt32)
	if r.selected == v1alpha1.SelectMin {
		result = math.MaxInt32
	}
	for _, p := range r.policies {
		added, removed := changes(events, p.period, now)
		start := cur - added + removed
		var proposed int32
		switch p.typ {
		case v1alpha1.PodsScalingPolicy:
			proposed = start + p.value
		default:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.value)/100)))
		}
		if r.selected == v1alpha1.SelectMin {
			result = min(result, proposed)
		} else {
			result = max(result, proposed)
		}
	}
	return result
}

// scaleDownLimit is the lowest count the scale-down policies allow now (HPA's
// calculateScaleDownLimitWithBehaviors).
func scaleDownLimit(cur int32, events []v1alpha1.ScaleEvent, r rules, now time.Time) int32 {
	if r.selected == v1alpha1.SelectDisabled {
		return cur
	}
	result := int32(math.MaxInt32)
	if r.selected == v1alpha1.SelectMin {
		result = math.MinInt32
	}
	for _, p := range r.policies {
		added, removed := changes(events, p.period, now)
		start := cur - added + removed
		var proposed int32
		switch p.typ {
		case v1alpha1.PodsScalingPolicy:
			proposed = start - p.value
		default:
			proposed = int32(float64(start) * (1 - float64(p.value)/100))
		}
		if r.selected == v1alpha1.SelectMin {
			result = max(result, proposed)
		} else {
			result = min(result, proposed)
		}
	}
	return result
}

// trimRecommendations keeps what the stabilization windows can still use, compactly. A
// recommendation holds until the next one, so one is kept while the next came after now-keep
// (the last one always). Of those, a recommendation that a later one matches or exceeds and a
// later one matches or undercuts can never be the highest nor the lowest of any window that
// sees it: a later one holds until later, so every window that sees it sees them too. It is
// dropped, and the next kept one starts where it started, so that the one before still holds
// until the same instant. What is left is the later recommendations' running maxima and
// minima (two monotonic sequences), at most twice the number of distinct counts whatever the
// rate of change: a 1 h window with a change every 15 s keeps its highest recommendation for
// the whole hour. Only beyond the API's 100 (over 50 distinct counts, each a new extreme
// within the window) do the oldest go.
func trimRecommendations(recs []v1alpha1.Recommendation, now time.Time, keep time.Duration) []v1alpha1.Recommendation {
	cutoff := now.Add(-keep)
	live := make([]v1alpha1.Recommendation, 0, len(recs))
	for i, r := range recs {
		if i+1 < len(recs) && !recs[i+1].At.After(cutoff) {
			continue
		}
		live = append(live, r)
	}
	// Mark, from the newest back, the ones that are a new extreme of what follows them; one
	// not made for a queue also where it is a new extreme of those not made for a queue that
	// follow it (the scale-down window stops holding these once the queue is gone, and the
	// ones they dominated hold again).
	kept := make([]bool, len(live))
	var hi, lo, hiLoad, loLoad int32
	load := false // a recommendation not made for a queue follows
	for i := len(live) - 1; i >= 0; i-- {
		r := live[i].Replicas
		if i == len(live)-1 || r > hi || r < lo || (!live[i].Queued && (!load || r > hiLoad || r < loLoad)) {
			kept[i] = true
		}
		if i == len(live)-1 {
			hi, lo = r, r
		}
		hi, lo = max(hi, r), min(lo, r)
		if !live[i].Queued {
			if !load {
				hiLoad, loLoad, load = r, r, true
			}
			hiLoad, loLoad = max(hiLoad, r), min(loLoad, r)
		}
	}
	out := make([]v1alpha1.Recommendation, 0, len(live))
	var from *metav1.Time // where the first dropped one since the last kept started
	for i, r := range live {
		if !kept[i] {
			if from == nil {
				from = &live[i].At
			}
			continue
		}
		if from != nil {
			r.At, from = *from, nil
		}
		out = append(out, r)
	}
	if len(out) > maxKeptEntries {
		out = out[len(out)-maxKeptEntries:]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// trimEvents keeps the scale events within keep (the longest policy period) before now, at
// most the API's 100, newest last. Dropping older events beyond 100 can only under-count past
// changes, i.e. allow a little more than a very long period with more than 100 changes would.
func trimEvents(events []v1alpha1.ScaleEvent, now time.Time, keep time.Duration) []v1alpha1.ScaleEvent {
	cutoff := now.Add(-keep)
	var out []v1alpha1.ScaleEvent
	for _, e := range events {
		if e.At.After(cutoff) {
			out = append(out, e)
		}
	}
	if len(out) > maxKeptEntries {
		out = out[len(out)-maxKeptEntries:]
	}
	return out
}
