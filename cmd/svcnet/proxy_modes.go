package main

// The proxy modes beyond iptables register themselves with the proxy core
// when imported; each one imported here is selectable with --proxy-mode.
import (
	_ "github.com/svcnet/svcnet/proxy/ipvs"
	_ "github.com/svcnet/svcnet/proxy/nftables"
	_ "github.com/svcnet/svcnet/proxy/userspace"
)
