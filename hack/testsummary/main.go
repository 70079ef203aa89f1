// Command testsummary reads `go test -json` on stdin, prints each package's result, the output
// of failed tests, lines of measured figures ("FIGURE: ...") as they come, and a closing line
// "N passed, N failed, N skipped" (tests, not packages).
// It exits 1 when a test or a package failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	passed, failed, skipped := 0, 0, 0
	pkgFailed := false
	output := map[string]*strings.Builder{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // build errors come as plain text
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if strings.Contains(e.Output, "FIGURE:") {
				fmt.Print(strings.TrimLeft(e.Output, " "))
			}
			b := output[key]
			if b == nil {
				b = &strings.Builder{}
				output[key] = b
			}
			b.WriteString(e.Output)
		case "pass", "fail", "skip":
			if e.Test == "" {
				fmt.Printf("%-4s %s (%.1fs)\n", strings.ToUpper(e.Action), e.Package, e.Elapsed)
				if e.Action == "fail" {
					pkgFailed = true
					if b := output[key]; b != nil {
						fmt.Print(b.String())
					}
				}
				continue
			}
			switch e.Action {
			case "pass":
				passed++
			case "skip":
				skipped++
			case "fail":
				failed++
				fmt.Printf("--- FAIL: %s %s\n", e.Package, e.Test)
				if b := output[key]; b != nil {
					fmt.Print(b.String())
				}
			}
			delete(output, key)
		}
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFailed {
		os.Exit(1)
	}
}
