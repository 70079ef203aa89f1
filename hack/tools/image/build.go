package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// User is the image's user: distroless' nonroot (65532), never root.
const User = "65532:65532"

// Options of a build.
type Options struct {
	RepoRoot, Out, Version, Repository string
	Arches                             []string
	// Package is the main package put at /manager (default ./cmd/modelship-controller).
	Package string
}

// Build compiles the controller statically for each architecture, puts each binary alone on
// a scratch base (no shell, no package manager), and writes the multi-arch index as an OCI
// layout (Out/oci: skopeo copy oci:..., crane push) and each image as a docker-load tarball
// (Out/modelship-controller-<arch>.tar).
func Build(o Options) (v1.ImageIndex, error) {
	var err error
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return nil, err
	}
	if o.RepoRoot, err = filepath.Abs(o.RepoRoot); err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	tag, err := name.NewTag(o.Repository + ":" + o.Version)
	if err != nil {
		return nil, fmt.Errorf("image name: %w", err)
	}
	for _, arch := range o.Arches {
		bin := filepath.Join(o.Out, "manager-"+arch)
		pkg := o.Package
		if pkg == "" {
			pkg = "./cmd/modelship-controller"
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg) //nolint:noctx // a build
		cmd.Dir = o.RepoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the controller for %s: %w\n%s", arch, err, out)
		}
		img, err := image(bin, arch, o.Version)
		if err != nil {
			return nil, err
		}
		if err := tarball.WriteToFile(filepath.Join(o.Out, "modelship-controller-"+arch+".tar"), tag, img); err != nil {
			return nil, fmt.Errorf("writing the %s tarball: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
		_ = os.Remove(bin)
	}
	dir := filepath.Join(o.Out, "oci")
	_ = os.RemoveAll(dir)
	if _, err := layout.Write(dir, idx); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	return idx, nil
}

// image is the binary at /manager on an empty base.
func image(bin, arch, version string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "manager", Mode: 0o555, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromReader(bytes.NewReader(buf.Bytes()), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/manager"}
	cfg.Config.User = User
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "modelship-controller",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/modelship/modelship",
	}
	return mutate.ConfigFile(img, cfg)
}
