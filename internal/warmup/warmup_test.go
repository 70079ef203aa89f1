package warmup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHTTPProber(t *testing.T) {
	loaded := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pods/ml/llama-green-1/v1/models" {
			http.NotFound(w, r)
			return
		}
		if !loaded {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer srv.Close()
	p := NewHTTPProber(time.Second, srv.URL+"/pods/{namespace}/{pod}/{path}")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama-green-1"}}
	if err := p.Probe(context.Background(), pod, 8000, "/v1/models"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a pod still loading its weights passed warm-up: %v", err)
	}
	loaded = true
	if err := p.Probe(context.Background(), pod, 8000, "/v1/models"); err != nil {
		t.Fatalf("a loaded pod failed warm-up: %v", err)
	}
}

func TestURLUsesPodIPWithoutTemplate(t *testing.T) {
	p := NewHTTPProber(time.Second, "")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{PodIP: "10.1.2.3"}}
	u, err := p.URL(pod, 8000, "/v1/models")
	if err != nil || u != "http://10.1.2.3:8000/v1/models" {
		t.Fatalf("URL = %q, %v", u, err)
	}
	if _, err := p.URL(&corev1.Pod{}, 8000, "/"); err == nil {
		t.Fatal("a pod without an IP must not be probed")
	}
}

func TestProberDoesNotFollowRedirects(t *testing.T) {
	reached := false
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached = true
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/latest/meta-data/", code)
		}))
		p := NewHTTPProber(time.Second, pod.URL+"/{path}")
		err := p.Probe(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}}, 8000, "/v1/models")
		pod.Close()
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("a pod answering %d passed warm-up or failed for another reason: %v", code, err)
		}
	}
	if reached {
		t.Fatal("the prober followed a redirect to another server")
	}
}

func TestProberWithoutRedirectPolicyDoesNotFollowRedirects(t *testing.T) {
	reached := false
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	defer target.Close()
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	defer pod.Close()
	p := &HTTPProber{Client: &http.Client{Timeout: time.Second}, URLTemplate: pod.URL + "/{path}"}
	if err := p.Probe(context.Background(), &corev1.Pod{}, 8000, "/v1/models"); err == nil || reached {
		t.Fatalf("a prober built without CheckRedirect followed a redirect: err=%v reached=%v", err, reached)
	}
}

func TestProberRefusesHostNetworkPods(t *testing.T) {
	probed := false
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { probed = true }))
	defer srv.Close()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p"}, Spec: corev1.PodSpec{HostNetwork: true}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
	for _, tmpl := range []string{"", srv.URL + "/{path}"} {
		err := NewHTTPProber(time.Second, tmpl).Probe(context.Background(), pod, 8000, "/v1/models")
		if err == nil || !strings.Contains(err.Error(), "host network") {
			t.Errorf("template %q: a hostNetwork pod was not refused: %v", tmpl, err)
		}
	}
	if probed {
		t.Fatal("a hostNetwork pod was probed")
	}
}

func TestOwnedBy(t *testing.T) {
	yes := true
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama-green", UID: "d1"}}
	rs := func(ns string, owner *appsv1.Deployment) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "llama-green-abc", UID: "rs1"}}
		if owner != nil {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: owner.Name, UID: owner.UID, Controller: &yes}}
		}
		return r
	}
	pod := func(refs ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "p", OwnerReferences: refs}}
	}
	byRS := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "llama-green-abc", UID: "rs1", Controller: &yes}
	notController := byRS
	notController.Controller = nil
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama-green", UID: "d2"}}
	cases := []struct {
		name string
		pod  *corev1.Pod
		rs   *appsv1.ReplicaSet
		want bool
	}{
		{"probes a pod of a ReplicaSet of our Deployment", pod(byRS), rs("ml", d), true},
		{"refuses a pod without owner", pod(), rs("ml", d), false},
		{"refuses a pod that only lists the ReplicaSet without being controlled by it", pod(notController), rs("ml", d), false},
		{"refuses a pod whose ReplicaSet is not found", pod(byRS), nil, false},
		{"refuses a pod of a ReplicaSet nobody controls", pod(byRS), rs("ml", nil), false},
		{"refuses a pod of a ReplicaSet of another Deployment with the same name", pod(byRS), rs("ml", other), false},
		{"refuses a pod whose ReplicaSet is in another namespace", pod(byRS), rs("other", d), false},
		{"refuses a pod controlled by a StatefulSet", pod(metav1.OwnerReference{Kind: "StatefulSet", Name: "llama-green-abc", UID: "rs1", Controller: &yes}), rs("ml", d), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := OwnedBy(c.pod, c.rs, d); got != c.want {
				t.Fatalf("OwnedBy = %v, want %v", got, c.want)
			}
		})
	}
}
