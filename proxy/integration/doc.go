// Package integration holds tests that run the proxy core against a real
// (in-process) apiserver, e.g. that the first sync after a start programs
// every Service. It has no code of its own; keeping these tests here keeps
// the apiserver out of the mode packages' test binaries.
package integration
