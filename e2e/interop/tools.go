//go:build tools

// This file records the components the tests build with `go build`, so that
// `go mod tidy` keeps their dependencies in go.mod and go.sum.
package interop

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
)
