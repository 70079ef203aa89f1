package peerbench

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/test/framework/stack"
	"github.com/modelship/modelship/test/sim/policysim"
)

// Verdicts of a rollout.
const (
	Undecided  = ""
	Promoted   = "promoted"
	RolledBack = "rolled-back"
)

// Workload is the model server every contender runs: its name, the image it starts at and its
// size. Scenarios give every contender the same.
const (
	WorkloadName = "llm"
	// RolloutReplicas is the fixed size of the rollout scenarios' workload: at the scenarios'
	// base rate its GPUs are about half busy, so that latency is the model's and not a queue's
	// (a saturated stable color is slower than any lightly loaded candidate, good or bad).
	RolloutReplicas = 6
	// MinReplicas bounds the autoscaling scenarios from below (the seeds' recipe).
	MinReplicas = 2
	// MaxReplicas bounds them from above.
	MaxReplicas = 10
	// GPUTarget is the DCGM GPU utilization every autoscaler aims at, in percent.
	GPUTarget = 70
)

// Contender is one way of running the workload: modelship, or a peer.
type Contender interface {
	Name() string
	// Deploy creates the workload at image in ns: autoscaled on GPU utilization, or with
	// RolloutReplicas replicas and the contender's canary analysis.
	Deploy(ctx context.Context, c client.Client, ns, image string, autoscaled bool) error
	// Serving reports whether the workload serves from Ready pods through its route.
	Serving(ctx context.Context, c client.Client, ns string) (bool, error)
	// SetImage starts a rollout to image.
	SetImage(ctx context.Context, c client.Client, ns, image string) error
	// State is the contender's view: desired replicas, rollout phase and candidate weight.
	State(ctx context.Context, c client.Client, ns string) (State, error)
	// Verdict is the outcome of the rollout to image started at since: Promoted, RolledBack or
	// Undecided (a verdict on an earlier rollout, still shown, is not this one's).
	Verdict(ctx context.Context, c client.Client, ns, image string, since time.Time) (string, error)
}

// Modelship runs the workload as a ModelServer.
type Modelship struct {
	// Recipe autoscales on modelship's SLO-minded recipe (the token work per replica and the
	// queue, policysim.RecipeSpec) rather than on the peers' GPU utilization at 70%.
	Recipe bool
	// SLO, when set, autoscales on modelship's SLO-first policy (spec.autoscaling.slo: the
	// scenario's latency SLO and nothing to tune, policysim.SLOSpec as make bench-sim runs it)
	// rather than on the peers' GPU utilization at 70%.
	SLO *SLO
	// LoadMatching is the rollouts' spec.rollout.loadMatching; empty: StablePods.
	LoadMatching v1alpha1.LoadMatching
	// ScrapeInterval, when set, is the rollouts' spec.rollout.analysis.scrapeInterval (the
	// stack's Prometheus scrapes every second); unset, the controller's flag (the stack's 8s).
	ScrapeInterval time.Duration
	// MinStep, when set, is the rollouts' spec.rollout.minStepDuration: a step whose analysis
	// passed confidently ends after it.
	MinStep time.Duration
	// StepDuration, when set, is the rollouts' spec.rollout.stepDuration (unset: the stack's
	// 20s); minStepDuration is at most it.
	StepDuration time.Duration
	// ScaleScrapeInterval, when set, is the autoscaling scenario's
	// spec.rollout.analysis.scrapeInterval, from which the autoscaler's serving window is
	// derived (at least four scrapes); unset, the controller's flag (the stack's 8s).
	ScaleScrapeInterval time.Duration
}

// Name implements Contender.
func (m Modelship) Name() string {
	switch {
	case m.Recipe:
		return "modelship-recipe"
	case m.SLO != nil:
		return "modelship-slo"
	}
	return "modelship"
}

// simScaleDown is make bench-sim's scale-down stabilization window of modelship's recipe (its
// --modelship-scale-down-window, part of the recipe). The SLO policy runs the API's default
// (autoscale.DefaultScaleDownWindow, bench-sim's --slo-scale-down-window): a ModelServer that
// states only its SLO gets it.
const simScaleDown = 180 * time.Second

// ModelServer is the benchmark's ModelServer: the demo's pod template and Gateway, the vLLM
// analysis preset with steps of 10/25/50% held 20s (StepDuration when set) and loadMatching lm
// (StablePods when empty: 14% at the first step with 6 replicas); autoscaled between 2 and 10 replicas on DCGM GPU
// utilization at 70% with the API's defaults otherwise (15s interval, 5m scale-down
// stabilization: the HPA's), or on the recipe (make bench-sim's, with the simulator's cold start
// and bench-sim's 180s scale-down window) or the SLO (with the cold start and the API's 5m
// scale-down window), or RolloutReplicas fixed replicas.
func (m Modelship) ModelServer(ns, image string, autoscaled bool) *v1alpha1.ModelServer {
	ms := stack.ModelServer(ns, WorkloadName, image)
	ms.Spec.Gateway.Hostnames = []gatewayv1.Hostname{gatewayv1.Hostname(Hostname(ns))}
	ms.Spec.Replicas = ptr.To(int32(RolloutReplicas))
	ms.Spec.Rollout.Steps = []int32{10, 25, 50, 100}
	ms.Spec.Rollout.LoadMatching = cmp.Or(m.LoadMatching, v1alpha1.LoadMatchingStablePods)
	if m.ScrapeInterval > 0 && !autoscaled {
		ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: m.ScrapeInterval}
	}
	if m.StepDuration > 0 && !autoscaled {
		ms.Spec.Rollout.StepDuration = v1alpha1.Duration{Duration: m.StepDuration}
	}
	if m.MinStep > 0 && !autoscaled {
		ms.Spec.Rollout.MinStepDuration = &v1alpha1.Duration{Duration: min(m.MinStep, ms.Spec.Rollout.StepDuration.Duration)}
	}
	if m.ScaleScrapeInterval > 0 && autoscaled {
		ms.Spec.Rollout.Analysis.ScrapeInterval = &v1alpha1.Duration{Duration: m.ScaleScrapeInterval}
	}
	ms.Spec.Autoscaling = nil
	if autoscaled {
		ms.Spec.Replicas = ptr.To(int32(MinReplicas))
		ms.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{
			MinReplicas: ptr.To(int32(MinReplicas)), MaxReplicas: MaxReplicas,
			Metrics: []v1alpha1.AutoscalingMetric{{GPUUtilization: &v1alpha1.GPUUtilizationMetric{Target: GPUTarget}}},
		}
		switch {
		case m.Recipe:
			spec := policysim.RecipeSpec(MinReplicas, MaxReplicas, stack.DefaultColdStart, 0.57, 2, simScaleDown, 0, 0.1)
			ms.Spec.Autoscaling = &spec
		case m.SLO != nil:
			spec := policysim.SLOSpec(MinReplicas, MaxReplicas, m.SLO.TTFT, m.SLO.ITL, stack.DefaultColdStart, autoscale.DefaultScaleDownWindow)
			ms.Spec.Autoscaling = &spec
		}
	}
	return ms
}

// Deploy implements Contender.
func (m Modelship) Deploy(ctx context.Context, c client.Client, ns, image string, autoscaled bool) error {
	return c.Create(ctx, m.ModelServer(ns, image, autoscaled))
}

func getModelServer(ctx context.Context, c client.Client, ns string) (*v1alpha1.ModelServer, error) {
	ms := &v1alpha1.ModelServer{}
	return ms, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: WorkloadName}, ms)
}

// Serving implements Contender.
func (Modelship) Serving(ctx context.Context, c client.Client, ns string) (bool, error) {
	ms, err := getModelServer(ctx, c, ns)
	if err != nil {
		return false, err
	}
	return ms.Status.Phase == v1alpha1.PhaseHealthy && ms.Status.Stable != nil && ms.Status.Stable.ReadyReplicas > 0, nil
}

// SetImage implements Contender.
func (Modelship) SetImage(ctx context.Context, c client.Client, ns, image string) error {
	ms, err := getModelServer(ctx, c, ns)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(ms.DeepCopy())
	ms.Spec.Template.Spec.Containers[0].Image = image
	return c.Patch(ctx, ms, patch)
}

// State implements Contender.
func (Modelship) State(ctx context.Context, c client.Client, ns string) (State, error) {
	ms, err := getModelServer(ctx, c, ns)
	if err != nil {
		return State{}, err
	}
	st := State{Desired: ptr.Deref(ms.Spec.Replicas, 0), Phase: string(ms.Status.Phase), Weight: ms.Status.Weights.Candidate}
	if a := ms.Status.Autoscaling; a != nil && ms.Spec.Autoscaling != nil {
		st.Desired, st.Why = a.DesiredReplicas, scalerSaid(a)
	}
	return st, nil
}

// scalerSaid is what modelship's autoscaler says of its count in status.autoscaling: the last
// change and why, each proposal (metric, value, replicas, message), and the capacities learnt
// (the slo's with its floor and ceiling), so that a round's timeline tells which rule asked.
func scalerSaid(a *v1alpha1.AutoscalingStatus) string {
	parts := []string{"last: " + a.LastScaleReason}
	for _, p := range a.Proposals {
		n := "-"
		if p.Replicas != nil {
			n = strconv.Itoa(int(*p.Replicas))
		}
		parts = append(parts, fmt.Sprintf("%s=%s -> %s: %s", p.Metric, p.Value, n, p.Message))
	}
	for _, c := range a.LearnedCapacities {
		parts = append(parts, fmt.Sprintf("learnt %s per_replica=%s floor=%s ceiling=%s", c.Metric, c.PerReplica, c.Floor, c.Ceiling))
	}
	return strings.Join(parts, "; ")
}

// Verdict implements Contender.
func (Modelship) Verdict(ctx context.Context, c client.Client, ns, image string, _ time.Time) (string, error) {
	ms, err := getModelServer(ctx, c, ns)
	if err != nil {
		return Undecided, err
	}
	switch {
	case ms.Status.ObservedGeneration < ms.Generation:
		return Undecided, nil // the status still speaks of the previous spec
	case ms.Status.Phase == v1alpha1.PhaseRolledBack:
		return RolledBack, nil
	case ms.Status.Phase == v1alpha1.PhaseHealthy && ms.Status.Stable != nil && ms.Status.Stable.Image == image && ms.Status.Candidate == nil:
		return Promoted, nil
	}
	return Undecided, nil
}

// podSpec is the ModelServer's pod spec (container, node selector, tolerations) for the peers'
// Deployments.
func podSpec(image string) corev1.PodSpec {
	return *stack.ModelServer("", WorkloadName, image).Spec.Template.Spec.DeepCopy()
}

// WaitServing polls the contender until it serves or the timeout passes.
func WaitServing(ctx context.Context, c client.Client, k Contender, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		ok, err := k.Serving(ctx, c, ns)
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("%s in %s did not serve within %s (last error: %v)", k.Name(), ns, timeout, last)
}
