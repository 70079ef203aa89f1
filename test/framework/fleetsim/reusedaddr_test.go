package fleetsim

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/fleet"
)

// healthOK says whether addr answers /health with 200.
func healthOK(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/health", nil)
	resp, err := (&http.Client{Transport: GuardedTransport(1)}).Do(req)
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// A deleted pod's server stops when the pod watch says so, not at the next sync (an hour away
// here): kwok hands the address to the next pod, whose warm-up check the old server must not
// answer. A terminating pod's server stops listening too.
func TestRunStopsTheServerOfAGoneOrTerminatingPodAtOnce(t *testing.T) {
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	env, restCfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(restCfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	pods := map[string]*corev1.Pod{}
	for i, name := range []string{"deleted", "terminating"} {
		ip := "127.0.0." + strconv.Itoa(51+i)
		port := freePort(t, ip)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "llm-" + name,
				Labels: map[string]string{LabelPeerServer: "llm", LabelPeerGroup: "llm-primary"}},
			Spec: corev1.PodSpec{NodeName: "gpu-node-1", Containers: []corev1.Container{{Name: "vllm", Image: "vllm",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}}}}},
		}
		if name == "terminating" {
			pod.Finalizers = []string{"modelship.dev/test-hold"}
		}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		past := metav1.NewTime(time.Now().Add(-time.Minute))
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: past}}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatalf("pod status: %v", err)
		}
		addrs[name] = ip + ":" + strconv.Itoa(int(port))
		pods[name] = pod
	}
	defer func() {
		p := pods["terminating"]
		if c.Get(context.Background(), client.ObjectKeyFromObject(p), p) == nil {
			p.Finalizers = nil
			_ = c.Update(context.Background(), p)
		}
	}()

	listen := freePort(t, "127.0.0.1")
	cfg := Config{Trace: fleet.Trace{Start: time.Now(), Requests: []fleet.TraceRequest{{ContextTokens: 1, GeneratedTokens: 1}}},
		Replay: fleet.ReplayOptions{Speed: 1}, Fleet: fleet.Config{Seed: 1, MaxTokens: 512},
		Listen: "127.0.0.1:" + strconv.Itoa(int(listen)), SyncInterval: time.Hour, LogInterval: time.Hour, ServePods: true}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, restCfg, cfg, logr.Discard()) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// The first sync serves both pods.
	for name, addr := range addrs {
		for {
			if ok, _ := healthOK(ctx, addr); ok {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("pod %s never answered at %s", name, addr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t0 := time.Now()
	for _, p := range pods {
		if err := c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	// The next sync is an hour away: only the watch can stop them before the test's deadline.
	for name, addr := range addrs {
		for {
			if _, err := healthOK(ctx, addr); err != nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("pod %s still answers at %s after its deletion", name, addr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Logf("FIGURE: gone_pod_server_stopped_after=%s", time.Since(t0).Round(time.Millisecond))
}

// A server whose pod the fleet no longer knows by that UID (a new pod took the name) drops the
// request rather than answer for the new pod.
func TestPodServersDropTheRequestsOfAReplacedPod(t *testing.T) {
	f := newSimFleet(t, simPod("a", "blue", 0, fleet.Profile{}))
	s := &PodServers{Fleet: f, Log: logr.Discard()}
	t.Cleanup(s.Close)
	if err := s.Sync(context.Background(), []PodEndpoint{{Namespace: "ns", Name: "a", IP: "127.0.0.2", UID: "uid-a"}}); err != nil {
		t.Fatal(err)
	}
	addr := s.Addresses()["ns/a"]
	if ok, err := healthOK(context.Background(), addr); !ok {
		t.Fatalf("pod a at %s: ok=%v err=%v", addr, ok, err)
	}
	p := simPod("a", "blue", time.Hour, fleet.Profile{})
	p.UID = "uid-a2" // a new pod of the same name, still loading
	f.SetPod(p)
	if ok, err := healthOK(context.Background(), addr); err == nil {
		t.Errorf("the old pod's server answered (ok=%v) for a replaced pod", ok)
	}
	// Observe stops it at once.
	if !s.Observe(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a2"},
		Status: corev1.PodStatus{PodIP: "127.0.0.2"}}, false) {
		t.Error("Observe kept the server of a replaced pod")
	}
	if len(s.Addresses()) != 0 {
		t.Errorf("servers after Observe: %v", s.Addresses())
	}
}
