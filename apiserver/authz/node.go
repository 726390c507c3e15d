package authz

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// NodeGraph answers the Node authorizer's questions about what a node's
// pods use. svcnet looks these up in storage instead of keeping
// kube-apiserver's in-memory graph.
type NodeGraph interface {
	// GetPod returns a stored pod.
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, bool)
	// PodsOnNode returns the pods bound to node.
	PodsOnNode(ctx context.Context, node string) []*corev1.Pod
}

// Node is the Node authorizer (--authorization-mode=Node): a user
// system:node:<name> in group system:nodes may read and write its own Node
// and Lease, the pods bound to it and their status, the secrets and config
// maps those pods use, and what the system:node rules (Rules) allow of
// everything else. Writes it is allowed here are narrowed further by the
// NodeRestriction admission (NodeRestriction).
type Node struct {
	Graph NodeGraph
	// Rules are the static node rules (kube-apiserver's NodeRules, which are
	// also the rules of the system:node ClusterRole).
	Rules []rbacv1.PolicyRule
}

// NodeName returns the node a user acts for: system:node:<name> in group
// system:nodes.
func NodeName(u User) (string, bool) {
	if !strings.HasPrefix(u.Name, NodeUserPrefix) || !u.InGroup(SystemNodes) {
		return "", false
	}
	return strings.TrimPrefix(u.Name, NodeUserPrefix), true
}

// Authorize implements Authorizer.
func (n *Node) Authorize(ctx context.Context, a Attributes) (Decision, string, error) {
	node, ok := NodeName(a.User)
	if !ok {
		return NoOpinion, "", nil
	}
	if node == "" {
		return NoOpinion, fmt.Sprintf("unknown node for user %q", a.User.Name), nil
	}
	if a.ResourceRequest {
		switch {
		case a.APIGroup == "" && (a.Resource == "secrets" || a.Resource == "configmaps"):
			return n.readPodObject(ctx, node, a)
		case a.APIGroup == "coordination.k8s.io" && a.Resource == "leases":
			return nodeLease(node, a)
		case a.APIGroup == "" && a.Resource == "nodes":
			return nodeNode(node, a)
		case a.APIGroup == "" && a.Resource == "pods":
			return n.nodePod(ctx, node, a)
		case a.APIGroup == "" && a.Resource == "serviceaccounts":
			return n.createToken(ctx, node, a)
		}
	}
	for i := range n.Rules {
		if RuleAllows(a, &n.Rules[i]) {
			return Allow, "", nil
		}
	}
	return NoOpinion, "", nil
}

func noRelation(node string) string {
	return fmt.Sprintf("no relationship found between node '%s' and this object", node)
}

func nodeLease(node string, a Attributes) (Decision, string, error) {
	switch a.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return NoOpinion, "can only get, create, update, patch, or delete a node lease", nil
	}
	if a.Namespace != corev1.NamespaceNodeLease {
		return NoOpinion, fmt.Sprintf("can only access leases in the %q system namespace", corev1.NamespaceNodeLease), nil
	}
	if a.Verb != "create" && a.Name != node {
		return NoOpinion, "can only access node lease with the same name as the requesting node", nil
	}
	return Allow, "", nil
}

func nodeNode(node string, a Attributes) (Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "create", "update", "patch":
			return Allow, "", nil // NodeRestriction limits these to its own Node
		case "get", "list", "watch":
			switch a.Name {
			case node:
				return Allow, "", nil
			case "":
				return NoOpinion, fmt.Sprintf("node '%s' cannot read all nodes, only its own Node object", node), nil
			default:
				return NoOpinion, fmt.Sprintf("node '%s' cannot read '%s', only its own Node object", node, a.Name), nil
			}
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return Allow, "", nil
		}
	}
	return NoOpinion, "", nil
}

func (n *Node) nodePod(ctx context.Context, node string, a Attributes) (Decision, string, error) {
	switch a.Subresource {
	case "":
		switch a.Verb {
		case "get":
			return n.podOnNode(ctx, node, a)
		case "list", "watch":
			if sel, err := fields.ParseSelector(a.FieldSelector); err == nil {
				for _, r := range sel.Requirements() {
					if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
						return Allow, "", nil
					}
				}
			}
			if a.Name != "" {
				return n.podOnNode(ctx, node, a)
			}
			return NoOpinion, "can only list/watch pods with spec.nodeName field selector", nil
		case "create", "delete":
			return Allow, "", nil // NodeRestriction: mirror pods / pods bound to itself
		}
	case "status":
		if a.Verb == "update" || a.Verb == "patch" {
			return Allow, "", nil
		}
	case "eviction":
		if a.Verb == "create" {
			return Allow, "", nil
		}
	}
	return NoOpinion, "", nil
}

func (n *Node) podOnNode(ctx context.Context, node string, a Attributes) (Decision, string, error) {
	if n.Graph == nil {
		return NoOpinion, noRelation(node), nil
	}
	if p, ok := n.Graph.GetPod(ctx, a.Namespace, a.Name); ok && p.Spec.NodeName == node {
		return Allow, "", nil
	}
	return NoOpinion, noRelation(node), nil
}

// readPodObject allows reading a secret or config map that a pod bound to
// the node references (volumes, env, envFrom, image pull secrets).
func (n *Node) readPodObject(ctx context.Context, node string, a Attributes) (Decision, string, error) {
	switch a.Verb {
	case "get", "list", "watch":
	default:
		return NoOpinion, "can only read resources of this type", nil
	}
	if a.Subresource != "" {
		return NoOpinion, "cannot read subresource", nil
	}
	if a.Namespace == "" {
		return NoOpinion, "can only read namespaced object of this type", nil
	}
	if a.Name == "" || n.Graph == nil {
		return NoOpinion, noRelation(node), nil
	}
	for _, p := range n.Graph.PodsOnNode(ctx, node) {
		if p.Namespace != a.Namespace {
			continue
		}
		if podReferences(p, a.Resource, a.Name) {
			return Allow, "", nil
		}
	}
	return NoOpinion, noRelation(node), nil
}

// createToken allows a node to request a token for the service account of
// a pod bound to it (its projected token volumes); the NodeRestriction
// admission then requires the token to be bound to such a pod.
func (n *Node) createToken(ctx context.Context, node string, a Attributes) (Decision, string, error) {
	if a.Verb != "create" || a.Name == "" {
		return NoOpinion, "can only create tokens for individual service accounts", nil
	}
	if a.Subresource != "token" {
		return NoOpinion, "can only create token subresource of serviceaccount", nil
	}
	if n.Graph == nil {
		return NoOpinion, noRelation(node), nil
	}
	for _, p := range n.Graph.PodsOnNode(ctx, node) {
		if p.Namespace == a.Namespace && p.Spec.ServiceAccountName == a.Name {
			return Allow, "", nil
		}
	}
	return NoOpinion, noRelation(node), nil
}

func podReferences(p *corev1.Pod, resource, name string) bool {
	secret := resource == "secrets"
	if secret {
		for _, s := range p.Spec.ImagePullSecrets {
			if s.Name == name {
				return true
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		if secret && v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
		if !secret && v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if secret && src.Secret != nil && src.Secret.Name == name {
					return true
				}
				if !secret && src.ConfigMap != nil && src.ConfigMap.Name == name {
					return true
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, c := range containers {
		for _, ef := range c.EnvFrom {
			if secret && ef.SecretRef != nil && ef.SecretRef.Name == name {
				return true
			}
			if !secret && ef.ConfigMapRef != nil && ef.ConfigMapRef.Name == name {
				return true
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if secret && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
			if !secret && e.ValueFrom.ConfigMapKeyRef != nil && e.ValueFrom.ConfigMapKeyRef.Name == name {
				return true
			}
		}
	}
	return false
}
