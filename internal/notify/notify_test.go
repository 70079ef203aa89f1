package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// receiver counts the messages it accepted per ID, answering 500 to the first fails attempts
// of each ID.
type receiver struct {
	mu       sync.Mutex
	fails    int
	attempts map[string]int
	accepted map[string]int
	texts    []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m Message
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts[m.ID]++
	if rc.attempts[m.ID] <= rc.fails {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	rc.accepted[m.ID]++
	rc.texts = append(rc.texts, m.Text)
}

func (rc *receiver) counts(id string) (attempts, accepted int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.attempts[id], rc.accepted[id]
}

func newReceiver(fails int) (*receiver, *httptest.Server) {
	rc := &receiver{fails: fails, attempts: map[string]int{}, accepted: map[string]int{}}
	return rc, httptest.NewServer(rc)
}

func modelServer() *v1alpha1.ModelServer {
	return &v1alpha1.ModelServer{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "llama", UID: types.UID("u1"), Generation: 3}}
}

func waitIdle(t *testing.T, s *Sender) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if s.Idle() {
			return
		}
	}
	t.Fatal("the sender is still busy")
}

func TestEachEventReachesEachTargetOnceThroughRetries(t *testing.T) {
	rc, srv := newReceiver(2)
	defer srv.Close()
	fromSecret, srv2 := newReceiver(2)
	defer srv2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSender([]string{srv.URL + "/hook"}, func(_ context.Context, ns string, ref v1alpha1.SecretKeyRef) (string, error) {
		if ns != "ml" || ref.Name != "hooks" || ref.Key != "url" {
			return "", fmt.Errorf("no Secret %s/%s key %s", ns, ref.Name, ref.Key)
		}
		return srv2.URL, nil
	}, logr.Discard())
	s.Backoff = time.Millisecond
	failed := 0
	s.OnFailure = func(types.NamespacedName, Target, Message, error) { failed++ }
	s.Start(ctx, 2)

	ms := modelServer()
	ms.Spec.Notifications = []v1alpha1.NotificationTarget{{Name: "team", URLSecretRef: v1alpha1.SecretKeyRef{Name: "hooks", Key: "url"}}}
	st := &v1alpha1.ModelServerStatus{Revision: "r2", Phase: v1alpha1.PhaseProgressing}
	started := ForEvent(ms, st, "Normal", "RolloutStarted", "rolling out r2", time.Unix(0, 0))
	// The same transition decided again (a pass retried) is the same message.
	again := ForEvent(ms, st, "Normal", "RolloutStarted", "rolling out r2 (retried)", time.Unix(5, 0))
	st.Rollout.Step = 1
	step := ForEvent(ms, st, "Normal", "StepAdvanced", "step 1/3", time.Unix(10, 0))
	s.Notify(ms, started)
	s.Notify(ms, again)
	s.Notify(ms, step)
	waitIdle(t, s)

	for _, r := range []*receiver{rc, fromSecret} {
		for _, id := range []string{started.ID, step.ID} {
			if attempts, accepted := r.counts(id); accepted != 1 || attempts != 3 {
				t.Errorf("message %s: %d attempts, %d accepted; want 3 attempts (two 500s) and exactly 1 accepted", id, attempts, accepted)
			}
		}
	}
	if failed != 0 {
		t.Errorf("%d deliveries reported failed", failed)
	}
	if started.ID != again.ID || started.ID == step.ID {
		t.Errorf("IDs %q %q %q: a transition decided again keeps its ID, another one differs", started.ID, again.ID, step.ID)
	}
	if rc.texts[0] != "[ml/llama] RolloutStarted: rolling out r2" {
		t.Errorf("text %q", rc.texts[0])
	}
}

func TestADeliveryGivesUpAfterItsAttemptsAndFollowsNoRedirect(t *testing.T) {
	target, srvTarget := newReceiver(0)
	defer srvTarget.Close()
	redirect := httptest.NewServer(http.RedirectHandler(srvTarget.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewSender([]string{redirect.URL, "file:///etc/passwd"}, nil, logr.Discard())
	s.Backoff, s.Attempts = time.Millisecond, 3
	var mu sync.Mutex
	failed := map[string]string{}
	s.OnFailure = func(_ types.NamespacedName, tg Target, _ Message, err error) {
		mu.Lock()
		defer mu.Unlock()
		failed[tg.Name] = err.Error()
	}
	s.Start(ctx, 1)
	s.Notify(modelServer(), ForEvent(modelServer(), &v1alpha1.ModelServerStatus{}, "Warning", "RolledBack", "ttft", time.Unix(0, 0)))
	waitIdle(t, s)
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 2 {
		t.Fatalf("failures %v; want the redirecting URL and the file URL", failed)
	}
	if _, accepted := target.counts(ForEvent(modelServer(), &v1alpha1.ModelServerStatus{}, "", "RolledBack", "", time.Time{}).ID); accepted != 0 {
		t.Error("the redirect was followed")
	}
}

func TestNotifyNeverBlocksWithoutWorkers(t *testing.T) {
	s := NewSender([]string{"http://127.0.0.1:1/"}, nil, logr.Discard())
	ms := modelServer()
	for i := range 1000 {
		s.Notify(ms, Message{ID: fmt.Sprint(i)})
	}
	if s.Idle() {
		t.Fatal("nothing queued")
	}
}
