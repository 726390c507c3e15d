package allocator

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store holds one serialized allocation bitmap and changes it only by
// compare-and-swap.
type Store interface {
	// Get returns the current snapshot and its revision. A store that was
	// never written returns (nil, 0, nil).
	Get(ctx context.Context) (snapshot []byte, rev int64, err error)
	// CAS writes snapshot if the stored revision is still rev (0 = "does not
	// exist yet"). ok is false, with a nil error, when someone else wrote first.
	CAS(ctx context.Context, rev int64, snapshot []byte) (ok bool, err error)
}

// RevisionStore is an optional extension of Store: CASRev is CAS that also
// returns the revision of the value it wrote, so the writer can keep its
// copy and skip the read before its next change (one round trip instead of
// two while no one else writes).
type RevisionStore interface {
	Store
	CASRev(ctx context.Context, rev int64, snapshot []byte) (newRev int64, ok bool, err error)
}

// Default etcd keys of the two range allocations.
const (
	KeyServiceIPs       = "/registry/ranges/serviceips"
	KeyServiceNodePorts = "/registry/ranges/servicenodeports"
)

// EtcdStore is a Store on one etcd key. The revision is the key's
// ModRevision, so any writer through any client invalidates older reads.
type EtcdStore struct {
	Client *clientv3.Client
	Key    string
}

var _ RevisionStore = (*EtcdStore)(nil)

// NewEtcdStore returns a Store on key (for example KeyServiceIPs, or
// KeyServiceIPs+"-ipv6" for a second family).
func NewEtcdStore(c *clientv3.Client, key string) *EtcdStore {
	return &EtcdStore{Client: c, Key: key}
}

// Get reads the key.
func (s *EtcdStore) Get(ctx context.Context) ([]byte, int64, error) {
	resp, err := s.Client.Get(ctx, s.Key)
	if err != nil {
		return nil, 0, fmt.Errorf("read range allocation %s: %w", s.Key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// CAS writes the key in a transaction guarded by its ModRevision (or by its
// absence when rev is 0).
func (s *EtcdStore) CAS(ctx context.Context, rev int64, snapshot []byte) (bool, error) {
	_, ok, err := s.CASRev(ctx, rev, snapshot)
	return ok, err
}

// CASRev is CAS returning the new ModRevision of the key.
func (s *EtcdStore) CASRev(ctx context.Context, rev int64, snapshot []byte) (int64, bool, error) {
	var cmp clientv3.Cmp
	if rev == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(s.Key), "=", 0)
	} else {
		cmp = clientv3.Compare(clientv3.ModRevision(s.Key), "=", rev)
	}
	resp, err := s.Client.Txn(ctx).If(cmp).Then(clientv3.OpPut(s.Key, string(snapshot))).Commit()
	if err != nil {
		return 0, false, fmt.Errorf("write range allocation %s: %w", s.Key, err)
	}
	return resp.Header.Revision, resp.Succeeded, nil
}

// MemoryStore is an in-process Store for tests; safe for concurrent use.
type MemoryStore struct {
	mu   sync.Mutex
	data []byte
	rev  int64
}

var _ RevisionStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

// Get returns a copy of the stored snapshot.
func (m *MemoryStore) Get(context.Context) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...), m.rev, nil
}

// CAS stores snapshot if rev is current.
func (m *MemoryStore) CAS(ctx context.Context, rev int64, snapshot []byte) (bool, error) {
	_, ok, err := m.CASRev(ctx, rev, snapshot)
	return ok, err
}

// CASRev is CAS returning the new revision.
func (m *MemoryStore) CASRev(_ context.Context, rev int64, snapshot []byte) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev != m.rev {
		return 0, false, nil
	}
	m.data = append([]byte(nil), snapshot...)
	m.rev++
	return m.rev, true, nil
}
