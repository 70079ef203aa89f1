package stack

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/metrics"
)

// Snapshot is what a person watching the demo sees at one moment.
type Snapshot struct {
	At           time.Time
	Phase        v1alpha1.Phase
	Step, Steps  int
	Stable       *v1alpha1.ColorStatus
	Candidate    *v1alpha1.ColorStatus
	Weights      v1alpha1.Weights
	Desired      int32
	TTFTP95      metrics.Sample
	GPUUtil      metrics.Sample
	RequestsRate metrics.Sample
	Conditions   string
	// Gateway is what the Gateway (Traefik) answered for the ModelServer's route over the last
	// 30 s, by color and HTTP code.
	Gateway GatewayCodes
}

// GatewayCodes counts responses by color ("blue", "green") and HTTP code ("200", "503").
type GatewayCodes map[string]map[string]float64

// gatewayWindow is the window of the Gateway's counts in a Snapshot.
const gatewayWindow = "30s"

// gatewayQuery sums Traefik's per-Service request counter of a ModelServer's color Services by
// Service and code. Traefik names its Services of the kubernetesgateway provider
// <namespace>-<service>-<...>@kubernetesgateway.
func gatewayQuery(ns, name string) string {
	return fmt.Sprintf(`sum by (service, code) (increase(traefik_service_requests_total{service=~"%s-%s-(blue|green)-.*"}[%s]))`,
		ns, name, gatewayWindow)
}

// gatewayCodes turns gatewayQuery's series into counts per color and code.
func gatewayCodes(series []metrics.Series, ns, name string) GatewayCodes {
	g := GatewayCodes{}
	prefix := ns + "-" + name + "-"
	for _, s := range series {
		rest, ok := strings.CutPrefix(s.Labels["service"], prefix)
		if !ok {
			continue
		}
		color, _, ok := strings.Cut(rest, "-")
		if !ok || (color != string(v1alpha1.Blue) && color != string(v1alpha1.Green)) {
			continue
		}
		if g[color] == nil {
			g[color] = map[string]float64{}
		}
		g[color][s.Labels["code"]] += s.Value
	}
	return g
}

// String is "blue 200:412 | green 200:40 503:2", codes in order, counts rounded; "-" when the
// Gateway served nothing.
func (g GatewayCodes) String() string {
	var parts []string
	for _, color := range []string{string(v1alpha1.Blue), string(v1alpha1.Green)} {
		codes := g[color]
		keys := make([]string, 0, len(codes))
		for c, n := range codes {
			if math.Round(n) > 0 {
				keys = append(keys, c)
			}
		}
		if len(keys) == 0 {
			continue
		}
		sort.Strings(keys)
		part := color
		for _, c := range keys {
			part += fmt.Sprintf(" %s:%.0f", c, codes[c])
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " | ")
}

// Observe reads the ModelServer and the fleet's headline metrics from Prometheus.
func Observe(ctx context.Context, c client.Client, q metrics.Querier, ns, name string) (Snapshot, error) {
	ms := &v1alpha1.ModelServer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ms); err != nil {
		return Snapshot{}, err
	}
	now := time.Now()
	s := Snapshot{At: now, Phase: ms.Status.Phase, Step: int(ms.Status.Rollout.Step), Steps: len(ms.Spec.Rollout.Steps),
		Stable: ms.Status.Stable, Candidate: ms.Status.Candidate, Weights: ms.Status.Weights}
	if a := ms.Status.Autoscaling; a != nil {
		s.Desired = a.DesiredReplicas
	}
	sel := fmt.Sprintf(`namespace=%q,pod=~%q`, ns, name+"-.*")
	s.TTFTP95 = q.Scalar(ctx, `histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{`+sel+`}[30s])))`, now)
	s.GPUUtil = q.Scalar(ctx, `avg(DCGM_FI_DEV_GPU_UTIL{`+sel+`})`, now)
	s.RequestsRate = q.Scalar(ctx, `sum(rate(vllm:request_success_total{`+sel+`}[30s]))`, now)
	if series, err := q.Vector(ctx, gatewayQuery(ns, name), now); err == nil {
		s.Gateway = gatewayCodes(series, ns, name)
	}
	var conds []string
	for _, c := range ms.Status.Conditions {
		if c.Status == "True" && c.Type != v1alpha1.ConditionRouteAccepted {
			conds = append(conds, c.Type)
		}
	}
	s.Conditions = strings.Join(conds, ",")
	return s, nil
}

func sample(s metrics.Sample, format string) string {
	if s.Status != metrics.OK {
		return "-"
	}
	return fmt.Sprintf(format, s.Value)
}

func color(c *v1alpha1.ColorStatus) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("%s %s %d/%d", c.Color, shortImage(c.Image), c.ReadyReplicas, c.Replicas)
}

func shortImage(image string) string {
	if i := strings.LastIndex(image, ":"); i >= 0 {
		return image[i+1:]
	}
	return image
}

// Header is the column header of Line.
func Header() string {
	return fmt.Sprintf("%-8s %-17s %-5s %-8s %-22s %-22s %-6s %-7s %-9s %-6s %-40s %s",
		"TIME", "PHASE", "STEP", "WEIGHT", "STABLE (ready/all)", "CANDIDATE", "WANT", "REQ/S", "TTFT-P95", "GPU%", "GATEWAY "+gatewayWindow+" (color code:count)", "CONDITIONS")
}

// Line prints a snapshot as one line under Header.
func (s Snapshot) Line() string {
	step := "-"
	if s.Step > 0 {
		step = fmt.Sprintf("%d/%d", s.Step, s.Steps)
	}
	return fmt.Sprintf("%-8s %-17s %-5s %-8s %-22s %-22s %-6d %-7s %-9s %-6s %-40s %s",
		s.At.Format("15:04:05"), s.Phase, step, fmt.Sprintf("%d/%d", s.Weights.Stable, s.Weights.Candidate),
		color(s.Stable), color(s.Candidate), s.Desired, sample(s.RequestsRate, "%.1f"),
		sample(s.TTFTP95, "%.3fs"), sample(s.GPUUtil, "%.0f"), s.Gateway.String(), s.Conditions)
}
