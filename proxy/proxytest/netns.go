package proxytest

import (
	"github.com/svcnet/svcnet/internal/testbed"
)

// Do runs f on an OS thread inside ns; sockets f opens stay in ns. It is
// testbed.NetNS.Do, kept as a name the mode packages already use.
func Do(ns *testbed.NetNS, f func() error) error { return ns.Do(f) }
