//go:build e2e

package e2e

import "testing"

// TestStoriesSharingTheStack runs the stories that leave the stack alone, all at once, each in
// its own namespace.
func TestStoriesSharingTheStack(t *testing.T) {
	t.Run("a good new version is promoted step by step", storyGoodVersionPromoted)
	t.Run("a slower new version is rolled back by itself while stable keeps serving", storySlowVersionRolledBack)
	t.Run("a ModelServer that wants more GPUs than there are is clamped, not left Pending", storyGPUsRunOut)
	t.Run("an SRE pauses, resumes and aborts with the kubectl plugin and wait tells the outcome", storySREWithThePlugin)
	t.Run("over InferencePools a good version is promoted and a slow one rolled back", storyInferencePools)
	t.Run("the spec back on the warm previous revision moves all traffic at once, no pod restarted", storyInstantRollback)
	t.Run("a candidate that degrades while it awaits promotion is still judged and rolled back", storyManualGateDegrades)
	t.Run("an abort reaches the Gateway while a webhook refuses every Deployment write", storyAbortDuringWebhookOutage)
	t.Run("at the data plane, each step serves each color its route weight within 3 points", storyDataPlaneSplit)
	t.Run("requests with the canary header reach only the candidate from step 0 until its promotion", storyHeaderRoute)
	t.Run("a version answering 5xx is rolled back on the error ratio Traefik counts", storyGatewayErrorsRolledBack)
	t.Run("a 3x slower version is rolled back in its shadow phase, no user request served by it", storyShadowRollsBackUnseen)
	t.Run("from 0 replicas, the requests Traefik counts at the route bring the first pods up", storyScaleFromZeroOnGatewayRequests)
	t.Run("a gate answering 503 for a minute holds step 0, and each rollout event is notified once", storyGateAndNotifications)
	t.Run("with minStepDuration, a good version's steps end once the analysis is confident", storyConfidentStepsEndEarly)
}

// TestStoriesDisruptingTheStack runs, after them and one after the other, the stories that
// change the load or stop a part of the stack (the simulator, Prometheus, the controller).
func TestStoriesDisruptingTheStack(t *testing.T) {
	t.Run("a load surge scales up within the policy and the trough scales down after stabilization", storySurgeAndTrough)
	t.Run("Prometheus stopped mid-rollout holds the rollout and the autoscaler until it returns", storyPrometheusDown)
	t.Run("the controller killed mid-rollout resumes where it was without traffic flapping", storyControllerKilled)
	t.Run("with two replicas, the leader killed mid-rollout hands over and the rollout goes on", storyLeaderFailover)
}
