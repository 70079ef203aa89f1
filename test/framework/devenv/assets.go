package devenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Versions of the control plane built by hack/controlplane.sh; they name its cache folder.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "v3.7.3"
	KwokVersion = "v0.8.0"
)

// modulePath is modelship's Go module, which FindRepoRoot looks for.
const modulePath = "github.com/modelship/modelship"

// assetBinaries are the programs an AssetsDir must hold.
var assetBinaries = []string{PartEtcd, PartAPIServer, PartControllerManager, PartScheduler, PartKwok}

// DefaultAssetsDir is where hack/controlplane.sh builds the control plane:
// $MODELSHIP_ASSETS if set, else $MODELSHIP_CACHE (or $XDG_CACHE_HOME/modelship, or
// ~/.cache/modelship)/controlplane/kube-<v>-etcd-<v>-kwok-<v>.
func DefaultAssetsDir() string {
	if d := os.Getenv("MODELSHIP_ASSETS"); d != "" {
		return d
	}
	cache := os.Getenv("MODELSHIP_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "modelship")
	}
	return filepath.Join(cache, "controlplane", fmt.Sprintf("kube-%s-etcd-%s-kwok-%s", KubeVersion, EtcdVersion, KwokVersion))
}

// MissingAssets lists what dir lacks to run a cluster (binaries, KwokStages), empty when
// complete. Tests use it to skip with a clear message.
func MissingAssets(dir string) []string {
	var missing []string
	for _, b := range assetBinaries {
		st, err := os.Stat(filepath.Join(dir, b))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	for _, s := range KwokStages {
		if _, err := os.Stat(filepath.Join(dir, "kwok-stages", s)); err != nil {
			missing = append(missing, "kwok-stages/"+s)
		}
	}
	return missing
}

func checkAssets(dir string) error {
	if missing := MissingAssets(dir); len(missing) > 0 {
		return fmt.Errorf("devenv: assets folder %s lacks %s: run hack/controlplane.sh all (make controlplane)", dir, strings.Join(missing, ", "))
	}
	return nil
}

// FindRepoRoot returns the nearest parent of the working directory whose go.mod declares
// modelship's module.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("devenv: find repository root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("devenv: no go.mod of %s above the working directory; set Options.RepoRoot", modulePath)
		}
		dir = parent
	}
}

// gatewayAPICRDDir finds config/crd/standard of the sigs.k8s.io/gateway-api module that
// repoRoot's go.mod requires (downloading the module if the cache lacks it).
func gatewayAPICRDDir(ctx context.Context, repoRoot string) (string, error) {
	return moduleFile(ctx, repoRoot, "sigs.k8s.io/gateway-api", "config", "crd", "standard")
}

// inferencePoolCRD finds the InferencePool CRD (inference.networking.k8s.io/v1) of the
// sigs.k8s.io/gateway-api-inference-extension module that repoRoot's go.mod requires, the
// module whose API types modelship uses.
func inferencePoolCRD(ctx context.Context, repoRoot string) (string, error) {
	return moduleFile(ctx, repoRoot, "sigs.k8s.io/gateway-api-inference-extension", "config", "crd", "bases", "inference.networking.k8s.io_inferencepools.yaml")
}

// moduleFile is a file or folder of a module that repoRoot's go.mod requires (downloading the
// module if the cache lacks it).
func moduleFile(ctx context.Context, repoRoot, module string, path ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("find the %s module (go mod download in %s): %w: %s", module, repoRoot, err, stderr.String())
	}
	var mod struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("find the %s module: %w", module, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return "", fmt.Errorf("find the %s module: %s", module, mod.Error)
	}
	file := filepath.Join(append([]string{mod.Dir}, path...)...)
	if _, err := os.Stat(file); err != nil {
		return "", fmt.Errorf("%s %s: %w", module, mod.Version, errors.Unwrap(err))
	}
	return file, nil
}
