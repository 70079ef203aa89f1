package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The test assembles the image around a small program of the repository (hack/testsummary)
// rather than the controller: cross-compiling the controller's Kubernetes dependencies for two
// architectures takes about ten minutes on a cold 2-core machine. The assembly (static build,
// scratch base, user, entrypoint, labels, index, layout, tarball) is the same code; `make image`
// runs it on the controller.
func TestTheImageIsAStaticNonRootMultiArchBinaryThatLoads(t *testing.T) {
	out := t.TempDir()
	if _, err := Build(Options{RepoRoot: filepath.Join("..", "..", ".."), Out: out, Version: "v9.9.9-test", Package: "./hack/testsummary",
		Repository: "example.com/modelship-controller", Arches: []string{"amd64", "arm64"}}); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatalf("the OCI layout does not load: %v", err)
	}
	// The layout's index.json is the multi-arch index itself.
	multi := idx
	m, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var arches []string
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, desc := range m.Manifests {
		arch := desc.Platform.Architecture
		arches = append(arches, arch)
		img, err := multi.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != User || !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || cfg.Architecture != arch ||
			cfg.Config.Labels["org.opencontainers.image.version"] != "v9.9.9-test" {
			t.Errorf("%s config: user %q entrypoint %v arch %s labels %v", arch, cfg.Config.User, cfg.Config.Entrypoint, cfg.Architecture, cfg.Config.Labels)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want the binary alone", arch, len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		found := false
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Name != "manager" {
				continue
			}
			found = true
			data, _ := io.ReadAll(tr)
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s: /manager is not an ELF binary: %v", arch, err)
			}
			if f.Machine != machines[arch] {
				t.Errorf("%s: /manager is built for %s", arch, f.Machine)
			}
			if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
				t.Errorf("%s: /manager is dynamically linked (it has an interpreter); want static on a scratch base", arch)
			}
		}
		_ = rc.Close()
		if !found {
			t.Errorf("%s: no /manager in the layer", arch)
		}
	}
	if !slices.Equal(arches, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v, want amd64 and arm64", arches)
	}
	// What `docker load` reads.
	img, err := tarball.ImageFromPath(filepath.Join(out, "modelship-controller-amd64.tar"), nil)
	if err != nil {
		t.Fatalf("the docker tarball does not load: %v", err)
	}
	if cfg, err := img.ConfigFile(); err != nil || cfg.Config.User != User {
		t.Errorf("tarball config: %v %+v", err, cfg)
	}
}
