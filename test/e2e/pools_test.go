//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
	"github.com/modelship/modelship/internal/signals"
	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/framework/gateway"
)

// onPools serves the ModelServer through one InferencePool per color. The fleet simulator plays
// the Gateway and the endpoint picker (it picks the pod with the fewest requests in flight), so
// the picker Service named here is not called.
func onPools(ms *v1alpha1.ModelServer) {
	ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool
	ms.Spec.Gateway.InferencePool = &v1alpha1.InferencePoolSpec{EndpointPickerRef: v1alpha1.EndpointPickerRef{
		Name: ms.Name + "-{color}-epp", Port: ptr.To(int32(9002))}}
}

func getPool(ns, name string) (*inferencev1.InferencePool, error) {
	p := routing.NewPool()
	return p, st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)
}

// storyInferencePools: the same rollouts as the Service stories, over InferencePools.
func storyInferencePools(t *testing.T) {
	if st.ResponsesMetric != fleet.MetricGatewayResponses {
		t.Skipf("Traefik %s serves no InferencePool backend (docs/gateway.md): this story runs on the simulated Gateway, %s=1 make e2e", gateway.Version, simulatedGatewayEnv)
	}
	t.Parallel()
	ns := namespace(t, "story-pools")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), onPools, func(ms *v1alpha1.ModelServer) {
		// The endpoint picker's own gauge for the color's pool, judged beside vLLM's latencies.
		ms.Spec.Rollout.Analysis.Metrics = append(ms.Spec.Rollout.Analysis.Metrics, v1alpha1.AnalysisMetric{
			Name: "epp-queue", Max: ptr.To(resource.MustParse("50")),
			Query: `max(inference_pool_average_queue_size{namespace="{{.Namespace}}",name=~"{{.Pool}}"})`,
		})
	})
	given(t, "a %s, routed through one InferencePool per color, whose analysis also reads the endpoint picker's queue of the color's pool", describe(ms))
	v0 := create(t, ms, 3*time.Minute)

	then(t, "each color has an InferencePool selecting its pods, the route points at the pools, and the Gateway accepted them")
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		p, err := getPool(ns, ms.PoolName(c))
		if err != nil {
			t.Fatalf("InferencePool of %s: %v", c, err)
		}
		sel := p.Spec.Selector.MatchLabels
		if sel[v1alpha1.LabelColor] != inferencev1.LabelValue(c) || sel[v1alpha1.LabelModelServer] != inferencev1.LabelValue(ms.Name) {
			t.Errorf("InferencePool %s selects %v", p.GetName(), sel)
		}
	}
	route := &gatewayv1.HTTPRoute{}
	if err := st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ms.RouteName()}, route); err != nil {
		t.Fatal(err)
	}
	for _, b := range route.Spec.Rules[0].BackendRefs {
		if ptr.Deref(b.Kind, "") != routing.PoolKind {
			t.Errorf("backendRef %s is a %s, want an InferencePool", b.Name, ptr.Deref(b.Kind, "Service"))
		}
	}
	follow(t, ns, ms.Name, time.Minute, "RouteAccepted with both pools", weightsInvariant, func(v view) bool {
		c := v.condition(v1alpha1.ConditionRouteAccepted)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "InferencePools accepted")
	})

	goodVersionPromoted(t, ms, v0, " over InferencePools")
	v1, err := observe(context.Background(), ns, ms.Name)
	if err != nil {
		t.Fatal(err)
	}
	and(t, "the last measurement read the endpoint picker's queue of the candidate's pool from Prometheus")
	var epp *v1alpha1.MetricResult
	for i, r := range v1.ms.Status.Rollout.Analysis {
		if r.Name == "epp-queue" {
			epp = &v1.ms.Status.Rollout.Analysis[i]
		}
	}
	if epp == nil || epp.Verdict != v1alpha1.VerdictPass || epp.Candidate == "" {
		t.Errorf("epp-queue measurement %+v, want a Pass with the candidate pool's value (analysis %+v)", epp, v1.ms.Status.Rollout.Analysis)
	}
	and(t, "the autoscaler's grouped endpoint picker queries find the serving pool and the model's running requests")
	for _, q := range []string{signals.QueryPoolQueueSize, signals.QueryObjectiveRunning} {
		series, err := prom.Vector(context.Background(), q, time.Now())
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		found := map[string]bool{}
		for _, s := range series {
			if s.Labels["namespace"] == ns {
				found[s.Labels["name"]+s.Labels["model_name"]] = true
			}
		}
		if q == signals.QueryPoolQueueSize && !found[ms.PoolName(v1.stableColor())] {
			t.Errorf("%s: no series for pool %s (%v)", q, ms.PoolName(v1.stableColor()), series)
		}
		if q == signals.QueryObjectiveRunning && len(found) == 0 {
			t.Errorf("%s: no running requests series in %s (%v)", q, ns, series)
		}
	}
	slowVersionRolledBack(t, ms, v1, " over InferencePools")

	when(t, "the ModelServer is deleted")
	if err := st.Client.Delete(context.Background(), v1.ms); err != nil {
		t.Fatal(err)
	}
	then(t, "the garbage collector removes both InferencePools with it")
	deadline := time.Now().Add(time.Minute)
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		for {
			_, err := getPool(ns, ms.PoolName(c))
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("InferencePool %s still there a minute after the ModelServer was deleted (%v)", ms.PoolName(c), err)
			}
			time.Sleep(pollInterval)
		}
	}
}
