package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/modelship/modelship/test/bench/peers"
	"github.com/modelship/modelship/test/framework/devenv"
)

// Figures of the KEDA smoke: Prometheus answers smokeValue, the trigger's threshold is
// smokeThreshold per replica, so the real HPA wants ceil(350/70) = 5 replicas.
const (
	smokeName      = "keda-smoke"
	smokeValue     = 350
	smokeThreshold = 70
	smokeWant      = 5
)

// kedaSmoke proves the KEDA + HPA path on a running environment with KEDA's operator: it
// starts the adapter, checks external.metrics.k8s.io answers through the aggregator, creates
// a Deployment of 2 and a ScaledObject (min 2, max 10, Prometheus query vector(350),
// threshold 70) and waits for the HPA of kube-controller-manager to scale the Deployment to 5.
// With outage > 0 it then stops Prometheus for that long and reports what the HPA does.
func kedaSmoke(ctx context.Context, env *devenv.Env, operator *peers.Peer, outage time.Duration) error {
	adapter, err := peers.StartKEDAAdapter(ctx, env, operator, peers.KEDAAdapterOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("keda-adapter serves on %s: healthy after %s, APIService %s Available after %s\n",
		adapter.Address, adapter.Ready.Round(time.Millisecond), peers.ExternalMetricsAPIService, adapter.Available.Round(time.Millisecond))

	out, err := exec.CommandContext(ctx, "kubectl", "--kubeconfig", env.Kubeconfig(), "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl get --raw /apis/external.metrics.k8s.io/v1beta1: %w: %s", err, out)
	}
	fmt.Printf("kubectl get --raw /apis/external.metrics.k8s.io/v1beta1: %s\n", strings.TrimSpace(string(out)))

	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(env.RESTConfig())
	if err != nil {
		return err
	}
	ns := "default"
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, smokeDeployment(ns), metav1.CreateOptions{}); err != nil {
		return err
	}
	so, err := peers.ScaledObject(peers.ScaledObjectSpec{
		Namespace: ns, Name: smokeName, Deployment: smokeName,
		MinReplicas: 2, MaxReplicas: 10, PollingInterval: 5 * time.Second,
		Prometheus: peers.PrometheusTrigger{
			ServerAddress: env.PrometheusURL(),
			Query:         fmt.Sprintf("vector(%d)", smokeValue),
			Threshold:     smokeThreshold,
		},
	})
	if err != nil {
		return err
	}
	began := time.Now()
	if _, err := dyn.Resource(peers.ScaledObjectGVR).Namespace(ns).Create(ctx, so, metav1.CreateOptions{}); err != nil {
		return err
	}
	hpaName := peers.KEDAHPAName(smokeName)
	var hpaAt, scaledAt time.Duration
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if hpaAt == 0 {
			if _, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpaName, metav1.GetOptions{}); err == nil {
				hpaAt = time.Since(began)
				fmt.Printf("HPA %s created by KEDA after %s\n", hpaName, hpaAt.Round(time.Millisecond))
			}
		}
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, smokeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ptr.Deref(d.Spec.Replicas, 0) == smokeWant {
			scaledAt = time.Since(began)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("deployment %s has %d replicas 3 minutes after its ScaledObject, want %d; HPA: %s; see %s and %s",
				smokeName, ptr.Deref(d.Spec.Replicas, 0), smokeWant, hpaSummary(ctx, cs, ns, hpaName), operator.Process.LogPath(), adapter.Process.LogPath())
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Printf("deployment %s scaled 2 -> %d by the HPA %s after its ScaledObject (HPA: %s)\n",
		smokeName, smokeWant, scaledAt.Round(time.Millisecond), hpaSummary(ctx, cs, ns, hpaName))
	ready := waitReadyReplicas(ctx, cs, ns, smokeWant, time.Minute)
	fmt.Printf("deployment %s: %d ready replicas on kwok nodes\n", smokeName, ready)
	fmt.Printf("keda_adapter_ready_s=%.1f keda_apiservice_available_s=%.1f keda_hpa_created_s=%.1f keda_first_scale_s=%.1f\n",
		adapter.Ready.Seconds(), adapter.Available.Seconds(), hpaAt.Seconds(), scaledAt.Seconds())

	if outage > 0 {
		return prometheusOutage(ctx, env, cs, dyn, ns, hpaName, outage)
	}
	return nil
}

// prometheusOutage stops Prometheus for d, sampling the Deployment's replicas and the HPA's
// conditions every 5 s, then starts it again and waits for the HPA to read metrics again.
func prometheusOutage(ctx context.Context, env *devenv.Env, cs kubernetes.Interface, dyn dynamic.Interface, ns, hpaName string, d time.Duration) error {
	prom := env.Process(devenv.PartPrometheus)
	if prom == nil {
		return fmt.Errorf("no Prometheus in this environment")
	}
	if err := prom.Stop(); err != nil {
		return err
	}
	fmt.Printf("prometheus stopped for %s\n", d)
	began := time.Now()
	for time.Since(began) < d {
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, smokeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		fmt.Printf("  +%2.0fs replicas=%d ScaledObject: %s HPA: %s\n", time.Since(began).Seconds(), ptr.Deref(dep.Spec.Replicas, 0),
			scaledObjectSummary(ctx, dyn, ns), hpaSummary(ctx, cs, ns, hpaName))
	}
	if err := prom.Restart(); err != nil {
		return err
	}
	fmt.Println("prometheus started again")
	restarted := time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpaName, metav1.GetOptions{})
		if err == nil && conditionTrue(hpa.Status.Conditions, autoscalingv2.ScalingActive) && len(hpa.Status.CurrentMetrics) > 0 {
			fmt.Printf("HPA reads metrics again %s after Prometheus came back (HPA: %s)\n", time.Since(restarted).Round(time.Millisecond), hpaSummary(ctx, cs, ns, hpaName))
			return nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("HPA %s did not become active again within 2 minutes of Prometheus' return: %s", hpaName, hpaSummary(ctx, cs, ns, hpaName))
}

// smokeDeployment is a Deployment of 2 pause pods that tolerate the GPU nodes' taint, so that
// kwok runs them.
func smokeDeployment(ns string) *appsv1.Deployment {
	labels := map[string]string{"app": smokeName}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: smokeName, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:  []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
					Tolerations: []corev1.Toleration{{Key: devenv.GPUResource.String(), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
	}
}

// waitReadyReplicas waits up to timeout for want ready replicas and returns the last count.
func waitReadyReplicas(ctx context.Context, cs kubernetes.Interface, ns string, want int32, timeout time.Duration) int32 {
	var ready int32
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		if d, err := cs.AppsV1().Deployments(ns).Get(ctx, smokeName, metav1.GetOptions{}); err == nil {
			ready = d.Status.ReadyReplicas
			if ready == want {
				return ready
			}
		}
		if sleep(ctx, 500*time.Millisecond) != nil {
			return ready
		}
	}
	return ready
}

// hpaSummary is the HPA's desired replicas, current metric and conditions in one line.
func hpaSummary(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	hpa, err := cs.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "desired=%d", hpa.Status.DesiredReplicas)
	for _, m := range hpa.Status.CurrentMetrics {
		if m.External != nil && m.External.Current.AverageValue != nil {
			fmt.Fprintf(&b, " current=%s/replica", m.External.Current.AverageValue)
		}
	}
	for _, c := range hpa.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// scaledObjectSummary is the smoke ScaledObject's conditions in one line.
func scaledObjectSummary(ctx context.Context, dyn dynamic.Interface, ns string) string {
	so, err := dyn.Resource(peers.ScaledObjectGVR).Namespace(ns).Get(ctx, smokeName, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(so.Object, "status", "conditions")
	var parts []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			parts = append(parts, fmt.Sprintf("%v=%v(%v)", m["type"], m["status"], m["reason"]))
		}
	}
	return strings.Join(parts, " ")
}

func conditionTrue(conds []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
