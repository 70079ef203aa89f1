package devenv

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	"github.com/modelship/modelship/test/framework/gateway"
)

func TestGPUNode(t *testing.T) {
	base, err := Options{Dir: "x", RepoRoot: "/r", GPUNodes: 2, GPUsPerNode: 4, GPUProduct: "NVIDIA-A100"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	untainted := base
	untainted.NoGPUTaint = true

	cases := []struct {
		name  string
		opts  Options
		i     int
		check func(t *testing.T, n *corev1.Node)
	}{
		{"a node is managed by kwok and labelled with its GPU product", base, 1, func(t *testing.T, n *corev1.Node) {
			if n.Name != "gpu-node-1" || n.Annotations[kwokNodeAnnotation] != "fake" || n.Labels["type"] != "kwok" || n.Labels[GPUProductLabel] != "NVIDIA-A100" {
				t.Errorf("name %s, annotations %v, labels %v", n.Name, n.Annotations, n.Labels)
			}
		}},
		{"a node offers its GPUs, CPU, memory and pods as capacity and allocatable", base, 0, func(t *testing.T, n *corev1.Node) {
			for _, rl := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
				gpu, cpu, mem, pods := rl[GPUResource], rl[corev1.ResourceCPU], rl[corev1.ResourceMemory], rl[corev1.ResourcePods]
				if gpu.Value() != 4 || cpu.Value() != 64 || mem.String() != "512Gi" || pods.Value() != 110 {
					t.Errorf("resources %v", rl)
				}
			}
		}},
		{"a node is tainted like a GPU pool so that only pods requesting GPUs land there", base, 0, func(t *testing.T, n *corev1.Node) {
			want := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
			if !reflect.DeepEqual(n.Spec.Taints, want) {
				t.Errorf("taints %v, want %v", n.Spec.Taints, want)
			}
		}},
		{"a node has no taint when NoGPUTaint is set", untainted, 0, func(t *testing.T, n *corev1.Node) {
			if len(n.Spec.Taints) != 0 {
				t.Errorf("taints %v, want none", n.Spec.Taints)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := c.opts.gpuNode(c.i)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, n)
		})
	}

	t.Run("an invalid memory quantity is an error naming the node", func(t *testing.T) {
		bad := base
		bad.NodeMemory = "lots"
		if _, err := bad.gpuNode(0); err == nil || !strings.Contains(err.Error(), "gpu-node-0") {
			t.Errorf("error = %v", err)
		}
	})
}

func TestOptionsDefaults(t *testing.T) {
	t.Run("an empty Dir is refused", func(t *testing.T) {
		if _, err := (Options{}).withDefaults(); err == nil {
			t.Error("no error without Dir")
		}
	})
	t.Run("defaults fill GPUs, product, gateway names and CRD folder", func(t *testing.T) {
		o, err := Options{Dir: "rel/dir", RepoRoot: "/repo"}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(o.Dir) || o.GPUsPerNode != DefaultGPUsPerNode || o.GPUProduct != DefaultGPUProduct ||
			o.GatewayClassName != DefaultGatewayClassName || o.GatewayControllerName != DefaultGatewayControllerName ||
			!reflect.DeepEqual(o.CRDDirs, []string{"/repo/config/crd/bases"}) || o.StartTimeout <= 0 {
			t.Errorf("defaults: %+v", o)
		}
	})
	t.Run("a negative node count is refused", func(t *testing.T) {
		if _, err := (Options{Dir: "d", RepoRoot: "/r", GPUNodes: -1}).withDefaults(); err == nil {
			t.Error("no error for -1 nodes")
		}
	})
	t.Run("the repository root is found from a package folder", func(t *testing.T) {
		root, err := FindRepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "api", "v1alpha1")); err != nil {
			t.Errorf("root %s has no api/v1alpha1: %v", root, err)
		}
	})
}

func TestAssets(t *testing.T) {
	t.Run("an empty folder lacks every binary and the kwok stages", func(t *testing.T) {
		got := MissingAssets(t.TempDir())
		want := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
			"kwok-stages/node-initialize.yaml", "kwok-stages/node-heartbeat-with-lease.yaml", "kwok-stages/pod-ready.yaml", "kwok-stages/pod-complete.yaml", "kwok-stages/pod-delete.yaml"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("MissingAssets = %v, want %v", got, want)
		}
	})
	t.Run("start without assets fails before launching anything and says how to build them", func(t *testing.T) {
		err := checkAssets(t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "hack/controlplane.sh all") {
			t.Errorf("error = %v", err)
		}
	})
}

func TestStartRefusesTheHostsNetworkNamespace(t *testing.T) {
	if os.Getenv(gateway.NetnsEnv) != "" {
		t.Skip("runs in the host's namespace only")
	}
	dir := t.TempDir()
	_, err := Start(context.Background(), Options{Dir: dir, AssetsDir: t.TempDir(), RepoRoot: "/r"})
	if err == nil || !strings.Contains(err.Error(), "network namespace of the project's own") || !strings.Contains(err.Error(), "make demo") {
		t.Fatalf("error = %v, want a refusal saying how to run it", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("Start wrote %d entries into its folder before refusing", len(entries))
	}
}

func TestPrometheusScrapesTraefik(t *testing.T) {
	with := prometheusConfig("/t.json", "127.0.0.1:8082")
	for _, want := range []string{"job_name: " + PrometheusJob, "job_name: " + TraefikJob, `targets: ["127.0.0.1:8082"]`} {
		if !strings.Contains(with, want) {
			t.Errorf("config lacks %q:\n%s", want, with)
		}
	}
	// Traefik's series carry the namespace label the controller's gateway queries select
	// (--gateway-metrics-namespace).
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			StaticConfigs []struct {
				Targets []string          `json:"targets"`
				Labels  map[string]string `json:"labels"`
			} `json:"static_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(with), &cfg); err != nil {
		t.Fatalf("config: %v\n%s", err, with)
	}
	labelled := false
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			labelled = labelled || sc.JobName == TraefikJob && st.Labels["namespace"] == TraefikMetricsNamespace
		}
	}
	if !labelled {
		t.Errorf("Traefik's target has no label namespace=%s:\n%s", TraefikMetricsNamespace, with)
	}
	if without := prometheusConfig("/t.json", ""); strings.Contains(without, TraefikJob) {
		t.Errorf("config without Traefik scrapes it:\n%s", without)
	}
}

func TestScrapeTargets(t *testing.T) {
	cases := []struct {
		name    string
		targets []string
		want    string
		wantErr bool
	}{
		{"targets form one static group", []string{"127.0.0.1:9400", "127.0.0.1:9401"}, `[{"targets":["127.0.0.1:9400","127.0.0.1:9401"]}]`, false},
		{"no targets is an empty list, not a group without targets", nil, `[]`, false},
		{"a target without a port is refused", []string{"127.0.0.1"}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := targetsJSON(c.targets)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if c.wantErr {
				return
			}
			var got, want any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(c.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("targets = %s, want %s", b, c.want)
			}
		})
	}
}

// Every address range of the environment is in the benchmarking range, and none overlaps the
// pods' (routed locally inside the namespace) or holds the nodes' address.
func TestEveryAddressRangeIsInTheBenchmarkingRange(t *testing.T) {
	bench := netip.MustParsePrefix(gateway.BenchmarkRange)
	pods := netip.MustParsePrefix(PodCIDR)
	node := netip.MustParseAddr(NodeIP)
	for name, cidr := range map[string]string{"service": serviceCIDR, "cluster": clusterCIDR} {
		p := netip.MustParsePrefix(cidr)
		if !bench.Contains(p.Addr()) || p.Bits() < bench.Bits() {
			t.Errorf("%s CIDR %s is not inside %s", name, p, bench)
		}
		if p.Overlaps(pods) || p.Contains(node) {
			t.Errorf("%s CIDR %s overlaps the pods' %s or holds the nodes' %s", name, p, pods, node)
		}
	}
	if !bench.Contains(node) || pods.Contains(node) {
		t.Errorf("NodeIP %s must be in %s and outside %s", node, bench, pods)
	}
}
