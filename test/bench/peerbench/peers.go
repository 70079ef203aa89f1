package peerbench

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/test/bench/peers"
	"github.com/modelship/modelship/test/framework/devenv"
)

// deployment is the peers' model-server Deployment (peers.ModelServerDeployment: the labels the
// simulator and Flagger read) with the ModelServer's pod spec, so that every contender runs the
// same pods.
func deployment(ns, name, image string, replicas int32) *appsv1.Deployment {
	d := peers.ModelServerDeployment(name, ns, image, replicas)
	d.Spec.Template.Spec = podSpec(image)
	return d
}

func deploymentState(ctx context.Context, c client.Client, ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
}

// Hostname is the hostname of a contender's route in namespace ns: one of its own, so that
// Traefik never merges two contenders' routes (a namespace being deleted may still hold the
// previous one's route when the next contender's comes).
func Hostname(ns string) string { return ns + ".local" }

// gatewayParent is the local Gateway, the parent of every contender's route.
func gatewayParent() gatewayv1.ParentReference {
	return gatewayv1.ParentReference{Name: devenv.DefaultGatewayName, Namespace: ptr.To(gatewayv1.Namespace(devenv.DefaultGatewayNamespace))}
}

// KEDAHPA runs the workload as a Deployment behind a Service and an HTTPRoute, scaled by a KEDA
// ScaledObject whose Prometheus trigger reads the namespace's DCGM GPU utilization, through the
// HPA KEDA creates and kube-controller-manager runs. It has no rollout of its own.
type KEDAHPA struct {
	// PrometheusURL is the trigger's serverAddress.
	PrometheusURL string
}

// Name implements Contender.
func (KEDAHPA) Name() string { return "keda-hpa" }

// ScaledObject is KEDA's recipe of the seeds: the Prometheus scaler on the total GPU
// utilization of the namespace's pods with a threshold of GPUTarget per replica (AverageValue,
// so the HPA asks for ceil(total / 70)), between MinReplicas and MaxReplicas, with KEDA's and
// the HPA's defaults otherwise (30s polling, 15s HPA sync, 5m scale-down stabilization).
func ScaledObject(ns, name, prometheusURL string) (*unstructured.Unstructured, error) {
	return peers.ScaledObject(peers.ScaledObjectSpec{
		Namespace: ns, Name: name, Deployment: name, MinReplicas: MinReplicas, MaxReplicas: MaxReplicas,
		Prometheus: peers.PrometheusTrigger{ServerAddress: prometheusURL, Threshold: GPUTarget,
			Query: fmt.Sprintf(`sum(DCGM_FI_DEV_GPU_UTIL{namespace=%q})`, ns)},
	})
}

// Deploy implements Contender. The rollout scenarios are not KEDA's.
func (k KEDAHPA) Deploy(ctx context.Context, c client.Client, ns, image string, autoscaled bool) error {
	if !autoscaled {
		return fmt.Errorf("keda-hpa has no rollout of its own")
	}
	so, err := ScaledObject(ns, WorkloadName, k.PrometheusURL)
	if err != nil {
		return err
	}
	objs := []client.Object{
		deployment(ns, WorkloadName, image, MinReplicas),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: WorkloadName}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": WorkloadName},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromInt32(8000)}},
		}},
		&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: WorkloadName}, Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{gatewayParent()}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(Hostname(ns))},
			Rules: []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{Name: WorkloadName, Port: ptr.To(gatewayv1.PortNumber(8000))},
			}}}}},
		}},
		so,
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// Serving implements Contender.
func (KEDAHPA) Serving(ctx context.Context, c client.Client, ns string) (bool, error) {
	d, err := deploymentState(ctx, c, ns, WorkloadName)
	if err != nil {
		return false, err
	}
	return d.Status.ReadyReplicas > 0, nil
}

// SetImage implements Contender: a plain rolling update.
func (KEDAHPA) SetImage(ctx context.Context, c client.Client, ns, image string) error {
	return peers.SetImage(ctx, c, ns, WorkloadName, image)
}

// State implements Contender: the replicas the HPA set.
func (KEDAHPA) State(ctx context.Context, c client.Client, ns string) (State, error) {
	d, err := deploymentState(ctx, c, ns, WorkloadName)
	if err != nil {
		return State{}, err
	}
	return State{Desired: ptr.Deref(d.Spec.Replicas, 0)}, nil
}

// Verdict implements Contender: a rolling update has none.
func (KEDAHPA) Verdict(context.Context, client.Client, string, string, time.Time) (string, error) {
	return Undecided, nil
}

// Flagger runs the workload as a Deployment that a Flagger Canary rolls out with the Gateway
// API provider: Flagger makes the primary Deployment, the Services and the HTTPRoute, and moves
// the route's weights step by step while MetricTemplates read the canary's vLLM latency from
// Prometheus. It has no autoscaling of its own (Flagger defers to an HPA).
type Flagger struct {
	// PrometheusURL is the MetricTemplates' provider address.
	PrometheusURL string
}

// Name implements Contender.
func (Flagger) Name() string { return "flagger" }

// FlaggerChecks are the Canary's checks: the canary's p95 TTFT, ITL and e2e latency each at
// most 1.2x the primary's over the last minute, the bounds modelship's vLLM preset sets (the
// strongest Flagger can be told: its built-in checks and the simulator's Flagger judge against
// fixed bounds instead).
var FlaggerChecks = []struct{ Name, Histogram string }{
	{"ttft-p95-ratio", "vllm:time_to_first_token_seconds"},
	{"itl-p95-ratio", "vllm:inter_token_latency_seconds"},
	{"e2e-p95-ratio", "vllm:e2e_request_latency_seconds"},
}

// FlaggerCanary is the Canary: Flagger's shortest interval (10s), the steps of modelship's
// rollout (10, 25, 50%), rollback after 5 failed checks (Flagger's documented examples), and
// FlaggerChecks.
func FlaggerCanary(ns string) peers.Canary {
	c := peers.Canary{Name: WorkloadName, Namespace: ns, GatewayName: devenv.DefaultGatewayName, Hosts: []string{Hostname(ns)},
		GatewayNamespace: devenv.DefaultGatewayNamespace, Interval: 10 * time.Second, Threshold: 5,
		StepWeights: []int{10, 25, 50}}
	for _, m := range FlaggerChecks {
		c.Metrics = append(c.Metrics, peers.CanaryMetric{Name: m.Name, Template: m.Name, Interval: "1m", Max: ptr.To(1.2)})
	}
	return c
}

// Deploy implements Contender. The autoscaling scenario is not Flagger's.
func (f Flagger) Deploy(ctx context.Context, c client.Client, ns, image string, autoscaled bool) error {
	if autoscaled {
		return fmt.Errorf("flagger has no autoscaling of its own")
	}
	objs := []client.Object{deployment(ns, WorkloadName, image, RolloutReplicas)}
	for _, m := range FlaggerChecks {
		objs = append(objs, peers.MetricTemplate(m.Name, ns, f.PrometheusURL, peers.QuantileRatioQuery(m.Histogram, 0.95)))
	}
	objs = append(objs, FlaggerCanary(ns).Object())
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// Serving implements Contender: the Canary is initialized (the primary serves).
func (Flagger) Serving(ctx context.Context, c client.Client, ns string) (bool, error) {
	st, err := peers.GetCanaryState(ctx, c, ns, WorkloadName)
	if err != nil {
		return false, err
	}
	return st.Phase == peers.PhaseInitialized || st.Phase == peers.PhaseSucceeded, nil
}

// SetImage implements Contender: Flagger sees the Deployment change and starts its analysis.
func (Flagger) SetImage(ctx context.Context, c client.Client, ns, image string) error {
	return peers.SetImage(ctx, c, ns, WorkloadName, image)
}

// State implements Contender: the weight is the route's (Flagger's status says 0 from
// Promoting on while the route still sends the canary its last step's share).
func (Flagger) State(ctx context.Context, c client.Client, ns string) (State, error) {
	cs, err := peers.GetCanaryState(ctx, c, ns, WorkloadName)
	if err != nil {
		return State{}, err
	}
	st := State{Phase: cs.Phase, Weight: int32(cs.CanaryWeight), Desired: -1}
	if r, err := peers.GetRoute(ctx, c, ns, WorkloadName); err == nil && r != nil {
		st.Weight = int32(r.Canary)
	}
	if d, err := deploymentState(ctx, c, ns, WorkloadName+"-primary"); err == nil {
		st.Desired = ptr.Deref(d.Spec.Replicas, 0)
	}
	return st, nil
}

// Verdict implements Contender: Succeeded with the image on the primary, or Failed with it on
// the canary, entered since the rollout began (second resolution, as the API keeps it).
func (Flagger) Verdict(ctx context.Context, c client.Client, ns, image string, since time.Time) (string, error) {
	cs, err := peers.GetCanaryState(ctx, c, ns, WorkloadName)
	if err != nil {
		return Undecided, err
	}
	if cs.LastTransitionTime.Before(since.Truncate(time.Second)) {
		return Undecided, nil // the phase is the previous rollout's
	}
	switch cs.Phase {
	case peers.PhaseSucceeded:
		if d, err := deploymentState(ctx, c, ns, WorkloadName+"-primary"); err == nil && d.Spec.Template.Spec.Containers[0].Image == image {
			return Promoted, nil
		}
	case peers.PhaseFailed:
		if d, err := deploymentState(ctx, c, ns, WorkloadName); err == nil && d.Spec.Template.Spec.Containers[0].Image == image {
			return RolledBack, nil
		}
	}
	return Undecided, nil
}

// ArgoRollouts runs the workload as an Argo Rollout (canary strategy) whose built-in Traefik
// router moves the weights of a TraefikService that the workload's HTTPRoute names, while a
// background analysis reads the canary's vLLM latency from Prometheus on the queries Flagger
// checks. It has no autoscaling of its own (Argo Rollouts defers to an HPA).
type ArgoRollouts struct {
	// PrometheusURL is the AnalysisTemplate's Prometheus address.
	PrometheusURL string
}

// Name implements Contender.
func (ArgoRollouts) Name() string { return "argo-rollouts" }

// ArgoCanary is the Rollout and its objects, matched to what the others get: RolloutReplicas
// of the ModelServer's pod spec; the steps of modelship's rollout (10, 25, 50 %), each held
// 20 s (the stack's step length; its analysis, measured every 10 s from 10 s after the first
// weight, needs more than Flagger's one interval per step to fail anything), then promotion; FlaggerChecks as Prometheus metrics (the
// canary's p95 over the stable's at most 1.2, over the last minute), measured every 10 s
// (Flagger's interval) from one interval after the first weight, failing the rollout after
// more than 4 failed measurements (Flagger's threshold of 5 failed checks); Argo Rollouts'
// defaults for the rest (consecutiveErrorLimit 4, dynamicStableScale off, 30 s scale-down
// delays, 600 s progress deadline).
func ArgoCanary(ns, image, prometheusURL string) peers.ArgoCanary {
	a := peers.ArgoCanary{
		Name: WorkloadName, Namespace: ns, Replicas: RolloutReplicas,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{peers.AppLabel: WorkloadName, peers.ServerLabel: WorkloadName}},
			Spec:       podSpec(image),
		},
		GatewayName: devenv.DefaultGatewayName, GatewayNamespace: devenv.DefaultGatewayNamespace, Hostname: Hostname(ns),
		StepWeights: []int{10, 25, 50}, StepPause: 20 * time.Second,
		PrometheusURL: prometheusURL, Interval: 10 * time.Second, InitialDelay: 10 * time.Second,
		FailureLimit: 4, StartingStep: 1,
	}
	for _, m := range FlaggerChecks {
		a.Metrics = append(a.Metrics, peers.ArgoMetric{Name: m.Name, SuccessCondition: "result[0] <= 1.2",
			Query: peers.ArgoQuantileRatioQuery(WorkloadName, m.Histogram, 0.95)})
	}
	return a
}

// Deploy implements Contender. The autoscaling scenario is not Argo Rollouts'.
func (a ArgoRollouts) Deploy(ctx context.Context, c client.Client, ns, image string, autoscaled bool) error {
	if autoscaled {
		return fmt.Errorf("argo-rollouts has no autoscaling of its own")
	}
	objs, err := ArgoCanary(ns, image, a.PrometheusURL).Objects()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// Serving implements Contender: the first revision is the stable one and Healthy.
func (ArgoRollouts) Serving(ctx context.Context, c client.Client, ns string) (bool, error) {
	s, err := peers.GetRolloutState(ctx, c, ns, WorkloadName)
	if err != nil {
		return false, err
	}
	return s.Promoted(), nil
}

// SetImage implements Contender: a new pod template starts a rollout.
func (ArgoRollouts) SetImage(ctx context.Context, c client.Client, ns, image string) error {
	return peers.SetRolloutImage(ctx, c, ns, WorkloadName, image)
}

// State implements Contender: the weight is the TraefikService's canary weight, the data
// path's (the Rollout's status says what Argo last set).
func (ArgoRollouts) State(ctx context.Context, c client.Client, ns string) (State, error) {
	s, err := peers.GetRolloutState(ctx, c, ns, WorkloadName)
	if err != nil {
		return State{}, err
	}
	st := State{Phase: s.Phase, Weight: int32(s.Weight), Desired: RolloutReplicas}
	a := peers.ArgoCanary{Name: WorkloadName}
	if ws, err := peers.TraefikWeights(ctx, c, ns, WorkloadName); err == nil {
		st.Weight = int32(ws[a.CanaryService()])
	}
	return st, nil
}

// Verdict implements Contender: Healthy with image's template as the stable one, or aborted
// (phase Degraded) since the rollout began with image still in the spec.
func (ArgoRollouts) Verdict(ctx context.Context, c client.Client, ns, image string, since time.Time) (string, error) {
	s, err := peers.GetRolloutState(ctx, c, ns, WorkloadName)
	if err != nil {
		return Undecided, err
	}
	if !s.Observed || s.Image != image {
		return Undecided, nil // the status still speaks of the previous spec
	}
	switch {
	case s.Promoted():
		return Promoted, nil
	case s.Abort && !s.AbortedAt.Before(since.Truncate(time.Second)):
		return RolledBack, nil
	}
	return Undecided, nil
}
