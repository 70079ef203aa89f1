package workloads

import (
	"bufio"
	"fmt"
	"io"

	"github.com/modelship/modelship/test/framework/fleet"
)

// traceTimeLayout is the shipped trace's TIMESTAMP layout (fleet.ReadTrace parses it).
const traceTimeLayout = "2006-01-02 15:04:05.0000000"

// WriteCSV writes tr in the shipped trace's CSV format (TIMESTAMP,ContextTokens,GeneratedTokens),
// so that a generated workload can be given to anything that reads a trace file (--trace).
func WriteCSV(w io.Writer, tr fleet.Trace) error {
	bw := bufio.NewWriter(w)
	if _, err := fmt.Fprintln(bw, "TIMESTAMP,ContextTokens,GeneratedTokens"); err != nil {
		return err
	}
	for _, r := range tr.Requests {
		if _, err := fmt.Fprintf(bw, "%s,%d,%d\n", tr.Start.Add(r.Offset).Format(traceTimeLayout), r.ContextTokens, r.GeneratedTokens); err != nil {
			return err
		}
	}
	return bw.Flush()
}
