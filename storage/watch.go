package storage

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchOptions tunes a Watch.
type WatchOptions struct {
	// Filter selects objects; an update that makes an object match is reported
	// as Added, one that makes it stop matching as Deleted, as kube-apiserver does.
	Filter Filter
	// ProgressInterval, when positive, asks etcd for progress this often and
	// reports each answer as a Bookmark event.
	ProgressInterval time.Duration
}

// Watch reports every change under prefix after revision fromRev (0: after
// the current revision) until ctx is done. The channel is closed at the end;
// if the watch fails (for example because fromRev was compacted: 410 Expired)
// the last event before close is an Error event whose Object is the
// *metav1.Status. Each Watch uses its own etcd watch stream.
func (s *Store) Watch(ctx context.Context, prefix string, fromRev int64, opts WatchOptions) (<-chan Event, error) {
	if fromRev == 0 {
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			return nil, err
		}
		fromRev = rev
	}
	ctx, cancel := context.WithCancel(ctx)
	w := clientv3.NewWatcher(s.client)
	// RequestProgress must use the watch's own context: the client keys its
	// gRPC streams by the context's metadata.
	wctx := clientv3.WithRequireLeader(ctx)
	// The watch starts at fromRev itself and events at fromRev are dropped
	// below: etcd does not answer progress requests for a watch that starts
	// at a future revision, so starting at fromRev+1 on an idle store would
	// get no bookmarks until the next write.
	wch := w.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRev), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	out := make(chan Event, 100)
	go func() {
		defer close(out)
		defer w.Close()
		defer cancel()
		var tick <-chan time.Time
		if opts.ProgressInterval > 0 {
			t := time.NewTicker(opts.ProgressInterval)
			defer t.Stop()
			tick = t.C
		}
		send := func(ev Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		fail := func(err error) {
			st, ok := err.(apierrors.APIStatus)
			if !ok {
				st = apierrors.NewInternalError(err)
			}
			status := st.Status()
			send(Event{Type: Error, Object: &status})
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
				_ = w.RequestProgress(wctx)
			case resp, ok := <-wch:
				if !ok {
					return
				}
				if resp.CompactRevision != 0 {
					fail(NewExpired(fromRev))
					return
				}
				if err := resp.Err(); err != nil {
					if ctx.Err() != nil {
						return
					}
					fail(s.etcdErr(err, fromRev))
					return
				}
				if resp.IsProgressNotify() {
					if opts.ProgressInterval > 0 && !send(Event{Type: Bookmark, Revision: resp.Header.Revision}) {
						return
					}
					continue
				}
				for _, e := range resp.Events {
					if e.Kv.ModRevision <= fromRev {
						continue
					}
					ev, ok, err := s.translate(e, opts.Filter)
					if err != nil {
						fail(err)
						return
					}
					if ok && !send(ev) {
						return
					}
				}
			}
		}
	}()
	return out, nil
}

func (s *Store) translate(e *clientv3.Event, filter Filter) (Event, bool, error) {
	rev := e.Kv.ModRevision
	var cur, prev runtime.Object
	var err error
	if e.Type == clientv3.EventTypePut {
		if cur, err = s.decode(e.Kv.Value, rev); err != nil {
			return Event{}, false, err
		}
	}
	if e.PrevKv != nil {
		if prev, err = s.decode(e.PrevKv.Value, rev); err != nil {
			return Event{}, false, err
		}
	}
	match := func(o runtime.Object) bool { return o != nil && (filter == nil || filter(o)) }
	curOK, prevOK := match(cur), match(prev)
	switch {
	case e.Type == clientv3.EventTypeDelete:
		if prev == nil || !prevOK {
			return Event{}, false, nil
		}
		return Event{Type: Deleted, Object: prev, Revision: rev}, true, nil
	case curOK && prevOK:
		return Event{Type: Modified, Object: cur, Revision: rev}, true, nil
	case curOK:
		return Event{Type: Added, Object: cur, Revision: rev}, true, nil
	case prevOK:
		// The object left the filter: report it as deleted, in its new state.
		return Event{Type: Deleted, Object: cur, Revision: rev}, true, nil
	}
	return Event{}, false, nil
}
