package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/modelship/modelship/internal/metrics"
	"github.com/modelship/modelship/internal/testenv"
)

const (
	testNamespace = "gw"
	webPort       = 8000 // the entry point and the Gateway's listener (a fresh namespace: free)
	adminPort     = 8082
	backendPort   = 8080 // every pod address serves here
	servicePort   = 80
	splitRequests = 2000
	tolerance     = 3.0 // percentage points
)

// colorServer is a tiny HTTP server on a pod address answering with its color.
type colorServer struct {
	color, addr string
	srv         *http.Server
}

func serveColor(t *testing.T, color, addr string) *colorServer {
	t.Helper()
	ap := net.JoinHostPort(addr, fmt.Sprint(backendPort))
	if a, err := netip.ParseAddr(addr); err != nil || !podCIDR.Contains(a) {
		t.Fatalf("%s is not a pod address (in %s)", addr, PodCIDR)
	}
	l, err := net.Listen("tcp", ap) //nolint:noctx // a test server
	if err != nil {
		t.Fatalf("binding %s (routed on lo in the test's namespace): %v", ap, err)
	}
	s := &colorServer{color: color, addr: addr, srv: &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, color)
		}),
	}}
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// outcome is what one request through the Gateway got: the backend's color, or "HTTP <code>",
// or "error".
type outcome struct {
	sent time.Time
	what string
}

type prober struct {
	c   *http.Client
	url string
}

func (p prober) get(ctx context.Context, path string) outcome {
	sent := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	resp, err := p.c.Do(req)
	if err != nil {
		return outcome{sent, "error"}
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return outcome{sent, fmt.Sprintf("HTTP %d", resp.StatusCode)}
	}
	return outcome{sent, string(body)}
}

func (p prober) count(ctx context.Context, path string, n int) map[string]int {
	got := map[string]int{}
	for range n {
		got[p.get(ctx, path).what]++
	}
	return got
}

func share(got map[string]int, what string) float64 {
	total := 0
	for _, n := range got {
		total += n
	}
	return 100 * float64(got[what]) / float64(total)
}

// TestTraefikRoutesAWeightedHTTPRouteToPodAddresses is the data path of issue #26 in small: a
// real kube-apiserver with the Gateway API's standard CRDs, Traefik as the Gateway, Services
// whose hand-written EndpointSlices hold pod addresses (198.18.200.x) served by real processes
// in a network namespace of the test's own, and a weighted HTTPRoute shaped like the ones
// modelship writes. It measures the split, the time a weight change takes to serve, and what
// Traefik reports and serves for a backend without EndpointSlice or without a ready endpoint.
func TestTraefikRoutesAWeightedHTTPRouteToPodAddresses(t *testing.T) {
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		t.Skipf("%s is not set: `make test-gateway` builds Traefik %s once (hack/traefik.sh) and runs this test", BinaryEnv, Version)
	}
	if _, err := FindBinary(); err != nil {
		t.Skip(err.Error())
	}
	if ok, why := testenv.Available(); !ok {
		t.Skip(why)
	}
	if !RunInNetns(t) {
		return
	}
	// From here on: inside the test's own network namespace (lo, and PodCIDR routed on it).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	apiserver, err := NetnsAPIServer(t.TempDir(), os.Getenv("KUBEBUILDER_ASSETS"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_ASSET_KUBE_APISERVER", apiserver)
	start := time.Now()
	env, cfg, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	t.Logf("FIGURE: envtest_start=%s", time.Since(start).Round(time.Millisecond))
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	// The pods: a process per address, answering with its color.
	addrs := map[string]string{}
	for i, color := range []string{"blue", "green", "red", "gray", "amber"} {
		addrs[color] = PodAddress(i + 1).String()
		serveColor(t, color, addrs[color])
	}

	ns := testNamespace
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	create(Class("traefik"))
	create(Gateway(ns, "gw", "traefik", webPort))
	for _, color := range []string{"blue", "green", "red", "gray", "amber"} {
		create(Service(ns, color, servicePort, backendPort))
	}
	for _, color := range []string{"blue", "green", "red"} {
		create(EndpointSlice(ns, color, backendPort, true, addrs[color]))
	}
	// gray: an EndpointSlice whose only endpoint is not ready; amber: no EndpointSlice at all.
	create(EndpointSlice(ns, "gray", backendPort, false, addrs["gray"]))
	weights := func(blue, green int32) []Backend {
		return []Backend{{"blue", servicePort, blue}, {"green", servicePort, green}, {"red", servicePort, 0}}
	}
	route := HTTPRoute(ns, "split", "gw", "/split", weights(90, 10)...)
	create(route)

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}
	tstart := time.Now()
	tr, err := Start(ctx, Options{Binary: bin, Kubeconfig: kubeconfig, Dir: dir, WebPort: webPort, AdminPort: adminPort})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = tr.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(tr.LogPath); err == nil {
				t.Logf("--- %s ---\n%s", tr.LogPath, tailLines(string(b), 40))
			}
		}
	}()
	t.Logf("FIGURE: traefik_ready=%s (process start to /ping 200)", time.Since(tstart).Round(time.Millisecond))

	if err := WaitGatewayProgrammed(ctx, c, ns, "gw", time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE: gateway_programmed=%s after traefik start", time.Since(tstart).Round(time.Millisecond))
	if _, err := WaitRoute(ctx, c, ns, "split", time.Minute, map[string]metav1.ConditionStatus{
		string(gatewayv1.RouteConditionAccepted): metav1.ConditionTrue, string(gatewayv1.RouteConditionResolvedRefs): metav1.ConditionTrue,
	}); err != nil {
		t.Fatal(err)
	}
	accepted := time.Now()
	t.Logf("FIGURE: route_accepted=%s after traefik start", accepted.Sub(tstart).Round(time.Millisecond))

	p := prober{c: &http.Client{Timeout: 5 * time.Second, Transport: Transport()}, url: tr.WebURL}
	if err := WaitFor(ctx, 30*time.Second, func(ctx context.Context) error {
		if o := p.get(ctx, "/split"); o.what != "blue" && o.what != "green" {
			return fmt.Errorf("GET / through the gateway: %s", o.what)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE: first_request_served=%s after the route's status said Accepted", time.Since(accepted).Round(time.Millisecond))

	// The split: 90/10 (and red at weight 0).
	split := func(label string, blue, green float64) {
		t.Helper()
		t0 := time.Now()
		got := p.count(ctx, "/split", splitRequests)
		el := time.Since(t0)
		t.Logf("FIGURE: split_%s requests=%d blue=%.2f%% green=%.2f%% red=%d other=%v (%.0f req/s sequential)",
			label, splitRequests, share(got, "blue"), share(got, "green"), got["red"], others(got, "blue", "green"), float64(splitRequests)/el.Seconds())
		if d := share(got, "blue") - blue; d > tolerance || d < -tolerance {
			t.Errorf("%s: blue got %.2f%%, want %.0f%% within %.0f points", label, share(got, "blue"), blue, tolerance)
		}
		if d := share(got, "green") - green; d > tolerance || d < -tolerance {
			t.Errorf("%s: green got %.2f%%, want %.0f%% within %.0f points", label, share(got, "green"), green, tolerance)
		}
		if got["red"] != 0 {
			t.Errorf("%s: red has weight 0 and served %d requests", label, got["red"])
		}
		if len(others(got, "blue", "green")) != 0 {
			t.Errorf("%s: requests not served by blue or green: %v", label, others(got, "blue", "green"))
		}
	}
	split("90_10", 90, 10)

	// Weight changes, both ways, a few times: from the write to the first request served by the
	// new split. A window of the last 4 requests tells the splits apart: 90/10 never puts 2 greens
	// in 4, 50/50 always does; a window of 10 with at most one green is 90/10 again.
	// setWeights writes the weights and returns when it wrote, and a channel that receives how
	// long after the write the route's status said Accepted for the new generation (Traefik
	// writes the status as it builds the configuration).
	setWeights := func(blue, green int32) (time.Time, <-chan time.Duration) {
		t.Helper()
		var r gatewayv1.HTTPRoute
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "split"}, &r); err != nil {
			t.Fatal(err)
		}
		SetWeights(&r, weights(blue, green)...)
		t0 := time.Now()
		if err := c.Update(ctx, &r); err != nil {
			t.Fatal(err)
		}
		status := make(chan time.Duration, 1)
		go func() {
			gen := r.Generation
			for time.Since(t0) < 20*time.Second {
				var cur gatewayv1.HTTPRoute
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "split"}, &cur); err == nil && cur.Generation == gen {
					if cond := RouteCondition(&cur, string(gatewayv1.RouteConditionAccepted)); cond != nil && cond.Status == metav1.ConditionTrue {
						status <- time.Since(t0)
						return
					}
				}
				time.Sleep(5 * time.Millisecond)
			}
			status <- -1
		}()
		return t0, status
	}
	switchTime := func(t0 time.Time, window int, isNew func(greens int) bool) (time.Duration, int) {
		t.Helper()
		var seen []outcome
		for time.Since(t0) < 20*time.Second {
			seen = append(seen, p.get(ctx, "/split"))
			if len(seen) < window {
				continue
			}
			w := seen[len(seen)-window:]
			greens := 0
			for _, o := range w {
				if o.what == "green" {
					greens++
				}
			}
			if isNew(greens) {
				return w[0].sent.Sub(t0), len(seen) - window
			}
		}
		t.Fatalf("the new weights did not serve within 20s of the write")
		return 0, 0
	}
	var toHalf, toNinety, statusLag []time.Duration
	change := func(label string, blue, green int32, window int, isNew func(greens int) bool) time.Duration {
		t0, status := setWeights(blue, green)
		d, n := switchTime(t0, window, isNew)
		st := <-status
		statusLag = append(statusLag, st)
		t.Logf("weights -> %s: first request of the new split %s after the write (%d old-split requests before); route status Accepted for the new generation %s after the write",
			label, d.Round(time.Microsecond), n, st.Round(time.Millisecond))
		return d
	}
	for range 5 {
		toHalf = append(toHalf, change("50/50", 50, 50, 4, func(g int) bool { return g >= 2 }))
		toNinety = append(toNinety, change("90/10", 90, 10, 10, func(g int) bool { return g <= 1 }))
	}
	t.Logf("FIGURE: weight_change_to_50_50 median=%s max=%s all=%v", median(toHalf), slices.Max(toHalf).Round(time.Microsecond), rounded(toHalf))
	t.Logf("FIGURE: weight_change_to_90_10 median=%s max=%s all=%v", median(toNinety), slices.Max(toNinety).Round(time.Microsecond), rounded(toNinety))
	t.Logf("FIGURE: weight_change_status_accepted median=%s max=%s (write to the route's status for the new generation)", median(statusLag), slices.Max(statusLag).Round(time.Microsecond))
	t0, _ := setWeights(50, 50)
	_, _ = switchTime(t0, 4, func(g int) bool { return g >= 2 })
	split("50_50", 50, 50)

	// What Traefik reports and serves for a backend without EndpointSlice (amber) and one whose
	// only endpoint is not ready (gray), each beside a healthy one at equal weight.
	findings := func(name string) {
		t.Helper()
		r, err := WaitRoute(ctx, c, ns, name, time.Minute, map[string]metav1.ConditionStatus{
			string(gatewayv1.RouteConditionAccepted): metav1.ConditionTrue,
		})
		if err != nil {
			t.Fatal(err)
		}
		rr := RouteCondition(r, string(gatewayv1.RouteConditionResolvedRefs))
		if rr == nil {
			t.Fatalf("route %s: no ResolvedRefs condition: %+v", name, r.Status.Parents)
		}
		// The status is written before the data path serves the route: 404 until then (no
		// other route matches the path).
		if err := WaitFor(ctx, 20*time.Second, func(ctx context.Context) error {
			if o := p.get(ctx, "/"+name); o.what == "HTTP 404" {
				return errors.New("GET /" + name + ": 404")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got := p.count(ctx, "/"+name, 200)
		t.Logf("FIGURE: finding_%s ResolvedRefs=%s reason=%s message=%q; 200 requests at 50/50 with blue: %v",
			strings.ReplaceAll(name, "-", "_"), rr.Status, rr.Reason, rr.Message, got)
	}
	create(HTTPRoute(ns, "no-slice", "gw", "/no-slice", Backend{"blue", servicePort, 1}, Backend{"amber", servicePort, 1}))
	findings("no-slice")
	create(HTTPRoute(ns, "not-ready", "gw", "/not-ready", Backend{"blue", servicePort, 1}, Backend{"gray", servicePort, 1}))
	findings("not-ready")

	// And how long the Gateway takes to serve a backend once it has one: gray's endpoint turns
	// ready; amber gets its EndpointSlice.
	var eps discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gray"}, &eps); err != nil {
		t.Fatal(err)
	}
	eps.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	t0 = time.Now()
	if err := c.Update(ctx, &eps); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE: endpoint_ready_to_served=%s (gray's endpoint Ready=true to its first request)", firstServed(ctx, t, p, "/not-ready", "gray", t0))
	t0 = time.Now()
	create(EndpointSlice(ns, "amber", backendPort, true, addrs["amber"]))
	served := firstServed(ctx, t, p, "/no-slice", "amber", t0)
	_, err = WaitRoute(ctx, c, ns, "no-slice", 30*time.Second, map[string]metav1.ConditionStatus{string(gatewayv1.RouteConditionResolvedRefs): metav1.ConditionTrue})
	resolved := time.Since(t0)
	if err != nil {
		t.Errorf("no-slice: ResolvedRefs not True after amber's EndpointSlice: %v", err)
	}
	t.Logf("FIGURE: endpointslice_created_to_served=%s (amber's first request); ResolvedRefs True within %s", served, resolved.Round(time.Millisecond))

	// Traefik's own view, for later analysis: requests per backend Service on /metrics.
	mresp, err := p.c.Get(tr.AdminURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mbody, _ := io.ReadAll(mresp.Body)
	_ = mresp.Body.Close()
	var lines []string
	for _, l := range strings.Split(string(mbody), "\n") {
		if strings.Contains(l, "_requests_total{") {
			lines = append(lines, l)
		}
	}
	if !strings.Contains(string(mbody), `service="gw-blue-http-80@kubernetesgateway"`) {
		t.Errorf("traefik /metrics has no series for the blue Service (gw-blue-http-80@kubernetesgateway): %v", lines)
	}
	// modelship's gateway error ratio (spec.rollout.analysis.gateway) selects that name.
	if m := matcherOf(t, metrics.TraefikErrorRatio, metrics.Vars{Namespace: ns, Service: "blue", GatewayNamespace: "x", Window: "1m"}, "service"); !m.Matches("gw-blue-http-80@kubernetesgateway") || m.Matches("gw-amber-http-80@kubernetesgateway") {
		t.Errorf("modelship's gateway error ratio selects the blue Service as %s", m)
	}
	t.Logf("request counters on %s/metrics:\n%s", tr.AdminURL, strings.Join(lines, "\n"))
	// modelship's gateway request rate (the autoscaling metric gateway) reads the route's
	// routers: they count every request the route matched, the 500s of a backend without
	// EndpointSlice and the 503s of one without a ready endpoint included, which the backend
	// Services' counters do not.
	for route, code := range map[string]string{"no-slice": "500", "not-ready": "503"} {
		if n := routerCount(t, mbody, ns, route, code); n == 0 {
			t.Errorf("no traefik_router_requests_total{code=%q} of route %s matched by modelship's router selector: %v", code, route, lines)
		} else {
			t.Logf("FIGURE: router_requests_%s_code_%s=%v (what the gateway request rate counts)", strings.ReplaceAll(route, "-", "_"), code, n)
		}
	}

	select {
	case <-tr.Exited():
		t.Fatal("traefik exited during the test")
	default:
	}
}

// firstServed sends requests to path until what answers, and returns the time since t0.
func firstServed(ctx context.Context, t *testing.T, p prober, path, what string, t0 time.Time) time.Duration {
	t.Helper()
	for time.Since(t0) < 20*time.Second {
		if p.get(ctx, path).what == what {
			return time.Since(t0).Round(time.Microsecond)
		}
	}
	t.Fatalf("%s did not serve %s within 20s", what, path)
	return 0
}

func others(got map[string]int, known ...string) map[string]int {
	o := map[string]int{}
	for k, n := range got {
		if !slices.Contains(known, k) {
			o[k] = n
		}
	}
	return o
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond)
}

func rounded(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond).String()
	}
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// routerCount sums the traefik_router_requests_total samples of /metrics whose code is code and
// whose router modelship's gateway request rate query (metrics.TraefikRouteRequestRate) selects
// for route in namespace ns.
func routerCount(t *testing.T, exposition []byte, ns, route, code string) float64 {
	t.Helper()
	router := matcherOf(t, metrics.TraefikRouteRequestRate, metrics.Vars{Namespace: ns, Route: metrics.TraefikName(route), GatewayNamespace: "x", Window: "1m"}, "router")
	var sum float64
	for _, l := range strings.Split(string(exposition), "\n") {
		if !strings.HasPrefix(l, "traefik_router_requests_total{") || !strings.Contains(l, `code="`+code+`"`) {
			continue
		}
		i := strings.Index(l, `router="`)
		if i < 0 {
			continue
		}
		name := l[i+len(`router="`):]
		name = name[:strings.Index(name, `"`)]
		if !router.Matches(name) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(l[strings.LastIndex(l, " ")+1:], "%g", &v); err == nil {
			sum += v
		}
	}
	return sum
}

// matcherOf is the matcher on label of the query template tmpl rendered with v.
func matcherOf(t *testing.T, tmpl string, v metrics.Vars, label string) *labels.Matcher {
	t.Helper()
	q, err := metrics.Render(tmpl, v)
	if err != nil {
		t.Fatal(err)
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		t.Fatal(err)
	}
	var found *labels.Matcher
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			for _, m := range vs.LabelMatchers {
				if m.Name == label && found == nil {
					found = m
				}
			}
		}
		return nil
	})
	if found == nil {
		t.Fatalf("no %s matcher in %s", label, q)
	}
	return found
}
