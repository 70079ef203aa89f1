package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// gateServer answers 503 until open() is called, then 200, and counts the calls per gate.
type gateServer struct {
	mu     sync.Mutex
	opened bool
	calls  map[string]int
}

func newGateServer(t *testing.T) (*gateServer, string) {
	g := &gateServer{calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req GateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Gate == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls[req.Gate]++
		if !g.opened {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return g, srv.URL
}

func (g *gateServer) open() { g.mu.Lock(); g.opened = true; g.mu.Unlock() }

func TestAGateAnswering503HoldsTheRolloutAtStepZeroThenLetsItGoOn(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	gs, url := newGateServer(t)
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gates"},
		StringData: map[string]string{"approve": url + "/approve"}}); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "gated", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Gates = []v1alpha1.RolloutGate{{Name: "approve", Type: v1alpha1.GateConfirmRollout, URLSecretRef: v1alpha1.SecretKeyRef{Name: "gates", Key: "approve"}}}
	})
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	// The gate answers 503: the rollout holds at step 0 (weight 0) and says so, call after call.
	eventually(t, rolloutTimeout, "held at step 0 by the gate, 3 failures recorded", func() error {
		got := getMS(t, ms)
		c := condition(got, v1alpha1.ConditionProgressing)
		g := got.Status.Rollout.Gates
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonGateHeld || !strings.Contains(c.Message, "approve") || !strings.Contains(c.Message, "503") {
			return fmt.Errorf("Progressing %+v", c)
		}
		if len(g) != 1 || g[0].Failures < 3 || g[0].Passed {
			return fmt.Errorf("gates %+v", g)
		}
		if got.Status.Rollout.Step != 0 || got.Status.Phase != v1alpha1.PhaseProgressing {
			return fmt.Errorf("step %d phase %s", got.Status.Rollout.Step, got.Status.Phase)
		}
		return nil
	})
	if h := tr.history(); !slices.Equal(h, []string{"100/0"}) {
		t.Fatalf("route weights went %v while the gate refused; want 100/0 only", h)
	}
	// A refusing gate is asked again one analysis interval (1s) after each refusal, not on
	// every pass: over the hold, about one call per recorded refusal (one more in flight).
	failures := getMS(t, ms).Status.Rollout.Gates[0].Failures
	gs.mu.Lock()
	calls := gs.calls["approve"]
	gs.mu.Unlock()
	if calls > int(failures)+2 {
		t.Errorf("the gate was called %d times for %d refusals recorded: it is not paced by the analysis interval", calls, failures)
	}

	// The gate answers 200: the rollout goes on through its steps.
	gs.open()
	waitPromoted(t, ms, v1alpha1.Green, v2)
	if h := tr.history(); !slices.Equal(h, []string{"100/0", "80/20", "50/50", "0/100"}) {
		t.Errorf("route weights went %v; want 100/0, 80/20, 50/50, 0/100", h)
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.calls["approve"] < 4 {
		t.Errorf("the gate was called %d times; want at least 3 refusals and the pass", gs.calls["approve"])
	}
}
