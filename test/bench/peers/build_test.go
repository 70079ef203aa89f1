package peers

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// make bench-peers builds the peers through hack/peers.sh for PEERS_FLAGS: only those its
// contenders run, so that a run of modelship and Flagger does not build KEDA and Argo
// Rollouts (12-15 minutes cold each).
func TestPeersScriptBuildsOnlyThePeersTheContendersRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"for", "--contenders", "modelship,flagger", "--scenarios", "rollouts"}, "flagger"},
		{[]string{"for", "--contenders=modelship-slo,keda-hpa", "--repeat", "3"}, "keda"},
		{[]string{"for", "-contenders", "argo-rollouts,modelship"}, "argo-rollouts"},
		{[]string{"for", "--contenders", "modelship,flagger,argo-rollouts,keda-hpa"}, "flagger argo-rollouts keda"},
		{[]string{"for", "--contenders", "modelship,modelship-recipe"}, ""},
		// modelship-bench peers' default contenders: modelship, modelship-recipe, keda-hpa, flagger.
		{[]string{"for", "--repeat", "2"}, "keda flagger"},
		{[]string{"for"}, "keda flagger"},
		// The smoke tests start their peers whatever the contenders.
		{[]string{"for", "--smoke"}, "keda flagger"},
		{[]string{"for", "--contenders", "modelship", "--smoke", "--smoke-outage", "30s"}, "flagger keda"},
		{[]string{"for", "--contenders=modelship", "-flagger-smoke", "--threshold", "3"}, "flagger"},
		{[]string{"for", "--contenders=keda-hpa", "--flagger-smoke=true"}, "keda flagger"},
		{[]string{"for", "--contenders=modelship", "--smoke=false"}, ""},
		{nil, "all"},
		{[]string{"keda", "flagger"}, "keda flagger"},
	} {
		cmd := exec.Command("bash", append([]string{"../../../hack/peers.sh"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "PEERS_PLAN=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hack/peers.sh %v: %v: %s", tc.args, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("hack/peers.sh %v plans %q, want %q", tc.args, got, tc.want)
		}
	}
}
