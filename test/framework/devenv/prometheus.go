package devenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PrometheusJob is the job label of the scrape targets given in Options.PrometheusScrapeTargets
// (unless a target's series carry their own job label: honor_labels is on).
const PrometheusJob = "modelship-dev"

// TraefikJob is the job label of Traefik's series (traefik_service_requests_total,
// traefik_service_request_duration_seconds, traefik_entrypoint_requests_total...).
const TraefikJob = "traefik"

// TraefikMetricsNamespace is the namespace label Prometheus gives Traefik's series (Traefik's
// own have none): the namespace Traefik "runs in", as a scrape target in a cluster labels it.
// The controller's gateway metrics read only that target's series: start it with
// --gateway-metrics-namespace=TraefikMetricsNamespace.
const TraefikMetricsNamespace = "traefik"

// prometheusConfig is Prometheus' configuration: a 1 s scrape of the targets listed in
// targetsFile (file service discovery, so that SetScrapeTargets needs no restart), keeping the
// labels the targets export (the fleet simulator labels its series as if from many pods), and of
// Traefik's /metrics at traefik (host:port; none when empty) as job TraefikJob, with the label
// namespace=TraefikMetricsNamespace.
func prometheusConfig(targetsFile, traefik string) string {
	cfg := fmt.Sprintf(`# Written by modelship's test/framework/devenv; regenerated at every start.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: %s
    honor_labels: true
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, PrometheusJob, targetsFile)
	if traefik != "" {
		cfg += fmt.Sprintf(`  - job_name: %s
    static_configs:
      - targets: [%q]
        labels:
          namespace: %s
`, TraefikJob, traefik, TraefikMetricsNamespace)
	}
	return cfg
}

// targetsJSON is the file service discovery content for targets.
func targetsJSON(targets []string) ([]byte, error) {
	for _, t := range targets {
		if _, port, err := net.SplitHostPort(t); err != nil || port == "" {
			return nil, fmt.Errorf("scrape target %q: want host:port", t)
		}
	}
	groups := []map[string]any{}
	if len(targets) > 0 {
		groups = append(groups, map[string]any{"targets": targets})
	}
	return json.MarshalIndent(groups, "", "  ")
}

// writeTargets replaces the targets file atomically.
func writeTargets(path string, targets []string) error {
	b, err := targetsJSON(targets)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// startPrometheus runs Prometheus on a free loopback port with its data in <Dir>/prometheus-data.
func (e *Env) startPrometheus(ctx context.Context) error {
	e.promDir = filepath.Join(e.opts.Dir, "prometheus")
	if err := os.MkdirAll(e.promDir, 0o755); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	targets := filepath.Join(e.promDir, "targets.json")
	if err := writeTargets(targets, e.opts.PrometheusScrapeTargets); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	config := filepath.Join(e.promDir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(prometheusConfig(targets, strings.TrimPrefix(e.traefikURL, "http://"))), 0o644); err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p, err := e.launch(PartPrometheus, []string{
		e.opts.PrometheusBinary,
		"--config.file=" + config,
		"--storage.tsdb.path=" + filepath.Join(e.opts.Dir, "prometheus-data"),
		"--storage.tsdb.retention.time=1d",
		"--web.listen-address=" + addr,
		"--web.enable-lifecycle",
		"--log.level=warn",
	})
	if err != nil {
		return fmt.Errorf("prometheus: %w (install it with hack/prometheus.sh)", err)
	}
	e.promURL = "http://" + addr
	if err := waitFor(ctx, p, "prometheus /-/ready", e.opts.StartTimeout, httpGetOK(e.promURL+"/-/ready", "", nil)); err != nil {
		return partError(p, err)
	}
	return nil
}

// SetScrapeTargets replaces Prometheus' scrape targets (host:port, scraped on /metrics with
// honor_labels). Prometheus picks the change up within about a second, and keeps it across a
// Restart of its process.
func (e *Env) SetScrapeTargets(targets []string) error {
	if e.promDir == "" {
		return fmt.Errorf("devenv: set scrape targets %s: Prometheus is not running here", strings.Join(targets, ","))
	}
	if err := writeTargets(filepath.Join(e.promDir, "targets.json"), targets); err != nil {
		return fmt.Errorf("devenv: %w", err)
	}
	return nil
}
