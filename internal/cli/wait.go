package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	v1alpha1 "github.com/modelship/modelship/api/v1alpha1"
	"github.com/modelship/modelship/internal/health"
)

func (o *options) newWaitCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait NAME",
		Short: "Wait until the rollout of the current spec finishes",
		Long: "wait follows the rollout of the ModelServer's current generation (status.observedGeneration\n" +
			"must reach metadata.generation) and prints a line at each phase or step change.\n\n" +
			"Exit codes:\n" +
			"  0  Healthy: the spec's revision serves all traffic\n" +
			"  1  RolledBack or Stalled (or any error)\n" +
			"  2  timed out\n" +
			"  3  Paused or AwaitingPromotion: waiting for a person\n\n" +
			"--timeout 0 checks once and exits 2 when the rollout is not finished.",
		Example: "  kubectl apply -f llama.yaml && kubectl modelship wait llama -n ml --timeout 30m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.runWait(cmd.Context(), args[0], timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "How long to wait")
	return cmd
}

// progressLine is the one-line summary wait prints when it changes.
func progressLine(ms *v1alpha1.ModelServer) string {
	phase := string(ms.Status.Phase)
	if phase == "" {
		phase = "<no status>"
	}
	line := phase
	if s := health.StepText(ms); s != "" {
		line += ", " + s + fmt.Sprintf(", weights stable %d%% / candidate %d%%", ms.Status.Weights.Stable, ms.Status.Weights.Candidate)
	}
	if ms.Status.ObservedGeneration < ms.Generation {
		line += fmt.Sprintf(" (generation %d not observed yet)", ms.Generation)
	}
	return line
}

func (o *options) runWait(ctx context.Context, name string, timeout time.Duration) error {
	c, ns, err := o.newClient()
	if err != nil {
		return err
	}
	var last *v1alpha1.ModelServer
	if timeout <= 0 {
		ms, err := getModelServer(ctx, c, ns, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(o.streams.Out, "%s %s\n", o.now().Format("15:04:05"), progressLine(ms))
		if r := health.Assess(ms); r.Done {
			return o.finish(name, r)
		}
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("modelserver %s: rollout not finished: %s", name, progressLine(ms))}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lastLine := ""
	var result health.Result
	err = o.follow(wctx, c, ns, name, func(ms *v1alpha1.ModelServer) (bool, error) {
		last = ms
		if line := progressLine(ms); line != lastLine {
			lastLine = line
			fmt.Fprintf(o.streams.Out, "%s %s\n", o.now().Format("15:04:05"), line)
		}
		result = health.Assess(ms)
		return result.Done, nil
	})
	switch {
	case err == nil:
		return o.finish(name, result)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		state := "no status read"
		if last != nil {
			state = progressLine(last)
		}
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for modelserver %s: %s", timeout, name, state)}
	}
	return err
}

// finish prints the outcome and turns it into the exit code.
func (o *options) finish(name string, r health.Result) error {
	if r.Code == health.CodeHealthy {
		_, err := fmt.Fprintf(o.streams.Out, "modelserver %s %s\n", name, r.Message)
		return err
	}
	return &ExitError{Code: r.Code, Err: fmt.Errorf("modelserver %s %s", name, r.Message)}
}
