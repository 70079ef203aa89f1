package autoscale

import (
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// batchLimitFlags are the engines' flags for the most requests running at once: vLLM's
// --max-num-seqs (its parser also takes the underscore spelling), SGLang's
// --max-running-requests.
var batchLimitFlags = []string{"--max-num-seqs", "--max_num_seqs", "--max-running-requests", "--max_running_requests"}

// dataParallelFlags are the engines' flags for the engines one pod runs (vLLM's
// --data-parallel-size, -dp; SGLang's --dp-size, --dp): each has its own batch, and the running
// requests are summed over a pod's engines.
var dataParallelFlags = []string{"--data-parallel-size", "--data_parallel_size", "-dp", "--dp-size", "--dp_size", "--dp"}

// BatchLimitOf is the batch limit a pod template states for its model server: the value of
// --max-num-seqs (vLLM) or --max-running-requests (SGLang) in a container's command or args,
// as "--flag=N" or "--flag N", also inside a shell command line ("sh -c 'vllm serve ...'").
// 0 when no container states one: the engine's default depends on its version and the GPU
// (vLLM v1: 256, 1024 on GPUs of 70 GiB or more other than A100), so it is not guessed.
// Containers are read in order; the first stated value wins. With data parallelism stated in
// the same container (--data-parallel-size, -dp, SGLang's --dp-size) the limit is per engine and
// the pod's is that many times it.
func BatchLimitOf(spec corev1.PodSpec) int32 {
	for _, c := range spec.Containers {
		var words []string
		for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
			words = append(words, strings.Fields(a)...)
		}
		if n := flagValue(words, batchLimitFlags); n > 0 {
			return int32(min(n*max(flagValue(words, dataParallelFlags), 1), math.MaxInt32))
		}
	}
	return 0
}

// flagValue is the first positive integer given to one of flags in words ("--flag=N" or
// "--flag N"); 0 when none.
func flagValue(words, flags []string) int64 {
	for i, w := range words {
		for _, f := range flags {
			var v string
			switch {
			case w == f && i+1 < len(words):
				v = words[i+1]
			case strings.HasPrefix(w, f+"="):
				v = strings.TrimPrefix(w, f+"=")
			default:
				continue
			}
			if n, err := strconv.ParseInt(strings.Trim(v, `"'`), 10, 32); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
