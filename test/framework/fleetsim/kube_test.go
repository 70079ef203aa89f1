package fleetsim

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/fleet"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func ready(since time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since),
		})
	}
}

// containersReady marks the pod's containers ready since then, Ready as given (a readiness
// gate can hold it).
func containersReady(since time.Time, isReady bool) podOpt {
	return func(p *corev1.Pod) {
		status := corev1.ConditionFalse
		if isReady {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)},
			corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(now)})
	}
}

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(p.Labels, kv[i])
				continue
			}
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withArgs(args ...string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[1].Args = args }
}

// newK8sPod is a scheduled blue pod of ModelServer "llm" with a sidecar and a vLLM container
// holding 2 GPUs.
func newK8sPod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{
			v1alpha1.LabelModelServer: "llm", v1alpha1.LabelColor: "blue", v1alpha1.LabelRevision: "rev1",
		}},
		Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{
			{Name: "proxy", Image: "envoy:1"},
			{Name: "vllm", Image: "vllm/vllm-openai:v0.9.0", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{GPUResource: resource.MustParse("2")},
			}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func TestPodToReplica(t *testing.T) {
	opts := PodOptions{
		ColdStart: 45 * time.Second,
		Capacity:  fleet.Capacity{MaxBatch: 7},
		Profiles: []ProfileRule{
			{Match: "rev-slow", Profile: fleet.Profile{LatencyMultiplier: 3}},
			{Match: "v0.9.0", Profile: fleet.Profile{LatencyMultiplier: 1, ErrorProbability: 0.2}},
		},
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		wantOK bool
		check  func(t *testing.T, p fleet.Pod)
	}{
		{
			name: "maps a Ready pod's labels, node, GPU container and readiness time", wantOK: true,
			pod: newK8sPod("a", ready(now.Add(-time.Minute))),
			check: func(t *testing.T, p fleet.Pod) {
				want := fleet.Pod{Namespace: "ns", Name: "a", UID: "uid-a", ModelServer: "llm", Color: "blue", Revision: "rev1",
					ModelName: "llm", Container: "vllm", Node: "gpu-node-1", GPUs: 2, Ready: true, ReadySince: now.Add(-time.Minute),
					LoadDelay: 45 * time.Second, Capacity: fleet.Capacity{MaxBatch: 7}, Profile: fleet.Profile{LatencyMultiplier: 1, ErrorProbability: 0.2}}
				if p != want {
					t.Errorf("got  %+v\nwant %+v", p, want)
				}
			},
		},
		{
			name: "a pod without a Ready condition is not Ready", wantOK: true, pod: newK8sPod("a"),
			check: func(t *testing.T, p fleet.Pod) {
				if p.Ready || !p.ReadySince.IsZero() {
					t.Errorf("ready=%v since=%v", p.Ready, p.ReadySince)
				}
			},
		},
		{
			name: "a pod held by a readiness gate loads from when its containers were ready and takes no traffic", wantOK: true,
			pod: newK8sPod("a", containersReady(now.Add(-time.Minute), false)),
			check: func(t *testing.T, p fleet.Pod) {
				if p.Ready || !p.ReadySince.Equal(now.Add(-time.Minute)) {
					t.Errorf("ready=%v since=%v, want not Ready, loading since %v", p.Ready, p.ReadySince, now.Add(-time.Minute))
				}
			},
		},
		{
			name: "a terminating pod is marked so", wantOK: true,
			pod: newK8sPod("a", ready(now), func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }),
			check: func(t *testing.T, p fleet.Pod) {
				if !p.Terminating {
					t.Error("not terminating")
				}
			},
		},
		{
			name: "the revision label selects a profile before the image", wantOK: true,
			pod: newK8sPod("a", withLabels(v1alpha1.LabelRevision, "rev-slow")),
			check: func(t *testing.T, p fleet.Pod) {
				if p.Profile.LatencyMultiplier != 3 || p.Revision != "rev-slow" {
					t.Errorf("profile %+v revision %s", p.Profile, p.Revision)
				}
			},
		},
		{
			name: "the served model name comes from vLLM's arguments", wantOK: true,
			pod: newK8sPod("a", withArgs("--model", "meta-llama/Llama-3.1-8B", "--served-model-name=llama3")),
			check: func(t *testing.T, p fleet.Pod) {
				if p.ModelName != "llama3" {
					t.Errorf("model name %q", p.ModelName)
				}
			},
		},
		{
			name: "the model of `vllm serve` names the model without --served-model-name", wantOK: true,
			pod: newK8sPod("a", withArgs("serve", "Qwen/Qwen3-8B", "--port", "8000")),
			check: func(t *testing.T, p fleet.Pod) {
				if p.ModelName != "Qwen/Qwen3-8B" {
					t.Errorf("model name %q", p.ModelName)
				}
			},
		},
		{name: "skips a pod without the color label", pod: newK8sPod("a", withLabels(v1alpha1.LabelColor, ""))},
		{name: "skips a pod that is not scheduled", pod: newK8sPod("a", func(p *corev1.Pod) { p.Spec.NodeName = "" })},
		{name: "skips a finished pod", pod: newK8sPod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := PodToReplica(tt.pod, opts, now)
			if ok != tt.wantOK {
				t.Fatalf("ok=%v, want %v", ok, tt.wantOK)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

func TestParseProfile(t *testing.T) {
	tests := []struct {
		name, in string
		want     ProfileRule
		wantErr  string
	}{
		{name: "reads latency and errors", in: "revision=abc123:latency=2.0,errors=0.1", want: ProfileRule{Match: "abc123", Profile: fleet.Profile{LatencyMultiplier: 2, ErrorProbability: 0.1}}},
		{name: "reads an image substring with a tag and one key", in: "revision=vllm-openai:v0.9:errors=0.5", want: ProfileRule{Match: "vllm-openai:v0.9", Profile: fleet.Profile{LatencyMultiplier: 1, ErrorProbability: 0.5}}},
		{name: "rejects a key list that is not key=value", in: "revision=r:latency=2,slow", wantErr: "not key=value"},
		{name: "defaults to a neutral profile without keys", in: "revision=r2", want: ProfileRule{Match: "r2", Profile: fleet.Profile{LatencyMultiplier: 1}}},
		{name: "rejects a missing revision", in: "latency=2", wantErr: "want revision="},
		{name: "rejects an unknown key", in: "revision=r:speed=2", wantErr: "unknown key"},
		{name: "rejects an unknown key after a known one", in: "revision=r:latency=2,speed=2", wantErr: "unknown key"},
		{name: "rejects an error probability above 1", in: "revision=r:errors=1.5", wantErr: "probability"},
		{name: "rejects a non-positive latency", in: "revision=r:latency=0", wantErr: "positive"},
		{name: "reads a delay before the profile applies", in: "revision=vllm-openai:v0.11.3:latency=3,after=90", want: ProfileRule{Match: "vllm-openai:v0.11.3", Profile: fleet.Profile{LatencyMultiplier: 3, After: 90 * time.Second}}},
		{name: "rejects a negative delay", in: "revision=r:after=-1", wantErr: "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProfile(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func backend(name string, weight *int32, mods ...func(*gatewayv1.HTTPBackendRef)) gatewayv1.HTTPBackendRef {
	b := gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name), Port: ptr.To(gatewayv1.PortNumber(8000))},
		Weight:                 weight,
	}}
	for _, m := range mods {
		m(&b)
	}
	return b
}

func newRoute(rules ...[]gatewayv1.HTTPBackendRef) *gatewayv1.HTTPRoute {
	r := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "route", Generation: 3},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{
			{Name: "gw-a"}, {Name: "gw-b", SectionName: ptr.To(gatewayv1.SectionName("http"))},
		}}},
	}
	for _, br := range rules {
		r.Spec.Rules = append(r.Spec.Rules, gatewayv1.HTTPRouteRule{BackendRefs: br})
	}
	return r
}

func TestRouteWeights(t *testing.T) {
	llm := types.NamespacedName{Namespace: "ns", Name: "llm"}
	other := types.NamespacedName{Namespace: "other", Name: "chat"}
	dotted, dashed := types.NamespacedName{Namespace: "ns", Name: "llama-3.1-8b"}, types.NamespacedName{Namespace: "ns", Name: "llama-3-1-8b"}
	known := map[types.NamespacedName]bool{llm: true, other: true, dotted: true, dashed: true}
	tests := []struct {
		name  string
		route *gatewayv1.HTTPRoute
		want  map[types.NamespacedName]map[string]int32
	}{
		{
			name:  "reads both colors' weights of a ModelServer",
			route: newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](90)), backend("llm-green", ptr.To[int32](10))}),
			want:  map[types.NamespacedName]map[string]int32{llm: {"blue": 90, "green": 10}},
		},
		{
			name:  "weighs a backendRef without a weight 1",
			route: newRoute([]gatewayv1.HTTPBackendRef{backend("llm-blue", nil)}),
			want:  map[types.NamespacedName]map[string]int32{llm: {"blue": 1}},
		},
		{
			name: "ignores Services of unknown ModelServers and non-Service backends",
			route: newRoute([]gatewayv1.HTTPBackendRef{
				backend("web-blue", ptr.To[int32](50)),
				backend("llm-green", ptr.To[int32](50), func(b *gatewayv1.HTTPBackendRef) { b.Kind = ptr.To(gatewayv1.Kind("InferencePool")) }),
				backend("llm-blue", ptr.To[int32](100)),
			}),
			want: map[types.NamespacedName]map[string]int32{llm: {"blue": 100}},
		},
		{
			name: "follows a backendRef to another namespace",
			route: newRoute([]gatewayv1.HTTPBackendRef{backend("chat-green", ptr.To[int32](100), func(b *gatewayv1.HTTPBackendRef) {
				b.Namespace = ptr.To(gatewayv1.Namespace("other"))
			})}),
			want: map[types.NamespacedName]map[string]int32{other: {"green": 100}},
		},
		{
			name: "takes the first rule that references a ModelServer",
			route: newRoute(
				[]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](75)), backend("llm-green", ptr.To[int32](25))},
				[]gatewayv1.HTTPBackendRef{backend("llm-blue", ptr.To[int32](0)), backend("llm-green", ptr.To[int32](100))},
			),
			want: map[types.NamespacedName]map[string]int32{llm: {"blue": 75, "green": 25}},
		},
		{
			name: "reads the Services of a dotted name, derived, apart from those of the same name with dashes",
			route: newRoute([]gatewayv1.HTTPBackendRef{
				backend(v1alpha1.ServiceNameOf(dotted.Name, v1alpha1.Blue), ptr.To[int32](70)), backend(v1alpha1.ServiceNameOf(dotted.Name, v1alpha1.Green), ptr.To[int32](30)),
				backend("llama-3-1-8b-blue", ptr.To[int32](100)),
			}),
			want: map[types.NamespacedName]map[string]int32{dotted: {"blue": 70, "green": 30}, dashed: {"blue": 100}},
		},
		{name: "gives nothing for a route without ModelServer backends", route: newRoute([]gatewayv1.HTTPBackendRef{backend("web", nil)}), want: map[types.NamespacedName]map[string]int32{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RouteWeights(tt.route, known, nil, nil)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, w := range tt.want {
				if len(got[k]) != len(w) {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
				for c, v := range w {
					if got[k][c] != v {
						t.Errorf("%s %s weight %d, want %d", k, c, got[k][c], v)
					}
				}
			}
		})
	}
}

func TestRouteStatus(t *testing.T) {
	t1 := metav1.NewTime(now)
	t.Run("accepts every parentRef with both conditions at the route's generation", func(t *testing.T) {
		r := newRoute()
		st, changed := RouteStatus(r, t1)
		if !changed || len(st.Parents) != 2 {
			t.Fatalf("changed=%v parents=%d, want true 2", changed, len(st.Parents))
		}
		for i, p := range st.Parents {
			if p.ControllerName != ControllerName || p.ParentRef.Name != r.Spec.ParentRefs[i].Name {
				t.Errorf("parent %d: %+v", i, p)
			}
			for _, typ := range []string{"Accepted", "ResolvedRefs"} {
				c := findCondition(p.Conditions, typ)
				if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 || c.Reason != typ {
					t.Errorf("parent %d condition %s: %+v", i, typ, c)
				}
			}
		}
	})
	t.Run("reports no change once the status says so, and keeps transition times", func(t *testing.T) {
		r := newRoute()
		st, _ := RouteStatus(r, t1)
		r.Status = st
		again, changed := RouteStatus(r, metav1.NewTime(now.Add(time.Minute)))
		if changed {
			t.Error("changed on the second pass")
		}
		if c := findCondition(again.Parents[0].Conditions, "Accepted"); !c.LastTransitionTime.Equal(&t1) {
			t.Errorf("transition time moved to %v", c.LastTransitionTime)
		}
	})
	t.Run("follows a new generation and drops parents that are gone, keeping other controllers'", func(t *testing.T) {
		r := newRoute()
		st, _ := RouteStatus(r, t1)
		foreign := gatewayv1.RouteParentStatus{ParentRef: gatewayv1.ParentReference{Name: "istio"}, ControllerName: "istio.io/gateway-controller"}
		r.Status = gatewayv1.HTTPRouteStatus{RouteStatus: gatewayv1.RouteStatus{Parents: append([]gatewayv1.RouteParentStatus{foreign}, st.Parents...)}}
		r.Generation = 4
		r.Spec.ParentRefs = r.Spec.ParentRefs[:1]
		next, changed := RouteStatus(r, t1)
		if !changed || len(next.Parents) != 2 || next.Parents[0].ControllerName != foreign.ControllerName {
			t.Fatalf("changed=%v parents %+v", changed, next.Parents)
		}
		if c := findCondition(next.Parents[1].Conditions, "Accepted"); c.ObservedGeneration != 4 {
			t.Errorf("observed generation %d, want 4", c.ObservedGeneration)
		}
	})
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
