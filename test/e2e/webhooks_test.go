//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/notify"
)

// webhooks is a gate that answers 503 until it is opened, and a notification receiver that
// answers 500 to the first two posts of each message, then 200; both count what they got. They
// listen on the stack's network namespace's loopback, where the controller runs.
type webhooks struct {
	mu       sync.Mutex
	opened   time.Time
	gateHits int
	posts    map[string]int            // per message ID
	accepted map[string]map[string]int // per reason, per ID
}

func newWebhooks(t *testing.T) (*webhooks, string) {
	w := &webhooks{posts: map[string]int{}, accepted: map[string]map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/gate", func(rw http.ResponseWriter, _ *http.Request) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.gateHits++
		if w.opened.IsZero() {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("/hook", func(rw http.ResponseWriter, r *http.Request) {
		var m notify.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m.ID == "" {
			http.Error(rw, "bad message", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.posts[m.ID]++
		if w.posts[m.ID] <= 2 {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		if w.accepted[m.Reason] == nil {
			w.accepted[m.Reason] = map[string]int{}
		}
		w.accepted[m.Reason][m.ID]++
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return w, srv.URL
}

func (w *webhooks) open() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.opened = time.Now()
	return w.opened
}

// events is how many distinct events of reason were accepted, and in how many messages.
func (w *webhooks) events(reason string) (events, messages int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.accepted[reason] {
		events++
		messages += n
	}
	return events, messages
}

// storyGateAndNotifications: a ConfirmRollout gate answering 503 for a minute holds the rollout
// at step 0 (Traefik sends the candidate nothing), then lets it go on to its promotion; a
// notification receiver that answers 500 twice to every message accepts exactly one message per
// rollout event.
func storyGateAndNotifications(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-webhooks")
	hooks, url := newWebhooks(t)
	if err := st.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"},
		StringData: map[string]string{"approve": url + "/gate", "team": url + "/hook?token=secret"}}); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), func(ms *v1alpha1.ModelServer) {
		ms.Spec.Rollout.Gates = []v1alpha1.RolloutGate{{Name: "approve", Type: v1alpha1.GateConfirmRollout, URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "approve"}}}
		ms.Spec.Notifications = []v1alpha1.NotificationTarget{{Name: "team", URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "team"}}}
	})
	given(t, "a %s, with a ConfirmRollout gate and a notification target, both read from a Secret", describe(ms))
	v0 := create(t, ms, 3*time.Minute)
	newColor := v0.stableColor().Other()

	when(t, "the image changes to %s while the gate answers 503, for a minute", imageGood)
	began := time.Now()
	rev := setImage(t, ns, ms.Name, imageGood)
	sawHeld := false
	held := follow(t, ns, ms.Name, 2*time.Minute, "a minute held at step 0 by the gate", func(v view) error {
		if v.route[newColor] > 0 || v.ms.Status.Weights.Candidate > 0 || v.ms.Status.Rollout.Step > 0 {
			return fmt.Errorf("the rollout moved past the closed gate: route %v, step %d", v.route, v.ms.Status.Rollout.Step)
		}
		if c := v.condition(v1alpha1.ConditionProgressing); c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonGateHeld {
			sawHeld = true
		}
		return nil
	}, func(v view) bool { return time.Since(began) >= time.Minute })
	opened := hooks.open()
	then(t, "it held at step 0 for a minute (Progressing False, GateHeld: %t), the gate called %d times; the gate now answers 200", sawHeld, hooks.gateHits)
	if !sawHeld {
		t.Errorf("the rollout never said it was held by the gate: Progressing %+v", held.condition(v1alpha1.ConditionProgressing))
	}
	hooks.mu.Lock()
	hits := hooks.gateHits
	hooks.mu.Unlock()
	interval := ms.Spec.Rollout.Analysis.Interval.Duration
	if most := int(opened.Sub(began)/interval) + 2; hits > most {
		t.Errorf("the gate was called %d times in %s: more than once per analysis interval (%s), at most %d", hits, secs(opened.Sub(began)), interval, most)
	}
	at := settleScrape()
	if n := served(t, ns, ms.Name, newColor, ".*", began, at); n != 0 {
		t.Errorf("the candidate answered %.0f requests through Traefik while the gate was closed, want 0", n)
	}

	var firstWeight time.Time
	follow(t, ns, ms.Name, 4*time.Minute, "promotion of "+rev, func(v view) error {
		if v.ms.Status.Weights.Candidate > 0 && firstWeight.IsZero() {
			firstWeight = v.at
		}
		if v.ms.Status.Phase == v1alpha1.PhaseRolledBack {
			return fmt.Errorf("rolled back: %+v", v.ms.Status.History)
		}
		return nil
	}, func(v view) bool { return v.healthyOn(rev) })
	and(t, "it went on once the gate answered 200, and was promoted")
	figure(t, "gate: first weight after the gate opened", "%s", secs(firstWeight.Sub(opened)))

	then(t, "the receiver accepted exactly one message per rollout event, each after two 500s")
	want := map[string]int{"RolloutStarted": 1, "StepAdvanced": 3, "Promoted": 1}
	follow(t, ns, ms.Name, time.Minute, "every rollout event delivered", func(view) error { return nil }, func(view) bool {
		for reason, n := range want {
			if e, _ := hooks.events(reason); e != n {
				return false
			}
		}
		return true
	})
	time.Sleep(5 * time.Second) // a repeat would come within the backoff
	for reason, n := range want {
		if e, m := hooks.events(reason); e != n || m != n {
			t.Errorf("%s: %d messages for %d events, want %d of each", reason, m, e, n)
		}
	}
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	for id, n := range hooks.posts {
		if n != 3 {
			t.Errorf("message %s was posted %d times, want 3 (two answered 500)", id, n)
		}
	}
	figure(t, "notifications", "%d messages accepted for %d events, each posted 3 times", len(hooks.posts), len(hooks.posts))
}
