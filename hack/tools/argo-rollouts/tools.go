//go:build tools

// Package tools pins the Argo Rollouts controller, which hack/peers.sh builds for the peer
// benchmark (make bench-peers).
package tools

import (
	_ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
)
