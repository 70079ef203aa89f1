// Command image builds the controller's OCI image without a Docker engine: `make image`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o Options
	arches := flag.String("arch", "amd64,arm64", "architectures of the multi-arch index")
	flag.StringVar(&o.RepoRoot, "repo", "../../..", "the modelship checkout")
	flag.StringVar(&o.Out, "out", "../../../bin/image", "output folder (OCI layout in oci/, docker tarballs)")
	flag.StringVar(&o.Version, "version", "dev", "image version (tag and org.opencontainers.image.version)")
	flag.StringVar(&o.Repository, "repository", "ghcr.io/modelship/modelship-controller", "image repository (the tarballs' tag)")
	flag.Parse()
	o.Arches = strings.Split(*arches, ",")
	idx, err := Build(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	d, _ := idx.Digest()
	fmt.Printf("image %s:%s (%s) for %s: OCI layout %s/oci, tarballs %s/modelship-controller-<arch>.tar\n",
		o.Repository, o.Version, d, *arches, o.Out, o.Out)
}
