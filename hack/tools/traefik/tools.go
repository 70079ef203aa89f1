//go:build tools

// Package tools pins the Traefik command that hack/traefik.sh builds.
package tools

import _ "github.com/traefik/traefik/v3/cmd/traefik"
