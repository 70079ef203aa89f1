// Package gateway runs a real Gateway API implementation, Traefik (its kubernetesgateway
// provider), as a process against a kube-apiserver, so that requests go through a real Gateway
// to the pods' addresses (issue #26). hack/traefik.sh builds the binary once into a cache; the
// pods' addresses are served only inside a network namespace of the test's own (netns.go).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Version is the Traefik release hack/traefik.sh builds.
const Version = "v3.6.12"

// ControllerName is the GatewayClass controllerName Traefik's kubernetesgateway provider serves.
const ControllerName = "traefik.io/gateway-controller"

// BinaryEnv names the environment variable that points at the Traefik binary
// (make test-gateway sets it from hack/traefik.sh).
const BinaryEnv = "TRAEFIK"

// DefaultBinary is where hack/traefik.sh puts the binary: <cache>/gateway/traefik-<Version>/traefik,
// the cache being MODELSHIP_CACHE, else $XDG_CACHE_HOME/modelship, else ~/.cache/modelship.
func DefaultBinary() string {
	cache := os.Getenv("MODELSHIP_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "modelship")
	}
	return filepath.Join(cache, "gateway", "traefik-"+Version, "traefik")
}

// FindBinary returns the Traefik binary named by $TRAEFIK, else DefaultBinary, or why there is
// none.
func FindBinary() (string, error) {
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		bin = DefaultBinary()
	}
	st, err := os.Stat(bin)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("no Traefik binary at %s: run `make gateway` (hack/traefik.sh builds Traefik %s once, ~6 min on 2 cores)", bin, Version)
	}
	return bin, nil
}

// Options configure a Traefik process.
type Options struct {
	// Binary is the traefik program; FindBinary's when empty.
	Binary string
	// Kubeconfig is the file Traefik's provider reads the API server's address and credentials
	// from (WriteKubeconfig writes one). Required.
	Kubeconfig string
	// Dir receives traefik.log (Traefik's own log) and traefik.out (its stdout and stderr).
	// Required.
	Dir string
	// Host is the address both entry points bind; 127.0.0.1 when empty.
	Host string
	// WebPort is the port of the "web" entry point: a Gateway's HTTP listener must use this
	// port for Traefik to attach it. Required.
	WebPort int
	// AdminPort is the port of the "traefik" entry point, serving /ping and /metrics
	// (Prometheus). Required.
	AdminPort int
	// LogLevel is Traefik's log level; INFO when empty.
	LogLevel string
	// LogToStdout sends Traefik's own log to its stdout instead of <Dir>/traefik.log (for a
	// supervisor that already keeps the process's output in a log file).
	LogToStdout bool
	// KubernetesCRD enables Traefik's kubernetescrd provider beside the Gateway API one, also
	// without throttling: it serves IngressRoutes and TraefikServices (traefik.io/v1alpha1),
	// and lets an HTTPRoute backendRef name a TraefikService (group traefik.io, kind
	// TraefikService). Argo Rollouts' Traefik router moves a canary's weights in a
	// TraefikService. The provider waits for every traefik.io CRD to be listable: install
	// them all (Traefik's kubernetes-crd-definition-v1.yml) before starting Traefik.
	KubernetesCRD bool
	// ExtraArgs are added to the flags.
	ExtraArgs []string
}

// Traefik is a running Traefik process.
type Traefik struct {
	// WebURL is the "web" entry point (http://host:WebPort), where the Gateway serves.
	WebURL string
	// AdminURL serves /ping and /metrics.
	AdminURL string
	// LogPath is Traefik's own log file.
	LogPath string
	args    []string
	cmd     *exec.Cmd
	out     *os.File
	done    chan struct{}
	waitErr error
}

// Args are the flags Traefik runs with: the kubernetesgateway provider (standard channel only:
// experimental channel off) and, with KubernetesCRD, the kubernetescrd provider; no provider throttling (its 2 s default delays every weight
// change), Prometheus metrics with per-service labels, /ping, a log file, and no calls home.
func (o Options) Args() []string {
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	level := o.LogLevel
	if level == "" {
		level = "INFO"
	}
	args := []string{
		"--global.checkNewVersion=false",
		"--global.sendAnonymousUsage=false",
		"--entryPoints.web.address=" + net.JoinHostPort(host, strconv.Itoa(o.WebPort)),
		"--entryPoints.traefik.address=" + net.JoinHostPort(host, strconv.Itoa(o.AdminPort)),
		"--ping=true",
		"--ping.entryPoint=traefik",
		"--metrics.prometheus=true",
		"--metrics.prometheus.entryPoint=traefik",
		"--metrics.prometheus.addServicesLabels=true",
		"--metrics.prometheus.addEntryPointsLabels=true",
		"--metrics.prometheus.addRoutersLabels=true",
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.experimentalChannel=false",
		"--providers.kubernetesgateway.throttleDuration=0s",
		"--providers.providersThrottleDuration=0s",
		"--log.level=" + level,
	}
	if !o.LogToStdout {
		args = append(args, "--log.filePath="+filepath.Join(o.Dir, "traefik.log"))
	}
	if o.KubernetesCRD {
		args = append(args, "--providers.kubernetescrd=true", "--providers.kubernetescrd.throttleDuration=0s")
	}
	return append(args, o.ExtraArgs...)
}

// Start runs Traefik and waits until it answers /ping (at most a minute). Stop ends it.
func Start(ctx context.Context, o Options) (*Traefik, error) {
	if o.Kubeconfig == "" || o.Dir == "" || o.WebPort == 0 || o.AdminPort == 0 {
		return nil, errors.New("gateway: Options.Kubeconfig, Dir, WebPort and AdminPort are required")
	}
	if o.Binary == "" {
		bin, err := FindBinary()
		if err != nil {
			return nil, err
		}
		o.Binary = bin
	}
	host := o.Host
	if host == "" {
		host = "127.0.0.1"
	}
	out, err := os.Create(filepath.Join(o.Dir, "traefik.out"))
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	t := &Traefik{
		WebURL:   "http://" + net.JoinHostPort(host, strconv.Itoa(o.WebPort)),
		AdminURL: "http://" + net.JoinHostPort(host, strconv.Itoa(o.AdminPort)),
		LogPath:  filepath.Join(o.Dir, "traefik.log"),
		args:     o.Args(),
		out:      out,
		done:     make(chan struct{}),
	}
	cmd := exec.Command(o.Binary, t.args...) //nolint:noctx // a long-lived process: Stop ends it
	// Out of any cluster: the provider reads KUBECONFIG (it would prefer the in-cluster
	// configuration if these two were set).
	env := []string{"KUBECONFIG=" + o.Kubeconfig}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBERNETES_SERVICE_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("gateway: starting %s: %w", o.Binary, err)
	}
	t.cmd = cmd
	go func() { t.waitErr = cmd.Wait(); close(t.done) }()

	client := &http.Client{Timeout: time.Second, Transport: Transport()}
	deadline := time.Now().Add(time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.AdminURL+"/ping", nil)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return t, nil
			}
		}
		select {
		case <-t.done:
			return nil, fmt.Errorf("gateway: traefik exited at start (%v); see %s and %s", t.waitErr, t.LogPath, out.Name())
		case <-ctx.Done():
			_ = t.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = t.Stop()
			return nil, fmt.Errorf("gateway: traefik does not answer %s/ping after a minute; see %s", t.AdminURL, t.LogPath)
		}
	}
}

// Args is the command line Traefik runs with.
func (t *Traefik) Args() []string { return append([]string(nil), t.args...) }

// Exited is closed when the process exits.
func (t *Traefik) Exited() <-chan struct{} { return t.done }

// Stop sends SIGTERM to Traefik's process group, SIGKILL after 5 seconds, and waits for it.
func (t *Traefik) Stop() error {
	defer func() { _ = t.out.Close() }()
	select {
	case <-t.done:
		return nil
	default:
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-t.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.done
	}
	return nil
}

// WriteKubeconfig writes cfg (an envtest or local API server's client configuration: client
// certificate or bearer token) as a kubeconfig file Traefik can read.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	user := &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, TokenFile: cfg.BearerTokenFile,
	}
	kc.Clusters["modelship"] = cluster
	kc.AuthInfos["modelship"] = user
	kc.Contexts["modelship"] = &clientcmdapi.Context{Cluster: "modelship", AuthInfo: "modelship"}
	kc.CurrentContext = "modelship"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("gateway: writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// CRDDir is the folder of Traefik's own CRDs (traefik.io/v1alpha1, for its kubernetescrd
// provider: TraefikServices) that hack/traefik.sh keeps beside the binary.
func CRDDir() string {
	bin := os.Getenv(BinaryEnv)
	if bin == "" {
		bin = DefaultBinary()
	}
	return filepath.Join(filepath.Dir(bin), "crds")
}
