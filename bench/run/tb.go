package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// benchTB lets the harness use internal/testbed (isolated network namespaces
// with cleanups) outside `go test`. testing.TB cannot be implemented outside
// the testing package, so the interface is embedded (nil) and every method
// testbed calls is overridden; Fatal and Skip unwind with a panic that
// step() turns into an error, after running the registered cleanups.
type benchTB struct {
	testing.TB
	name string

	mu       sync.Mutex
	cleanups []func()
}

type tbAbort struct{ msg string }

func (b *benchTB) Helper()          {}
func (b *benchTB) Name() string     { return b.name }
func (b *benchTB) Failed() bool     { return false }
func (b *benchTB) Cleanup(f func()) { b.mu.Lock(); b.cleanups = append(b.cleanups, f); b.mu.Unlock() }
func (b *benchTB) Fatal(args ...any) {
	panic(tbAbort{fmt.Sprint(args...)})
}
func (b *benchTB) Fatalf(format string, args ...any) {
	panic(tbAbort{fmt.Sprintf(format, args...)})
}
func (b *benchTB) Skip(args ...any) { panic(tbAbort{"skipped: " + fmt.Sprint(args...)}) }
func (b *benchTB) Skipf(format string, args ...any) {
	panic(tbAbort{"skipped: " + fmt.Sprintf(format, args...)})
}
func (b *benchTB) Error(args ...any) { fmt.Fprintln(os.Stderr, b.name+":", fmt.Sprint(args...)) }
func (b *benchTB) Errorf(format string, args ...any) {
	fmt.Fprintln(os.Stderr, b.name+":", fmt.Sprintf(format, args...))
}
func (b *benchTB) Log(args ...any) { logf("%s: %s", b.name, fmt.Sprint(args...)) }
func (b *benchTB) Logf(format string, args ...any) {
	logf("%s: %s", b.name, fmt.Sprintf(format, args...))
}
func (b *benchTB) TempDir() string {
	d, err := os.MkdirTemp("", "svcnet-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (b *benchTB) runCleanups() {
	b.mu.Lock()
	cs := b.cleanups
	b.cleanups = nil
	b.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Fprintf(os.Stderr, "%s: cleanup: %v\n", b.name, r)
				}
			}()
			cs[i]()
		}()
	}
}

// step runs f with a fresh benchTB; a Fatal inside f becomes the returned
// error. Cleanups run in reverse order whatever happens.
func step(name string, f func(tb *benchTB) error) (err error) {
	if interrupted.Load() {
		select {} // the signal handler cleans up and exits
	}
	tb := &benchTB{name: name}
	activeMu.Lock()
	active[tb] = true
	activeMu.Unlock()
	defer func() {
		activeMu.Lock()
		delete(active, tb)
		activeMu.Unlock()
	}()
	defer tb.runCleanups()
	defer func() {
		if r := recover(); r != nil {
			if a, ok := r.(tbAbort); ok {
				err = fmt.Errorf("%s: %s", name, a.msg)
				return
			}
			panic(r)
		}
	}()
	return f(tb)
}

var (
	activeMu sync.Mutex
	active   = map[*benchTB]bool{}
)

// interrupted is set once a signal started abortAll; main then waits for
// the handler to finish the cleanups and exit instead of carrying on.
var interrupted atomic.Bool

// abortAll runs the cleanups of every step in progress (on a signal).
func abortAll() {
	interrupted.Store(true)
	activeMu.Lock()
	tbs := make([]*benchTB, 0, len(active))
	for tb := range active {
		tbs = append(tbs, tb)
	}
	activeMu.Unlock()
	for _, tb := range tbs {
		tb.runCleanups()
	}
}
