package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func postBody(t *testing.T, url, origin, body string) (int, actionResult) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Origin", origin)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	var out actionResult
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// An SRE reviewed candidate a-old on the page and clicks "Promote fully" after CI pushed b: the
// click names the candidate the page showed and is refused with 409 naming both, before it
// reaches the action code; the page that shows b promotes b; pause, a brake, applies to whatever
// rolls out.
func TestActionsLandOnTheCandidateThePageShowed(t *testing.T) {
	var calls []Action
	s, srv := newTestServer(t, func(_ context.Context, _, _ string, a Action) (string, error) {
		calls = append(calls, a)
		return "annotated", nil
	})
	s.store.upsert(rollout(1, false), time.Now()) // candidate b in progress
	url := srv.URL + "/api/modelservers/ml/llama/actions/"

	code, body := postBody(t, url+"promote-full", srv.URL, `{"candidate":"a-old"}`)
	if code != http.StatusConflict || !strings.Contains(body.Error, "a-old") || !strings.Contains(body.Error, "revision b") {
		t.Errorf("promote-full of the candidate the page showed before b got %d %q, want 409 naming a-old and b", code, body.Error)
	}
	code, body = postBody(t, url+"promote", srv.URL, `{}`)
	if code != http.StatusConflict || !strings.Contains(body.Error, "no rollout in progress") {
		t.Errorf("promote from a page that showed no rollout got %d %q, want 409", code, body.Error)
	}
	code, _ = postBody(t, url+"resume", srv.URL, `{"candidate":"a-old"}`)
	if code != http.StatusConflict {
		t.Errorf("resume of another candidate got %d, want 409", code)
	}
	if len(calls) != 0 {
		t.Fatalf("refused actions reached the action code: %+v", calls)
	}

	if code, body := postBody(t, url+"promote-full", srv.URL, `{"candidate":"b"}`); code != http.StatusOK {
		t.Errorf("promote-full of the candidate shown got %d %+v, want 200", code, body)
	}
	if code, body := postBody(t, url+"pause", srv.URL, `{"candidate":"a-old"}`); code != http.StatusOK {
		t.Errorf("pause from a stale page got %d %+v, want 200: pausing is always safe", code, body)
	}
	if len(calls) != 2 || calls[0].Verb != ActionPromoteFull || calls[0].Candidate != "b" {
		t.Errorf("actions carried out %+v, want promote-full naming candidate b, then pause", calls)
	}
}
