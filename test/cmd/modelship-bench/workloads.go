package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelship/modelship/test/framework/fleet"
	"github.com/modelship/modelship/test/sim/policysim"
	"github.com/modelship/modelship/test/sim/workloads"
)

func init() {
	register("workloads", "the workload matrix: each workload's measured statistics for a seed; --write DIR writes them as trace CSVs", runWorkloads)
}

func runWorkloads(args []string) error {
	fs := flag.NewFlagSet("workloads", flag.ContinueOnError)
	base := fs.String("matrix-base", shippedTrace, "the shipped trace the matrix's replays are built from")
	seed := fs.Uint64("seed", 1, "seed of every workload")
	write := fs.String("write", "", "directory to write each workload as <name>.csv in the shipped trace format (empty: do not write)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tr, err := fleet.LoadTrace(*base)
	if err != nil {
		return err
	}
	if *write != "" {
		if err := os.MkdirAll(*write, 0o755); err != nil {
			return err
		}
	}
	capa := fleet.DefaultCapacity()
	matrix := workloads.Matrix(tr)
	for _, w := range matrix {
		g, err := w.Trace(*seed)
		if err != nil {
			return err
		}
		arr, err := w.Sequence(*seed)
		if err != nil {
			return err
		}
		fmt.Printf("workload=%s seed=%d gpu_speed=%g mean_work=%.2f %s\n  %s\n", w.Name, *seed, w.Speed(),
			policysim.WorkBetween(arr, capa.AtSpeed(w.Speed()), 0, w.Duration), workloads.Measure(g, w.Duration), w.Summary)
		if *write != "" {
			if err := writeWorkload(filepath.Join(*write, strings.ReplaceAll(w.Name, "/", "-")+".csv"), g); err != nil {
				return err
			}
		}
	}
	fmt.Printf("workloads=%d\n", len(matrix))
	return nil
}

func writeWorkload(path string, tr fleet.Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := workloads.WriteCSV(f, tr); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
