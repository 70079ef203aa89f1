//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/bench/scalebench"
	"github.com/modelship/modelship/test/framework/devenv"
)

// restartSimulator replaces the simulator with one replaying the trace at rate.
func restartSimulator(t *testing.T, rate float64) {
	t.Helper()
	if err := st.RestartSimulator(rate); err != nil {
		t.Fatal(err)
	}
}

// scaleEvents collects the autoscaler's scale events from status as they appear (status keeps
// only those the rate limits still need).
type scaleEvents map[string]v1alpha1.ScaleEvent

func (e scaleEvents) add(v view) {
	if a := v.ms.Status.Autoscaling; a != nil {
		for _, ev := range a.Events {
			e[fmt.Sprintf("%d:%d:%d", ev.At.Unix(), ev.From, ev.To)] = ev
		}
	}
}

func (e scaleEvents) sorted() []v1alpha1.ScaleEvent {
	out := make([]v1alpha1.ScaleEvent, 0, len(e))
	for _, ev := range e {
		out = append(out, ev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(&out[j].At) })
	return out
}

func (e scaleEvents) String() string {
	var s []string
	for _, ev := range e.sorted() {
		s = append(s, fmt.Sprintf("%s %d->%d", ev.At.Format("15:04:05"), ev.From, ev.To))
	}
	return strings.Join(s, ", ")
}

func storySurgeAndTrough(t *testing.T) {
	const low, surge = 0.05, 1.5
	const minR, maxR, policyPods = 2, 8, 2
	const policyPeriod, downWindow = 10 * time.Second, 30 * time.Second
	ns := namespace(t, "story-surge")
	ms := newModelServer(ns, "llama", imageV1, func(ms *v1alpha1.ModelServer) {
		a := ms.Spec.Autoscaling
		a.MinReplicas, a.MaxReplicas = ptr.To(int32(minR)), maxR
		a.Behavior = v1alpha1.ScalingBehavior{
			ScaleUp:   &v1alpha1.ScalingRules{Policies: []v1alpha1.ScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: policyPods, Period: v1alpha1.Duration{Duration: policyPeriod}}}},
			ScaleDown: &v1alpha1.ScalingRules{StabilizationWindow: &v1alpha1.Duration{Duration: downWindow}},
		}
	})
	given(t, "a %s, scaling up by at most %d pods per %s and down after a %s stabilization window", describe(ms), policyPods, policyPeriod, downWindow)
	and(t, "a quiet trace (rate scale %g, about %.0f requests/s)", low, 55*low)
	restartSimulator(t, low)
	t.Cleanup(func() {
		if err := st.RestartSimulator(rateScale); err != nil {
			t.Errorf("restoring the simulator's load: %v", err)
		}
	})
	create(t, ms, 3*time.Minute)
	follow(t, ns, ms.Name, 2*time.Minute, fmt.Sprintf("%d replicas on a quiet trace", minR), weightsInvariant, func(v view) bool {
		return v.desired() == minR && v.ms.Status.ReadyReplicas == minR
	})

	when(t, "the load surges (rate scale %g, about %.0f requests/s)", surge, 55*surge)
	evs := scaleEvents{}
	began := time.Now()
	restartSimulator(t, surge)
	var firstUp time.Time
	v := follow(t, ns, ms.Name, 3*time.Minute, fmt.Sprintf("%d Ready replicas", maxR), func(v view) error {
		evs.add(v)
		if d := v.desired(); d > minR && firstUp.IsZero() {
			firstUp = v.at
		}
		if d := v.desired(); d > maxR || d < minR {
			return fmt.Errorf("desired replicas %d outside [%d, %d]", d, minR, maxR)
		}
		return weightsInvariant(v)
	}, func(v view) bool { return v.desired() == maxR && v.ms.Status.ReadyReplicas == maxR })
	up := time.Since(began)
	then(t, "it scales up to maxReplicas %d, never faster than %d pods per %s: %s", maxR, policyPods, policyPeriod, evs)
	for _, ev := range evs.sorted() {
		if ev.To <= ev.From {
			continue
		}
		added := int32(0)
		for _, o := range evs.sorted() {
			if o.To > o.From && o.At.After(ev.At.Add(-policyPeriod)) && !o.At.After(ev.At.Time) {
				added += o.To - o.From
			}
		}
		if added > policyPods {
			t.Errorf("%d pods added in the %s up to %s, policy allows %d: %s", added, policyPeriod, ev.At.Format("15:04:05"), policyPods, evs)
		}
	}
	if min := time.Duration((maxR-minR)/policyPods-1) * policyPeriod; v.at.Sub(firstUp) < min-time.Second {
		t.Errorf("went from %d to %d in %s, the policy needs at least %s", minR, maxR, v.at.Sub(firstUp), min)
	}
	wanted := int32(0)
	for _, p := range v.ms.Status.Autoscaling.Proposals {
		if p.Replicas != nil {
			wanted = max(wanted, *p.Replicas)
		}
	}
	if c := v.condition(v1alpha1.ConditionScalingLimited); wanted <= maxR || c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonBoundsLimited {
		t.Errorf("at maxReplicas the metrics propose %d and ScalingLimited is %+v, want more than %d and True BoundsLimited", wanted, c, maxR)
	} else {
		and(t, "ScalingLimited says: %s", c.Message)
	}

	when(t, "the load drops to a trough (rate scale %g)", low)
	var lastHigh time.Time
	for _, r := range v.ms.Status.Autoscaling.Recommendations {
		if r.Replicas >= maxR && r.At.After(lastHigh) {
			lastHigh = r.At.Time
		}
	}
	troughAt := time.Now()
	restartSimulator(t, low)
	var firstDown *v1alpha1.ScaleEvent
	v = follow(t, ns, ms.Name, 3*time.Minute, fmt.Sprintf("back to %d replicas", minR), func(v view) error {
		evs.add(v)
		// Recommendations of at least maxReplicas made after the surge's last one also hold.
		if a := v.ms.Status.Autoscaling; a != nil && firstDown == nil {
			for _, r := range a.Recommendations {
				if r.Replicas >= maxR && r.At.After(lastHigh) {
					lastHigh = r.At.Time
				}
			}
			for _, ev := range a.Events {
				if ev.To < ev.From && ev.At.After(troughAt.Add(-time.Second)) {
					firstDown = ev.DeepCopy()
				}
			}
		}
		return weightsInvariant(v)
	}, func(v view) bool { return v.desired() == minR && v.ms.Status.Replicas == minR })
	down := time.Since(troughAt)
	then(t, "it scales down to %d only once the %s window holds no high recommendation: %s", minR, downWindow, evs)
	if firstDown == nil {
		t.Fatalf("no scale-down event seen")
	}
	if lastHigh.IsZero() {
		t.Errorf("no recommendation of %d or more was kept during the surge", maxR)
	} else if firstDown.At.Time.Before(lastHigh.Add(downWindow - time.Second)) {
		t.Errorf("scaled down at %s, within the %s stabilization window after a recommendation of %d at %s",
			firstDown.At.Format("15:04:05"), downWindow, maxR, lastHigh.Format("15:04:05"))
	}
	figure(t, "time to scale up on a surge", "%d -> %d Ready in %s (first scale-up after %s)", minR, maxR, secs(up), secs(firstUp.Sub(began)))
	figure(t, "time to scale down after the trough", "%d -> %d in %s (first scale-down %s after the trough, stabilization %s)",
		maxR, minR, secs(down), secs(firstDown.At.Sub(troughAt)), downWindow)
}

func storyPrometheusDown(t *testing.T) {
	ns := namespace(t, "story-prometheus")
	ms := newModelServer(ns, "llama", imageV1, func(ms *v1alpha1.ModelServer) {
		a := ms.Spec.Autoscaling
		a.MaxReplicas = 8
		// 40% rather than 70%: see the known issue on storyGoodVersionPromoted.
		a.Metrics = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: 40}}}
	})
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()
	follow(t, ns, ms.Name, time.Minute, "MetricsAvailable=True", weightsInvariant, func(v view) bool {
		c := v.condition(v1alpha1.ConditionMetricsAvailable)
		return c != nil && c.Status == metav1.ConditionTrue && v.desired() > 0
	})
	rev := setImage(t, ns, ms.Name, imageGood)
	var weights []int32
	var first time.Time
	inv := func(v view) error {
		if err := monotonicNew(v, newColor, &weights, &first); err != nil {
			return err
		}
		if v.phase() == v1alpha1.PhaseRolledBack {
			return fmt.Errorf("rolled back: %+v", v.ms.Status.History)
		}
		return nil
	}
	and(t, "a rollout of %s that has just reached its second step", imageGood)
	v := follow(t, ns, ms.Name, 3*time.Minute, "step 2", inv, func(v view) bool { return v.ms.Status.Rollout.Step == 2 })

	when(t, "Prometheus stops")
	p := st.Env.Process(devenv.PartPrometheus)
	if err := p.Stop(); err != nil {
		t.Fatalf("stopping Prometheus: %v", err)
	}
	stopped := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = p.Restart()
		}
	})
	// The invariant: no decision is taken on missing data. Decisions on data Prometheus gave
	// before it went down may still land after Stop returns: Prometheus answers until its
	// shutdown completes, and the autoscaler's signal cache serves a snapshot for up to its
	// interval (2 s here). So the baseline is the first state written by a pass that fetched no
	// data (every autoscaling proposal without a count and MetricsAvailable False); from then on
	// nothing may move. (A fresh clone once failed here with blue 6 -> 7 right after the stop:
	// a scale-up decided on data fetched before it, see TestPrometheusOutageHoldsFromTheFirstPassThatSeesIt
	// in internal/autoscale.)
	v = follow(t, ns, ms.Name, time.Minute, "a reconcile that saw no data", inv, func(v view) bool {
		return sawNoData(v)
	})
	unavailableAt := v.at
	held := v.ms.Status
	heldReplicas := map[v1alpha1.Color]int32{v1alpha1.Blue: v.replicas(v1alpha1.Blue), v1alpha1.Green: v.replicas(v1alpha1.Green)}
	and(t, "the controller sees the outage %s after the stop: step %d, weights %d/%d, %d replicas wanted (blue %d, green %d)",
		secs(unavailableAt.Sub(stopped)), held.Rollout.Step, held.Weights.Stable, held.Weights.Candidate, held.Autoscaling.DesiredReplicas,
		heldReplicas[v1alpha1.Blue], heldReplicas[v1alpha1.Green])
	holdFor := ms.Spec.Rollout.StepDuration.Duration + 20*time.Second
	v = hold(t, ns, ms.Name, holdFor, "the rollout to hold", func(v view) error {
		if err := inv(v); err != nil {
			return err
		}
		s := v.ms.Status
		if s.Rollout.Step != held.Rollout.Step || s.Weights != held.Weights || v.route[newColor] != held.Weights.Candidate {
			return fmt.Errorf("moved without Prometheus: step %d weights %+v route %v, held at step %d weights %+v", s.Rollout.Step, s.Weights, v.route, held.Rollout.Step, held.Weights)
		}
		if s.Autoscaling == nil || s.Autoscaling.DesiredReplicas != held.Autoscaling.DesiredReplicas {
			return fmt.Errorf("the autoscaler moved without Prometheus: desired %d, held at %d", v.desired(), held.Autoscaling.DesiredReplicas)
		}
		for c, n := range heldReplicas {
			if v.replicas(c) != n {
				return fmt.Errorf("Deployment %s went from %d to %d replicas without Prometheus", c, n, v.replicas(c))
			}
		}
		return nil
	})
	then(t, "for %s (longer than a step) the weights stay at %d/%d, the autoscaler holds %d replicas and MetricsAvailable is False",
		holdFor, held.Weights.Stable, held.Weights.Candidate, held.Autoscaling.DesiredReplicas)
	c := v.condition(v1alpha1.ConditionMetricsAvailable)
	if c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("MetricsAvailable %+v after %s without Prometheus, want False", c, holdFor)
	}
	and(t, "MetricsAvailable says: %s", c.Message)
	if v.phase() != v1alpha1.PhaseProgressing {
		t.Errorf("phase %s while Prometheus is down, want Progressing (held, not decided)", v.phase())
	}
	if r := v.condition(v1alpha1.ConditionReconciling); r == nil || r.Reason != v1alpha1.ReasonInconclusive {
		t.Logf("note: Reconciling condition while held: %+v", r)
	}

	when(t, "Prometheus comes back")
	if err := p.Restart(); err != nil {
		t.Fatalf("restarting Prometheus: %v", err)
	}
	restarted = true
	back := time.Now()
	var resumedAt time.Time
	v = follow(t, ns, ms.Name, 4*time.Minute, "promotion of "+rev, func(v view) error {
		if v.ms.Status.Rollout.Step > held.Rollout.Step && resumedAt.IsZero() {
			resumedAt = v.at
		}
		return inv(v)
	}, func(v view) bool { return v.healthyOn(rev) })
	then(t, "the rollout goes on and %s is promoted; MetricsAvailable is True again", imageGood)
	v = follow(t, ns, ms.Name, time.Minute, "MetricsAvailable=True", weightsInvariant, func(v view) bool {
		c := v.condition(v1alpha1.ConditionMetricsAvailable)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if resumedAt.IsZero() {
		resumedAt = v.at
	}
	figure(t, "Prometheus outage mid-rollout", "held %s at step %d (MetricsAvailable False %s after the stop); next step %s after Prometheus returned; promoted %s after it returned",
		secs(back.Sub(stopped)), held.Rollout.Step, secs(unavailableAt.Sub(stopped)), secs(resumedAt.Sub(back)), secs(time.Since(back)))
}

// sawNoData: the status was written by a pass whose autoscaler had no data for any metric and
// said so (MetricsAvailable False).
func sawNoData(v view) bool {
	a := v.ms.Status.Autoscaling
	c := v.condition(v1alpha1.ConditionMetricsAvailable)
	if a == nil || len(a.Proposals) == 0 || c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	for _, p := range a.Proposals {
		if p.Replicas != nil {
			return false
		}
	}
	return true
}

func storyControllerKilled(t *testing.T) {
	ns := namespace(t, "story-controller")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas))
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageGood)
	var weights []int32
	var first time.Time
	steps := []int32{0}
	inv := func(v view) error {
		if err := monotonicNew(v, newColor, &weights, &first); err != nil {
			return err
		}
		s := v.ms.Status
		if s.Candidate != nil && s.Candidate.Revision == rev {
			if last := steps[len(steps)-1]; s.Rollout.Step < last {
				return fmt.Errorf("step went back from %d to %d", last, s.Rollout.Step)
			} else if s.Rollout.Step != last {
				steps = append(steps, s.Rollout.Step)
			}
		}
		if s.Phase == v1alpha1.PhaseRolledBack {
			return fmt.Errorf("rolled back: %+v", s.History)
		}
		return nil
	}
	and(t, "a rollout of %s at its second step", imageGood)
	v := follow(t, ns, ms.Name, 3*time.Minute, "step 2", inv, func(v view) bool { return v.ms.Status.Rollout.Step == 2 })

	when(t, "the controller is killed (SIGKILL) and comes back 15s later")
	killedAt := v.ms.Status
	if err := st.Controller.Kill(); err != nil {
		t.Fatalf("killing the controller: %v", err)
	}
	killed := time.Now()
	hold(t, ns, ms.Name, 15*time.Second, "nothing to move while the controller is away", func(v view) error {
		if err := inv(v); err != nil {
			return err
		}
		if v.ms.Status.Rollout.Step != killedAt.Rollout.Step || v.route[newColor] != killedAt.Weights.Candidate {
			return fmt.Errorf("moved without a controller: step %d route %v", v.ms.Status.Rollout.Step, v.route)
		}
		return nil
	})
	if err := st.Controller.Restart(); err != nil {
		t.Fatalf("restarting the controller: %v", err)
	}
	back := time.Now()
	var nextStep time.Time
	v = follow(t, ns, ms.Name, 3*time.Minute, "promotion of "+rev, func(v view) error {
		if v.ms.Status.Rollout.Step > killedAt.Rollout.Step && nextStep.IsZero() {
			nextStep = v.at
		}
		return inv(v)
	}, func(v view) bool { return v.healthyOn(rev) })
	then(t, "the rollout resumes at step %d and goes on to promotion: steps %v, candidate weights %v, never backwards", killedAt.Rollout.Step, steps[1:], weights)
	if want := goodWeights; fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Errorf("candidate weights seen %v, want %v", weights, want)
	}
	if want := []int32{1, 2, 3}; fmt.Sprint(steps[1:]) != fmt.Sprint(want) {
		t.Errorf("steps seen %v, want %v", steps[1:], want)
	}
	h := v.ms.Status.History
	if len(h) != 1 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomePromoted {
		t.Errorf("history %+v, want only %s Promoted", h, rev)
	}
	started := 0
	for _, r := range events(t, ns, ms.Name) {
		if r == "RolloutStarted" {
			started++
		}
	}
	if started != 1 {
		t.Errorf("%d RolloutStarted events, want 1: the restarted controller began the rollout again", started)
	}
	stepEnd := killedAt.Rollout.StepStartedAt.Add(ms.Spec.Rollout.StepDuration.Duration)
	figure(t, "controller killed mid-rollout", "away %s at step %d; next step %s after restart (step timer ran out %s after restart); promoted %s after the release",
		secs(back.Sub(killed)), killedAt.Rollout.Step, secs(nextStep.Sub(back)), secs(stepEnd.Sub(back)), secs(time.Since(began)))
}

// leaderOf returns which of the controllers' metrics endpoints reports itself the leader.
func leaderOf(urls map[string]string) string {
	for name, url := range urls {
		s, err := scalebench.ScrapeMetrics(context.Background(), url)
		if err != nil {
			continue
		}
		if s.Sum("leader_election_master_status", map[string]string{"name": controllerLeaseName}) == 1 {
			return name
		}
	}
	return ""
}

// controllerLeaseName is the controller's LeaderElectionID (cmd/modelship-controller).
const controllerLeaseName = "modelship-controller.serving.modelship.dev"

func storyLeaderFailover(t *testing.T) {
	ns := namespace(t, "story-failover")
	when(t, "the controller runs as two replicas with leader election, as the manifests deploy it")
	if err := st.Controller.Stop(); err != nil {
		t.Fatalf("stopping the single controller: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Controller.Restart(); err != nil {
			t.Errorf("restarting the single controller: %v", err)
		}
	})
	urls := map[string]string{}
	procs := map[string]*devenv.Process{}
	for _, name := range []string{"controller-a", "controller-b"} {
		port, err := devenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := st.StartControllerNamed(name, "--leader-elect", "--leader-election-namespace", "default",
			"--metrics-bind-address", addr, "--metrics-secure=false")
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		procs[name], urls[name] = p, "http://"+addr+"/metrics"
		t.Cleanup(func() { _ = p.Stop() })
	}
	var leader string
	deadline := time.Now().Add(time.Minute)
	for leader == "" {
		if time.Now().After(deadline) {
			t.Fatal("no controller became leader within a minute")
		}
		time.Sleep(pollInterval)
		leader = leaderOf(urls)
	}
	and(t, "%s leads", leader)

	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas))
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()
	rev := setImage(t, ns, ms.Name, imageGood)
	var weights []int32
	var first time.Time
	inv := func(v view) error {
		if err := monotonicNew(v, newColor, &weights, &first); err != nil {
			return err
		}
		if v.ms.Status.Phase == v1alpha1.PhaseRolledBack {
			return fmt.Errorf("rolled back: %+v", v.ms.Status.History)
		}
		return nil
	}
	follow(t, ns, ms.Name, 3*time.Minute, "step 2", inv, func(v view) bool { return v.ms.Status.Rollout.Step == 2 })

	when(t, "the leader %s is killed (SIGKILL: it cannot release the lease)", leader)
	if err := procs[leader].Kill(); err != nil {
		t.Fatalf("killing %s: %v", leader, err)
	}
	killed := time.Now()
	other := "controller-a"
	if leader == other {
		other = "controller-b"
	}
	delete(urls, leader)
	var took time.Duration
	for {
		if leaderOf(urls) == other {
			took = time.Since(killed)
			break
		}
		if time.Since(killed) > 2*time.Minute {
			t.Fatalf("%s did not take over within two minutes", other)
		}
		time.Sleep(200 * time.Millisecond)
	}
	then(t, "%s takes over %s later and the rollout goes on to promotion, weights never backwards", other, secs(took))
	v := follow(t, ns, ms.Name, 3*time.Minute, "promotion of "+rev, inv, func(v view) bool { return v.healthyOn(rev) })
	if want := goodWeights; fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Errorf("candidate weights seen %v, want %v", weights, want)
	}
	if h := v.ms.Status.History; len(h) != 1 || h[0].Outcome != v1alpha1.OutcomePromoted {
		t.Errorf("history %+v, want one Promoted", h)
	}
	figure(t, "leader killed mid-rollout", "the other replica led %s later (lease 15s, retry 2s); promoted without a step back", secs(took))
}
