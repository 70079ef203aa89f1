//go:build e2e

package peers

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/devenv"
	"github.com/modelship/modelship/test/framework/gateway"
)

// testLog is an io.Writer logging each write as a test line.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Run with: go test -tags e2e ./test/bench/peers/ -run TestFlaggerCanary -v
// (after hack/controlplane.sh all, hack/prometheus.sh and hack/peers.sh). About 3 minutes:
// Flagger moves one step per 10 s interval. FLAGGER_E2E_OUTAGE=60s adds the Prometheus outage.
func TestFlaggerCanary(t *testing.T) {
	// The environment runs in a network namespace of its own (needs root; skips without).
	if !gateway.RunInNetns(t) {
		return
	}
	if missing := devenv.MissingAssets(devenv.DefaultAssetsDir()); len(missing) > 0 {
		t.Skipf("control plane assets in %s lack %s: run hack/controlplane.sh all (make controlplane)", devenv.DefaultAssetsDir(), strings.Join(missing, ", "))
	}
	if ok, why := Built(); !ok {
		t.Skip(why)
	}
	var outage time.Duration
	if v := os.Getenv("FLAGGER_E2E_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FLAGGER_E2E_OUTAGE: %v", err)
		}
		outage = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	env, err := devenv.Start(ctx, devenv.Options{
		Dir: t.TempDir(), GPUNodes: 2, WithPrometheus: true, Logger: testr.New(t),
		CRDDirs: append([]string{filepath.Join(root, "config", "crd", "bases")}, CRDDirs()...),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	c, err := client.New(env.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	flagger, err := StartFlagger(ctx, env, env.PrometheusURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Flagger healthy after %s, log %s", flagger.Ready.Round(time.Millisecond), flagger.Process.LogPath())

	report, err := FlaggerSmoke(ctx, env, c, SmokeOptions{Outage: outage, Log: testLog{t}})
	if report != nil {
		for _, s := range report.Steps {
			t.Logf("%s: %s after %s", s.Name, s.Reached, s.Took.Round(100*time.Millisecond))
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(report.Route.Backends, " "), "llm-primary=100 llm-canary=0"; got != want {
		t.Errorf("route after initialization = %s, want %s", got, want)
	}
	if got, want := strings.Join(report.Services, "; "), "llm: app=llm-primary; llm-primary: app=llm-primary; llm-canary: app=llm"; got != want {
		t.Errorf("services = %s, want %s", got, want)
	}
	// The promotion walks the step weights, and both rollouts end with all traffic on the primary.
	var weights []int
	for _, o := range report.Steps[1].History {
		if o.Route != nil && (len(weights) == 0 || weights[len(weights)-1] != o.Route.Canary) {
			weights = append(weights, o.Route.Canary)
		}
	}
	if got, want := weights, []int{0, 10, 25, 50, 0}; !slices.Equal(got, want) {
		t.Errorf("canary weights during the promotion = %v, want %v", got, want)
	}
	for _, s := range report.Steps[1:3] {
		if last := s.History[len(s.History)-1]; last.Route == nil || last.Route.Primary != 100 || last.Route.Canary != 0 {
			t.Errorf("%s ended with route %v, want 100/0", s.Name, last.Route)
		}
	}
}
