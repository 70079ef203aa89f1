//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/testenv"
	"github.com/modelship/modelship/test/framework/gateway"
)

// The data-plane story's measurement.
const (
	// splitTolerance is how far, in points, a color's share of the requests served over a step
	// may be from its route weight.
	splitTolerance = 3.0
	// probeInterval paces the story's own requests through the Gateway (about 100 per second).
	probeInterval = 10 * time.Millisecond
	// switchWindow is how many consecutive probe requests tell one split from the next: the
	// first request of a window whose candidate share is nearer the new weight than the old one
	// is the first served by the new split.
	switchWindow = 20
	// switchSearch is how many probes after a weight write the switch is looked for (5 s).
	switchSearch = 500
	// traefikSettle is how long after a step's switch Traefik's counters start to count for
	// the step.
	traefikSettle = 5 * time.Second
	// minShareSample is the fewest requests a step's share is judged on.
	minShareSample = 200
	// colorHeader names the color of the simulated pod that answered (the fleet simulator's
	// pod servers set it).
	colorHeader = "X-Modelship-Color"
)

// probed is one request of the story through the Gateway.
type probed struct {
	sent, done time.Time
	code       int
	color      v1alpha1.Color // from colorHeader; "" when no pod answered
}

// weightChange is a version of the route's backend weights and when the story saw it written.
type weightChange struct {
	at      time.Time
	weights map[v1alpha1.Color]int32
}

// traefikSample is Traefik's per-Service request counter of each color at one instant.
type traefikSample struct {
	at     time.Time
	counts map[v1alpha1.Color]float64
}

// storyDataPlaneSplit measures the split where it happens: Traefik's weighted round robin over
// the pods' addresses. While a good version is rolled out step by step, the story sends its own
// requests through the Gateway and reads which color's pod answered each, watches the route's
// weights as the controller writes them, and samples Traefik's per-Service counters. Over each
// step (from the first request of its split to the next weight write) each color's share of the
// requests must be within 3 points of its weight, as the story's requests and as Traefik counts
// all of the route's requests (the simulator's load included); the time from each weight write
// to the first request served by the new split is a figure.
func storyDataPlaneSplit(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "story-dataplane")
	ms := newModelServer(ns, "llama", imageV1, fixedReplicas(4), steps(20*time.Second, 10, 25, 50, 100))
	ms.Spec.Gateway.Hostnames = []gatewayv1.Hostname{"dataplane.local"}
	given(t, "a %s, behind Traefik %s (GatewayClass %s)", describe(ms), gateway.Version, st.Env.Options().GatewayClassName)
	v0 := create(t, ms, 3*time.Minute)
	stable := v0.stableColor()
	candidate := stable.Other()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var changes []weightChange
	var probes []probed
	var samples []traefikSample
	var watchErr error
	wg.Add(3)
	go func() { defer wg.Done(); changes, watchErr = watchWeights(ctx, ms) }()
	go func() { defer wg.Done(); probes = probe(ctx, "dataplane.local") }()
	go func() { defer wg.Done(); samples = sampleTraefik(ctx, ns, ms.Name) }()

	when(t, "the image changes to %s and the controller moves the route's weights step by step", imageGood)
	time.Sleep(2 * time.Second) // requests on the stable split first
	rev := setImage(t, ns, ms.Name, imageGood)
	follow(t, ns, ms.Name, 5*time.Minute, "promotion of "+rev, weightsInvariant, func(v view) bool { return v.healthyOn(rev) })
	time.Sleep(traefikSettle + 5*time.Second) // requests on the final split
	cancel()
	wg.Wait()
	if watchErr != nil {
		t.Fatalf("watching the route: %v", watchErr)
	}
	if len(changes) < 2 {
		t.Fatalf("saw %d versions of the route's weights, want the stable one and the rollout's steps", len(changes))
	}

	then(t, "over each step, each color's share of the requests is within %.0f points of its route weight, as the pods and as Traefik count them", splitTolerance)
	var lags []time.Duration
	for k := 1; k < len(changes); k++ {
		old, cur := changes[k-1].weights, changes[k].weights
		end := time.Now()
		if k+1 < len(changes) {
			end = changes[k+1].at
		}
		step := fmt.Sprintf("%s/%s %d/%d -> %d/%d", stable, candidate, old[stable], old[candidate], cur[stable], cur[candidate])
		first, last := between(probes, changes[k].at, end)
		j := switchIndex(probes, first, last, candidate, old[candidate], cur[candidate])
		if j < 0 {
			t.Errorf("step %s: no window of %d requests served by the new split (%d requests in the step)", step, switchWindow, last-first)
			continue
		}
		in, i := probes[first:last], j-first
		if old[candidate] != cur[candidate] {
			lag := in[i].done.Sub(changes[k].at)
			lags = append(lags, lag)
			figure(t, "data plane: weight write -> first request served by the new split, "+step, "%dms", lag.Milliseconds())
		}

		// Every answer from a pod counts for that pod's color, whatever its code: the split is
		// the Gateway's routing decision (a pod's own 503 while it loads is still routed there).
		served := map[v1alpha1.Color]int{}
		total, notOK, noPod := 0, 0, 0
		for _, p := range in[i:] {
			if p.color == "" {
				noPod++
				continue
			}
			if p.code != http.StatusOK {
				notOK++
			}
			served[p.color]++
			total++
		}
		if total < minShareSample {
			t.Logf("step %s: %d requests served by its split, fewer than %d: share not judged", step, total, minShareSample)
		} else {
			checkShares(t, "the pods' answers", step, cur, shares(map[v1alpha1.Color]float64{stable: float64(served[stable]), candidate: float64(served[candidate])}), total)
		}
		if notOK > 0 || noPod > 0 {
			figure(t, "data plane: story's requests not answered 200, "+step, "%d answered by a pod with another code, %d answered by no pod (the Gateway's own errors)", notOK, noPod)
		}
		// Traefik counts a request when it ends: the trace's requests still running on the old
		// split when it changed end in the first seconds of the step; start after them.
		from, to := sampleAtOrAfter(samples, in[i].done.Add(traefikSettle)), sampleAtOrBefore(samples, end)
		if from == nil || to == nil || !to.at.After(from.at) {
			t.Logf("step %s: shorter than %s after its switch: Traefik's share not judged", step, traefikSettle)
			continue
		}
		delta := map[v1alpha1.Color]float64{}
		n := 0.0
		for _, c := range []v1alpha1.Color{stable, candidate} {
			delta[c] = to.counts[c] - from.counts[c]
			n += delta[c]
		}
		if n < minShareSample {
			t.Logf("step %s: Traefik counted %.0f requests, fewer than %d: share not judged", step, n, minShareSample)
			continue
		}
		s := shares(delta)
		checkShares(t, "Traefik's per-Service counters", step, cur, s, int(n))
		figure(t, "data plane: share served over the step, "+step, "%s %.1f%% / %s %.1f%% of %d (Traefik), %s %.1f%% of %d (story's requests)",
			stable, s[stable], candidate, s[candidate], int(n), candidate, 100*float64(served[candidate])/math.Max(1, float64(total)), total)
	}
	if len(lags) > 0 {
		sorted := append([]time.Duration(nil), lags...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		figure(t, "data plane: weight write -> first request of the new split, all steps", "median %dms, max %dms over %d writes",
			sorted[len(sorted)/2].Milliseconds(), sorted[len(sorted)-1].Milliseconds(), len(sorted))
	}
	figure(t, "data plane: requests the story sent through Traefik", "%d", len(probes))
}

// checkShares wants every color's share (percent) within splitTolerance of its weight.
func checkShares(t *testing.T, counted, step string, weights map[v1alpha1.Color]int32, s map[v1alpha1.Color]float64, n int) {
	t.Helper()
	for _, c := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
		if d := math.Abs(s[c] - float64(weights[c])); d > splitTolerance {
			t.Errorf("step %s: %s give %s %.1f%% of %d requests, route weight %d%% (%.1f points off)", step, counted, c, s[c], n, weights[c], d)
		}
	}
}

// shares turns counts into percents of their sum.
func shares(counts map[v1alpha1.Color]float64) map[v1alpha1.Color]float64 {
	sum := 0.0
	for _, n := range counts {
		sum += n
	}
	out := map[v1alpha1.Color]float64{}
	for c, n := range counts {
		if sum > 0 {
			out[c] = 100 * n / sum
		}
	}
	return out
}

// between is the range [first, last) of the probes sent in [from, to).
func between(ps []probed, from, to time.Time) (first, last int) {
	first = sort.Search(len(ps), func(i int) bool { return !ps[i].sent.Before(from) })
	last = sort.Search(len(ps), func(i int) bool { return !ps[i].sent.Before(to) })
	return first, last
}

// switchIndex estimates which of the probes ps[first:last] was the first served by the new
// split: the point j where the switchWindow requests before it are nearest the old candidate
// weight and the switchWindow from it nearest the new one (the earliest j of least deviation;
// Traefik's weighted round robin gives exact shares over such windows). -1 when the step is too
// short to tell.
func switchIndex(ps []probed, first, last int, candidate v1alpha1.Color, oldW, newW int32) int {
	share := func(from, to int) float64 {
		n := 0
		for _, p := range ps[from:to] {
			if p.color == candidate {
				n++
			}
		}
		return 100 * float64(n) / float64(to-from)
	}
	best, bestCost := -1, math.Inf(1)
	for j := first; j+switchWindow <= last && j <= first+switchSearch; j++ {
		cost := math.Abs(share(j, j+switchWindow) - float64(newW))
		if j >= switchWindow {
			cost += math.Abs(share(j-switchWindow, j) - float64(oldW))
		}
		if cost < bestCost {
			best, bestCost = j, cost
		}
	}
	return best
}

// watchWeights records every version of the ModelServer's route weights until ctx ends, each
// with the time the watch delivered it.
func watchWeights(ctx context.Context, ms *v1alpha1.ModelServer) ([]weightChange, error) {
	c, err := client.NewWithWatch(st.Env.RESTConfig(), client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return nil, err
	}
	w, err := c.Watch(ctx, &gatewayv1.HTTPRouteList{}, client.InNamespace(ms.Namespace))
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []weightChange
	for {
		select {
		case <-ctx.Done():
			return out, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return out, fmt.Errorf("the watch of HTTPRoutes in %s ended", ms.Namespace)
			}
			r, isRoute := ev.Object.(*gatewayv1.HTTPRoute)
			if !isRoute || r.Name != ms.RouteName() {
				continue
			}
			ws := map[v1alpha1.Color]int32{}
			for _, rule := range r.Spec.Rules {
				for _, ref := range rule.BackendRefs {
					for _, col := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
						if string(ref.Name) == ms.ServiceName(col) {
							ws[col] = ptr.Deref(ref.Weight, 1)
						}
					}
				}
			}
			if n := len(out); n == 0 || fmt.Sprint(out[n-1].weights) != fmt.Sprint(ws) {
				out = append(out, weightChange{at: time.Now(), weights: ws})
			}
		}
	}
}

// probe sends GET /v1/models for host through the Gateway every probeInterval, one at a time,
// until ctx ends, and records each answer.
func probe(ctx context.Context, host string) []probed {
	client := &http.Client{Timeout: 5 * time.Second, Transport: gateway.Transport()}
	var out []probed
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.Env.GatewayURL()+"/v1/models", nil)
		if err != nil {
			return out
		}
		req.Host = host
		p := probed{sent: time.Now()}
		resp, err := client.Do(req)
		p.done = time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return out
			}
			out = append(out, p)
			continue
		}
		_ = resp.Body.Close()
		p.code = resp.StatusCode
		p.color = v1alpha1.Color(resp.Header.Get(colorHeader))
		out = append(out, p)
	}
}

// sampleTraefik reads Traefik's traefik_service_requests_total of the ModelServer's color
// Services from its /metrics every 250 ms until ctx ends.
func sampleTraefik(ctx context.Context, ns, name string) []traefikSample {
	client := &http.Client{Timeout: 2 * time.Second, Transport: gateway.Transport()}
	var out []traefikSample
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if s, err := readTraefik(ctx, client, ns, name); err == nil {
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// readTraefik is one sample of Traefik's per-Service request counters, summed per color over
// codes and methods. Traefik names the Services <ns>-<service>-<...>@kubernetesgateway.
func readTraefik(ctx context.Context, c *http.Client, ns, name string) (traefikSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, st.Env.TraefikURL()+"/metrics", nil)
	if err != nil {
		return traefikSample{}, err
	}
	at := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return traefikSample{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	s := traefikSample{at: at, counts: map[v1alpha1.Color]float64{}}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "traefik_service_requests_total{") {
			continue
		}
		for _, col := range []v1alpha1.Color{v1alpha1.Blue, v1alpha1.Green} {
			if strings.Contains(line, fmt.Sprintf(`service="%s-%s-%s-`, ns, name, col)) {
				v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
				if err == nil {
					s.counts[col] += v
				}
			}
		}
	}
	return s, sc.Err()
}

// sampleAtOrAfter is the first sample taken at or after t.
func sampleAtOrAfter(ss []traefikSample, t time.Time) *traefikSample {
	for i := range ss {
		if !ss[i].at.Before(t) {
			return &ss[i]
		}
	}
	return nil
}

// sampleAtOrBefore is the last sample taken at or before t.
func sampleAtOrBefore(ss []traefikSample, t time.Time) *traefikSample {
	for i := len(ss) - 1; i >= 0; i-- {
		if !ss[i].at.After(t) {
			return &ss[i]
		}
	}
	return nil
}
