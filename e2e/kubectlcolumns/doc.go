// Package kubectlcolumns checks svcnet's server-side Tables
// (apiserver/tables) and OpenAPI v3 documents (apiserver/openapi) with the
// real kubectl: its tests serve them from a small loopback HTTP server with
// just enough discovery for kubectl, run /usr/bin/kubectl get/explain/apply
// against it and compare the output with what a real cluster prints (the
// seeds' walkthroughs). The tests skip when kubectl is not installed.
package kubectlcolumns
