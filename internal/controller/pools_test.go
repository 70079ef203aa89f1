package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	inferencev1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/routing"
)

// onPools routes the ModelServer through one InferencePool per color, each with its own
// endpoint picker Service ("<color>-epp").
func onPools(ms *v1alpha1.ModelServer) {
	ms.Spec.Gateway.Backend = v1alpha1.BackendInferencePool
	ms.Spec.Gateway.InferencePool = &v1alpha1.InferencePoolSpec{EndpointPickerRef: v1alpha1.EndpointPickerRef{
		Name: "{color}-epp", Port: ptr.To(int32(9002)), FailureMode: "FailOpen"}}
}

func getPool(ns, name string) (*inferencev1.InferencePool, error) {
	p := routing.NewPool()
	return p, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p)
}

// answerPool plays the Gateway's report on a pool: Accepted True and ResolvedRefs as given.
func answerPool(ns, name string, resolved metav1.ConditionStatus, reason string) error {
	p, err := getPool(ns, name)
	if err != nil {
		return err
	}
	cond := func(typ string, st metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: typ + " " + reason,
			ObservedGeneration: p.Generation, LastTransitionTime: metav1.Now()}
	}
	p.Status.Parents = []inferencev1.ParentStatus{{
		ParentRef:  inferencev1.ParentReference{Group: ptr.To(inferencev1.Group("gateway.networking.k8s.io")), Kind: "Gateway", Name: "inference-gateway", Namespace: "gateway-system"},
		Conditions: []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted"), cond("ResolvedRefs", resolved, reason)},
	}}
	return k8s.Status().Update(context.Background(), p)
}

func TestServesThroughInferencePoolsAndMovesTheirWeightsThroughARollout(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "pooled", onPools)
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)

	created := getMS(t, ms)
	for _, c := range routing.Colors {
		eventually(t, 20*time.Second, "InferencePool "+ms.PoolName(c), func() error {
			p, err := getPool(ns, ms.PoolName(c))
			if err != nil {
				return err
			}
			sel := p.Spec.Selector.MatchLabels
			if sel[v1alpha1.LabelModelServer] != inferencev1.LabelValue(ms.Name) || sel[v1alpha1.LabelColor] != inferencev1.LabelValue(c) || len(sel) != 2 {
				return fmt.Errorf("selector %v", sel)
			}
			if ports := p.Spec.TargetPorts; len(ports) != 1 || ports[0].Number != 8000 {
				return fmt.Errorf("targetPorts %v, want the template's 8000", ports)
			}
			if epp := p.Spec.EndpointPickerRef; epp == nil || string(epp.Name) != string(c)+"-epp" {
				name := ""
				if epp != nil {
					name = string(epp.Name)
				}
				return fmt.Errorf("endpointPickerRef.name %q", name)
			}
			if !metav1.IsControlledBy(p, created) {
				return fmt.Errorf("not controlled by the ModelServer (garbage collection removes it with the ModelServer): %v", p.GetOwnerReferences())
			}
			return nil
		})
	}
	route, err := getRoute(ns, ms.RouteName())
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range route.Spec.Rules[0].BackendRefs {
		if ptr.Deref(b.Kind, "") != routing.PoolKind || ptr.Deref(b.Group, "") != routing.InferenceGroup || string(b.Name) != ms.PoolName(routing.Colors[i]) {
			t.Errorf("backendRef %d: %+v, want InferencePool %s", i, b.BackendObjectReference, ms.PoolName(routing.Colors[i]))
		}
	}
	tr.waitWeights(t, "100/0")

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	tr.waitCandidateWeight(t, 20)
	waitPromoted(t, ms, v1alpha1.Green, v2)
	onlyForward(t, tr.history())
	tr.waitWeights(t, "0/100")
	if h := strings.Join(tr.history(), " "); !strings.Contains(h, "50/50") {
		t.Errorf("the pools' weights did not go through the 50%% step: %s", h)
	}
}

func TestRolloutHoldsOnAPoolItsGatewayDidNotAccept(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "unresolved", onPools)
	good := map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy}
	tr, _ := startServing(t, ms, good)
	playDeployments(t, ns)
	// The Gateway accepts the route and the blue pool, but cannot resolve green's endpoint picker.
	eventually(t, 20*time.Second, "the Gateway's answers", func() error {
		if err := answerRoute(ns, ms.RouteName(), metav1.ConditionTrue, "Accepted"); err != nil {
			return err
		}
		if err := answerPool(ns, ms.PoolName(v1alpha1.Blue), metav1.ConditionTrue, "ResolvedRefs"); err != nil {
			return err
		}
		return answerPool(ns, ms.PoolName(v1alpha1.Green), metav1.ConditionFalse, "InvalidExtensionRef")
	})
	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	var held *v1alpha1.ModelServer
	eventually(t, 20*time.Second, "RouteAccepted False with reason PoolNotAccepted", func() error {
		if err := answerRoute(ns, ms.RouteName(), metav1.ConditionTrue, "Accepted"); err != nil && !apierrors.IsConflict(err) {
			return err
		}
		held = getMS(t, ms)
		ra := condition(held, v1alpha1.ConditionRouteAccepted)
		if ra == nil || ra.Status != metav1.ConditionFalse || ra.Reason != v1alpha1.ReasonPoolNotAccepted || !strings.Contains(ra.Message, "InvalidExtensionRef") {
			return fmt.Errorf("RouteAccepted %+v", ra)
		}
		if p := condition(held, v1alpha1.ConditionProgressing); p == nil || p.Reason != v1alpha1.ReasonRouteNotAccepted {
			return fmt.Errorf("Progressing %+v", p)
		}
		return nil
	})
	weights, step := tr.current(), held.Status.Rollout.Step
	consistently(t, holdFor, "holds while green's pool is not accepted", func() error {
		st := getMS(t, ms).Status
		if w := tr.current(); w != weights || st.Rollout.Step != step {
			return fmt.Errorf("weights %s step %d; held at %s step %d", w, st.Rollout.Step, weights, step)
		}
		return nil
	})
	eventually(t, 10*time.Second, "green's pool resolved", func() error {
		return answerPool(ns, ms.PoolName(v1alpha1.Green), metav1.ConditionTrue, "ResolvedRefs")
	})
	waitPromoted(t, ms, v1alpha1.Green, v2)
	onlyForward(t, tr.history())
}

func TestUserOwnedRouteOnPoolsKeepsItsOtherRules(t *testing.T) {
	ns := newNamespace(t)
	createUserRoute(t, ns)
	ms := newModelServer(ns, "shared-pools", onPools, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.ParentRefs, ms.Spec.Gateway.Hostnames = nil, nil
		ms.Spec.Gateway.RouteRef = &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}
	})
	if err := k8s.Create(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "our pools in the llm rule, the docs rule untouched", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		llm := r.Spec.Rules[1]
		if len(llm.BackendRefs) != 2 || len(llm.Filters) != 1 || ptr.Deref(llm.BackendRefs[0].Kind, "") != routing.PoolKind {
			return fmt.Errorf("llm rule %+v", llm)
		}
		if docs := r.Spec.Rules[0]; len(docs.BackendRefs) != 1 || docs.BackendRefs[0].Name != "legacy" {
			return fmt.Errorf("the docs rule changed: %+v", docs)
		}
		_, err = getPool(ns, ms.PoolName(v1alpha1.Green))
		return err
	})
	// Back to Services: the route points at them and the pools go.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.Backend, ms.Spec.Gateway.InferencePool = v1alpha1.BackendService, nil
	})
	eventually(t, 20*time.Second, "Service refs in the llm rule and no pools", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		for _, b := range r.Spec.Rules[1].BackendRefs {
			if ptr.Deref(b.Kind, "Service") != "Service" {
				return fmt.Errorf("llm rule still has %s %s", *b.Kind, b.Name)
			}
		}
		for _, c := range routing.Colors {
			if _, err := getPool(ns, ms.PoolName(c)); !apierrors.IsNotFound(err) {
				return fmt.Errorf("pool %s: %v", ms.PoolName(c), err)
			}
		}
		return nil
	})
}

func TestWithoutTheInferencePoolAPIOnlyModelServersOnPoolsStall(t *testing.T) {
	// A controller started on a cluster without the InferencePool CRD (InferencePools false).
	r := manualReconciler(t, interceptor.Funcs{})
	stamp := time.Now().UnixNano() % 1e6
	pools := newModelServer(manualNamespace, fmt.Sprintf("nopool-%d", stamp), onPools)
	services := newModelServer(manualNamespace, fmt.Sprintf("svc-%d", stamp))
	for _, ms := range []*v1alpha1.ModelServer{pools, services} {
		if err := k8s.Create(context.Background(), ms); err != nil {
			t.Fatal(err)
		}
		pass(t, r, ms)
	}
	got := getMS(t, pools)
	if c := condition(got, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonInferencePoolAPIMissing ||
		!strings.Contains(c.Message, "spec.gateway.backend") {
		t.Errorf("Stalled %+v; want True with reason InferencePoolAPIMissing naming spec.gateway.backend", c)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: manualNamespace, Name: pools.DeploymentName(v1alpha1.Blue)}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a ModelServer asking for pools the cluster lacks got a Deployment (%v); want nothing applied", err)
	}
	if _, err := getDeployment(manualNamespace, services.DeploymentName(v1alpha1.Blue)); err != nil {
		t.Errorf("the ModelServer on Services was not served: %v", err)
	}
}
