//go:build tools

// This file records the peers the harness builds with `go build`, so that
// `go mod tidy` keeps their dependencies in go.mod and go.sum.
package main

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
)
