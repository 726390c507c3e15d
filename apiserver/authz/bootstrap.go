package authz

import (
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// bootstrap/*.yaml are kube-apiserver 1.37.2's default RBAC policy
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata, which is the
// policy's own output), kept as data.
//
//go:embed bootstrap/*.yaml
var bootstrapFS embed.FS

// DefaultPolicy is what kube-apiserver bootstraps, restricted to the
// controllers svcnet runs, plus svcnet's own additions (BootstrapExtras).
type DefaultPolicy struct {
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding
}

// SvcnetControllers are the kube-controller-manager controllers whose
// system:controller:* roles and bindings are bootstrapped because
// `svcnet controllers` (or the apiserver itself) does their work.
var SvcnetControllers = []string{
	"endpoint-controller", "endpointslice-controller", "endpointslicemirroring-controller",
	"deployment-controller", "replicaset-controller", "daemon-set-controller", "generic-garbage-collector",
	"service-controller", // LoadBalancer IP assignment (lbipam) writes services/status
	"namespace-controller", "clusterrole-aggregation-controller",
	"node-controller", // the node lifecycle health check
	"service-account-controller", "root-ca-cert-publisher",
}

// ControllersUser is the identity of `svcnet controllers` in `svcnet up`:
// kube-controller-manager's user, bound (by BootstrapExtras) to the
// system:controller:* roles of SvcnetControllers and to the scheduler's role.
const ControllersUser = "system:kube-controller-manager"

// DNSUser is the identity of `svcnet dns` in `svcnet up`: the coredns
// service account of kube-system, bound to system:coredns as kubeadm does.
const DNSUser = "system:serviceaccount:kube-system:coredns"

// ProxyUser is kube-proxy's identity, bound to system:node-proxier.
const ProxyUser = "system:kube-proxy"

// NetpolUser is the identity of `svcnet netpol` in `svcnet up`: a service
// account of kube-system bound to svcnet:netpol (read pods, namespaces and
// NetworkPolicies), as network-policy agents of CNI plugins get one.
const NetpolUser = "system:serviceaccount:kube-system:svcnet-netpol"

// IngressUser is the identity of `svcnet ingress` in `svcnet up`: a service
// account of kube-system bound to svcnet:ingress (read Ingresses,
// IngressClasses, Services and EndpointSlices; write Ingress status and
// Events) and, in kube-system, to the Role that keeps its election Lease, as
// ingress-nginx's manifests bind its controller.
const IngressUser = "system:serviceaccount:kube-system:svcnet-ingress"

// SpeakerUser is the identity of `svcnet speaker` in `svcnet up`: MetalLB's
// speaker service account (metallb-system/speaker), bound to svcnet:speaker
// (MetalLB's speaker ClusterRole) and, in kube-system, to the Role that
// keeps the speakers' Leases.
const SpeakerUser = "system:serviceaccount:metallb-system:speaker"

type itemList struct {
	Items []json.RawMessage `json:"items"`
}

func load[T any](name string) ([]T, error) {
	data, err := bootstrapFS.ReadFile("bootstrap/" + name)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var l itemList
	if err := json.Unmarshal(j, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := make([]T, 0, len(l.Items))
	for _, it := range l.Items {
		var v T
		if err := json.Unmarshal(it, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func isController(name string) (bool, bool) {
	c, ok := strings.CutPrefix(name, "system:controller:")
	if !ok {
		return false, false
	}
	return true, slices.Contains(SvcnetControllers, c)
}

// LoadDefaultPolicy returns the default policy.
func LoadDefaultPolicy() (*DefaultPolicy, error) {
	p := &DefaultPolicy{}
	var err error
	if p.ClusterRoles, err = load[rbacv1.ClusterRole]("cluster-roles.yaml"); err != nil {
		return nil, err
	}
	if p.ClusterRoleBindings, err = load[rbacv1.ClusterRoleBinding]("cluster-role-bindings.yaml"); err != nil {
		return nil, err
	}
	cr, err := load[rbacv1.ClusterRole]("controller-roles.yaml")
	if err != nil {
		return nil, err
	}
	for _, r := range cr {
		if _, ours := isController(r.Name); ours {
			p.ClusterRoles = append(p.ClusterRoles, r)
		}
	}
	crb, err := load[rbacv1.ClusterRoleBinding]("controller-role-bindings.yaml")
	if err != nil {
		return nil, err
	}
	for _, b := range crb {
		if _, ours := isController(b.Name); ours {
			p.ClusterRoleBindings = append(p.ClusterRoleBindings, b)
		}
	}
	if p.Roles, err = load[rbacv1.Role]("namespace-roles.yaml"); err != nil {
		return nil, err
	}
	if p.RoleBindings, err = load[rbacv1.RoleBinding]("namespace-role-bindings.yaml"); err != nil {
		return nil, err
	}
	p.addExtras()
	return p, nil
}

// ClusterRole returns a default cluster role by name.
func (p *DefaultPolicy) ClusterRole(name string) (*rbacv1.ClusterRole, bool) {
	for i := range p.ClusterRoles {
		if p.ClusterRoles[i].Name == name {
			return &p.ClusterRoles[i], true
		}
	}
	return nil, false
}

func svcnetMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"},
		Labels:      map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}}
}

// addExtras adds what a kubeadm cluster adds to kube-apiserver's defaults
// for the components svcnet up runs: CoreDNS's system:coredns role bound to
// kube-system/coredns, and the controllers' user bound to the controller
// roles (kube-controller-manager uses one service account per controller;
// svcnet's controllers share one process and one identity).
func (p *DefaultPolicy) addExtras() {
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: svcnetMeta("system:coredns"),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"list", "watch"}, APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}},
			{Verbs: []string{"list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
		},
	})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
		ObjectMeta: svcnetMeta("system:coredns"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "coredns", Namespace: "kube-system"}},
	})
	// MetalLB's controller ClusterRole (its LoadBalancer IP assignment is
	// svcnet's lbipam controller): it annotates Services, writes their
	// status, reads the address pools and the namespaces their
	// serviceAllocation selects, and writes the pools' status.
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: svcnetMeta("svcnet:metallb-controller"),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch", "update"}, APIGroups: []string{""}, Resources: []string{"services"}},
			{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"services/status"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"namespaces"}},
			{Verbs: []string{"create", "patch"}, APIGroups: []string{""}, Resources: []string{"events"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"metallb.io"}, Resources: []string{"ipaddresspools", "l2advertisements"}},
			{Verbs: []string{"update", "patch"}, APIGroups: []string{"metallb.io"}, Resources: []string{"ipaddresspools/status"}},
			{Verbs: []string{"get", "create", "update"}, APIGroups: []string{"metallb.io"}, Resources: []string{"configurationstates", "configurationstates/status"}},
		},
	})
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: svcnetMeta("svcnet:netpol"),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}},
		},
	})
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
		ObjectMeta: svcnetMeta("svcnet:netpol"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "svcnet:netpol"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "svcnet-netpol", Namespace: "kube-system"}},
	})
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: svcnetMeta("svcnet:ingress"),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services", "secrets"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses", "ingressclasses"}},
			{Verbs: []string{"update"}, APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses/status"}},
			{Verbs: []string{"create", "patch", "update"}, APIGroups: []string{""}, Resources: []string{"events"}},
		},
	})
	ingressSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "svcnet-ingress", Namespace: "kube-system"}}
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
		ObjectMeta: svcnetMeta("svcnet:ingress"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "svcnet:ingress"},
		Subjects:   ingressSA,
	})
	ingressLease := svcnetMeta("svcnet:ingress")
	ingressLease.Namespace = "kube-system"
	p.Roles = append(p.Roles, rbacv1.Role{
		ObjectMeta: ingressLease,
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "create", "update"},
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}},
	})
	p.RoleBindings = append(p.RoleBindings, rbacv1.RoleBinding{
		ObjectMeta: ingressLease,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "svcnet:ingress"},
		Subjects:   ingressSA,
	})
	// MetalLB's speaker ClusterRole (read Services, endpoints, Nodes and
	// the MetalLB configuration; record events; write the status kinds),
	// plus the Leases by which speakers see each other alive (svcnet's
	// replacement for memberlist), in kube-system only.
	p.ClusterRoles = append(p.ClusterRoles, rbacv1.ClusterRole{
		ObjectMeta: svcnetMeta("svcnet:speaker"),
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"services", "endpoints", "nodes", "namespaces"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}},
			{Verbs: []string{"create", "patch"}, APIGroups: []string{""}, Resources: []string{"events"}},
			{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{"metallb.io"},
				Resources: []string{"ipaddresspools", "l2advertisements", "bgpadvertisements", "bgppeers", "communities"}},
			{Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}, APIGroups: []string{"metallb.io"},
				Resources: []string{"servicel2statuses", "servicel2statuses/status", "servicebgpstatuses", "servicebgpstatuses/status"}},
			{Verbs: []string{"get", "create", "update"}, APIGroups: []string{"metallb.io"}, Resources: []string{"configurationstates", "configurationstates/status"}},
		},
	})
	speakerSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "speaker", Namespace: "metallb-system"}}
	p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
		ObjectMeta: svcnetMeta("svcnet:speaker"),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "svcnet:speaker"},
		Subjects:   speakerSA,
	})
	leaseMeta := svcnetMeta("svcnet:speaker")
	leaseMeta.Namespace = "kube-system"
	p.Roles = append(p.Roles, rbacv1.Role{
		ObjectMeta: leaseMeta,
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch", "create", "update", "delete"},
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}},
	})
	p.RoleBindings = append(p.RoleBindings, rbacv1.RoleBinding{
		ObjectMeta: leaseMeta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "svcnet:speaker"},
		Subjects:   speakerSA,
	})
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ControllersUser}}
	roles := []string{"system:kube-scheduler", "svcnet:metallb-controller"}
	for _, c := range SvcnetControllers {
		roles = append(roles, "system:controller:"+c)
	}
	for _, r := range roles {
		p.ClusterRoleBindings = append(p.ClusterRoleBindings, rbacv1.ClusterRoleBinding{
			ObjectMeta: svcnetMeta("svcnet:controllers:" + strings.TrimPrefix(strings.TrimPrefix(r, "system:"), "svcnet:")),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r},
			Subjects:   user,
		})
	}
}
