package autoscale

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestBatchLimitOfReadsTheEnginesFlag(t *testing.T) {
	for _, tc := range []struct {
		name          string
		command, args []string
		want          int32
	}{
		{name: "vLLM with --max-num-seqs=N in args", args: []string{"--model", "m", "--max-num-seqs=64"}, want: 64},
		{name: "vLLM with --max-num-seqs N in args", args: []string{"--max-num-seqs", "96"}, want: 96},
		{name: "vLLM's underscore spelling", args: []string{"--max_num_seqs", "32"}, want: 32},
		{name: "in the command", command: []string{"vllm", "serve", "m", "--max-num-seqs", "48"}, want: 48},
		{name: "inside a shell command line", command: []string{"sh", "-c"}, args: []string{"exec vllm serve m --max-num-seqs 200 --port 8000"}, want: 200},
		{name: "SGLang's --max-running-requests", args: []string{"--max-running-requests=512"}, want: 512},
		{name: "no flag: unknown, not guessed", args: []string{"--model", "m"}, want: 0},
		{name: "a flag without a value", args: []string{"--max-num-seqs"}, want: 0},
		{name: "a value that is no number", args: []string{"--max-num-seqs=$(SEQS)"}, want: 0},
		{name: "a similar flag is not the batch limit", args: []string{"--max-num-seqs-per-lora=8"}, want: 0},
		{name: "vLLM data parallel: one batch per engine", args: []string{"--max-num-seqs", "64", "--data-parallel-size", "4"}, want: 256},
		{name: "vLLM's -dp", args: []string{"-dp=2", "--max-num-seqs=64"}, want: 128},
		{name: "SGLang's --dp-size", args: []string{"--max-running-requests", "100", "--dp-size", "2"}, want: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Args: []string{"--verbose"}}, {Name: "server", Command: tc.command, Args: tc.args}}}
			if got := BatchLimitOf(spec); got != tc.want {
				t.Errorf("BatchLimitOf = %d, want %d", got, tc.want)
			}
		})
	}
}
