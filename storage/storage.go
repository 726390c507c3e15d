// Package storage is svcnet's object store on etcd: the one place that turns
// API objects into etcd keys and values and back.
//
// Keys are laid out as kube-apiserver lays them out:
// /registry/<group>/<resource>/<namespace>/<name> (the group is omitted for the
// core group, and the namespace for cluster-scoped objects; the prefix is
// configurable). Values are encoded with the codec the caller gives (protobuf of
// the k8s.io/api types, or JSON for unstructured objects).
//
// An object's resourceVersion is the etcd ModRevision of its key, a list's is
// the etcd revision it was read at, and a watch is an etcd watch. A store may
// keep a list cache (EnableListCache): the decoded objects, kept current by one
// etcd watch, from which whole read-only LISTs are answered as consistently as
// from etcd. Reading or watching from a compacted revision fails with a 410
// Gone (reason Expired) status error, as kube-apiserver does. All errors are
// apierrors status errors so the API server can return them as they are.
package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Preconditions must hold for an update or delete to be applied. Empty fields
// are not checked.
type Preconditions struct {
	UID             *types.UID
	ResourceVersion *string
}

// Filter reports whether an object is of interest to a list or watch. A nil
// Filter accepts everything.
type Filter func(obj runtime.Object) bool

// ListOptions narrows a List.
type ListOptions struct {
	// Limit is the most items returned; 0 means all.
	Limit int64
	// Continue is the token from a previous page's ListMeta.Continue.
	Continue string
	// ResourceVersion, when set and ResourceVersionMatch is "Exact" (or, by
	// kube-apiserver's legacy rule, unset with a Limit and no Continue), lists
	// at that revision; otherwise the newest data is listed (from the list
	// cache: data at least that new, "0" any).
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Filter drops items after they are read; the limit counts kept items.
	Filter Filter
	// ReadOnly promises that the caller will not modify the items, so they may
	// be the objects the store's list cache holds (see EnableListCache): a
	// LIST that is not for an exact resourceVersion is then answered from
	// memory, as consistent as a read of etcd.
	ReadOnly bool
}

// UpdateFunc computes the new object from the current one. It must not change
// cur. Returning an error aborts the update with that error.
type UpdateFunc func(cur runtime.Object) (runtime.Object, error)

// Store is an object store for one resource (one codec and one object type)
// on a shared etcd client.
type Store struct {
	client   *clientv3.Client
	codec    runtime.Codec
	newFunc  func() runtime.Object
	resource schema.GroupResource
	cache    *listCache
}

// NewStore returns a store for one resource. newFunc returns an empty object
// of the stored type; codec encodes and decodes it.
func NewStore(client *clientv3.Client, resource schema.GroupResource, codec runtime.Codec, newFunc func() runtime.Object) *Store {
	return &Store{client: client, codec: codec, newFunc: newFunc, resource: resource}
}

// Client returns the etcd client the store uses.
func (s *Store) Client() *clientv3.Client { return s.client }

// Resource is the group and resource the store holds, used in error messages.
func (s *Store) Resource() schema.GroupResource { return s.resource }

// New returns an empty object of the stored type.
func (s *Store) New() runtime.Object { return s.newFunc() }

// KeyPrefix is the etcd key prefix of every object of a resource: it ends in a
// slash.
func KeyPrefix(gr schema.GroupResource) string {
	if gr.Group == "" {
		return "/registry/" + gr.Resource + "/"
	}
	return "/registry/" + gr.Group + "/" + gr.Resource + "/"
}

// Key is the etcd key of one object; namespace is empty for cluster-scoped
// objects.
func Key(gr schema.GroupResource, namespace, name string) string {
	if namespace == "" {
		return KeyPrefix(gr) + name
	}
	return KeyPrefix(gr) + namespace + "/" + name
}

func nameFromKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

func (s *Store) encode(obj runtime.Object) ([]byte, error) {
	// The resourceVersion is the etcd revision; it is never stored.
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	rv := acc.GetResourceVersion()
	acc.SetResourceVersion("")
	defer acc.SetResourceVersion(rv)
	data, err := runtime.Encode(s.codec, obj)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.resource, err)
	}
	return data, nil
}

func (s *Store) decode(data []byte, rev int64) (runtime.Object, error) {
	obj, _, err := s.codec.Decode(data, nil, s.newFunc())
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode stored %s: %w", s.resource, err))
	}
	if err := setRV(obj, rev); err != nil {
		return nil, err
	}
	return obj, nil
}

func setRV(obj runtime.Object, rev int64) error {
	if rev == 0 {
		return nil
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// ParseResourceVersion parses a resourceVersion; "" is 0. A malformed one is
// kube-apiserver's 400 "invalid resource version: ...".
func ParseResourceVersion(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 63)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: resourceVersion: Invalid value: %q: %v", rv, err))
	}
	return int64(n), nil
}

// etcdErr turns etcd client errors into status errors.
func (s *Store) etcdErr(err error, rev int64) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return NewExpired(rev)
	}
	if errors.Is(err, rpctypes.ErrFutureRev) {
		// kube-apiserver reports the current revision too (0 if unknown).
		cur, cerr := s.CurrentRevision(context.Background())
		if cerr != nil {
			cur = 0
		}
		return newTooLarge(rev, cur, 0)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	return apierrors.NewInternalError(fmt.Errorf("etcd: %w", err))
}

// NewExpired is the 410 Gone error for a compacted revision.
func NewExpired(rev int64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("The resourceVersion for the provided watch is too old."))
}

// Create stores obj under key unless the key exists (409 AlreadyExists). It
// returns the stored object with its resourceVersion set.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object) (runtime.Object, error) {
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Commit()
	if err != nil {
		return nil, s.etcdErr(err, 0)
	}
	if !resp.Succeeded {
		return nil, apierrors.NewAlreadyExists(s.resource, nameFromKey(key))
	}
	out := obj.DeepCopyObject()
	if err := setRV(out, resp.Header.Revision); err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns the object under key, or a 404 NotFound error.
func (s *Store) Get(ctx context.Context, key string) (runtime.Object, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, s.etcdErr(err, 0)
	}
	if len(resp.Kvs) == 0 {
		return nil, apierrors.NewNotFound(s.resource, nameFromKey(key))
	}
	return s.decode(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// GetCached returns the object under key as the list cache holds it (shared:
// the caller must not modify it), and reads etcd when the cache is not
// primed or does not hold the key. It is for hot read paths that tolerate a
// view a watch event behind, as kube-apiserver's authenticators read their
// informers' caches; a caller that finds the cached object stale by its own
// rules (a UID it did not expect) reads again with Get.
func (s *Store) GetCached(ctx context.Context, key string) (runtime.Object, error) {
	if c := s.cache; c.covers(key) {
		c.mu.RLock()
		it, found := cachedObject{}, false
		if c.rev != 0 {
			it, found = c.items.Get(cachedObject{key: key})
		}
		c.mu.RUnlock()
		if found {
			return it.obj, nil
		}
	}
	return s.Get(ctx, key)
}

type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

func encodeContinue(rev int64, next string, prefix string) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: rev, StartKey: strings.TrimPrefix(next, prefix)})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeContinue reads a continue token as kube-apiserver does, with its
// error texts (a 400 "invalid continue token: ..."). A token's negative
// revision means "the newest" (rev 0).
func decodeContinue(tok, prefix string) (rev int64, start string, err error) {
	invalid := func(detail string) error {
		return apierrors.NewBadRequest("invalid continue token: continue key is not valid" + detail)
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", invalid(": " + err.Error())
	}
	var c continueToken
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, "", invalid(": " + err.Error())
	}
	if c.APIVersion != "meta.k8s.io/v1" {
		return 0, "", invalid(": server does not recognize this encoded version " + c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return 0, "", invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	}
	if c.StartKey == "" {
		return 0, "", invalid(": encoded start key empty (version meta.k8s.io/v1)")
	}
	// The start key cannot climb out of the prefix: it must be clean.
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if path.Clean(key) != key {
		return 0, "", invalid(": " + c.StartKey)
	}
	return max(c.ResourceVersion, 0), prefix + key[1:], nil
}

// ListResult is one page of a list.
type ListResult struct {
	Items []runtime.Object
	// ResourceVersion is the etcd revision the list was read at.
	ResourceVersion int64
	// Continue is set when more items follow.
	Continue string
	// RemainingItemCount, set with Continue when the LIST has no filter, is
	// how many items follow (kube-apiserver's ListMeta.remainingItemCount).
	RemainingItemCount *int64
	// Encoded, when the list cache answered, holds each item's memoized
	// encodings (Encoded[i] is Items[i]'s); nil otherwise.
	Encoded []*Encoded
}

// List returns the objects whose keys start with prefix (which should end in
// a slash), in key order. With a limit, pages are read at one fixed revision
// and Continue resumes after the last item; a continue token whose revision has
// been compacted yields 410 Expired. An empty result is not an error.
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error) {
	if opts.Continue != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		if _, _, err := decodeContinue(opts.Continue, prefix); err != nil {
			return nil, err
		}
		return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	if opts.ResourceVersionMatch == "" && opts.Limit > 0 && opts.Continue == "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		// kube-apiserver's legacy rule: the first page of a paginated LIST
		// at a resourceVersion is read at exactly that revision.
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchExact
	}
	if opts.ReadOnly && opts.ResourceVersionMatch != metav1.ResourceVersionMatchExact && s.cache.covers(prefix) {
		if res, ok, err := s.listCached(ctx, prefix, opts); ok || err != nil {
			return res, err
		}
	}
	var rev int64
	start := prefix
	if opts.Continue != "" {
		var err error
		rev, start, err = decodeContinue(opts.Continue, prefix)
		if err != nil {
			return nil, err
		}
	} else if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact {
		var err error
		if rev, err = ParseResourceVersion(opts.ResourceVersion); err != nil {
			return nil, err
		}
	}
	end := clientv3.GetPrefixRangeEnd(prefix)
	res := &ListResult{}
	batch := int64(0)
	if opts.Limit > 0 {
		batch = opts.Limit
		if opts.Filter != nil && batch < 100 {
			batch = 100
		}
	}
	for {
		ops := []clientv3.OpOption{clientv3.WithRange(end)}
		if batch > 0 {
			ops = append(ops, clientv3.WithLimit(batch+1))
		}
		if rev > 0 {
			ops = append(ops, clientv3.WithRev(rev))
		}
		resp, err := s.client.Get(ctx, start, ops...)
		if err != nil {
			return nil, s.etcdErr(err, rev)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs := resp.Kvs
		more := batch > 0 && int64(len(kvs)) > batch
		if more {
			kvs = kvs[:batch]
		}
		objs, err := s.decodeAll(kvs)
		if err != nil {
			return nil, err
		}
		for i, kv := range kvs {
			obj := objs[i]
			if opts.Filter != nil && !opts.Filter(obj) {
				continue
			}
			res.Items = append(res.Items, obj)
			if opts.Limit > 0 && int64(len(res.Items)) == opts.Limit {
				if i < len(kvs)-1 || more {
					res.Continue = encodeContinue(rev, string(kv.Key)+"\x00", prefix)
					if opts.Filter == nil {
						// Unfiltered, this is the only read: etcd counted
						// the whole rest of the range.
						n := resp.Count - int64(i+1)
						res.RemainingItemCount = &n
					}
				}
				res.ResourceVersion = rev
				return res, nil
			}
		}
		if !more {
			break
		}
		start = string(kvs[len(kvs)-1].Key) + "\x00"
	}
	res.ResourceVersion = rev
	return res, nil
}

// listCached answers a LIST from the list cache: resourceVersion "" asks for
// the newest data (etcd's current revision), "0" for any, and a number for
// data at least that new. A page that continues a paginated LIST comes from
// the cache only while it is still at the token's revision; otherwise etcd,
// which keeps old revisions, answers it. ok is false when the cache could not
// answer.
func (s *Store) listCached(ctx context.Context, prefix string, opts ListOptions) (*ListResult, bool, error) {
	q := cacheQuery{prefix: prefix, start: prefix, filter: opts.Filter, limit: opts.Limit}
	if opts.ResourceVersion != "0" && opts.Continue == "" && !s.cache.consistent() {
		// This etcd cannot tell the cache it is current.
		return nil, false, nil
	}
	switch {
	case opts.Continue != "":
		rev, start, err := decodeContinue(opts.Continue, prefix)
		if err != nil {
			return nil, false, err
		}
		q.atRev, q.start = rev, start
		if rev == 0 {
			// A token for "the newest": a consistent read.
			if !s.cache.consistent() {
				return nil, false, nil
			}
			if q.minRev, err = s.CurrentRevision(ctx); err != nil {
				return nil, false, err
			}
		}
	case opts.ResourceVersion == "0":
	case opts.ResourceVersion == "":
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			return nil, false, err
		}
		q.minRev = rev
	default:
		rev, err := ParseResourceVersion(opts.ResourceVersion)
		if err != nil {
			return nil, false, err
		}
		q.minRev = rev
	}
	res, ok := s.cache.list(ctx, q)
	if !ok && q.minRev > 0 && opts.ResourceVersion != "" {
		// A revision etcd has not reached is an error, after the wait, as
		// kube-apiserver's watch cache answers it.
		if cur, err := s.CurrentRevision(ctx); err == nil && q.minRev > cur {
			return nil, false, newTooLarge(q.minRev, cur, 1)
		}
	}
	return res, ok, nil
}

// newTooLarge is kube-apiserver's 504 for a resourceVersion newer than the
// store: reason Timeout, retry after retry seconds (its watch cache says 1,
// its etcd reads 0), cause ResourceVersionTooLarge.
func newTooLarge(want, cur int64, retry int) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, cur), retry)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// decodeAll decodes a range of stored objects, in parallel when it is large
// enough to pay for it (a LIST of 10,000 Services spent most of its time
// decoding on one core).
func (s *Store) decodeAll(kvs []*mvccpb.KeyValue) ([]runtime.Object, error) {
	objs := make([]runtime.Object, len(kvs))
	workers := min(goruntime.GOMAXPROCS(0), len(kvs)/decodePerWorker)
	if workers <= 1 {
		for i, kv := range kvs {
			obj, err := s.decode(kv.Value, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			objs[i] = obj
		}
		return objs, nil
	}
	errs := make([]error, workers)
	var wg sync.WaitGroup
	per := (len(kvs) + workers - 1) / workers
	for w := range workers {
		lo, hi := w*per, min((w+1)*per, len(kvs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				obj, err := s.decode(kvs[i].Value, kvs[i].ModRevision)
				if err != nil {
					errs[w] = err
					return
				}
				objs[i] = obj
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return objs, nil
}

// decodePerWorker is the fewest objects a decoding goroutine is given.
const decodePerWorker = 512

// CurrentRevision is the newest etcd revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	resp, err := s.client.Get(ctx, "/registry/\x00-revision-probe", clientv3.WithCountOnly())
	if err != nil {
		return 0, s.etcdErr(err, 0)
	}
	return resp.Header.Revision, nil
}

func checkPreconditions(p *Preconditions, obj runtime.Object, gr schema.GroupResource, key string) error {
	if p == nil {
		return nil
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if p.UID != nil && *p.UID != acc.GetUID() {
		return apierrors.NewConflict(gr, nameFromKey(key), fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, acc.GetUID()))
	}
	if p.ResourceVersion != nil && *p.ResourceVersion != acc.GetResourceVersion() {
		return apierrors.NewConflict(gr, nameFromKey(key), fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, acc.GetResourceVersion()))
	}
	return nil
}

// GuaranteedUpdate reads the object under key, checks preconditions, computes
// the new object with tryUpdate and writes it if the key has not changed in
// between; on a concurrent change it rereads and calls tryUpdate again. If the
// key does not exist, tryUpdate is called with nil only when ignoreNotFound is
// set (an upsert); otherwise the result is 404. If tryUpdate returns an object
// equal in encoding to the stored one, nothing is written and the stored
// object is returned.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, ignoreNotFound bool, precond *Preconditions, tryUpdate UpdateFunc) (runtime.Object, error) {
	for {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return nil, s.etcdErr(err, 0)
		}
		var cur runtime.Object
		var curRev int64
		var curData []byte
		if len(resp.Kvs) == 0 {
			if !ignoreNotFound {
				return nil, apierrors.NewNotFound(s.resource, nameFromKey(key))
			}
		} else {
			curRev = resp.Kvs[0].ModRevision
			curData = resp.Kvs[0].Value
			if cur, err = s.decode(curData, curRev); err != nil {
				return nil, err
			}
			if err := checkPreconditions(precond, cur, s.resource, key); err != nil {
				return nil, err
			}
		}
		var in runtime.Object
		if cur != nil {
			in = cur.DeepCopyObject()
		}
		next, err := tryUpdate(in)
		if err != nil {
			return nil, err
		}
		data, err := s.encode(next)
		if err != nil {
			return nil, err
		}
		if cur != nil && string(data) == string(curData) {
			return cur, nil
		}
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", curRev)).
			Then(clientv3.OpPut(key, string(data))).
			Commit()
		if err != nil {
			return nil, s.etcdErr(err, 0)
		}
		if !txn.Succeeded {
			continue
		}
		out := next.DeepCopyObject()
		if err := setRV(out, txn.Header.Revision); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// Delete removes the object under key if the preconditions hold, and returns
// it as it was last stored, with the resourceVersion of the deletion. A
// missing key is 404. validate, when not nil, is called with the current
// object and may veto the delete by returning an error.
func (s *Store) Delete(ctx context.Context, key string, precond *Preconditions, validate func(cur runtime.Object) error) (runtime.Object, error) {
	for {
		resp, err := s.client.Get(ctx, key)
		if err != nil {
			return nil, s.etcdErr(err, 0)
		}
		if len(resp.Kvs) == 0 {
			return nil, apierrors.NewNotFound(s.resource, nameFromKey(key))
		}
		kv := resp.Kvs[0]
		cur, err := s.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		if err := checkPreconditions(precond, cur, s.resource, key); err != nil {
			return nil, err
		}
		if validate != nil {
			if err := validate(cur); err != nil {
				return nil, err
			}
		}
		txn, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return nil, s.etcdErr(err, 0)
		}
		if !txn.Succeeded {
			continue
		}
		if err := setRV(cur, txn.Header.Revision); err != nil {
			return nil, err
		}
		return cur, nil
	}
}

// Event is one change seen by a watch. For Deleted, Object is the object as
// it was before deletion, with the resourceVersion of the deletion.
type Event struct {
	Type   EventType
	Object runtime.Object
	// Revision is the etcd revision of the change (of a Bookmark: the revision
	// the watch has caught up to).
	Revision int64
}

// EventType is the kind of a watch Event.
type EventType string

// The event types; they match k8s.io/apimachinery/pkg/watch.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	Bookmark EventType = "BOOKMARK"
	Error    EventType = "ERROR"
)

func isCompacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

var _ = mvccpb.PUT
