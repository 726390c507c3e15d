// Package registry is the generic, storage-backed registry behind every API
// resource. Each resource plugs in a Strategy (defaulting, server-owned
// fields, validation) and, where it needs one, an allocation hook; the
// generic code handles storage, optimistic concurrency, dry-run, watches and
// errors identically for all of them.
//
// Order of a create, as in Kubernetes' generic registry:
//
//	decode → Default → BeginCreate (allocation; may fail) → PrepareForCreate →
//	Validate → store → Transaction.Commit   (Revert on any failure after BeginCreate)
//
// and of an update:
//
//	decode → Default → BeginUpdate(new, old) → PrepareForUpdate →
//	ValidateUpdate → store (compare-and-swap) → Commit   (Revert on failure)
//
// Delete runs the store's delete, then AfterDelete with the deleted object.
package registry

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Strategy is what one resource adds to the generic registry. Objects are
// the versioned k8s.io/api types (for example *corev1.Service).
type Strategy interface {
	// NamespaceScoped reports whether objects live in a namespace.
	NamespaceScoped() bool
	// Default fills in the defaults Kubernetes applies when it decodes the
	// object (for example a Service port's protocol TCP). It is applied to
	// every object written, on create and on update.
	Default(obj runtime.Object)
	// PrepareForCreate clears fields a client may not set on create (status,
	// for resources with a status subresource) and sets server-owned ones.
	PrepareForCreate(ctx context.Context, obj runtime.Object)
	// PrepareForUpdate does the same on update; old is the stored object.
	// For the main resource it typically keeps old's status; for the status
	// subresource the strategy returned by StatusStrategy keeps old's spec.
	PrepareForUpdate(ctx context.Context, obj, old runtime.Object)
	// Validate returns the field errors of a new object. An empty list accepts it.
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	// ValidateUpdate returns the field errors of an update from old to obj,
	// including the rules about what may not change.
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// Transaction is an allocation made before an object is stored: Commit when
// the write succeeded, Revert when the request failed afterwards. Both must
// be safe to call on a nil-effect transaction.
type Transaction interface {
	Commit()
	Revert()
}

// CreateAllocator is implemented by strategies that allocate resources (IPs,
// ports) for a new object. BeginCreate may change obj (fill in what it
// allocated); an error it returns is reported to the client as is (it should
// be an apierrors status error, usually Invalid with field causes).
type CreateAllocator interface {
	BeginCreate(ctx context.Context, obj runtime.Object, dryRun bool) (Transaction, error)
}

// UpdateAllocator is the update counterpart of CreateAllocator: it allocates
// what the new object needs and old did not have, and arranges for what old
// had and obj no longer needs to be released on Commit.
type UpdateAllocator interface {
	BeginUpdate(ctx context.Context, obj, old runtime.Object, dryRun bool) (Transaction, error)
}

// DeleteReleaser is implemented by strategies that must release what a
// deleted object held. It runs after the object is gone from storage.
type DeleteReleaser interface {
	AfterDelete(ctx context.Context, obj runtime.Object, dryRun bool)
}

// NopTransaction is a Transaction that does nothing.
type NopTransaction struct{}

func (NopTransaction) Commit() {}
func (NopTransaction) Revert() {}

// CreateWarner is implemented by strategies whose kind warns about what a
// created object holds, as kube-apiserver's WarningsOnCreate (for example
// an Ingress that names its class with the deprecated annotation). The API
// server sends the warnings as Warning headers of a successful create.
type CreateWarner interface {
	WarningsOnCreate(ctx context.Context, obj runtime.Object) []string
}

// UpdateWarner is CreateWarner's counterpart for updates (and patches and
// server-side applies, which are updates), as kube-apiserver's
// WarningsOnUpdate: obj is the prepared new object, old the stored one.
type UpdateWarner interface {
	WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string
}
