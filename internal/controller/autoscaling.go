package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/autoscale"
	"github.com/modelship/modelship/internal/capacity"
	"github.com/modelship/modelship/internal/plan"
	"github.com/modelship/modelship/internal/signals"
)

// observeSignals reads what the autoscaler decides on: the Ready and starting pods (pods are the
// ModelServer's), the autoscalers that would fight it, and the signals its sources measure
// (signals.Deps.Sources), fetched off the worker (signals.Cache). Nil when no measurement is at
// hand yet (a fetch runs, none ended): the pass then keeps the last decision.
func (r *ModelServerReconciler) observeSignals(ctx context.Context, ms *v1alpha1.ModelServer, pods []corev1.Pod, now time.Time) (*plan.Signals, error) {
	t := signals.Target{ModelServer: ms.DeepCopy(), Route: routeTarget(ms).Name} // the fetch may outlive the pass
	var starting int32
	readyOf := map[string]int32{}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if podReady(p) {
			t.Ready = append(t.Ready, autoscale.PodKey{Namespace: p.Namespace, Name: p.Name})
			t.ReadyPods = append(t.ReadyPods, *p)
			readyOf[p.Labels[v1alpha1.LabelColor]]++
		} else {
			starting++
		}
	}
	// The endpoint picker reports per InferencePool; each color's pool weighs by its Ready pods.
	if ms.UsesInferencePools() {
		for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
			t.Pools = append(t.Pools, autoscale.Pool{Key: autoscale.PodKey{Namespace: ms.Namespace, Name: ms.PoolName(c)}, Ready: readyOf[string(c)]})
		}
	}
	conflicts, err := r.conflictingAutoscalers(ctx, ms)
	if err != nil {
		return nil, err
	}
	deps := signals.Deps{Snapshots: r.Signals, Prometheus: r.Prometheus, Policy: r.QueryPolicy, MetricsAPIs: r.MetricsAPIs, GatewayNamespace: r.GatewayMetricsNamespace}
	res, ok := r.fetches.Get(ctx, client.ObjectKeyFromObject(ms), deps.Sources(ms), t, now, 2*autoscalingInterval(ms))
	if !ok {
		ctrl.LoggerFrom(ctx).V(1).Info("Autoscaling signals under way in the background")
		return nil, nil
	}
	if res.Err != nil {
		// Failed sources come out as Error observations: the count holds.
		ctrl.LoggerFrom(ctx).V(1).Info("Autoscaling signals unavailable", "error", res.Err.Error())
	}
	s := res.Signals
	return &plan.Signals{
		Observations: s.Observations, RequestsWaiting: s.RequestsWaiting, RequestsRunning: s.RequestsRunning, KVCacheUsage: s.KVCacheUsage, TTFTP95: s.TTFTP95, ITLP95: s.ITLP95, Load: s.Load, Served: s.Served,
		Ready: int32(len(t.Ready)), ReadyOverWindow: readyOverWindow(t.ReadyPods, now, autoscale.ServingWindowOf(ms)),
		Starting: starting, BothColorsReady: len(readyOf) > 1, Conflicts: conflicts,
	}, nil
}

// readyOverWindow is the Ready pods averaged over the window before now, each counted from when
// its Ready condition last turned true (a pod Ready throughout counts 1).
func readyOverWindow(ready []corev1.Pod, now time.Time, win time.Duration) float64 {
	if win <= 0 {
		return float64(len(ready))
	}
	var sum float64
	for i := range ready {
		in := win
		if c := readyCondition(&ready[i]); c != nil && !c.LastTransitionTime.IsZero() {
			in = min(max(now.Sub(c.LastTransitionTime.Time), 0), win)
		}
		sum += in.Seconds() / win.Seconds()
	}
	return sum
}

// autoscalingInterval is how often the autoscaler looks (spec.autoscaling.interval).
func autoscalingInterval(ms *v1alpha1.ModelServer) time.Duration {
	if d := ms.Spec.Autoscaling.Interval.Duration; d > 0 {
		return d
	}
	return autoscale.DefaultInterval
}

// observeCapacity reads the cluster's room for the ModelServer's GPUs: the nodes and the GPUs
// all pods hold (the shared clusterView), the namespace's quotas, and own, its pods. Nil when
// its pods need no GPU.
func (r *ModelServerReconciler) observeCapacity(ctx context.Context, ms *v1alpha1.ModelServer, own []corev1.Pod) (*plan.CapacityView, error) {
	if capacity.PodGPUs(&ms.Spec.Template.Spec) == 0 {
		return nil, nil
	}
	cluster, err := r.cluster.get(ctx, r.Client, r.Now())
	if err != nil {
		return nil, err
	}
	var quotas corev1.ResourceQuotaList
	if err := r.List(ctx, &quotas, client.InNamespace(ms.Namespace)); err != nil {
		return nil, fmt.Errorf("listing resource quotas: %w", err)
	}
	return &plan.CapacityView{Cluster: cluster, Quotas: quotas.Items, Own: own}, nil
}

// scaledObjectGVK is KEDA's ScaledObject.
var scaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// conflictingAutoscalers names HPAs and KEDA ScaledObjects that target the ModelServer's
// Deployments (or the ModelServer itself), which would fight modelship over replicas.
func (r *ModelServerReconciler) conflictingAutoscalers(ctx context.Context, ms *v1alpha1.ModelServer) ([]string, error) {
	targets := map[string]bool{"Deployment/" + ms.DeploymentName(v1alpha1.Blue): true, "Deployment/" + ms.DeploymentName(v1alpha1.Green): true, "ModelServer/" + ms.Name: true}
	var found []string
	var hpas autoscalingv2.HorizontalPodAutoscalerList
	if err := r.List(ctx, &hpas, client.InNamespace(ms.Namespace)); err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	for _, h := range hpas.Items {
		if targets[h.Spec.ScaleTargetRef.Kind+"/"+h.Spec.ScaleTargetRef.Name] {
			found = append(found, "HorizontalPodAutoscaler/"+h.Name)
		}
	}
	if !r.scaledObjects {
		// KEDA is not installed (checked once at start): no ScaledObject can fight us.
		return found, nil
	}
	scaled := &unstructured.UnstructuredList{}
	scaled.SetGroupVersionKind(scaledObjectGVK.GroupVersion().WithKind("ScaledObjectList"))
	if err := r.cacheReader.List(ctx, scaled, client.InNamespace(ms.Namespace)); err == nil {
		for _, s := range scaled.Items {
			kind, _, _ := unstructured.NestedString(s.Object, "spec", "scaleTargetRef", "kind")
			name, _, _ := unstructured.NestedString(s.Object, "spec", "scaleTargetRef", "name")
			if kind == "" {
				kind = "Deployment"
			}
			if targets[kind+"/"+name] {
				found = append(found, "ScaledObject/"+s.GetName())
			}
		}
	} else if !meta.IsNoMatchError(err) && !strings.Contains(err.Error(), "no matches for kind") {
		return nil, fmt.Errorf("listing KEDA ScaledObjects: %w", err)
	}
	return found, nil
}
