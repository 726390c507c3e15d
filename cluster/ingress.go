package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// The Ingress controller of `svcnet up`, as kind's ingress-nginx set-up:
// one controller on the control-plane node, in that node's network
// namespace (hostNetwork), serving HTTP on the node's port 80 and HTTPS on
// its port 443, so that the
// node's address — which the controller writes into every Ingress's status
// (kubectl get ingress: ADDRESS) — reaches it from the node network, from
// every node and from every pod.
const (
	ingressNamespace  = "kube-system"
	ingressName       = "svcnet-ingress-controller"
	ingressSA         = "svcnet-ingress"
	ingressClassName  = "svcnet"
	ingressController = "svcnet.io/ingress"
	// IngressHealthzPort serves /healthz and /metrics of the controller.
	IngressHealthzPort = 10254
)

// ingressLabels select the controller's pods.
var ingressLabels = map[string]string{"app.kubernetes.io/name": "svcnet-ingress", "app.kubernetes.io/component": "controller"}

// IngressSelector is the label selector of the Ingress controller's pods.
func IngressSelector() string {
	var s []string
	for k, v := range ingressLabels {
		s = append(s, k+"="+v)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// ensureIngress creates the IngressClass svcnet (the default class: an
// Ingress without spec.ingressClassName is given it at creation), the
// controller's service account and its Deployment. A user's changes to the
// class are kept; the Deployment's command is brought up to date (the
// binary of this up may be another one's). Without cfg.Ingress, the
// Deployment an earlier up made is deleted (the class is the user's to keep).
func ensureIngress(ctx context.Context, client kubernetes.Interface, cfg Config, fams []familyNet) error {
	if !cfg.Ingress {
		err := client.AppsV1().Deployments(ingressNamespace).Delete(ctx, ingressName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Deployment %s: %w", ingressName, err)
		}
		return nil
	}
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: ingressClassName,
			Labels:      map[string]string{"app.kubernetes.io/name": "svcnet-ingress"},
			Annotations: map[string]string{networkingv1.AnnotationIsDefaultIngressClass: "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: ingressController},
	}
	if _, err := client.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create IngressClass %s: %w", class.Name, err)
	}
	if _, err := client.CoreV1().ServiceAccounts(ingressNamespace).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ingressSA}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service account %s: %w", ingressSA, err)
	}
	var addrs []string
	for _, f := range fams {
		addrs = append(addrs, f.nodeIP(1).String())
	}
	node := NodeName(cfg.Prefix, 1)
	grace := int64(15)
	one := int32(1)
	container := v1.Container{
		Name:  "controller",
		Image: "svcnet/ingress-controller",
		Command: []string{cfg.Exe, "ingress", "--kubeconfig", componentKubeconfig(cfg.DataDir, "ingress"),
			"--http-port", "80", "--https-port", "443", "--healthz-port", fmt.Sprint(IngressHealthzPort),
			"--controller-class", ingressController, "--ingress-class", ingressClassName,
			"--publish-status-address", strings.Join(addrs, ","),
			"--election-id", "svcnet-ingress-leader", "--election-namespace", ingressNamespace},
		Env: []v1.EnvVar{
			{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "POD_NAMESPACE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		},
		Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 80, Protocol: v1.ProtocolTCP},
			{Name: "https", ContainerPort: 443, HostPort: 443, Protocol: v1.ProtocolTCP},
			{Name: "metrics", ContainerPort: IngressHealthzPort, HostPort: IngressHealthzPort, Protocol: v1.ProtocolTCP}},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(IngressHealthzPort)}},
			PeriodSeconds: 2},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(IngressHealthzPort)}},
			InitialDelaySeconds: 30, PeriodSeconds: 10, FailureThreshold: 5},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: ingressName, Namespace: ingressNamespace, Labels: ingressLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: ingressLabels},
			// Its port is the node's: the old pod goes before the new one.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ingressLabels},
				Spec: v1.PodSpec{
					HostNetwork:                   true,
					DNSPolicy:                     v1.DNSClusterFirstWithHostNet,
					ServiceAccountName:            ingressSA,
					NodeSelector:                  map[string]string{v1.LabelHostname: node},
					Tolerations:                   []v1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Effect: v1.TaintEffectNoSchedule}},
					TerminationGracePeriodSeconds: &grace,
					Containers:                    []v1.Container{container},
				},
			},
		},
	}
	deps := client.AppsV1().Deployments(ingressNamespace)
	cur, err := deps.Get(ctx, ingressName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Deployment %s: %w", ingressName, err)
		}
	case err != nil:
		return fmt.Errorf("get Deployment %s: %w", ingressName, err)
	default:
		cs := cur.Spec.Template.Spec.Containers
		if len(cs) == 1 && slices.Equal(cs[0].Command, container.Command) && cur.Spec.Template.Spec.NodeSelector[v1.LabelHostname] == node {
			return nil
		}
		cur.Spec = dep.Spec
		if _, err := deps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update Deployment %s: %w", ingressName, err)
		}
	}
	return nil
}
