package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/apiserver/authz"
	"github.com/svcnet/svcnet/controller/daemonset"
	"github.com/svcnet/svcnet/internal/version"
)

// KubeProxyConfigMap is the ConfigMap (kube-system/kube-proxy, key
// config.conf) holding the proxies' KubeProxyConfiguration, as kubeadm
// clusters keep kube-proxy's: `kubectl edit cm kube-proxy -n kube-system`
// changes every node's proxy (mode, ipvs.strictARP, ...), which restarts
// itself with it.
const KubeProxyConfigMap = "kube-system/kube-proxy"

// kubeProxyConfig is the configuration Up's flags give the proxies.
func kubeProxyConfig(cfg Config) ([]byte, error) {
	minSync, err := time.ParseDuration(upMinSyncPeriod)
	if err != nil {
		return nil, err
	}
	sync := metav1.Duration{Duration: 30 * time.Second}
	bit := int32(14)
	c := kubeproxyconfig.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		BindAddress:        "0.0.0.0",
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		Mode:               kubeproxyconfig.ProxyMode(cfg.ProxyMode),
		ClusterCIDR:        cfg.ClusterCIDR,
		IPTables: kubeproxyconfig.KubeProxyIPTablesConfiguration{MasqueradeBit: &bit, SyncPeriod: sync,
			MinSyncPeriod: metav1.Duration{Duration: minSync}},
		IPVS:     kubeproxyconfig.KubeProxyIPVSConfiguration{SyncPeriod: sync, MinSyncPeriod: metav1.Duration{Duration: minSync}},
		NFTables: kubeproxyconfig.KubeProxyNFTablesConfiguration{MasqueradeBit: &bit, SyncPeriod: sync, MinSyncPeriod: metav1.Duration{Duration: minSync}},
	}
	if cfg.NodePortAddresses != "" {
		c.NodePortAddresses = strings.Split(cfg.NodePortAddresses, ",")
	}
	return yaml.Marshal(c)
}

// ensureKubeProxyConfig writes the proxies' ConfigMap from Up's flags (a
// second Up replaces what an edit left: its flags are the cluster's
// configuration when it starts) and lets the proxies read it: a Role in
// kube-system for get/list/watch of that ConfigMap, bound to
// system:kube-proxy (kubeadm grants it to the joining nodes, whose kubelet
// projects it into kube-proxy's pods).
func ensureKubeProxyConfig(ctx context.Context, client kubernetes.Interface, cfg Config) error {
	data, err := kubeProxyConfig(cfg)
	if err != nil {
		return err
	}
	ns, name, _ := strings.Cut(KubeProxyConfigMap, "/")
	if err := ensureNamespace(ctx, client, ns); err != nil {
		return err
	}
	labels := map[string]string{"app": "kube-proxy"}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Data: map[string]string{"config.conf": string(data)}}
	cur, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	case err == nil:
		cur.Data = cm.Data
		_, err = client.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("configmap %s: %w", KubeProxyConfigMap, err)
	}
	if err := ensureKubeProxyDaemonSet(ctx, client); err != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{name},
			Verbs: []string{"get", "list", "watch"}}}}
	if _, err := client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role kube-proxy: %w", err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "kube-proxy"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: authz.ProxyUser}}}
	if _, err := client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("rolebinding kube-proxy: %w", err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// ensureKubeProxyDaemonSet describes the nodes' proxies as kubeadm's
// kube-proxy DaemonSet of kube-system (`kubectl get daemonset kube-proxy
// -n kube-system`, as the seeds do). svcnet's node agents run them as
// processes, not pods: the DaemonSet carries daemonset.NodeAgentAnnotation,
// so that the DaemonSet controller creates no pods for it and counts the
// Ready nodes it selects as its ready proxies.
func ensureKubeProxyDaemonSet(ctx context.Context, client kubernetes.Interface) error {
	ns, name, _ := strings.Cut(KubeProxyConfigMap, "/")
	labels := map[string]string{"k8s-app": "kube-proxy"}
	privileged := true
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: ns, Labels: labels,
			Annotations: map[string]string{daemonset.NodeAgentAnnotation: "true"}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					Containers: []v1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:" + version.KubernetesGitVersion,
						Command:         []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"},
						Env:             []v1.EnvVar{{Name: "NODE_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						SecurityContext: &v1.SecurityContext{Privileged: &privileged},
						VolumeMounts:    []v1.VolumeMount{{Name: name, MountPath: "/var/lib/kube-proxy"}}}},
					Volumes: []v1.Volume{{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
						LocalObjectReference: v1.LocalObjectReference{Name: name}}}}},
					HostNetwork:        true,
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: "kube-proxy",
					Tolerations:        []v1.Toleration{{Operator: v1.TolerationOpExists}},
				},
			},
		},
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("daemonset kube-proxy: %w", err)
	}
	return nil
}

// writeKubeProxyManifest writes the static pod of a node's proxy into its
// agent's manifest directory. The mode, cluster CIDR, NodePort addresses
// and sync periods come from the kube-proxy ConfigMap (kubeProxyConfig).
// --min-sync-period: kube-proxy's 1 s (with a burst of two syncs) bounds the
// CPU of large clusters' syncs; a local cluster's partial syncs take
// milliseconds, and at 1 s a third change within a second (a pod that
// starts: created, address, Ready) waited up to a second for its rules.
// The Kubernetes documentation advises a lower value for small clusters.
// A --proxy-arg given to svcnet up wins over the ConfigMap. There is no
// --service-cluster-ip-range: the proxies read the ServiceCIDR objects, as
// kube-proxy does (ranges added at run time count).
func writeKubeProxyManifest(dir string, cfg Config, kubeconfig, node string) error {
	command := append([]string{cfg.Exe, "proxy", "--kubeconfig", kubeconfig, "--hostname-override", node,
		"--config-map", KubeProxyConfigMap}, cfg.ProxyArgs...)
	privileged := true
	grace := int64(30)
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system",
			Labels: map[string]string{"k8s-app": "kube-proxy", "component": "kube-proxy", "tier": "node"}},
		Spec: v1.PodSpec{
			HostNetwork:                   true,
			PriorityClassName:             "system-node-critical",
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:" + version.KubernetesGitVersion,
				Command:         command,
				SecurityContext: &v1.SecurityContext{Privileged: &privileged}}},
		},
	}
	b, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kube-proxy.yaml"), b, 0o644)
}
