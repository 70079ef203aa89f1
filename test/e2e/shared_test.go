//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/test/framework/devenv"
)

// storyGoodVersionPromoted: a version as fast as the stable one is promoted.
//
// Known issue, found by the stories (an identical version rolled back): at 70% GPU utilization
// per replica the candidate gets a step's weight as soon as need(total, weight) of its pods are
// warm, while the stable color keeps all its replicas. Right after the step to 50% the
// candidate's pods carry twice the stable's per-pod load until the pods pre-scaled for the next
// step have loaded, and the p95 latencies of the analysis window show it.
//
// The stories run 6 replicas at about 45% utilization and the API's default minSamples of 20:
// the histogram judge (internal/analysis, JudgeHistogram) fails a latency only when a rank test
// on both colors' buckets is confident, so the p95 read from vLLM's coarse buckets moving by
// more than 20% between windows at ~50 samples no longer rolls an identical version back.
func storyGoodVersionPromoted(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-promote")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas))
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	goodVersionPromoted(t, ms, v0, "")
}

// goodVersionPromoted rolls out imageGood on ms, Healthy as v0 shows it; label tells its figures
// apart from another story's.
func goodVersionPromoted(t *testing.T, ms *v1alpha1.ModelServer, v0 view, label string) {
	ns := ms.Namespace
	stableColor := v0.stableColor()
	newColor := stableColor.Other()
	and(t, "it is Healthy on %s with the whole traffic", stableColor)

	when(t, "the image changes to %s, a version as fast as the stable one", imageGood)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageGood)
	last, weights, firstWeight := followPromotion(t, ns, ms.Name, rev, newColor, 4*time.Minute)
	promoted := time.Since(began)

	then(t, "the candidate took the weights %v one step after the other and was promoted", weights)
	if want := goodWeights; fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Errorf("candidate weights seen %v, want %v", weights, want)
	}
	if last.stableColor() != newColor || last.route[newColor] != 100 || last.route[stableColor] != 0 {
		t.Errorf("after promotion: stable color %s, route %v; want %s at 100%%", last.stableColor(), last.route, newColor)
	}
	if h := last.ms.Status.History; len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomePromoted {
		t.Errorf("history %+v, want %s Promoted first", h, rev)
	}
	and(t, "the previous color is scaled to zero after the scale-down delay")
	follow(t, ns, ms.Name, time.Minute, string(stableColor)+" scaled to zero", weightsInvariant, func(v view) bool {
		return v.replicas(stableColor) == 0
	})
	at := settleScrape()
	refused := served(t, ns, ms.Name, "", "503", began, at)
	lost := served(t, ns, ms.Name, "", "502", began, at)
	total := served(t, ns, ms.Name, "", ".*", began, at)
	and(t, "no request was refused for want of a warm pod (no 503 from the Gateway)")
	if refused != 0 {
		t.Errorf("the Gateway refused %.0f requests (503) during the rollout: a color got weight without a serving pod", refused)
	}
	if total == 0 {
		t.Errorf("the simulated Gateway counted no response during the rollout")
	}
	figure(t, "time to promote a good version (4 steps of 20s)"+label, "%s (first weight after %s)", secs(promoted), secs(firstWeight.Sub(began)))
	figure(t, "responses during the good rollout"+label, "%.0f, 503 %.0f, 502 (in flight on a pod scaled away) %.0f", total, refused, lost)
}

// followPromotion follows the rollout of rev to newColor until it is promoted, failing the story
// when the weights go back (monotonicNew) or it is rolled back; it returns the last view, the
// candidate weights in the order they appeared in status and when the first appeared.
func followPromotion(t *testing.T, ns, name, rev string, newColor v1alpha1.Color, timeout time.Duration) (last view, weights []int32, firstWeight time.Time) {
	t.Helper()
	last = follow(t, ns, name, timeout, "promotion of "+rev, func(v view) error {
		if err := monotonicNew(v, newColor, &weights, &firstWeight); err != nil {
			return err
		}
		if v.ms.Status.Phase == v1alpha1.PhaseRolledBack {
			return fmt.Errorf("the good version was rolled back: %+v", v.ms.Status.History)
		}
		return nil
	}, func(v view) bool { return v.healthyOn(rev) })
	return last, weights, firstWeight
}

// goodWeights are the candidate weights of a good rollout over steps 10, 25, 50, 100 of the
// stories' 6 replicas, with loadMatching StablePods, the API's default: at the 10% step one
// candidate pod beside the 6 stable ones gets a seventh of the traffic, a stable pod's load
// (14%); the 25% and 50% steps keep their weight (2 and 3 candidate pods carry no more than a
// stable pod there).
var goodWeights = []int32{14, 25, 50}

// monotonicNew checks the weights at every poll of a rollout to newColor: they add up to 100,
// the new color's route weight never decreases below what loadMatching allows (see
// weightFloor), and it records the candidate weights of status.
func monotonicNew(v view, newColor v1alpha1.Color, weights *[]int32, first *time.Time) error {
	if err := weightsInvariant(v); err != nil {
		return err
	}
	w := v.route[newColor]
	if n := len(*weights); n > 0 && w < (*weights)[n-1] && w < weightFloor(v) {
		return fmt.Errorf("route weight of %s went back from %d%% to %d%%", newColor, (*weights)[n-1], w)
	}
	if c := v.ms.Status.Weights.Candidate; v.ms.Status.Candidate != nil && c > 0 {
		if n := len(*weights); n == 0 || (*weights)[n-1] != c {
			if n > 0 && c < (*weights)[n-1] && c < weightFloor(v) {
				return fmt.Errorf("status candidate weight went back from %d%% to %d%%", (*weights)[n-1], c)
			}
			*weights = append(*weights, c)
			if n == 0 {
				*first = v.at
			}
		}
	}
	return nil
}

// weightFloor is the lowest weight a live candidate may go down to at its step without going
// back: loadMatching StablePods raises a step's weight to one stable pod's share and lowers it
// as the stable color grows, down to the step's own weight (an e2e run: 20% -> 16% -> 14% -> 12%
// at the 10% step while the autoscaler took the stable color from 4 to 7 Ready pods), and the
// parity cap may dip it below that for a pass (parityDip).
func weightFloor(v view) int32 {
	return min(v.ms.Status.Rollout.StepWeight, parityDip(v))
}

// parityDip is the lowest weight a live candidate may dip to at its step: no candidate pod
// carries more than a stable pod (rollout's parity cap), and a Ready pod counts once the
// EndpointSlice controller lists its endpoint. When the autoscaler grows both colors, the stable
// color's new endpoint may be listed a moment before the candidate's: the share of one
// candidate pod fewer, floor(100 (c-1) / (c-1+s)) with c and s the colors' Ready pods (7 and 7:
// 46%), until the next pass. 0 without a stable color.
func parityDip(v view) int32 {
	c, s := v.ms.Status.Candidate, v.ms.Status.Stable
	if c == nil || s == nil || c.ReadyReplicas < 1 || c.ReadyReplicas-1+s.ReadyReplicas <= 0 {
		return 0
	}
	return (c.ReadyReplicas - 1) * 100 / (c.ReadyReplicas - 1 + s.ReadyReplicas)
}

func storySlowVersionRolledBack(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-rollback")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas))
	given(t, "a %s", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	slowVersionRolledBack(t, ms, v0, "")
}

// slowVersionRolledBack rolls out imageSlow on ms, Healthy as v0 shows it, and checks that it is
// rolled back; label tells its figures apart from another story's.
func slowVersionRolledBack(t *testing.T, ms *v1alpha1.ModelServer, v0 view, label string) {
	ns := ms.Namespace
	stable := v0.ms.Status.Stable.DeepCopy()
	bad := stable.Color.Other()

	when(t, "the image changes to %s, which the simulator makes 3x slower (%s)", imageSlow, slowProfile)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageSlow)
	var firstWeight time.Time
	maxWeight := int32(0)
	last := follow(t, ns, ms.Name, 4*time.Minute, "rollback of "+rev, func(v view) error {
		if err := weightsInvariant(v); err != nil {
			return err
		}
		s := v.ms.Status
		if s.Stable == nil || s.Stable.Revision != stable.Revision || s.Stable.Color != stable.Color {
			return fmt.Errorf("the stable revision changed: %+v", s.Stable)
		}
		if r := v.ready(stable.Color); r < replicas {
			return fmt.Errorf("stable %s has %d Ready pods, want %d throughout", stable.Color, r, replicas)
		}
		if v.route[stable.Color] == 0 {
			return fmt.Errorf("the route gives stable %s no traffic: %v", stable.Color, v.route)
		}
		if s.Weights.Candidate > 0 && firstWeight.IsZero() {
			firstWeight = v.at
		}
		maxWeight = max(maxWeight, v.route[bad])
		if s.Phase == v1alpha1.PhaseHealthy && s.Revision == rev {
			return fmt.Errorf("the slow version was promoted")
		}
		return nil
	}, func(v view) bool {
		return v.ms.Status.ObservedGeneration >= v.ms.Generation && v.phase() == v1alpha1.PhaseRolledBack
	})
	rolledBack := last.at

	then(t, "it is rolled back: stable %s (%s) has the whole traffic again", stable.Color, stable.Revision)
	if last.route[stable.Color] != 100 || last.ms.Status.Weights.Stable != 100 {
		t.Errorf("after the rollback the route is %v and status weights %+v, want stable %s at 100", last.route, last.ms.Status.Weights, stable.Color)
	}
	h := last.ms.Status.History
	if len(h) == 0 || h[0].Revision != rev || h[0].Outcome != v1alpha1.OutcomeRolledBack {
		t.Fatalf("history %+v, want %s RolledBack first", h, rev)
	}
	and(t, "the reason names the failed analysis: %s", h[0].Reason)
	if !strings.Contains(h[0].Reason, "analysis failed") || !namesALatency(h[0].Reason) {
		t.Errorf("rollback reason %q does not name the failed latency analysis", h[0].Reason)
	}
	if c := last.condition(v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Stalled condition %+v, want True after a rollback", c)
	}
	and(t, "the rolled-back version stays off: %d pods after a while, and the stable color never stopped serving", 0)
	follow(t, ns, ms.Name, time.Minute, string(bad)+" scaled to zero", weightsInvariant, func(v view) bool {
		return v.replicas(bad) == 0 && v.route[bad] == 0
	})
	at := settleScrape()
	window := int(at.Sub(began).Seconds())
	minRate := prom.Scalar(context.Background(), fmt.Sprintf(
		`min_over_time((sum(rate(`+st.ResponsesMetric+`{namespace=%q,modelserver=%q,color=%q,code="200"}[10s])))[%ds:1s])`,
		ns, ms.Name, stable.Color, window), at)
	if minRate.Status != "OK" || minRate.Value <= 0 {
		t.Errorf("stable %s served nothing for 10s at some point during the rollout: lowest rate %+v", stable.Color, minRate)
	}
	badServed := served(t, ns, ms.Name, bad, ".*", began, at)
	// The bad pods are gone by now and their series stale: each pod's last value over the story
	// (their counters start at 0 with the pod).
	badOK := counter(t, fmt.Sprintf(`sum(max_over_time(vllm:request_success_total{namespace=%q,pod=~%q}[%ds]))`, ns, ms.Name+"-"+string(bad)+"-.*", window+1), at)
	total := served(t, ns, ms.Name, "", ".*", began, at)
	if badServed == 0 {
		t.Errorf("the slow version served no request: the rollback was not judged on its traffic")
	}
	figure(t, "time to roll back a 3x slower version"+label, "%s after the release, %s after it first got traffic (highest weight %d%%)",
		secs(rolledBack.Sub(began)), secs(rolledBack.Sub(firstWeight)), maxWeight)
	figure(t, "requests served by the bad version before rollback"+label, "%.0f Gateway responses (%.1f%% of %.0f; vLLM request_success %.0f); stable's lowest 10s rate %.1f req/s",
		badServed, 100*badServed/max(total, 1), total, badOK, minRate.Value)
}

// GPUs run out.

const (
	// a100Product labels the nodes of the GPU story, so that it has GPUs of its own.
	a100Product = "NVIDIA-A100-SXM4-80GB"
	a100Nodes   = 2
	a100PerNode = 8
)

// addGPUNode adds a kwok fake node with GPUs of another product, and waits until it is Ready.
func addGPUNode(t *testing.T, name, product string, gpus int) {
	t.Helper()
	ctx := context.Background()
	capacity := corev1.ResourceList{
		devenv.GPUResource:    *resource.NewQuantity(int64(gpus), resource.DecimalSI),
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
				devenv.GPUProductLabel: product, "nvidia.com/gpu.count": fmt.Sprint(gpus)},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: devenv.GPUTaintKey, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if err := st.Client.Create(ctx, n); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	// kwok writes the node's conditions at the same time: retry on conflicts.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &corev1.Node{}
		if err := st.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return err
		}
		got.Status.Capacity, got.Status.Allocatable = capacity, capacity.DeepCopy()
		return st.Client.Status().Update(ctx, got)
	})
	if err != nil {
		t.Fatalf("setting the capacity of node %s: %v", name, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got := &corev1.Node{}
		if err := st.Client.Get(ctx, client.ObjectKey{Name: name}, got); err == nil {
			q := got.Status.Allocatable[devenv.GPUResource]
			for _, c := range got.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && q.Value() == int64(gpus) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not Ready after a minute", name)
		}
		time.Sleep(pollInterval)
	}
}

func storyGPUsRunOut(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-gpus")
	for i := range a100Nodes {
		addGPUNode(t, fmt.Sprintf("a100-node-%d", i), a100Product, a100PerNode)
	}
	const perReplica, maxReplicas = 4, 8
	// A target far below what the trace's load keeps 4 replicas at: the demand must stay above
	// what fits also while newly Ready replicas, still without traffic, pull the average down
	// (at 20% a CI run saw the proposal dip to 4 for a moment and the condition turn WithinBounds).
	const gpuTarget = 5
	fit := int32(a100Nodes * a100PerNode / perReplica)
	ms := newModelServer(ns, "llama-70b", imageV1, func(ms *v1alpha1.ModelServer) {
		pod := &ms.Spec.Template.Spec
		pod.NodeSelector = map[string]string{devenv.GPUProductLabel: a100Product}
		pod.Containers[0].Resources.Limits[devenv.GPUResource] = resource.MustParse(fmt.Sprint(perReplica))
		ms.Spec.Replicas = ptr.To(int32(1))
		a := ms.Spec.Autoscaling
		a.MinReplicas, a.MaxReplicas = ptr.To(int32(1)), maxReplicas
		a.Metrics = []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: gpuTarget}}}
	})
	given(t, "%d fake nodes of %d %s GPUs and a %s, %d GPUs per replica: %d replicas fit, %d are allowed",
		a100Nodes, a100PerNode, a100Product, describe(ms), perReplica, fit, maxReplicas)

	when(t, "the trace's load (about 14 requests/s) asks for more replicas than the GPUs hold (GPU utilization target %d%%)", gpuTarget)
	began := time.Now()
	if err := st.Client.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating the ModelServer: %v", err)
	}
	unschedulable := func(v view) error {
		var pods corev1.PodList
		if err := st.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(ms.SelectorLabels())); err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return fmt.Errorf("pod %s is Pending: %s", p.Name, c.Message)
				}
			}
		}
		if total := v.replicas(v1alpha1.Blue) + v.replicas(v1alpha1.Green); total > fit {
			return fmt.Errorf("the Deployments ask for %d replicas, only %d fit", total, fit)
		}
		return nil
	}
	limited := func(v view) bool {
		c := v.condition(v1alpha1.ConditionScalingLimited)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonGPUCapacityLimited
	}
	v := follow(t, ns, ms.Name, 3*time.Minute, "ScalingLimited=True GPUCapacityLimited", unschedulable, limited)
	tookLimit := time.Since(began)
	then(t, "ScalingLimited is True with reason GPUCapacityLimited: %s", v.condition(v1alpha1.ConditionScalingLimited).Message)
	follow(t, ns, ms.Name, time.Minute, fmt.Sprintf("%d Ready replicas", fit), unschedulable, func(v view) bool {
		return v.ms.Status.ReadyReplicas == fit
	})
	tookReady := time.Since(began)
	and(t, "the count is clamped at the %d replicas that fit and no pod is left Pending, for 20s", fit)
	v = hold(t, ns, ms.Name, 20*time.Second, "the clamp to hold", func(v view) error {
		if err := unschedulable(v); err != nil {
			return err
		}
		if d := v.desired(); d != fit {
			return fmt.Errorf("desired replicas %d, want the %d that fit", d, fit)
		}
		if !limited(v) {
			return fmt.Errorf("ScalingLimited is not GPUCapacityLimited any more: %+v", v.condition(v1alpha1.ConditionScalingLimited))
		}
		return nil
	})
	want := int32(0)
	for _, p := range v.ms.Status.Autoscaling.Proposals {
		if p.Replicas != nil {
			want = max(want, *p.Replicas)
		}
	}
	if want <= fit {
		t.Errorf("the metrics propose %d replicas, not more than the %d that fit: the story did not run out of GPUs", want, fit)
	}
	figure(t, "time to reach the GPU limit", "%s to ScalingLimited (metrics asked for %d, %d fit), %s to %d Ready", secs(tookLimit), want, fit, secs(tookReady), fit)
}

func storySREWithThePlugin(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-sre")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas))
	given(t, "a %s and the kubectl-modelship plugin", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()
	if out, code := plugin(t, ns, time.Minute, "wait", ms.Name, "--timeout", "30s"); code != 0 {
		t.Fatalf("wait on a Healthy ModelServer exited %d, want 0:\n%s", code, out)
	}

	when(t, "%s is released and, once it has traffic, the SRE runs `kubectl modelship pause`", imageGood)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageGood)
	var weights []int32
	var first time.Time
	inv := func(v view) error { return monotonicNew(v, newColor, &weights, &first) }
	follow(t, ns, ms.Name, 2*time.Minute, "candidate traffic", inv, func(v view) bool { return v.ms.Status.Weights.Candidate > 0 })
	out, code := plugin(t, ns, time.Minute, "pause", ms.Name)
	if code != 0 {
		t.Fatalf("pause exited %d:\n%s", code, out)
	}
	and(t, "the plugin says: %s", strings.TrimSpace(out))
	paused := follow(t, ns, ms.Name, 30*time.Second, "phase Paused", inv, func(v view) bool { return v.phase() == v1alpha1.PhasePaused })
	pausedAt := paused.ms.Status.Weights
	then(t, "the rollout holds at %d%% for longer than a step (30s) and wait exits 3 (a person is needed)", pausedAt.Candidate)
	hold(t, ns, ms.Name, 30*time.Second, "the pause to hold", func(v view) error {
		if err := inv(v); err != nil {
			return err
		}
		if v.phase() != v1alpha1.PhasePaused || v.ms.Status.Weights != pausedAt || v.route[newColor] != pausedAt.Candidate {
			return fmt.Errorf("paused at %+v, now phase %s weights %+v route %v", pausedAt, v.phase(), v.ms.Status.Weights, v.route)
		}
		return nil
	})
	if out, code := plugin(t, ns, time.Minute, "wait", ms.Name, "--timeout", "20s"); code != 3 {
		t.Errorf("wait on a paused rollout exited %d, want 3:\n%s", code, out)
	}

	when(t, "the SRE runs `kubectl modelship resume` and then `kubectl modelship wait`")
	if out, code := plugin(t, ns, time.Minute, "resume", ms.Name); code != 0 {
		t.Fatalf("resume exited %d:\n%s", code, out)
	}
	resumed := time.Now()
	waited := make(chan struct {
		out  string
		code int
	}, 1)
	go func() {
		out, code, err := runPlugin(ns, 5*time.Minute, "wait", ms.Name, "--timeout", "4m")
		if err != nil {
			out, code = err.Error(), -1
		}
		waited <- struct {
			out  string
			code int
		}{out, code}
	}()
	follow(t, ns, ms.Name, 4*time.Minute, "promotion of "+rev, inv, func(v view) bool { return v.healthyOn(rev) })
	w := <-waited
	then(t, "the rollout goes on from %d%% to promotion and wait exits %d", pausedAt.Candidate, w.code)
	if w.code != 0 {
		t.Errorf("wait on a promoted rollout exited %d, want 0:\n%s", w.code, w.out)
	}
	figure(t, "rollout with a 30s pause", "promoted %s after the release, %s after resume", secs(time.Since(began)), secs(time.Since(resumed)))

	when(t, "%s is released and the SRE runs `kubectl modelship abort` once it has traffic", imageV3)
	v := follow(t, ns, ms.Name, time.Minute, "the previous color scaled down", weightsInvariant, func(v view) bool {
		return v.replicas(v.stableColor().Other()) == 0
	})
	abortColor := v.stableColor().Other()
	rev3 := setImage(t, ns, ms.Name, imageV3)
	weights, first = nil, time.Time{}
	inv3 := func(v view) error { return monotonicNew(v, abortColor, &weights, &first) }
	follow(t, ns, ms.Name, 2*time.Minute, "candidate traffic", inv3, func(v view) bool {
		return v.candidateRevision() == rev3 && v.ms.Status.Weights.Candidate > 0
	})
	out, code = plugin(t, ns, time.Minute, "abort", ms.Name)
	if code != 0 {
		t.Fatalf("abort exited %d:\n%s", code, out)
	}
	aborted := time.Now()
	go func() {
		out, code, err := runPlugin(ns, 3*time.Minute, "wait", ms.Name, "--timeout", "2m")
		if err != nil {
			out, code = err.Error(), -1
		}
		waited <- struct {
			out  string
			code int
		}{out, code}
	}()
	v = follow(t, ns, ms.Name, time.Minute, "all traffic on stable", weightsInvariant, func(v view) bool {
		return v.phase() == v1alpha1.PhaseRolledBack && v.route[abortColor] == 0
	})
	w = <-waited
	then(t, "all traffic is back on %s within %s and wait exits %d", v.stableColor(), secs(v.at.Sub(aborted)), w.code)
	if w.code != 1 {
		t.Errorf("wait on an aborted rollout exited %d, want 1:\n%s", w.code, w.out)
	}
	if v.route[v.stableColor()] != 100 || v.stableColor() == abortColor {
		t.Errorf("after abort the route is %v with stable %s, want all on stable", v.route, v.stableColor())
	}
	if h := v.ms.Status.History; len(h) == 0 || h[0].Revision != rev3 || h[0].Outcome != v1alpha1.OutcomeAborted {
		t.Errorf("history %+v, want %s Aborted first", h, rev3)
	}
	if _, ok := v.ms.Annotations[v1alpha1.AnnotationAbort]; ok {
		t.Errorf("the abort annotation is still there after the controller acted on it")
	}
	figure(t, "abort to all traffic on stable", "%s", secs(v.at.Sub(aborted)))
}

// namesALatency: reason names one of the presets' latency metrics (the 3x slower build is
// slower per decoded token and per token alike; either may fail first).
func namesALatency(reason string) bool {
	for _, m := range []string{metrics.MetricDecodePerToken, metrics.MetricITLP95, metrics.MetricTTFTP95, metrics.MetricE2EP95} {
		if strings.Contains(reason, m) {
			return true
		}
	}
	return false
}
