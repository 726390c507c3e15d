package proxytest

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"

	"github.com/svcnet/svcnet/internal/testbed"
)

// Do runs f on an OS thread switched into ns and switches the thread back
// before releasing it. Unlike a thread that exits while locked, a restored
// thread can never leave the process's main thread in a test namespace
// (where `ip netns pids` would list the whole test process, and the
// namespace's cleanup would kill it). Sockets f opens stay in ns.
func Do(ns *testbed.NetNS, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(ns.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns.Name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", ns.Name, err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: it dies with this goroutine.
			errc <- fmt.Errorf("return from netns %s: %w", ns.Name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
