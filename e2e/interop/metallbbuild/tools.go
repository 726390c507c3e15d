//go:build tools

// Package metallbbuild pins MetalLB's controller and speaker for the
// interop tests: `go build -o DIR go.universe.tf/metallb/controller
// go.universe.tf/metallb/speaker` in this directory builds them with
// MetalLB's own dependency versions, kept apart from svcnet's modules.
package metallbbuild

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
