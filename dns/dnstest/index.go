package dnstest

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/dns/index"
)

// SyncedIndex returns an index fed by a watcher of client that has synced,
// and the watcher's HasSynced. The watcher stops when the test ends.
func SyncedIndex(t testing.TB, client kubernetes.Interface, watchPods bool) (*index.Index, func() bool) {
	t.Helper()
	idx := index.New()
	w, err := index.NewWatcher(client, idx, watchPods, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go w.Run(ctx)
	if !w.WaitForSync(ctx, 60*time.Second) {
		t.Fatal("informers did not sync")
	}
	return idx, w.HasSynced
}
