// Command modelship-bench measures modelship: each benchmark is a subcommand in its own file
// (registered with register) that prints its figures and ends with key=value lines.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/modelship/modelship/test/framework/gateway"
)

// benchmark is one subcommand: run parses its own flags from args and prints its figures.
type benchmark struct {
	summary string
	run     func(args []string) error
}

// inNetns are the benchmarks that start the local environment: they run in a network namespace
// of their own (gateway.Reexec), like everything that starts it.
var inNetns = map[string]bool{"scale": true, "peers": true}

var benchmarks = map[string]benchmark{}

// register adds a subcommand; each benchmark's file calls it from init.
func register(name, summary string, run func(args []string) error) {
	benchmarks[name] = benchmark{summary: summary, run: run}
}

// freshDir empties a benchmark's working folder and returns its absolute path.
func freshDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(abs); err != nil {
		return "", err
	}
	return abs, os.MkdirAll(abs, 0o755)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: modelship-bench <benchmark> [flags]\n\nbenchmarks:")
	names := make([]string, 0, len(benchmarks))
	for n := range benchmarks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", n, benchmarks[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	b, ok := benchmarks[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "modelship-bench: unknown benchmark %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if inNetns[os.Args[1]] {
		ns, code, err := gateway.Reexec()
		if err != nil {
			fmt.Fprintf(os.Stderr, "modelship-bench %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		if ns == nil {
			os.Exit(code) // the program ran in its namespace and ended with code
		}
	}
	if err := b.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "modelship-bench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
