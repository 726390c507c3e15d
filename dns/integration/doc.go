// Package integration runs svcnet dns against svcnet's real apiserver (with
// embedded etcd): the informers list and watch over HTTP exactly as they do
// in a cluster. It holds only tests.
package integration
