package registry

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcnet/svcnet/storage"
)

// NameValidator is implemented by strategies whose object names follow a rule
// other than a DNS subdomain (services and namespaces: DNS labels). It returns
// the problems with name, as apimachinery's ValidateNameFunc does.
type NameValidator interface {
	ValidateName(name string, prefix bool) []string
}

// StatusStrategist is implemented by strategies of resources with a status
// subresource: the returned strategy handles writes to /status.
type StatusStrategist interface {
	StatusStrategy() Strategy
}

// FieldsSetter is implemented by strategies whose objects support field
// selectors beyond metadata.name and metadata.namespace. The returned set
// must include those two.
type FieldsSetter interface {
	FieldsSet(obj runtime.Object) map[string]string
}

// SpecFinalizer is implemented by strategies of kinds that keep finalizers
// outside metadata: a namespace's spec.finalizers, which its finalize
// subresource removes. Such an object is only marked on delete (MarkDeleting
// then sets what marking means for the kind: a namespace turns Terminating)
// and is removed once Finalized reports true and metadata.finalizers is
// empty, by the write that empties the last list, as kube-apiserver's
// namespace registry does.
type SpecFinalizer interface {
	Finalized(obj runtime.Object) bool
	MarkDeleting(obj runtime.Object)
}

// FinalizeStrategist is implemented by strategies of resources with a
// finalize subresource (namespaces): the returned strategy handles writes
// to /finalize.
type FinalizeStrategist interface {
	FinalizeStrategy() Strategy
}

// GracefulDeleter is implemented by strategies of objects deleted in two
// steps (pods bound to a node): it returns the grace period to apply (and
// true) when the object must only be marked for deletion.
type GracefulDeleter interface {
	GracePeriod(obj runtime.Object, requested *int64) (int64, bool)
}

// ResourceInfo describes one API resource.
type ResourceInfo struct {
	GVR        schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// Singular name and short names, for discovery.
	Singular   string
	ShortNames []string
	Categories []string
	// Generation says whether metadata.generation is maintained (1 on
	// create, +1 on each spec change), as Kubernetes does for workloads and
	// pods but not, for example, for Services or ConfigMaps.
	Generation bool
	// Status and Scale report the subresources.
	Status bool
	Scale  bool
	// New and NewList return empty objects; for unstructured resources they
	// return *unstructured.Unstructured(List) with apiVersion/kind set.
	New     func() runtime.Object
	NewList func() runtime.Object
}

// GVK is the resource's kind.
func (r *ResourceInfo) GVK() schema.GroupVersionKind {
	return r.GVR.GroupVersion().WithKind(r.Kind)
}

// GroupResource is the resource's group and resource.
func (r *ResourceInfo) GroupResource() schema.GroupResource { return r.GVR.GroupResource() }

// Store is the generic registry of one resource: it runs the strategy around
// every storage operation. Methods return apierrors status errors.
type Store struct {
	Info     ResourceInfo
	Strategy Strategy
	Storage  *storage.Store
	// FieldManagers maintain managedFields; keyed by subresource ("" for the
	// main resource). Nil disables managed fields.
	FieldManagers map[string]*managedfields.FieldManager
	// NamespaceExists is consulted before creating a namespaced object; it
	// returns a NotFound error for a missing namespace and Forbidden for one
	// being terminated.
	NamespaceExists func(ctx context.Context, ns string, gr schema.GroupResource, name string) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// KeyResource, when set, is the resource whose etcd keys hold the
	// objects: a second version of a kind served from the same stored
	// objects (events.k8s.io/v1 Events are /registry/events/...).
	KeyResource schema.GroupResource
}

func (s *Store) keyResource() schema.GroupResource {
	if s.KeyResource.Resource != "" {
		return s.KeyResource
	}
	return s.Info.GroupResource()
}

func (s *Store) now() metav1.Time {
	if s.Now != nil {
		return metav1.NewTime(s.Now().Truncate(time.Second))
	}
	return metav1.NewTime(time.Now().Truncate(time.Second))
}

// Key is the storage key of an object.
func (s *Store) Key(ns, name string) string {
	if !s.Info.Namespaced {
		ns = ""
	}
	return storage.Key(s.keyResource(), ns, name)
}

// Prefix is the storage prefix of a namespace's objects (all objects for "").
func (s *Store) Prefix(ns string) string {
	p := storage.KeyPrefix(s.keyResource())
	if s.Info.Namespaced && ns != "" {
		p += ns + "/"
	}
	return p
}

func (s *Store) strategyFor(sub string) Strategy {
	switch sub {
	case "status":
		if ss, ok := s.Strategy.(StatusStrategist); ok {
			return ss.StatusStrategy()
		}
	case "finalize":
		if fs, ok := s.Strategy.(FinalizeStrategist); ok {
			return fs.FinalizeStrategy()
		}
	}
	return s.Strategy
}

// HasSubresource reports whether the resource serves subresource sub
// through Update ("status" or "finalize").
func (s *Store) HasSubresource(sub string) bool {
	switch sub {
	case "status":
		return s.Info.Status
	case "finalize":
		_, ok := s.Strategy.(FinalizeStrategist)
		return ok
	}
	return false
}

// finalized reports whether obj has no finalizers outside metadata left.
func (s *Store) finalized(obj runtime.Object) bool {
	if sf, ok := s.Strategy.(SpecFinalizer); ok {
		return sf.Finalized(obj)
	}
	return true
}

// DryRunResult is returned (as an error) by tryUpdate functions to stop a
// dry-run write after computing its result.
type dryRunResult struct{ obj runtime.Object }

func (d *dryRunResult) Error() string { return "dry run" }

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

func generateName(base string) string {
	const maxGeneratedNameLength = 63 - 5
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	b := make([]byte, 5)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(nameChars))))
		b[i] = nameChars[n.Int64()]
	}
	return base + string(b)
}

// WriteOptions are the request options of a create or update.
type WriteOptions struct {
	DryRun bool
	// FieldManager names the writer in managedFields.
	FieldManager string
	// Subresource is "" or "status".
	Subresource string
	// SkipManagedFields leaves managedFields to the caller (server-side
	// apply computes them itself).
	SkipManagedFields bool
	// Warnings, when set, receives the strategy's warnings for the write
	// that was made (registry.UpdateWarner; registry.CreateWarner when an
	// update creates), as kube-apiserver computes them after validation:
	// the API server returns them as Warning headers.
	Warnings *[]string
}

// validatePathSegment is the name rule the generic registry of
// kube-apiserver applies to every object: a name must be usable as a URL
// path segment.
func validatePathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// ValidateCreate returns the field errors of a new object in the order and
// with the grouping of kube-apiserver's rest.ValidateCreate: the strategy's
// errors alone if there are any, otherwise the generic ObjectMeta errors
// (path-segment name rule), then the declarative-validation step
// (DeclarativeValidator). For strategies that do not check ObjectMeta
// themselves (they implement NameValidator), the ObjectMeta errors (with the
// strategy's name rule) come first in the strategy's list, as Kubernetes'
// ValidateXxx functions put them. Errors are neither sorted nor deduplicated.
// It is exported so that the differential check (hack/apidiff) runs exactly
// what the store runs.
func ValidateCreate(ctx context.Context, st Strategy, namespaced bool, obj runtime.Object) field.ErrorList {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	metaPath := field.NewPath("metadata")
	var errs field.ErrorList
	if nv, ok := st.(NameValidator); ok {
		errs = append(errs, metavalidation.ValidateObjectMetaAccessor(acc, namespaced, nv.ValidateName, metaPath)...)
	}
	errs = append(errs, st.Validate(ctx, obj)...)
	if len(errs) == 0 {
		errs = metavalidation.ValidateObjectMetaAccessor(acc, namespaced, validatePathSegment, metaPath)
	}
	return mergeDeclarative(ctx, st, operation.Create, obj, nil, errs)
}

// ValidateUpdate returns the field errors of an update as kube-apiserver's
// rest.ValidateUpdate does: the common ObjectMeta checks (path-segment name
// rule, then the update rules such as immutable name and uid) followed by
// the strategy's ValidateUpdate errors, in one list. A strategy that checks
// ObjectMeta itself may repeat an error of the common checks; Kubernetes
// reports both unless the strategy is a DeclarativeValidator (whose step
// removes repeated errors), and so does svcnet.
func ValidateUpdate(ctx context.Context, st Strategy, namespaced bool, obj, old runtime.Object) field.ErrorList {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	oacc, err := meta.Accessor(old)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("metadata"), err)}
	}
	metaPath := field.NewPath("metadata")
	errs := metavalidation.ValidateObjectMetaAccessor(acc, namespaced, validatePathSegment, metaPath)
	errs = append(errs, metavalidation.ValidateObjectMetaAccessorUpdate(acc, oacc, metaPath)...)
	errs = append(errs, st.ValidateUpdate(ctx, obj, old)...)
	return mergeDeclarative(ctx, st, operation.Update, obj, old, errs)
}

func (s *Store) invalid(obj runtime.Object, errs field.ErrorList) error {
	name := ""
	if acc, err := meta.Accessor(obj); err == nil {
		name = acc.GetName()
	}
	return apierrors.NewInvalid(s.Info.GVK().GroupKind(), name, errs)
}

// Create stores a new object in namespace ns (ignored for cluster-scoped
// resources): it fills generateName, uid, creationTimestamp and generation,
// runs the strategy (Default, BeginCreate, PrepareForCreate, Validate) and
// writes the object unless DryRun.
func (s *Store) Create(ctx context.Context, ns string, obj runtime.Object, opts WriteOptions) (runtime.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if s.Info.Namespaced {
		if acc.GetNamespace() == "" {
			acc.SetNamespace(ns)
		} else if acc.GetNamespace() != ns {
			return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
	} else {
		acc.SetNamespace("")
	}
	if acc.GetName() == "" && acc.GetGenerateName() != "" {
		acc.SetName(generateName(acc.GetGenerateName()))
	}
	if acc.GetName() == "" {
		return nil, s.invalid(obj, field.ErrorList{field.Required(field.NewPath("metadata", "name"), "name or generateName is required")})
	}
	if s.Info.Namespaced && s.NamespaceExists != nil {
		if err := s.NamespaceExists(ctx, ns, s.Info.GroupResource(), acc.GetName()); err != nil {
			return nil, err
		}
	}
	obj, tx, err := s.prepareCreate(ctx, s.Strategy, obj, "", opts)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		tx.Revert()
		return obj, nil
	}
	out, err := s.Storage.Create(ctx, s.Key(ns, acc.GetName()), obj)
	if err != nil {
		tx.Revert()
		return nil, err
	}
	tx.Commit()
	return out, nil
}

// prepareCreate is the one create recipe, used by Create and by Update's
// create branch (PUT or apply of a missing object): Default, BeginCreate
// (allocation), PrepareForCreate, the server-owned metadata, managedFields
// (of the subresource's field manager), then validation. On success the
// returned transaction (never nil) must be committed once the object is
// stored, or reverted; on error it has been reverted already.
func (s *Store) prepareCreate(ctx context.Context, st Strategy, obj runtime.Object, sub string, opts WriteOptions) (runtime.Object, Transaction, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	st.Default(obj)
	var tx Transaction = NopTransaction{}
	if a, ok := st.(CreateAllocator); ok {
		t, err := a.BeginCreate(ctx, obj, opts.DryRun)
		if err != nil {
			return nil, nil, err
		}
		if t != nil {
			tx = t
		}
	}
	st.PrepareForCreate(ctx, obj)
	acc.SetUID(uuid.NewUUID())
	acc.SetCreationTimestamp(s.now())
	acc.SetResourceVersion("")
	acc.SetDeletionTimestamp(nil)
	acc.SetDeletionGracePeriodSeconds(nil)
	acc.SetGeneration(0)
	if s.Info.Generation {
		acc.SetGeneration(1)
	}
	if fm := s.FieldManagers[sub]; fm != nil && !opts.SkipManagedFields {
		acc.SetManagedFields(nil)
		obj = fm.UpdateNoErrors(s.Info.New(), obj, opts.FieldManager)
	}
	if errs := ValidateCreate(ctx, st, s.Info.Namespaced, obj); len(errs) > 0 {
		tx.Revert()
		return nil, nil, s.invalid(obj, errs)
	}
	return obj, tx, nil
}

// Get returns one object.
func (s *Store) Get(ctx context.Context, ns, name string) (runtime.Object, error) {
	return s.Storage.Get(ctx, s.Key(ns, name))
}

// GetCached returns one object from the resource's list cache when it holds
// it (shared: do not modify), else from etcd; see storage.Store.GetCached.
func (s *Store) GetCached(ctx context.Context, ns, name string) (runtime.Object, error) {
	return s.Storage.GetCached(ctx, s.Key(ns, name))
}

// conflictErr is Kubernetes' message for a stale resourceVersion.
func (s *Store) conflictErr(name string) error {
	return apierrors.NewConflict(s.Info.GroupResource(), name, errors.New("the object has been modified; please apply your changes to the latest version and try again"))
}

// UpdateFunc computes the object a request wants from the stored one (nil when
// it does not exist and the update may create).
type UpdateFunc func(ctx context.Context, cur runtime.Object) (runtime.Object, error)

// Update replaces object ns/name with what compute returns, with optimistic
// concurrency: if the computed object carries a resourceVersion that is not
// the stored one the result is 409 Conflict; without one the update is
// unconditional. With allowCreate a missing object is created (server-side
// apply). It returns the stored object and whether it was created.
func (s *Store) Update(ctx context.Context, ns, name string, compute UpdateFunc, allowCreate bool, opts WriteOptions) (runtime.Object, bool, error) {
	key := s.Key(ns, name)
	st := s.strategyFor(opts.Subresource)
	var tx Transaction
	created := false
	revert := func() {
		if tx != nil {
			tx.Revert()
			tx = nil
		}
	}
	out, err := s.Storage.GuaranteedUpdate(ctx, key, allowCreate, nil, func(cur runtime.Object) (runtime.Object, error) {
		revert()
		obj, err := compute(ctx, cur)
		if err != nil {
			return nil, err
		}
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if acc.GetName() != name {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", acc.GetName(), name))
		}
		if s.Info.Namespaced {
			if acc.GetNamespace() == "" {
				acc.SetNamespace(ns)
			} else if acc.GetNamespace() != ns {
				return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
			}
		} else {
			acc.SetNamespace("")
		}
		if cur == nil {
			created = true
			if s.Info.Namespaced && s.NamespaceExists != nil {
				if err := s.NamespaceExists(ctx, ns, s.Info.GroupResource(), name); err != nil {
					return nil, err
				}
			}
			if rv := acc.GetResourceVersion(); rv != "" {
				return nil, apierrors.NewNotFound(s.Info.GroupResource(), name)
			}
			obj, tx, err = s.prepareCreate(ctx, st, obj, opts.Subresource, opts)
			if err != nil {
				return nil, err
			}
			if opts.Warnings != nil {
				*opts.Warnings = nil
				if w, ok := st.(CreateWarner); ok {
					*opts.Warnings = w.WarningsOnCreate(ctx, obj)
				}
			}
			if opts.DryRun {
				return nil, &dryRunResult{obj}
			}
			return obj, nil
		}
		created = false
		cacc, _ := meta.Accessor(cur)
		if rv := acc.GetResourceVersion(); rv == "" {
			acc.SetResourceVersion(cacc.GetResourceVersion())
		} else if rv != cacc.GetResourceVersion() {
			return nil, s.conflictErr(name)
		}
		// Server-owned metadata a client cannot change.
		acc.SetCreationTimestamp(cacc.GetCreationTimestamp())
		acc.SetDeletionTimestamp(cacc.GetDeletionTimestamp())
		acc.SetDeletionGracePeriodSeconds(cacc.GetDeletionGracePeriodSeconds())
		acc.SetGeneration(cacc.GetGeneration())
		if acc.GetUID() == "" {
			acc.SetUID(cacc.GetUID())
		}
		st.Default(obj)
		if a, ok := st.(UpdateAllocator); ok {
			t, err := a.BeginUpdate(ctx, obj, cur, opts.DryRun)
			if err != nil {
				return nil, err
			}
			tx = t
		}
		st.PrepareForUpdate(ctx, obj, cur)
		if s.Info.Generation && opts.Subresource == "" && specChanged(obj, cur) {
			acc.SetGeneration(cacc.GetGeneration() + 1)
		}
		if fm := s.FieldManagers[opts.Subresource]; fm != nil && !opts.SkipManagedFields {
			obj = fm.UpdateNoErrors(cur, obj, opts.FieldManager)
		}
		if errs := ValidateUpdate(ctx, st, s.Info.Namespaced, obj, cur); len(errs) > 0 {
			return nil, s.invalid(obj, errs)
		}
		if opts.Warnings != nil {
			*opts.Warnings = nil
			if w, ok := st.(UpdateWarner); ok {
				*opts.Warnings = w.WarningsOnUpdate(ctx, obj, cur)
			}
		}
		if opts.DryRun {
			return nil, &dryRunResult{obj}
		}
		return obj, nil
	})
	var dr *dryRunResult
	if errors.As(err, &dr) {
		revert()
		return dr.obj, created, nil
	}
	if err != nil {
		revert()
		return nil, false, err
	}
	if tx != nil {
		tx.Commit()
	}
	// An object marked for deletion whose last finalizer is gone is deleted.
	if acc, aerr := meta.Accessor(out); aerr == nil && acc.GetDeletionTimestamp() != nil && len(acc.GetFinalizers()) == 0 && !s.graceful(out) && s.finalized(out) {
		uid := acc.GetUID()
		if _, derr := s.Storage.Delete(ctx, key, &storage.Preconditions{UID: &uid}, nil); derr == nil {
			s.afterDelete(ctx, out)
		}
	}
	return out, created, nil
}

// graceful reports whether obj is still within a graceful deletion period
// that only its owner (the node agent) ends.
func (s *Store) graceful(obj runtime.Object) bool {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	g := acc.GetDeletionGracePeriodSeconds()
	return g != nil && *g > 0
}

// specChanged reports whether anything but metadata and status differs; such
// a change increments metadata.generation.
func specChanged(a, b runtime.Object) bool {
	strip := func(o runtime.Object) map[string]any {
		var m map[string]any
		if u, ok := o.(*unstructured.Unstructured); ok {
			m = runtime.DeepCopyJSON(u.Object)
		} else {
			data, err := json.Marshal(o)
			if err != nil {
				return nil
			}
			if json.Unmarshal(data, &m) != nil {
				return nil
			}
		}
		delete(m, "metadata")
		delete(m, "status")
		delete(m, "kind")
		delete(m, "apiVersion")
		return m
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}

// DeleteOptions are the options of a delete.
type DeleteOptions struct {
	DryRun             bool
	GracePeriodSeconds *int64
	Preconditions      *metav1.Preconditions
	PropagationPolicy  *metav1.DeletionPropagation
}

// Delete deletes ns/name. Objects with finalizers, and objects whose strategy
// asks for graceful deletion, are only marked (deletionTimestamp set) and
// returned with deleted=false; otherwise the object is removed and returned
// with deleted=true.
func (s *Store) Delete(ctx context.Context, ns, name string, opts DeleteOptions) (runtime.Object, bool, error) {
	key := s.Key(ns, name)
	var pre *storage.Preconditions
	if p := opts.Preconditions; p != nil && (p.UID != nil || p.ResourceVersion != nil) {
		pre = &storage.Preconditions{UID: p.UID, ResourceVersion: p.ResourceVersion}
	}
	cur, err := s.Storage.Get(ctx, key)
	if err != nil {
		return nil, false, err
	}
	acc, _ := meta.Accessor(cur)
	grace, graceful := int64(0), false
	if gd, ok := s.Strategy.(GracefulDeleter); ok {
		grace, graceful = gd.GracePeriod(cur, opts.GracePeriodSeconds)
	}
	// Propagation, as in Kubernetes: Orphan and Foreground are finalizers
	// on the deleted object ("orphan", "foregroundDeletion") that the
	// garbage collector (controller/gc) carries out and removes; until then
	// the object stays, marked with a deletionTimestamp (without a garbage
	// collector it stays, as on a cluster without kube-controller-manager).
	// Background, the default, removes the object at once; the collector
	// then deletes the dependents left with a dangling owner reference.
	finalizers := func(f []string) []string { return gcFinalizers(f, opts.PropagationPolicy) }
	if len(finalizers(acc.GetFinalizers())) > 0 || graceful || !s.finalized(cur) {
		now := s.now()
		out, err := s.Storage.GuaranteedUpdate(ctx, key, false, pre, func(c runtime.Object) (runtime.Object, error) {
			ca, _ := meta.Accessor(c)
			f := finalizers(ca.GetFinalizers())
			if len(f) == 0 && !graceful && s.finalized(c) {
				return nil, errRetryDelete
			}
			if !slices.Equal(f, ca.GetFinalizers()) {
				ca.SetFinalizers(f)
			}
			if graceful {
				ts := metav1.NewTime(now.Add(time.Duration(grace) * time.Second))
				if old := ca.GetDeletionTimestamp(); old == nil || ts.Before(old) {
					ca.SetDeletionTimestamp(&ts)
					g := grace
					ca.SetDeletionGracePeriodSeconds(&g)
				}
			} else if ca.GetDeletionTimestamp() == nil {
				ca.SetDeletionTimestamp(&now)
				g := int64(0)
				ca.SetDeletionGracePeriodSeconds(&g)
			}
			if sf, ok := s.Strategy.(SpecFinalizer); ok {
				sf.MarkDeleting(c)
			}
			if opts.DryRun {
				return nil, &dryRunResult{c}
			}
			return c, nil
		})
		var dr *dryRunResult
		if errors.As(err, &dr) {
			return dr.obj, false, nil
		}
		if err == nil {
			return out, false, nil
		}
		if !errors.Is(err, errRetryDelete) {
			return nil, false, err
		}
	}
	if opts.DryRun {
		return cur, true, nil
	}
	out, err := s.Storage.Delete(ctx, key, pre, func(c runtime.Object) error {
		if ca, _ := meta.Accessor(c); len(finalizers(ca.GetFinalizers())) > 0 || !s.finalized(c) {
			return s.conflictErr(name)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	s.afterDelete(ctx, out)
	return out, true, nil
}

var errRetryDelete = errors.New("object has no finalizers any more")

// gcFinalizers returns the finalizers an object has after a delete with
// propagation policy pp, as kube-apiserver sets them: Orphan and Foreground
// add their finalizer and drop the other one; an explicit Background drops
// both; no policy keeps what an earlier delete asked for.
func gcFinalizers(f []string, pp *metav1.DeletionPropagation) []string {
	if pp == nil {
		return f
	}
	want := ""
	switch *pp {
	case metav1.DeletePropagationOrphan:
		want = metav1.FinalizerOrphanDependents
	case metav1.DeletePropagationForeground:
		want = metav1.FinalizerDeleteDependents
	}
	out := slices.DeleteFunc(slices.Clone(f), func(x string) bool {
		return x != want && (x == metav1.FinalizerOrphanDependents || x == metav1.FinalizerDeleteDependents)
	})
	if want != "" && !slices.Contains(out, want) {
		out = append(out, want)
	}
	return out
}

// afterDelete releases what the strategy allocated for obj (ClusterIPs,
// node ports). Dependents are the garbage collector's business
// (controller/gc), as in Kubernetes: the API server never cascades.
func (s *Store) afterDelete(ctx context.Context, obj runtime.Object) {
	if r, ok := s.Strategy.(DeleteReleaser); ok {
		r.AfterDelete(ctx, obj, false)
	}
}

// ListOptions select objects for List and Watch.
type ListOptions struct {
	Filter               storage.Filter
	Limit                int64
	Continue             string
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	// ReadOnly: the caller only reads (encodes) the items; see
	// storage.ListOptions.ReadOnly.
	ReadOnly bool
}

// List returns the objects of namespace ns ("" for all) as a list object of
// the resource's list kind.
func (s *Store) List(ctx context.Context, ns string, opts ListOptions) (runtime.Object, error) {
	res, err := s.ListItems(ctx, ns, opts)
	if err != nil {
		return nil, err
	}
	return s.ListObject(res)
}

// ListItems is List without the list object: the storage's answer.
func (s *Store) ListItems(ctx context.Context, ns string, opts ListOptions) (*storage.ListResult, error) {
	return s.Storage.List(ctx, s.Prefix(ns), storage.ListOptions{
		Limit: opts.Limit, Continue: opts.Continue, Filter: opts.Filter,
		ResourceVersion: opts.ResourceVersion, ResourceVersionMatch: opts.ResourceVersionMatch,
		ReadOnly: opts.ReadOnly,
	})
}

// ListObject makes the resource's list object of a storage answer.
func (s *Store) ListObject(res *storage.ListResult) (runtime.Object, error) {
	list := s.Info.NewList()
	if err := meta.SetList(list, res.Items); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	lm.SetResourceVersion(fmt.Sprint(res.ResourceVersion))
	lm.SetContinue(res.Continue)
	lm.SetRemainingItemCount(res.RemainingItemCount)
	return list, nil
}

// FieldsSet returns the fields a field selector may test on obj.
func (s *Store) FieldsSet(obj runtime.Object) map[string]string {
	if fs, ok := s.Strategy.(FieldsSetter); ok {
		return fs.FieldsSet(obj)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	set := map[string]string{"metadata.name": acc.GetName()}
	if s.Info.Namespaced {
		set["metadata.namespace"] = acc.GetNamespace()
	}
	return set
}

// SemanticEqual reports whether two objects are equal for API purposes.
func SemanticEqual(a, b runtime.Object) bool { return apiequality.Semantic.DeepEqual(a, b) }

// DefaultManager derives a field manager name from a User-Agent as
// kube-apiserver does: the part before the first '/'.
func DefaultManager(userAgent string) string {
	if i := strings.IndexByte(userAgent, '/'); i >= 0 {
		userAgent = userAgent[:i]
	}
	if len(userAgent) > 128 {
		userAgent = userAgent[:128]
	}
	return userAgent
}
