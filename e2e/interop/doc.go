// Package interop runs the real Kubernetes components, built from
// k8s.io/kubernetes at the version svcnet targets, against svcnet's API
// server. It is its own Go module so that the main module never depends on
// k8s.io/kubernetes. See README.md.
package interop
