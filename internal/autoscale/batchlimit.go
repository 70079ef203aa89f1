package autoscale

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// batchLimitFlags are the engines' flags for the most requests running at once: vLLM's
// --max-num-seqs (its parser also takes the underscore spelling), SGLang's
// --max-running-requests.
var batchLimitFlags = []string{"--max-num-seqs", "--max_num_seqs", "--max-running-requests", "--max_running_requests"}

// BatchLimitOf is the batch limit a pod template states for its model server: the value of
// --max-num-seqs (vLLM) or --max-running-requests (SGLang) in a container's command or args,
// as "--flag=N" or "--flag N", also inside a shell command line ("sh -c 'vllm serve ...'").
// 0 when no container states one: the engine's default depends on its version and the GPU
// (vLLM v1: 256, 1024 on GPUs of 70 GiB or more other than A100), so it is not guessed.
// Containers are read in order; the first stated value wins.
func BatchLimitOf(spec corev1.PodSpec) int32 {
	for _, c := range spec.Containers {
		var words []string
		for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
			words = append(words, strings.Fields(a)...)
		}
		for i, w := range words {
			for _, f := range batchLimitFlags {
				var v string
				switch {
				case w == f && i+1 < len(words):
					v = words[i+1]
				case strings.HasPrefix(w, f+"="):
					v = strings.TrimPrefix(w, f+"=")
				default:
					continue
				}
				v = strings.Trim(v, `"'`)
				if n, err := strconv.ParseInt(v, 10, 32); err == nil && n > 0 {
					return int32(n)
				}
			}
		}
	}
	return 0
}
