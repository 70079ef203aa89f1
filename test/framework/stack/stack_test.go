package stack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/fleet"
)

func TestDefaultTraceShipsWithTheRepository(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), DefaultTrace)
	tr, err := fleet.LoadTrace(path)
	if err != nil {
		t.Fatalf("the default trace does not load: %v", err)
	}
	// The README of test/traces describes this file: one hour, 19,366 requests.
	if n := len(tr.Requests); n != 19366 {
		t.Errorf("%d requests in %s, want 19366", n, path)
	}
	if d := tr.Duration(); d < 58*time.Minute || d > time.Hour {
		t.Errorf("the trace spans %s, want about an hour", d)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "README.md")); err != nil {
		t.Errorf("the trace has no README with its source and license: %v", err)
	}
}

func TestStartFailsFastWhenTheTraceIsMissing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-trace.csv")
	began := time.Now()
	s, err := Start(context.Background(), Options{Dir: dir, Trace: missing})
	if err == nil {
		s.Stop()
		t.Fatal("Start succeeded without a trace")
	}
	for _, want := range []string{"fleet simulator", "opening trace", missing, "no such file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("failed after %s, want before building or starting anything", took)
	}
	if _, err := os.Stat(filepath.Join(dir, "env")); !os.IsNotExist(err) {
		t.Errorf("the environment was started (%s exists) before the trace was checked", filepath.Join(dir, "env"))
	}
}

func TestStartFailsOnAnUnreadableTrace(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "trace.csv")
	if err := os.WriteFile(bad, []byte("TIMESTAMP,ContextTokens,GeneratedTokens\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), Options{Dir: dir, Trace: bad})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "fleet simulator") {
		t.Errorf("err = %v, want the simulator's trace error naming %s", err, bad)
	}
}

func TestGatewayCodesCountTraefiksResponsesByColorAndCode(t *testing.T) {
	series := []metrics.Series{
		{Labels: map[string]string{"service": "demo-llama-blue-http-80@kubernetesgateway", "code": "200"}, Value: 411.6},
		{Labels: map[string]string{"service": "demo-llama-green-http-80@kubernetesgateway", "code": "200"}, Value: 40},
		{Labels: map[string]string{"service": "demo-llama-green-http-80@kubernetesgateway", "code": "503"}, Value: 2},
		{Labels: map[string]string{"service": "demo-llama-blue-http-80@kubernetesgateway", "code": "502"}, Value: 0.2},
		// Another ModelServer whose name starts the same, and another namespace: not counted.
		{Labels: map[string]string{"service": "demo-llama-2-blue-http-80@kubernetesgateway", "code": "200"}, Value: 7},
		{Labels: map[string]string{"service": "other-llama-blue-http-80@kubernetesgateway", "code": "200"}, Value: 9},
	}
	g := gatewayCodes(series, "demo", "llama")
	if got, want := g.String(), "blue 200:412 | green 200:40 503:2"; got != want {
		t.Errorf("gateway codes %q, want %q (%v)", got, want, g)
	}
	if got := (GatewayCodes{}).String(); got != "-" {
		t.Errorf("no responses print %q, want -", got)
	}
	if !strings.Contains(gatewayQuery("demo", "llama"), `service=~"demo-llama-(blue|green)-.*"`) {
		t.Errorf("query %s does not select the color Services", gatewayQuery("demo", "llama"))
	}
}
