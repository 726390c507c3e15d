package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// listCache holds every object under one key prefix (a resource's), decoded,
// as of a known etcd revision, and keeps it current with one etcd watch. A
// full LIST is then a walk over memory instead of reading and decoding the
// whole range from etcd: kube-apiserver serves LISTs from its watch cache the
// same way, and at 10,000 Services reading etcd made svcnet's LIST 1.4× slower
// than kube-apiserver's.
//
// Reads stay consistent: a LIST that asks for the newest data first reads
// etcd's current revision (one small request) and waits until the cache has
// applied every change up to it. The watch tells the cache how far it is, by
// its events and, when this resource has not changed, by the progress
// notifications the waiting LIST asks etcd for (kube-apiserver's consistent
// reads from cache do the same). A LIST that cannot be served from the cache
// in time (not yet primed, the watch broken, etcd slow to answer) reads etcd.
//
// Cached objects are shared by every reader and never modified: an update
// replaces the object.
type listCache struct {
	s    *Store
	root string

	// mu guards the fields below it.
	mu    sync.RWMutex
	items *btree.BTreeG[cachedObject]
	// rev is the etcd revision every change up to which is applied; 0 while
	// the cache is not primed.
	rev int64
	// advanced is closed (and replaced) whenever rev moves.
	advanced chan struct{}
	// progress asks etcd for a progress notification on the cache's watch;
	// nil while there is no watch.
	progress func()
	// stop ends the current watch (tests use it to make the cache start over).
	stop context.CancelFunc
	// progressOK: every etcd member sends progress notifications only once
	// the watch has caught up (see progressReliable); without it the cache
	// cannot tell it is current and consistent reads go to etcd.
	progressOK bool

	// served counts LISTs answered from memory (for tests).
	served atomic.Int64
}

type cachedObject struct {
	key string
	obj runtime.Object
	enc *Encoded
}

// Encoded keeps an object's encoded forms (the protobuf or JSON bytes it has
// as an item of a list), made the first time a LIST needs them and reused by
// every later LIST until the object changes. Encoding 10,000 Services took
// most of the API server's time in a LIST answered from memory.
type Encoded struct {
	mu    sync.Mutex
	forms map[string][]byte
}

// Get returns the form named by form, made with encode the first time. The
// bytes are shared: callers must not modify them.
func (e *Encoded) Get(form string, encode func() ([]byte, error)) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.forms[form]; ok {
		return b, nil
	}
	b, err := encode()
	if err != nil {
		return nil, err
	}
	if e.forms == nil {
		e.forms = map[string][]byte{}
	}
	e.forms[form] = b
	return b, nil
}

func lessKey(a, b cachedObject) bool { return a.key < b.key }

// cacheWait is how long a consistent LIST waits for the cache to catch up
// with etcd before it reads etcd instead (kube-apiserver's is 3 s too).
const cacheWait = 3 * time.Second

// cachePage is how many keys one priming read asks etcd for.
const cachePage = 5000

// EnableListCache makes the store answer read-only LISTs of keys under root
// (a resource's prefix, ending in a slash) from memory; see ListOptions.ReadOnly.
// The cache primes and starts watching at once, and stops when the store's
// etcd client is closed. Calling it again does nothing.
func (s *Store) EnableListCache(root string) {
	if s.cache != nil {
		return
	}
	c := &listCache{s: s, root: root, advanced: make(chan struct{})}
	s.cache = c
	go c.run(s.client.Ctx())
}

// run primes and watches until ctx is done, starting over after any failure.
func (c *listCache) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		err := c.watch(ctx)
		c.mu.Lock()
		c.rev, c.progress, c.items, c.stop = 0, nil, nil, nil
		c.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		slog.Warn("list cache restarts", "resource", c.s.resource.String(), "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// prime reads every object under root at one revision.
func (c *listCache) prime(ctx context.Context) (*btree.BTreeG[cachedObject], int64, error) {
	items := btree.NewG(32, lessKey)
	end := clientv3.GetPrefixRangeEnd(c.root)
	start, rev := c.root, int64(0)
	for {
		ops := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(cachePage)}
		if rev > 0 {
			ops = append(ops, clientv3.WithRev(rev))
		}
		resp, err := c.s.client.Get(ctx, start, ops...)
		if err != nil {
			return nil, 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		objs, err := c.s.decodeAll(resp.Kvs)
		if err != nil {
			return nil, 0, err
		}
		for i, kv := range resp.Kvs {
			items.ReplaceOrInsert(cachedObject{key: string(kv.Key), obj: objs[i], enc: &Encoded{}})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return items, rev, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch primes the cache and applies the changes etcd reports until the watch
// fails or ctx is done.
func (c *listCache) watch(ctx context.Context) error {
	progressOK := c.progressReliable(ctx)
	items, rev, err := c.prime(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	w := clientv3.NewWatcher(c.s.client)
	defer w.Close()
	// The watch starts at the primed revision itself (whose changes are
	// already in): etcd answers no progress request for a watch that starts
	// at a future revision.
	wch := w.Watch(wctx, c.root, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithProgressNotify())
	c.mu.Lock()
	c.items = items
	c.progressOK = progressOK
	c.progress = func() { _ = w.RequestProgress(wctx) }
	c.stop = cancel
	c.advance(rev)
	c.mu.Unlock()
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return fmt.Errorf("watch from revision %d: compacted at %d", rev, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if resp.IsProgressNotify() {
			if progressOK {
				c.mu.Lock()
				c.advance(resp.Header.Revision)
				c.mu.Unlock()
			}
			continue
		}
		// Decode before taking the lock; apply the whole response at once,
		// so a reader sees every change of a revision or none.
		changes := make([]cachedObject, 0, len(resp.Events))
		last := int64(0)
		for _, e := range resp.Events {
			if e.Kv.ModRevision <= rev {
				continue
			}
			ch := cachedObject{key: string(e.Kv.Key)}
			if e.Type == clientv3.EventTypePut {
				if ch.obj, err = c.s.decode(e.Kv.Value, e.Kv.ModRevision); err != nil {
					return err
				}
				ch.enc = &Encoded{}
			}
			changes = append(changes, ch)
			last = e.Kv.ModRevision
		}
		if last == 0 {
			continue
		}
		c.mu.Lock()
		for _, ch := range changes {
			if ch.obj == nil {
				c.items.Delete(ch)
			} else {
				c.items.ReplaceOrInsert(ch)
			}
		}
		c.advance(last)
		c.mu.Unlock()
		rev = last
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch closed")
}

// progressReliable reports whether every etcd member answers progress
// requests only for a watch that has caught up: etcd 3.4.31, 3.5.13, 3.6 and
// later. Older ones may report a revision whose events are still on their way
// (etcd issue 15220), so kube-apiserver does not serve consistent reads from
// its cache on them, and neither does svcnet (Debian 12's etcd is 3.4.23).
func (c *listCache) progressReliable(ctx context.Context) bool {
	eps := c.s.client.Endpoints()
	if len(eps) == 0 {
		return false
	}
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.s.client.Status(sctx, ep)
		cancel()
		if err != nil || !progressVersionOK(st.Version) {
			return false
		}
	}
	return true
}

// progressVersionOK is the version test of progressReliable.
func progressVersionOK(v string) bool {
	var major, minor, patch int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		return false
	}
	switch {
	case major != 3:
		return major > 3
	case minor == 4:
		return patch >= 31
	case minor == 5:
		return patch >= 13
	}
	return minor >= 6
}

// consistent reports whether the cache can answer reads that must be as new
// as etcd (see progressOK).
func (c *listCache) consistent() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.progressOK
}

// advance records that every change up to rev is applied. c.mu is held.
func (c *listCache) advance(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	close(c.advanced)
	c.advanced = make(chan struct{})
}

// covers reports whether a LIST of prefix can be answered from the cache.
func (c *listCache) covers(prefix string) bool {
	return c != nil && strings.HasPrefix(prefix, c.root)
}

// cacheQuery is one LIST asked of the cache.
type cacheQuery struct {
	// prefix is the key range; items are read from key start (prefix, or
	// where a continue token resumes) on.
	prefix, start string
	filter        Filter
	// limit is the most items returned (0: all); Continue is then set when
	// keys follow the last one, as a read of etcd sets it.
	limit int64
	// minRev: answer once every change up to it is applied (0: any primed
	// state). atRev: answer only if the cache is exactly at this revision
	// (a continue token's), without waiting.
	minRev, atRev int64
}

// list answers q, or reports false when the cache cannot within cacheWait;
// the caller reads etcd.
func (c *listCache) list(ctx context.Context, q cacheQuery) (res *ListResult, ok bool) {
	timer := time.NewTimer(cacheWait)
	defer timer.Stop()
	// Ask for progress now and then while waiting: etcd sends it only once
	// the watch has caught up, and a request may meet a watch being restarted.
	ask := time.NewTicker(250 * time.Millisecond)
	defer ask.Stop()
	asked := false
	c.mu.RLock()
	for c.rev == 0 || c.rev < q.minRev {
		if c.rev == 0 {
			c.mu.RUnlock()
			return nil, false
		}
		advanced, progress := c.advanced, c.progress
		c.mu.RUnlock()
		if !asked && progress != nil {
			progress()
			asked = true
		}
		select {
		case <-advanced:
		case <-ask.C:
			asked = false
		case <-timer.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
		c.mu.RLock()
	}
	defer c.mu.RUnlock()
	if q.atRev != 0 && c.rev != q.atRev {
		return nil, false
	}
	res = &ListResult{ResourceVersion: c.rev, Encoded: []*Encoded{}}
	last, more, rest := "", false, int64(0)
	c.items.AscendRange(cachedObject{key: q.start}, cachedObject{key: clientv3.GetPrefixRangeEnd(q.prefix)}, func(it cachedObject) bool {
		if q.limit > 0 && int64(len(res.Items)) == q.limit {
			// Unfiltered, count the rest (remainingItemCount).
			more, rest = true, rest+1
			return q.filter == nil
		}
		if q.filter == nil || q.filter(it.obj) {
			res.Items = append(res.Items, it.obj)
			res.Encoded = append(res.Encoded, it.enc)
			last = it.key
		}
		return true
	})
	if more {
		res.Continue = encodeContinue(c.rev, last+"\x00", q.prefix)
		if q.filter == nil {
			res.RemainingItemCount = &rest
		}
	}
	c.served.Add(1)
	return res, true
}
