package service_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/allocator/etcdtest"
	"github.com/svcnet/svcnet/apiserver"
	"github.com/svcnet/svcnet/apiserver/apiservertest"
	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/registry/service"
)

// startAPIServer runs an apiserver on the shared etcd at url with this
// package's strategies, and returns a client and the allocator config.
func startAPIServer(t *testing.T, url string, opts ...apiservertest.Option) (*kubernetes.Clientset, service.Config) {
	t.Helper()
	cfg, err := service.NewEtcdConfig(etcdtest.Client(t, url), service.DefaultServiceClusterIPRange, service.DefaultServiceNodePortRange)
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]apiservertest.Option{
		apiservertest.WithEtcd(url),
		apiservertest.WithConfig(func(c *apiserver.Config) {
			// Only services: the test apiserver advertises 127.0.0.1, which
			// the real Endpoints/EndpointSlice validation rejects (loopback).
			c.Strategies = map[schema.GroupResource]registry.Strategy{
				apiserver.ServicesResource: service.NewStrategy(cfg),
			}
		}),
	}, opts...)
	srv := apiservertest.Start(t, opts...)
	return kubernetes.NewForConfigOrDie(srv.Config), cfg
}

func nodePortService(name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 38080, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func TestLifecycleThroughAPI(t *testing.T) {
	url := etcdtest.Start(t)
	c, cfg := startAPIServer(t, url)
	ctx := context.Background()
	svcs := c.CoreV1().Services("default")

	created, err := svcs.Create(ctx, nodePortService("web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip, np := created.Spec.ClusterIP, created.Spec.Ports[0].NodePort
	if ip == "" || np == 0 || created.Spec.Ports[0].Protocol != corev1.ProtocolTCP ||
		created.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyCluster {
		t.Fatalf("created: %+v", created.Spec)
	}

	// Conflicting requests answer 422 with the allocator's words.
	dup := nodePortService("dup")
	dup.Spec.ClusterIP = ip
	_, err = svcs.Create(ctx, dup, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate IP "+ip+": provided IP is already allocated") {
		t.Fatalf("duplicate clusterIP: %v", err)
	}
	dup.Spec.ClusterIP = ""
	dup.Spec.Ports[0].NodePort = np
	_, err = svcs.Create(ctx, dup, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), fmt.Sprintf("spec.ports[0].nodePort: Invalid value: %d: provided port is already allocated", np)) {
		t.Fatalf("duplicate nodePort: %v", err)
	}
	st := err.(apierrors.APIStatus).Status()
	if st.Code != 422 || st.Details == nil || len(st.Details.Causes) != 1 ||
		st.Details.Causes[0].Field != "spec.ports[0].nodePort" || st.Details.Causes[0].Type != metav1.CauseTypeFieldValueInvalid {
		t.Fatalf("status of duplicate nodePort: %+v", st)
	}

	// Re-applying the original manifest keeps the allocations.
	again := nodePortService("web")
	again.ResourceVersion = created.ResourceVersion
	updated, err := svcs.Update(ctx, again, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Spec.ClusterIP != ip || updated.Spec.Ports[0].NodePort != np {
		t.Fatalf("re-apply changed %s/%d to %s/%d", ip, np, updated.Spec.ClusterIP, updated.Spec.Ports[0].NodePort)
	}

	// A dry-run create allocates nothing.
	before, _ := cfg.NodePorts.Used(ctx)
	if _, err := svcs.Create(ctx, nodePortService("dry"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if after, _ := cfg.NodePorts.Used(ctx); after != before {
		t.Fatalf("dry run allocated node ports: %d → %d", before, after)
	}

	// NodePort → ClusterIP frees the node port.
	toCIP := updated.DeepCopy()
	toCIP.Spec.Type = corev1.ServiceTypeClusterIP
	if updated, err = svcs.Update(ctx, toCIP, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if has, _ := cfg.NodePorts.Has(ctx, int(np)); has || updated.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("node port %d still held after NodePort→ClusterIP", np)
	}

	// A restarted apiserver (new allocators on a new etcd client) still
	// knows the IP: the state is in etcd.
	restarted, err := service.NewEtcdConfig(etcdtest.Client(t, url), service.DefaultServiceClusterIPRange, service.DefaultServiceNodePortRange)
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := restarted.ClusterIPs[0].Has(ctx, netip.MustParseAddr(ip)); !has {
		t.Fatalf("restart forgot IP %s", ip)
	}

	// Delete frees the ClusterIP.
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr(ip)
	if has, _ := cfg.ClusterIPs[0].Has(ctx, addr); has {
		t.Fatalf("ClusterIP %s still held after delete", ip)
	}

	// Repair frees a leak planted in etcd.
	leak := netip.MustParseAddr("10.96.77.77")
	if err := cfg.ClusterIPs[0].Allocate(ctx, leak, false); err != nil {
		t.Fatal(err)
	}
	r := cfg.Repairer(nil)
	r.LeakThreshold = 1
	err = r.RunOnce(ctx, func(ctx context.Context) ([]corev1.Service, error) {
		l, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return l.Items, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if has, _ := cfg.ClusterIPs[0].Has(ctx, leak); has {
		t.Fatal("repair did not free the planted leak")
	}
	if has, _ := cfg.ClusterIPs[0].Has(ctx, netip.MustParseAddr("10.96.0.1")); !has {
		t.Fatal("repair freed the kubernetes service's IP")
	}
}
