package autoscale

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/sample"
)

// Decide computes the total replica count for one ModelServer at now.
//
// The steps, HPA's where HPA has one:
//  1. Each spec metric proposes a count (see the rules on propose); the largest wins.
//     With no proposal at all the count is held (never read as zero load) and no
//     recommendation is recorded. With some metrics missing, the winner may scale up but a
//     scale-down is held at Current: a missing metric might be the one that needs the replicas.
//  2. Stabilization: the recommendation is recorded; the count moves up only to the lowest
//     recommendation of the scale-up window and down only to the highest of the scale-down
//     window. On the first pass (no recorded recommendation) Current is recorded first, as HPA
//     does at start, so a new or restarted controller does not scale down at once. With
//     spec.autoscaling.slo, a token work whose window is still filling with traffic holds a
//     scale-down at Current for the pass (its recommendation still recorded).
//  3. Rate limits: the policies of the direction (Max: the most permissive, Min: the least,
//     Disabled: none), each counted from the count at the start of its period, as HPA does
//     from the scale events kept in status.
//  4. Bounds [minReplicas, maxReplicas], applied last, so that a count outside them moves to
//     them at once.
//  5. GPU capacity and quota cap the increase above max(Current, minReplicas): the total
//     grows only as far as the pods it needs (Input.PodsFor) fit.
func Decide(in Input, now time.Time) Output {
	s := resolve(in.Spec)
	cur := max(in.Current, 0)
	out := Output{RequeueAfter: s.interval, MetricsAvailable: true, MetricsMessage: "all metrics have data", LimitedReason: v1alpha1.ReasonWithinBounds}
	var prev v1alpha1.AutoscalingStatus
	if in.Previous != nil {
		prev = *in.Previous
	}
	st := v1alpha1.AutoscalingStatus{LastScaleTime: prev.LastScaleTime, LastScaleReason: prev.LastScaleReason}
	var held []string

	// 1. Proposals, on the targets learnt from the replicas beyond capacity where the spec asks.
	st.LearnedCapacities = s.learn(in, prev.LearnedCapacities, now)
	var slo sloState
	var sloKnown bool
	if s.hasSLO {
		if slo, sloKnown = learnSLO(s.slo, in, in.Previous, now, s.sloColdStart(in.ServingWindow), s.interval); sloKnown {
			st.LearnedCapacities = append(st.LearnedCapacities, slo.status())
		}
	}
	props, best, missing := s.propose(in, cur, st.LearnedCapacities)
	if s.hasSLO {
		st.Queue = queueSample(in, now)
		p, ok := s.proposeSLO(in, cur, slo, sloKnown, now)
		props = append(props, p)
		switch {
		case !ok:
			missing = append(missing, MetricSLO+": "+p.Message)
		case best < 0 || *p.Replicas > *props[best].Replicas:
			best = len(props) - 1
		}
	}
	st.Proposals = props
	recs := append([]v1alpha1.Recommendation(nil), prev.Recommendations...)
	rec, recorded := cur, false
	switch {
	case best < 0:
		out.MetricsAvailable = false
		out.MetricsMessage = fmt.Sprintf("no metric has data (%s); holding %d replicas", strings.Join(missing, "; "), cur)
	default:
		rec, recorded = *props[best].Replicas, true
		if len(missing) > 0 {
			out.MetricsAvailable = false
			out.MetricsMessage = fmt.Sprintf("some metrics have no data (%s); scaling down is held", strings.Join(missing, "; "))
			if rec < cur {
				held = append(held, fmt.Sprintf("scale-down to %d held while metrics are missing", rec))
				rec = cur
			}
		}
	}

	// 2. Stabilization windows.
	// Each recommendation holds from its time until the next one (the last one until now): a
	// window sees every value that held at some moment of it. want is the highest of the
	// scale-down window, what the count is kept for: the limits below are judged on it, so
	// that a pass whose metrics dip for a moment (new pods idle until traffic reaches them),
	// a rate limit or a pass without data does not report a clamp as gone while the window
	// still holds the recommendation that hit it.
	up, down := rec, rec // rec is cur when nothing was recorded
	recMetric := ""
	if recorded {
		recMetric = props[best].Metric
	}
	// A count the slo asked for while a queue is kept in status (requests queued, or a backlog
	// draining, or the windows after it whose latencies are its wait) is the queue's: the fast
	// path sizes the fleet for the arrivals and the queue's drain, and the token work read is
	// what the replicas serve, the backlog included. Once the queue is gone from
	// status and the window holds the SLO with margin (the fleet carries what arrives with
	// room), the scale-down window no longer holds it, only what the load asked for before and
	// since. Held for the window, a flash crowd's 28 replicas (asked for on the work the
	// backlog's drain added) stayed 5 minutes after its queue was gone, where the arrivals
	// needed 19. Without the margin, the queue may have said the capacity learnt is no longer
	// the replicas' (a tenant with long prompts come in, its first windows after the queue at
	// the SLO's edge): the window holds the fleet as for any count.
	recQueued := recorded && recMetric == MetricSLO && st.Queue != nil
	queueGone := s.hasSLO && st.Queue == nil && s.slo.withMargin(in, slo)
	if recorded && len(recs) == 0 {
		recs = append(recs, v1alpha1.Recommendation{At: metav1.NewTime(now), Replicas: cur})
	}
	for i, r := range recs {
		until := now
		if i+1 < len(recs) {
			until = recs[i+1].At.Time
		}
		if until.After(now.Add(-s.up.window)) {
			up = min(up, r.Replicas)
		}
		if until.After(now.Add(-s.down.window)) && !(r.Queued && queueGone) {
			down = max(down, r.Replicas)
		}
	}
	want := down
	desired := cur
	var follows string // the window's recommendation the count follows, for the reason
	if recorded {
		desired = max(desired, up)
		desired = min(desired, down)
		follows = s.follows(recs, rec, desired, now, queueGone)
		if rec > cur && desired < rec {
			held = append(held, fmt.Sprintf("scale-up stabilization window %s holds %d (lowest recommendation)", s.up.window, desired))
		}
		if rec < cur && desired > rec {
			held = append(held, fmt.Sprintf("scale-down stabilization window %s holds %d (highest recommendation)", s.down.window, desired))
		}
		// Only a change is recorded: a steady recommendation leaves the status as it is, so a
		// pass that changes nothing writes nothing.
		if last := recs[len(recs)-1]; last.Replicas != rec || last.Queued != recQueued {
			recs = append(recs, v1alpha1.Recommendation{At: metav1.NewTime(now), Replicas: rec, Metric: recMetric, Queued: recQueued})
		}
	}

	if desired < cur && s.hasSLO && in.Load.Filling && usable(in.Load) && in.Load.Value > 0 {
		// Traffic that started, or came back after an idle spell, within the serving window:
		// its rate reads the start, a part of the level for each scrape it has been there
		// (a few percent on the first pass), so no scale-down is taken on it. Unlike missing
		// data, what the proposals recorded stays: this pass only holds, and once the window
		// is full, or at a pass of trickling traffic whose rate stays up a whole window, the
		// windows decide as before. Taken on the read, a fleet that had idled 5 minutes was
		// cut from 9 replicas to 5 in the 30 s its traffic came back, and missed 5 minutes.
		held = append(held, fmt.Sprintf("scale-down to %d held while the token work's window fills (the traffic started within it)", desired))
		desired = cur
	}

	// 3. Rate limits.
	if desired > cur {
		limit := max(scaleUpLimit(cur, prev.Events, s.up, now), cur)
		if desired > limit {
			held = append(held, fmt.Sprintf("scale-up rate limited to %d", limit))
			desired = limit
		}
	} else if desired < cur {
		limit := min(scaleDownLimit(cur, prev.Events, s.down, now), cur)
		if desired < limit {
			held = append(held, fmt.Sprintf("scale-down rate limited to %d", limit))
			desired = limit
		}
	}

	// 4. Bounds.
	askFor := func() string {
		switch {
		case want > rec:
			return fmt.Sprintf("metrics asked for %d replicas within the scale-down stabilization window %s", want, s.down.window)
		case rec == cur:
			return fmt.Sprintf("the count is %d", cur)
		}
		return fmt.Sprintf("metrics ask for %d replicas", rec)
	}
	switch {
	case desired > s.max || want > s.max:
		out.Limited, out.LimitedReason = true, v1alpha1.ReasonBoundsLimited
		out.LimitedMessage = fmt.Sprintf("%s, maxReplicas is %d", askFor(), s.max)
		desired = min(desired, s.max)
	case desired < s.min || (recorded && rec < s.min):
		out.Limited, out.LimitedReason = true, v1alpha1.ReasonBoundsLimited
		out.LimitedMessage = fmt.Sprintf("%s, minReplicas is %d", askFor(), s.min)
		desired = max(desired, s.min)
	}

	// 5. GPU capacity and quota, counted in pods (see Input.PodsFor), judged on the most the
	// count may grow to: desired, or want within the bounds. capped is the clamp's message when
	// it lowered desired itself, for the scale reason.
	capped := ""
	if c := in.Capacity; c != nil && c.MaxAdditional >= 0 {
		if target := max(desired, min(want, s.max)); target > cur {
			pods := in.PodsFor
			if pods == nil {
				pods = func(total int32) int32 { return total }
			}
			base := pods(cur)
			allowed := cur
			for n := cur + 1; n <= target && pods(n)-base <= c.MaxAdditional; n++ {
				allowed = n
			}
			allowed = max(allowed, min(max(cur, s.min), s.max))
			if target > allowed {
				out.Limited, out.LimitedReason = true, c.Reason
				out.LimitedMessage = fmt.Sprintf("capped at %d replicas: %s", allowed, c.MessageFor(pods(target)-base))
				if desired > allowed {
					capped, desired = out.LimitedMessage, allowed
				}
			}
		}
	}

	// Memory for the next pass, and the change.
	recKeep, evKeep := s.keepFor()
	if s.hasSLO {
		// The slo judges a window by the scale events within it and within a cold start
		// before it (learnSLO): they are kept that long, not only for the rate limits.
		evKeep = max(evKeep, s.sloMemory(in.ServingWindow))
	}
	events := append([]v1alpha1.ScaleEvent(nil), prev.Events...)
	if desired != cur {
		events = append(events, v1alpha1.ScaleEvent{At: metav1.NewTime(now), From: cur, To: desired})
		why := s.cause(props, best, cur, desired, capped)
		if follows != "" && cur >= s.min && cur <= s.max {
			why = follows + "; now " + why
		}
		st.LastScaleTime = &metav1.Time{Time: now}
		st.LastScaleReason = fmt.Sprintf("%d -> %d: %s", cur, desired, why)
		reason := ReasonScaledUp
		if desired < cur {
			reason = ReasonScaledDown
		}
		out.Event = &Event{Type: corev1.EventTypeNormal, Reason: reason, Message: fmt.Sprintf("%d -> %d replicas: %s", cur, desired, why)}
	}
	st.Recommendations = trimRecommendations(recs, now, recKeep)
	st.Events = trimEvents(events, now, evKeep)
	st.DesiredReplicas = desired
	out.Desired = desired
	out.Unserved = s.unservedAtZero(in.Observations, desired)
	out.Status = st
	out.Held = strings.Join(held, "; ")
	return out
}

// follows names the recommendation of the stabilization windows that desired follows when it
// is not this pass's (rec): the latest within the window of the direction that holds it, with
// its time and metric. Empty when desired is rec. queueGone: the queue's recommendations no
// longer hold.
func (s settings) follows(recs []v1alpha1.Recommendation, rec, desired int32, now time.Time, queueGone bool) string {
	if desired == rec {
		return ""
	}
	rules, dir := s.down, "scale-down"
	if desired < rec {
		rules, dir = s.up, "scale-up"
	}
	for i := len(recs) - 1; i >= 0; i-- {
		until := now
		if i+1 < len(recs) {
			until = recs[i+1].At.Time
		}
		if !until.After(now.Add(-rules.window)) {
			break
		}
		r := recs[i]
		if r.Replicas != desired || (r.Queued && queueGone && desired > rec) {
			continue
		}
		by := r.Metric
		if by == "" {
			by = "the count then"
		}
		return fmt.Sprintf("follows the recommendation of %d at %s (%s), kept by the %s stabilization window %s",
			r.Replicas, r.At.UTC().Format(time.RFC3339), by, dir, rules.window)
	}
	return ""
}

// cause explains a change: the winning metric against its target, or the bounds.
func (s settings) cause(props []v1alpha1.Proposal, best int, cur, desired int32, capped string) string {
	var why string
	switch {
	case cur > s.max || cur < s.min:
		why = fmt.Sprintf("outside bounds [%d, %d]", s.min, s.max)
	case best >= len(s.metrics):
		p := props[best]
		why = fmt.Sprintf("%s: token work %s", p.Metric, p.Value)
		if p.Target != "" {
			why += fmt.Sprintf(" (target %s per replica)", p.Target)
		}
		if p.Message != "" && p.Message != "within tolerance" {
			why += ", " + p.Message
		}
	case best >= 0:
		p := props[best]
		k, tgt := target(s.metrics[best])
		switch k {
		case saturated:
			why = fmt.Sprintf("%s %s (%s)", p.Metric, p.Value, p.Message)
		case total:
			why = fmt.Sprintf("%s %s (target %s per replica)", p.Metric, p.Value, p.Target)
			if strings.HasPrefix(p.Message, risingPrefix) {
				why += ", " + p.Message
			}
		default:
			v, _ := strconv.ParseFloat(p.Value, 64)
			op := "="
			if v > tgt {
				op = ">"
			} else if v < tgt {
				op = "<"
			}
			why = fmt.Sprintf("%s %s %s target %s", p.Metric, p.Value, op, p.Target)
			if p.Message != "" && p.Message != "within tolerance" {
				why += ", " + p.Message
			}
		}
	default:
		why = "no metric has data"
	}
	if capped != "" {
		why += "; " + capped
	}
	return why
}

// propose turns each spec metric's observation into a proposal. It returns the proposals in
// spec order, the index of the largest (-1 when none) and a description of each missing metric.
func (s settings) propose(in Input, cur int32, learnt []v1alpha1.LearnedCapacity) ([]v1alpha1.Proposal, int, []string) {
	obs := make(map[string]Observation, len(in.Observations))
	for _, o := range in.Observations {
		obs[o.Metric] = o
	}
	props := make([]v1alpha1.Proposal, len(s.metrics))
	best := -1
	var missing []string
	for i, m := range s.metrics {
		name := s.names[i]
		k, tgt := target(m)
		p := v1alpha1.Proposal{Metric: name, Target: fmtNum(tgt)}
		if t, desc, ok := learntTarget(m, name, learnt); ok {
			tgt, p.Target = t, desc
		}
		o, ok := obs[name]
		var n int32
		valid := false
		switch {
		case !ok:
			p.Message = "not observed"
		case o.Status != sample.OK:
			p.Message = string(o.Status)
			if o.Message != "" {
				p.Message += ": " + o.Message
			}
		case !(tgt > 0) || math.IsInf(tgt, 0):
			p.Message = "target must be a positive number"
		case math.IsNaN(o.Value) || math.IsInf(o.Value, 0) || o.Value < 0:
			p.Value = fmtNum(o.Value)
			p.Message = "value is not a finite non-negative number"
		case k == saturated:
			if o.Saturation == nil {
				p.Message = "no saturation sample"
				break
			}
			st := resolveSaturation(m.Saturation)
			p.Target = st.String()
			p.Value = fmt.Sprintf("%d/%d saturated", o.Saturation.Saturated, o.Saturation.Pods)
			n, p.Message = proposeSaturation(st, o, cur)
			valid = true
		default:
			p.Value = fmtNum(o.Value)
			n, p.Message, valid = replicas(k, o, tgt, s.tolerance, cur, in.Ready)
			if valid && k == total {
				n, p.Message = s.project(o, tgt, cur, n, p.Message)
			}
		}
		if !valid {
			missing = append(missing, name+": "+p.Message)
			props[i] = p
			continue
		}
		p.Replicas = &n
		props[i] = p
		if best < 0 || n > *props[best].Replicas {
			best = i
		}
	}
	return props, best, missing
}

// project raises a total metric's proposal n to the replicas of the load projected
// spec.autoscaling.projectionHorizon ahead along a rising trend, when that is more than both n and Current: replicas
// asked for now serve only after the cold start. A flat or falling trend changes nothing.
func (s settings) project(o Observation, tgt float64, cur, n int32, msg string) (int32, string) {
	if s.projectionHorizon <= 0 || !o.HasTrend || !(o.Trend > 0) || math.IsInf(o.Trend, 0) {
		return n, msg
	}
	ahead := o.Value + o.Trend*s.projectionHorizon.Seconds()
	p := ceil(ahead / tgt)
	if p <= n || p <= cur {
		return n, msg
	}
	return p, fmt.Sprintf("%s %s/s: %s projected in %s", risingPrefix, fmtNum(o.Trend), fmtNum(ahead), s.projectionHorizon)
}

// risingPrefix starts the message of a proposal raised by project, which cause repeats.
const risingPrefix = "rising"

// replicas is one metric's proposal.
//
// Average metrics (HPA's ratio rule): ratio = value/target over the Ready pods with a sample;
// within the tolerance the proposal is Current; else ceil(pods * ratio). Ready pods without a
// sample count as 0 when scaling up and as on target when scaling down (HPA's treatment); if
// that flips the direction or lands within the tolerance, the proposal is Current, and it
// never makes a utilization below target propose more than Current (mid-rollout, when both
// colors' Ready pods outnumber the total).
//
// Cold start: pods not Ready bring no capacity and are not averaged as idle; the count is
// computed relative to the Ready pods, and a proposal above them but not above Current is
// Current: the pods still starting will absorb that load, so scaling up again for it would
// cascade (2, 4, 8, 16 while models load).
//
// Total metrics: ceil(total / target), Current when total/(target*Current) is within
// the tolerance. Ready pods that did not report are assumed on target when that would scale
// down (never adding replicas for them).
func replicas(k kind, o Observation, tgt, tol float64, cur, ready int32) (int32, string, bool) {
	miss := max(o.MissingPods, 0)
	if k == total {
		eff := o.Value
		if miss > 0 && o.Value/tgt < float64(cur) {
			eff = math.Min(o.Value+float64(miss)*tgt, tgt*float64(cur))
		}
		if cur > 0 && math.Abs(eff/(tgt*float64(cur))-1) <= tol {
			return cur, "within tolerance", true
		}
		return ceil(eff / tgt), "", true
	}
	pods := o.Pods
	if pods <= 0 {
		pods = ready - miss
	}
	if pods <= 0 {
		return 0, "no Ready pod to average over", false
	}
	ratio := o.Value / tgt
	adj := ratio
	if miss > 0 {
		all := float64(pods + miss)
		if ratio > 1 {
			adj = o.Value * float64(pods) / (tgt * all)
		} else if ratio < 1 {
			adj = (o.Value*float64(pods) + tgt*float64(miss)) / (tgt * all)
		}
	}
	if math.Abs(adj-1) <= tol || (ratio > 1) != (adj > 1) {
		return cur, "within tolerance", true
	}
	base := pods + miss
	n := ceil(float64(base) * adj)
	if miss > 0 && ratio < 1 && n > cur {
		// Pods without a sample are assumed on target only to soften a scale-down (HPA's rule,
		// where Ready pods never outnumber Current). Mid-rollout both colors' Ready pods exceed
		// the total, and the assumption alone must not turn a low utilization into a scale-up.
		if m := ceil(float64(pods) * ratio); m <= cur {
			return cur, fmt.Sprintf("%d of %d Ready pods without a sample: holding", miss, base), true
		}
	}
	if n > base && n <= cur {
		return cur, fmt.Sprintf("%d Ready pods need %d; the %d not Ready yet will take that load", base, n, cur-base), true
	}
	if base != cur {
		// Both colors' Ready pods mid-rollout, or pods still starting: the count is the work
		// of the pods measured, which the comparison per pod does not show.
		return n, fmt.Sprintf("over %d Ready pods: %s replicas' worth at target", base, fmtNum(float64(base)*adj)), true
	}
	return n, "", true
}

// ceil rounds up, forgiving float noise (2.0000000001 is 2), within int32.
func ceil(x float64) int32 {
	c := math.Ceil(x - 1e-9)
	if c >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(c, 0))
}

// fmtNum formats a value for status and messages with at most three decimals.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
