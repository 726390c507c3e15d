package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/operation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/svcnet/svcnet/apiserver/authz"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/core"
	"github.com/svcnet/svcnet/storage"
)

var (
	rolesGR               = rbacv1.Resource("roles")
	clusterRolesGR        = rbacv1.Resource("clusterroles")
	roleBindingsGR        = rbacv1.Resource("rolebindings")
	clusterRoleBindingsGR = rbacv1.Resource("clusterrolebindings")
)

func rbacResources() []resourceDef {
	gv := rbacv1.SchemeGroupVersion
	strategy := func(namespaced bool) func() registry.Strategy {
		return func() registry.Strategy { return authz.NewBasic(namespaced) }
	}
	return []resourceDef{
		{registry.ResourceInfo{GVR: gv.WithResource("clusterrolebindings"), Kind: "ClusterRoleBinding", Singular: "clusterrolebinding",
			New: typed[rbacv1.ClusterRoleBinding](), NewList: typed[rbacv1.ClusterRoleBindingList]()}, strategy(false)},
		{registry.ResourceInfo{GVR: gv.WithResource("clusterroles"), Kind: "ClusterRole", Singular: "clusterrole",
			New: typed[rbacv1.ClusterRole](), NewList: typed[rbacv1.ClusterRoleList]()}, strategy(false)},
		{registry.ResourceInfo{GVR: gv.WithResource("rolebindings"), Kind: "RoleBinding", Singular: "rolebinding", Namespaced: true,
			New: typed[rbacv1.RoleBinding](), NewList: typed[rbacv1.RoleBindingList]()}, strategy(true)},
		{registry.ResourceInfo{GVR: gv.WithResource("roles"), Kind: "Role", Singular: "role", Namespaced: true,
			New: typed[rbacv1.Role](), NewList: typed[rbacv1.RoleList]()}, strategy(true)},
	}
}

// escalationStrategy puts kube-apiserver's escalation checks in front of
// the RBAC resources' strategy: they run before validation, as in
// kube-apiserver's RBAC storage, and answer 403.
type escalationStrategy struct {
	*core.Basic
	esc *authz.Escalation
}

// ValidateDeclaratively: as kube-apiserver 1.37, the RBAC kinds validate
// declaratively (authz.NewStrategy without the escalation checks).
func (e *escalationStrategy) ValidateDeclaratively(ctx context.Context, op operation.Type, obj, old runtime.Object) field.ErrorList {
	return authz.ValidateDeclaratively(ctx, op, obj, old)
}

func (e *escalationStrategy) BeginCreate(ctx context.Context, obj runtime.Object, _ bool) (registry.Transaction, error) {
	return registry.NopTransaction{}, e.check(ctx, obj)
}

func (e *escalationStrategy) BeginUpdate(ctx context.Context, obj, _ runtime.Object, _ bool) (registry.Transaction, error) {
	return registry.NopTransaction{}, e.check(ctx, obj)
}

func (e *escalationStrategy) check(ctx context.Context, obj runtime.Object) error {
	u, ok := authz.UserFrom(ctx)
	if !ok {
		return nil // the server's own writes (bootstrap, aggregation)
	}
	switch o := obj.(type) {
	case *rbacv1.Role:
		return e.esc.CheckRole(ctx, u, o.Namespace, o.Name, o.Rules, false)
	case *rbacv1.ClusterRole:
		return e.esc.CheckRole(ctx, u, "", o.Name, o.Rules, o.AggregationRule != nil)
	case *rbacv1.RoleBinding:
		return e.esc.CheckBinding(ctx, u, o.Namespace, o.Name, o.RoleRef)
	case *rbacv1.ClusterRoleBinding:
		return e.esc.CheckBinding(ctx, u, "", o.Name, o.RoleRef)
	}
	return nil
}

// storedRoles reads Roles and ClusterRoles from storage (the escalation
// check of bindings must see a role's latest rules).
type storedRoles struct{ s *Server }

func (r storedRoles) GetRole(ns, name string) (*rbacv1.Role, bool) {
	st, ok := r.s.byGR[rolesGR]
	if !ok {
		return nil, false
	}
	obj, err := st.Get(context.Background(), ns, name)
	role, ok := obj.(*rbacv1.Role)
	return role, err == nil && ok
}

func (r storedRoles) GetClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	st, ok := r.s.byGR[clusterRolesGR]
	if !ok {
		return nil, false
	}
	obj, err := st.Get(context.Background(), "", name)
	role, ok := obj.(*rbacv1.ClusterRole)
	return role, err == nil && ok
}

// policyCache keeps every Role, ClusterRole, RoleBinding and
// ClusterRoleBinding in memory, fed by etcd watches, for the RBAC
// authorizer (which must not read etcd on every request). Writes through
// any apiserver sharing the etcd reach it.
type policyCache struct {
	mu       sync.RWMutex
	roles    map[string]*rbacv1.Role // ns/name
	cRoles   map[string]*rbacv1.ClusterRole
	bindings map[string]map[string]*rbacv1.RoleBinding // ns → name
	cBinds   map[string]*rbacv1.ClusterRoleBinding
	changed  chan struct{}
}

func newPolicyCache() *policyCache {
	return &policyCache{roles: map[string]*rbacv1.Role{}, cRoles: map[string]*rbacv1.ClusterRole{},
		bindings: map[string]map[string]*rbacv1.RoleBinding{}, cBinds: map[string]*rbacv1.ClusterRoleBinding{},
		changed: make(chan struct{}, 1)}
}

func (c *policyCache) GetRole(ns, name string) (*rbacv1.Role, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.roles[ns+"/"+name]
	return r, ok
}

func (c *policyCache) GetClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.cRoles[name]
	return r, ok
}

func (c *policyCache) ClusterRoleBindings() []*rbacv1.ClusterRoleBinding {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*rbacv1.ClusterRoleBinding, 0, len(c.cBinds))
	for _, b := range c.cBinds {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *policyCache) RoleBindings(ns string) []*rbacv1.RoleBinding {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*rbacv1.RoleBinding, 0, len(c.bindings[ns]))
	for _, b := range c.bindings[ns] {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *policyCache) clusterRoles() []*rbacv1.ClusterRole {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*rbacv1.ClusterRole, 0, len(c.cRoles))
	for _, r := range c.cRoles {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *policyCache) apply(gr schema.GroupResource, obj runtime.Object, deleted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := obj.(type) {
	case *rbacv1.Role:
		if deleted {
			delete(c.roles, o.Namespace+"/"+o.Name)
		} else {
			c.roles[o.Namespace+"/"+o.Name] = o
		}
	case *rbacv1.ClusterRole:
		if deleted {
			delete(c.cRoles, o.Name)
		} else {
			c.cRoles[o.Name] = o
		}
		select {
		case c.changed <- struct{}{}:
		default:
		}
	case *rbacv1.RoleBinding:
		m := c.bindings[o.Namespace]
		if m == nil {
			m = map[string]*rbacv1.RoleBinding{}
			c.bindings[o.Namespace] = m
		}
		if deleted {
			delete(m, o.Name)
		} else {
			m[o.Name] = o
		}
	case *rbacv1.ClusterRoleBinding:
		if deleted {
			delete(c.cBinds, o.Name)
		} else {
			c.cBinds[o.Name] = o
		}
	}
}

func (c *policyCache) reset(gr schema.GroupResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch gr {
	case rolesGR:
		c.roles = map[string]*rbacv1.Role{}
	case clusterRolesGR:
		c.cRoles = map[string]*rbacv1.ClusterRole{}
	case roleBindingsGR:
		c.bindings = map[string]map[string]*rbacv1.RoleBinding{}
	case clusterRoleBindingsGR:
		c.cBinds = map[string]*rbacv1.ClusterRoleBinding{}
	}
}

// run lists and then watches one resource until ctx ends, relisting after
// a failed watch; synced is called after the first list.
func (c *policyCache) run(ctx context.Context, st *storage.Store, log func(string, ...any), synced func()) {
	gr := st.Resource()
	prefix := storage.KeyPrefix(gr)
	once := sync.Once{}
	for ctx.Err() == nil {
		l, err := st.List(ctx, prefix, storage.ListOptions{})
		if err != nil {
			log("rbac cache list", "resource", gr.String(), "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		c.reset(gr)
		for _, o := range l.Items {
			c.apply(gr, o, false)
		}
		once.Do(synced)
		ch, err := st.Watch(ctx, prefix, l.ResourceVersion, storage.WatchOptions{})
		if err != nil {
			continue
		}
		for ev := range ch {
			switch ev.Type {
			case storage.Added, storage.Modified:
				c.apply(gr, ev.Object, false)
			case storage.Deleted:
				c.apply(gr, ev.Object, true)
			}
		}
	}
}

// startPolicy starts the RBAC cache and waits for its first list.
func (s *Server) startPolicy(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, gr := range []schema.GroupResource{rolesGR, clusterRolesGR, roleBindingsGR, clusterRoleBindingsGR} {
		wg.Add(1)
		go s.policy.run(ctx, s.byGR[gr].Storage, func(msg string, args ...any) { s.log.Warn(msg, args...) }, wg.Done)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return fmt.Errorf("RBAC policy cache did not load within 30s")
	}
}

// bootstrapPolicy reconciles the default roles and bindings as
// kube-apiserver's rbac/bootstrap-roles post-start hook does: missing ones
// are created; existing ones annotated rbac.authorization.kubernetes.io/autoupdate
// other than "false" get the default rules (or aggregation selectors) and
// subjects they lack added; nothing is removed.
func (s *Server) bootstrapPolicy(ctx context.Context) error {
	p, err := authz.LoadDefaultPolicy()
	if err != nil {
		return err
	}
	opts := registry.WriteOptions{FieldManager: bootstrapManager}
	reconcile := func(gr schema.GroupResource, ns string, want runtime.Object, merge func(cur, want runtime.Object) bool) error {
		st := s.byGR[gr]
		_, err := st.Create(ctx, ns, want.DeepCopyObject(), opts)
		if err == nil || !apierrors.IsAlreadyExists(err) {
			return err
		}
		name := want.(metav1.Object).GetName()
		cur, err := st.Get(ctx, ns, name)
		if err != nil {
			return err
		}
		if cur.(metav1.Object).GetAnnotations()[rbacv1.AutoUpdateAnnotationKey] == "false" || !merge(cur.DeepCopyObject(), want) {
			return nil // opted out, or nothing missing: no write
		}
		_, _, err = st.Update(ctx, ns, name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			merge(cur, want)
			return cur, nil
		}, false, opts)
		return err
	}
	mergeRules := func(cur *[]rbacv1.PolicyRule, want []rbacv1.PolicyRule) bool {
		ok, missing := validation.Covers(*cur, want)
		if !ok {
			*cur = append(*cur, missing...)
		}
		return !ok
	}
	mergeSubjects := func(cur *[]rbacv1.Subject, want []rbacv1.Subject) bool {
		changed := false
		for _, w := range want {
			if !slices.Contains(*cur, w) {
				*cur = append(*cur, w)
				changed = true
			}
		}
		return changed
	}
	for i := range p.ClusterRoles {
		err := reconcile(clusterRolesGR, "", &p.ClusterRoles[i], func(cur, want runtime.Object) bool {
			c, w := cur.(*rbacv1.ClusterRole), want.(*rbacv1.ClusterRole)
			if w.AggregationRule != nil {
				if c.AggregationRule == nil {
					c.AggregationRule = &rbacv1.AggregationRule{}
				}
				changed := false
				for _, sel := range w.AggregationRule.ClusterRoleSelectors {
					if !slices.ContainsFunc(c.AggregationRule.ClusterRoleSelectors, func(x metav1.LabelSelector) bool { return reflect.DeepEqual(x, sel) }) {
						c.AggregationRule.ClusterRoleSelectors = append(c.AggregationRule.ClusterRoleSelectors, sel)
						changed = true
					}
				}
				return changed
			}
			return mergeRules(&c.Rules, w.Rules)
		})
		if err != nil {
			return fmt.Errorf("clusterrole %s: %w", p.ClusterRoles[i].Name, err)
		}
	}
	for i := range p.ClusterRoleBindings {
		err := reconcile(clusterRoleBindingsGR, "", &p.ClusterRoleBindings[i], func(cur, want runtime.Object) bool {
			return mergeSubjects(&cur.(*rbacv1.ClusterRoleBinding).Subjects, want.(*rbacv1.ClusterRoleBinding).Subjects)
		})
		if err != nil {
			return fmt.Errorf("clusterrolebinding %s: %w", p.ClusterRoleBindings[i].Name, err)
		}
	}
	for i := range p.Roles {
		err := reconcile(rolesGR, p.Roles[i].Namespace, &p.Roles[i], func(cur, want runtime.Object) bool {
			return mergeRules(&cur.(*rbacv1.Role).Rules, want.(*rbacv1.Role).Rules)
		})
		if err != nil {
			return fmt.Errorf("role %s/%s: %w", p.Roles[i].Namespace, p.Roles[i].Name, err)
		}
	}
	for i := range p.RoleBindings {
		err := reconcile(roleBindingsGR, p.RoleBindings[i].Namespace, &p.RoleBindings[i], func(cur, want runtime.Object) bool {
			return mergeSubjects(&cur.(*rbacv1.RoleBinding).Subjects, want.(*rbacv1.RoleBinding).Subjects)
		})
		if err != nil {
			return fmt.Errorf("rolebinding %s/%s: %w", p.RoleBindings[i].Namespace, p.RoleBindings[i].Name, err)
		}
	}
	return nil
}

// aggregateLoop is the clusterrole aggregation controller of
// kube-controller-manager, run inside the apiserver so that admin, edit and
// view work without `svcnet controllers`: the rules of a ClusterRole with an
// aggregationRule become the rules of every ClusterRole its selectors match
// (in name order, without duplicates), whenever a ClusterRole changes.
func (s *Server) aggregateLoop(ctx context.Context) {
	for {
		s.aggregateOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.policy.changed:
		case <-time.After(5 * time.Minute):
		}
	}
}

func (s *Server) aggregateOnce(ctx context.Context) {
	roles := s.policy.clusterRoles()
	for _, r := range roles {
		if r.AggregationRule == nil {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, sel := range r.AggregationRule.ClusterRoleSelectors {
			ls, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				continue
			}
			for _, o := range roles {
				if o.Name == r.Name || !ls.Matches(labels.Set(o.Labels)) {
					continue
				}
				for _, rule := range o.Rules {
					if !slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return reflect.DeepEqual(x, rule) }) {
						rules = append(rules, rule)
					}
				}
			}
		}
		if reflect.DeepEqual(rules, r.Rules) || (len(rules) == 0 && len(r.Rules) == 0) {
			continue
		}
		_, _, err := s.byGR[clusterRolesGR].Update(ctx, "", r.Name, func(_ context.Context, cur runtime.Object) (runtime.Object, error) {
			c := cur.(*rbacv1.ClusterRole)
			c.Rules = rules
			return c, nil
		}, false, registry.WriteOptions{FieldManager: "clusterrole-aggregation-controller"})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("clusterrole aggregation", "clusterrole", r.Name, "err", err)
		}
	}
}

// nodeGraph answers the Node authorizer from storage.
type nodeGraph struct{ s *Server }

func (g nodeGraph) GetPod(ctx context.Context, ns, name string) (*corev1.Pod, bool) {
	o, err := g.s.byGR[podsGR].Get(ctx, ns, name)
	if err != nil {
		return nil, false
	}
	return o.(*corev1.Pod), true
}

func (g nodeGraph) PodsOnNode(ctx context.Context, node string) []*corev1.Pod {
	l, err := g.s.byGR[podsGR].List(ctx, "", registry.ListOptions{Filter: func(o runtime.Object) bool {
		p, ok := o.(*corev1.Pod)
		return ok && p.Spec.NodeName == node
	}})
	if err != nil {
		return nil
	}
	items := l.(*corev1.PodList).Items
	out := make([]*corev1.Pod, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
