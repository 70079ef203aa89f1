package controller

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
	ctrl "sigs.k8s.io/controller-runtime"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/notify"
)

// testNotifier is the controller's Notifier in the tests: no cluster-wide URL, retries 20ms
// apart.
func testNotifier() *notify.Sender {
	s := notify.NewSender(nil, nil, ctrl.Log.WithName("notify"))
	s.Backoff = 20 * time.Millisecond
	return s
}

// hookReceiver is a webhook that answers 500 to the first two posts of each message, then
// 200, and counts the messages it accepted per reason and ID.
type hookReceiver struct {
	mu       sync.Mutex
	posts    map[string]int // per ID
	accepted map[string]map[string]int
}

func newHookReceiver(t *testing.T) (*hookReceiver, string) {
	rc := &hookReceiver{posts: map[string]int{}, accepted: map[string]map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil || m.ID == "" || m.Text == "" {
			http.Error(w, "bad message", http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		rc.posts[m.ID]++
		if rc.posts[m.ID] <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if rc.accepted[m.Reason] == nil {
			rc.accepted[m.Reason] = map[string]int{}
		}
		rc.accepted[m.Reason][m.ID]++
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

// count is how many messages of reason were accepted, and how many distinct events they were.
func (rc *hookReceiver) count(reason string) (messages, events int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range rc.accepted[reason] {
		messages += n
		events++
	}
	return messages, events
}

func TestNotificationsReachAWebhookOncePerEventThroughItsFailures(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	rc, url := newHookReceiver(t)
	if err := k8s.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"},
		StringData: map[string]string{"team": url + "/hook?token=secret"}}); err != nil {
		t.Fatal(err)
	}
	ms := newModelServer(ns, "notified", func(ms *v1alpha1.ModelServer) {
		ms.Spec.Notifications = []v1alpha1.NotificationTarget{{Name: "team", URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "team"}}}
	})
	_, _ = startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitPromoted(t, ms, v1alpha1.Green, v2)

	want := map[string]int{"RolloutStarted": 1, "StepAdvanced": 2, "Promoted": 1}
	eventually(t, 20*time.Second, "each rollout event accepted by the webhook", func() error {
		for reason, n := range want {
			if _, events := rc.count(reason); events != n {
				return fmt.Errorf("%d %s events accepted, want %d", events, reason, n)
			}
		}
		return nil
	})
	// Every event was posted three times (two 500s, then 200) and accepted exactly once, and
	// no other rollout event was sent.
	consistently(t, 500*time.Millisecond, "no message accepted twice", func() error {
		for reason, n := range want {
			if messages, events := rc.count(reason); messages != n || events != n {
				return fmt.Errorf("%s: %d messages for %d events, want %d", reason, messages, events, n)
			}
		}
		for _, reason := range []string{"RolledBack", "Aborted", "Paused"} {
			if m, _ := rc.count(reason); m != 0 {
				return fmt.Errorf("%d %s messages for a rollout that had none", m, reason)
			}
		}
		return nil
	})
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id, n := range rc.posts {
		if n != 3 {
			t.Errorf("message %s was posted %d times, want 3 (two answered 500)", id, n)
		}
	}
}
