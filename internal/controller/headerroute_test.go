package controller

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
)

// The header route stories: spec.rollout.headerRoute adds a rule that sends the requests with
// the header to the candidate only, from step 0 (weight 0) on, and removes it when the rollout
// ends, in the owned route and in a user's route.

func withHeaderRoute(ms *v1alpha1.ModelServer) {
	ms.Spec.Rollout.HeaderRoute = &v1alpha1.HeaderRouteSpec{Name: "x-canary", Value: "always"}
}

// headerRule returns the ModelServer's header rule in a version of its route, or nil.
func headerRule(r *gatewayv1.HTTPRoute, ms *v1alpha1.ModelServer) *gatewayv1.HTTPRouteRule {
	for i := range r.Spec.Rules {
		if n := r.Spec.Rules[i].Name; n != nil && string(*n) == ms.HeaderRuleName() {
			return &r.Spec.Rules[i]
		}
	}
	return nil
}

// checkHeaderRule says what is wrong with a header rule: it must send only to color's Service,
// and each of its matches must carry x-canary: always (exact) and one of the paths in paths.
func checkHeaderRule(rule *gatewayv1.HTTPRouteRule, ms *v1alpha1.ModelServer, color v1alpha1.Color, paths ...string) error {
	if rule == nil {
		return fmt.Errorf("no header rule")
	}
	if len(rule.BackendRefs) != 1 || string(rule.BackendRefs[0].Name) != ms.ServiceName(color) || ptr.Deref(rule.BackendRefs[0].Kind, "") != "Service" {
		return fmt.Errorf("header rule sends to %+v, want only Service %s", rule.BackendRefs, ms.ServiceName(color))
	}
	if len(rule.Matches) != len(paths) {
		return fmt.Errorf("header rule matches %+v, want one per path %v", rule.Matches, paths)
	}
	for i, m := range rule.Matches {
		if m.Path == nil || ptr.Deref(m.Path.Value, "") != paths[i] {
			return fmt.Errorf("header rule match %d has path %+v, want %s", i, m.Path, paths[i])
		}
		if len(m.Headers) != 1 || m.Headers[0].Name != "x-canary" || m.Headers[0].Value != "always" || ptr.Deref(m.Headers[0].Type, "") != gatewayv1.HeaderMatchExact {
			return fmt.Errorf("header rule match %d has headers %+v, want x-canary: always (Exact)", i, m.Headers)
		}
	}
	return nil
}

// holdAtStepZero sets the image of a ModelServer with its rollout paused, so that the rollout
// holds at step 0 (weight 0) once the candidate is Ready and warm; it returns the candidate.
func holdAtStepZero(t *testing.T, ms *v1alpha1.ModelServer, image string) string {
	t.Helper()
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Paused = true
		ms.Spec.Template.Spec.Containers[0].Image = image
	})
	rev := waitCandidate(t, ms, image)
	eventually(t, rolloutTimeout, "paused at step 0 with a Ready, warm candidate", func() error {
		st := getMS(t, ms).Status
		if st.Phase != v1alpha1.PhasePaused || st.Rollout.Step != 0 || st.Candidate == nil || !st.Candidate.Warm || st.Candidate.ReadyReplicas == 0 {
			return fmt.Errorf("phase %s step %d candidate %+v", st.Phase, st.Rollout.Step, st.Candidate)
		}
		return nil
	})
	return rev
}

func TestHeaderRouteSendsTheHeaderToTheCandidateFromStepZeroUntilPromotion(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "header", withHeaderRoute, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway.Matches = []gatewayv1.HTTPRouteMatch{
			{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/v1")}},
			{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchExact), Value: ptr.To("/metrics")}},
		}
	})
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)
	for _, r := range tr.all() {
		if headerRule(r, ms) != nil {
			t.Fatalf("route version %s has a header rule before any rollout", r.ResourceVersion)
		}
	}

	// Step 0, weight 0: the header reaches the candidate, everything else stays on blue.
	v2 := holdAtStepZero(t, ms, imageV2)
	eventually(t, rolloutTimeout, "header rule to green at 100/0", func() error {
		r, err := getRoute(ns, ms.RouteName())
		if err != nil {
			return err
		}
		if w := weightsOf(r, ms); w != "100/0" {
			return fmt.Errorf("weights %s", w)
		}
		return checkHeaderRule(headerRule(r, ms), ms, v1alpha1.Green, "/v1", "/metrics")
	})
	r, err := getRoute(ns, ms.RouteName())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Spec.Rules) != 2 {
		t.Fatalf("route rules %+v, want the header rule and the weighted rule", r.Spec.Rules)
	}
	for _, rule := range r.Spec.Rules {
		if rule.Name != nil && string(*rule.Name) == ms.HeaderRuleName() {
			continue
		}
		if len(rule.Matches) != 2 || *rule.Matches[0].Path.Value != "/v1" || *rule.Matches[1].Path.Value != "/metrics" || len(rule.Matches[0].Headers) != 0 {
			t.Errorf("the weighted rule's matches are %+v, want the spec's paths without a header", rule.Matches)
		}
	}

	// Resumed: the rule stays at every step and goes with the promotion.
	updateMS(t, ms, func(ms *v1alpha1.ModelServer) { ms.Spec.Paused = false })
	waitPromoted(t, ms, v1alpha1.Green, v2)
	eventually(t, rolloutTimeout, "header rule gone after the promotion", func() error {
		r, err := getRoute(ns, ms.RouteName())
		if err != nil {
			return err
		}
		if hr := headerRule(r, ms); hr != nil || len(r.Spec.Rules) != 1 {
			return fmt.Errorf("rules %+v", r.Spec.Rules)
		}
		return nil
	})
	steps := map[string]bool{}
	for _, r := range tr.all() {
		w := weightsOf(r, ms)
		hr := headerRule(r, ms)
		switch w {
		case "80/20", "50/50":
			steps[w] = true
			if err := checkHeaderRule(hr, ms, v1alpha1.Green, "/v1", "/metrics"); err != nil {
				t.Errorf("route version %s at %s: %v", r.ResourceVersion, w, err)
			}
		case "0/100":
			if hr != nil {
				t.Errorf("route version %s at 0/100 (promoted) still has the header rule", r.ResourceVersion)
			}
		}
	}
	if !steps["80/20"] || !steps["50/50"] {
		t.Errorf("the route went %v; want 80/20 and 50/50 seen", tr.history())
	}
}

func TestHeaderRouteInAUserRouteLeavesItsRulesAloneAndGoesOnAbort(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	createUserRoute(t, ns)
	ms := newModelServer(ns, "headerref", withHeaderRoute, func(ms *v1alpha1.ModelServer) {
		ms.Spec.Gateway = v1alpha1.GatewaySpec{RouteRef: &v1alpha1.RouteReference{Name: "shared", RuleName: ptr.To(gatewayv1.SectionName("llm"))}}
	})
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: alsoHealthy})
	playDeployments(t, ns)

	v2 := holdAtStepZero(t, ms, imageV2)
	eventually(t, rolloutTimeout, "header rule to green at 100/0 in the user's route", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		if w := weightsOf(r, ms); w != "100/0" {
			return fmt.Errorf("weights %s", w)
		}
		return checkHeaderRule(headerRule(r, ms), ms, v1alpha1.Green, "/") // the llm rule matches every path
	})
	if r, _ := getRoute(ns, "shared"); headerRule(r, ms).Filters == nil || headerRule(r, ms).Filters[0].RequestHeaderModifier == nil {
		t.Errorf("the header rule should carry the llm rule's filter: %+v", headerRule(r, ms))
	}
	// The rule read back (with the API server's defaults) is the one modelship wants: no
	// write on every pass while the rollout holds.
	written := len(tr.all())
	consistently(t, holdFor, "no route write while the rollout holds at step 0", func() error {
		if n := len(tr.all()); n != written {
			return fmt.Errorf("%d route versions written while held", n-written)
		}
		return nil
	})

	updateMS(t, ms, func(ms *v1alpha1.ModelServer) {
		if ms.Annotations == nil {
			ms.Annotations = map[string]string{}
		}
		ms.Annotations[v1alpha1.AnnotationAbort] = v2
	})
	eventually(t, rolloutTimeout, "header rule gone after the abort", func() error {
		r, err := getRoute(ns, "shared")
		if err != nil {
			return err
		}
		if st := getMS(t, ms).Status; st.Phase != v1alpha1.PhaseRolledBack {
			return fmt.Errorf("phase %s", st.Phase)
		}
		if headerRule(r, ms) != nil || len(r.Spec.Rules) != 2 {
			return fmt.Errorf("rules %+v", r.Spec.Rules)
		}
		return nil
	})

	// Every version of the user's route kept its own rules: names, order, matches, filter, other backend.
	sawHeader := false
	for _, r := range tr.all() {
		if headerRule(r, ms) != nil {
			sawHeader = true
			if n := len(r.Spec.Rules); n != 3 || !strings.HasSuffix(string(ptr.Deref(r.Spec.Rules[2].Name, "")), "-header") {
				t.Errorf("route version %s: the header rule should be the third of 3 rules: %+v", r.ResourceVersion, r.Spec.Rules)
			}
		}
		docs, llm := r.Spec.Rules[0], r.Spec.Rules[1]
		if ptr.Deref(docs.Name, "") != "docs" || len(docs.BackendRefs) != 1 || docs.BackendRefs[0].Name != "legacy" || *docs.Matches[0].Path.Value != "/docs" || len(docs.Matches[0].Headers) != 0 {
			t.Errorf("route version %s changed the docs rule: %+v", r.ResourceVersion, docs)
		}
		if ptr.Deref(llm.Name, "") != "llm" || len(llm.Filters) != 1 || len(llm.Matches) != 1 || len(llm.Matches[0].Headers) != 0 {
			t.Errorf("route version %s changed the llm rule's matches or filter: %+v", r.ResourceVersion, llm)
		}
	}
	if !sawHeader {
		t.Error("no version of the user's route had the header rule")
	}
}

func TestHeaderRouteGoesWhenAnalysisRollsTheCandidateBack(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ms := newModelServer(ns, "headerbad", withHeaderRoute)
	tr, _ := startServing(t, ms, map[v1alpha1.Color]latencies{v1alpha1.Blue: healthy, v1alpha1.Green: slowBuild})
	playDeployments(t, ns)

	setImage(t, ms, imageV2)
	v2 := waitCandidate(t, ms, imageV2)
	waitRolledBack(t, ms, v2, "")
	eventually(t, rolloutTimeout, "header rule gone after the rollback", func() error {
		r, err := getRoute(ns, ms.RouteName())
		if err != nil {
			return err
		}
		if headerRule(r, ms) != nil || weightsOf(r, ms) != "100/0" {
			return fmt.Errorf("weights %s rules %+v", weightsOf(r, ms), r.Spec.Rules)
		}
		return nil
	})
	sawAtStep := false
	for _, r := range tr.all() {
		if weightsOf(r, ms) == "80/20" {
			if err := checkHeaderRule(headerRule(r, ms), ms, v1alpha1.Green, "/"); err != nil {
				t.Errorf("route version %s at 80/20: %v", r.ResourceVersion, err)
			}
			sawAtStep = true
		}
	}
	if !sawAtStep {
		t.Errorf("the route went %v; want 80/20 seen", tr.history())
	}
}
