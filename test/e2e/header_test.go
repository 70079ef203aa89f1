//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/test/framework/gateway"
)

// askColor sends n requests for host through the Gateway, with the header x-canary: always when
// canary is set, and counts the color of the pod that answered each ("" when none did).
func askColor(t *testing.T, host string, canary bool, n int) map[v1alpha1.Color]int {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: gateway.Transport()}
	out := map[v1alpha1.Color]int{}
	for range n {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, st.Env.GatewayURL()+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if canary {
			req.Header.Set("X-Canary", "always")
		}
		resp, err := c.Do(req)
		if err != nil {
			out[""]++
			continue
		}
		_ = resp.Body.Close()
		out[v1alpha1.Color(resp.Header.Get(colorHeader))]++
	}
	return out
}

// storyHeaderRoute: with spec.rollout.headerRoute, requests with the header reach only the
// candidate from step 0 (weight 0) and at the later 50% step, requests without it follow the
// weights, and the rule is gone after the promotion.
func storyHeaderRoute(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-header")
	// replicas, as the stories that judge a good version: the story waits at 50% on a passing
	// analysis, which two replicas under the simulator's load would not give.
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(replicas), steps(10*time.Second, 50, 100),
		func(ms *v1alpha1.ModelServer) { ms.Spec.Rollout.AutoPromote = ptr.To(false) })
	ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x-canary", Value: "always"}
	host := string(ms.Spec.Gateway.Hostnames[0])
	given(t, "a %s, with headerRoute x-canary: always, promoted by a person, behind Traefik %s", describe(ms), gateway.Version)
	v0 := create(t, ms, 3*time.Minute)
	stable, candidate := v0.stableColor(), v0.stableColor().Other()

	when(t, "the image changes to %s with the rollout paused, so that it holds at step 0 (weight 0)", imageGood)
	cur := &v1alpha1.ModelServer{}
	if err := st.Client.Get(context.Background(), client.ObjectKeyFromObject(ms), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Paused = true
	cur.Spec.Template.Spec.Containers[0].Image = imageGood
	if err := st.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("pausing and setting the image: %v", err)
	}
	follow(t, ns, ms.Name, 4*time.Minute, "paused at step 0 with a Ready, warm candidate", nil, func(v view) bool {
		c := v.ms.Status.Candidate
		return v.phase() == v1alpha1.PhasePaused && v.ms.Status.Rollout.Step == 0 && c != nil && c.Warm && c.ReadyReplicas > 0
	})

	then(t, "requests with the header are answered by the candidate (%s) only, those without by stable (%s) only", candidate, stable)
	deadline := time.Now().Add(time.Minute)
	var got map[v1alpha1.Color]int
	for {
		if got = askColor(t, host, true, 20); got[candidate] == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests with the header were answered %v within a minute; want all by %s", got, candidate)
		}
		time.Sleep(time.Second)
	}
	if got := askColor(t, host, true, 100); got[candidate] != 100 {
		t.Errorf("100 requests with the header were answered %v; want all by the candidate %s", got, candidate)
	}
	if got := askColor(t, host, false, 100); got[stable] != 100 {
		t.Errorf("100 requests without the header were answered %v at weight 0; want all by stable %s", got, stable)
	}

	when(t, "the rollout is resumed: it goes on to its 50%% step, where it waits for a person (autoPromote false)")
	if err := st.Client.Get(context.Background(), client.ObjectKeyFromObject(ms), cur); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(cur.DeepCopy())
	cur.Spec.Paused = false
	if err := st.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("resuming: %v", err)
	}
	waiting := follow(t, ns, ms.Name, 4*time.Minute, "AwaitingPromotion at the 50% step", weightsInvariant, func(v view) bool {
		return v.phase() == v1alpha1.PhaseAwaitingPromotion && v.route[candidate] > 0
	})
	w := waiting.route[candidate]
	then(t, "at %d%% to the candidate, requests with the header still reach the candidate only; those without follow the weights", w)
	if got := askColor(t, host, true, 100); got[candidate] != 100 {
		t.Errorf("100 requests with the header at weight %d were answered %v; want all by the candidate %s", w, got, candidate)
	}
	split := askColor(t, host, false, 200)
	if split[candidate]+split[stable] != 200 {
		t.Errorf("200 requests without the header at weight %d were answered %v; want all by %s or %s", w, split, stable, candidate)
	}
	// Traefik's weighted round robin is smooth, so the share is close to the weight; 12 points
	// is over 3 binomial standard deviations at 200 requests, were it random.
	if share := 100 * split[candidate] / 200; share < int(w)-12 || share > int(w)+12 {
		t.Errorf("requests without the header: %d%% answered by the candidate (%v), want the route's %d%% within 12 points", share, split, w)
	}

	// The promotion is a person's (promote-full): the story is about the route, not the
	// analysis, which the other stories judge.
	when(t, "%s is promoted by request (promote-full)", imageGood)
	if err := st.Client.Get(context.Background(), client.ObjectKeyFromObject(ms), cur); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[v1alpha1.AnnotationPromoteFull] = cur.Status.Revision
	if err := st.Client.Patch(context.Background(), cur, patch); err != nil {
		t.Fatalf("promoting: %v", err)
	}
	rev := cur.Status.Revision
	follow(t, ns, ms.Name, 5*time.Minute, "promotion", weightsInvariant, func(v view) bool { return v.healthyOn(rev) })

	then(t, "the route no longer has the header rule")
	route := &gatewayv1.HTTPRoute{}
	if err := st.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: ms.RouteName()}, route); err != nil {
		t.Fatal(err)
	}
	for _, r := range route.Spec.Rules {
		if r.Name != nil && string(*r.Name) == ms.HeaderRuleName() {
			t.Errorf("the header rule is still in the route after the promotion: %+v", r)
		}
	}
	if n := len(route.Spec.Rules); n != 1 {
		t.Errorf("the route has %d rules after the promotion, want 1", n)
	}
	figure(t, "header route: requests with the header at weight 0", "%s", fmt.Sprint(got))
	figure(t, "header route: 200 requests without the header at the candidate's weight "+fmt.Sprint(w)+"%", "%s", fmt.Sprint(split))
}
