package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// TestFieldSelectors drives every kind's field selectors through client-go:
// the labels each kind's Kubernetes field-label conversion accepts, the
// values its registry's field set gives, and kube-apiserver's 400 with the
// conversion's own wording for the rest.
func TestFieldSelectors(t *testing.T) {
	srv := apiservertest.Start(t)
	ctx := ctxT(t)
	c := kubernetes.NewForConfigOrDie(srv.Config)
	svcs := c.CoreV1().Services("default")
	mk := func(name string, typ corev1.ServiceType, clusterIP string, lbls map[string]string) {
		t.Helper()
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Port: 80}}}}
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("np", corev1.ServiceTypeNodePort, "", nil)
	mk("cip", corev1.ServiceTypeClusterIP, "", nil)
	mk("headless", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, nil)
	mk("other-proxy", corev1.ServiceTypeClusterIP, "", map[string]string{"service.kubernetes.io/service-proxy-name": "x"})

	names := func(l *corev1.ServiceList) map[string]bool {
		m := map[string]bool{}
		for _, s := range l.Items {
			m[s.Name] = true
		}
		return m
	}
	l, err := svcs.List(ctx, metav1.ListOptions{FieldSelector: "spec.type=NodePort"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(l); len(got) != 1 || !got["np"] {
		t.Errorf("spec.type=NodePort: %v", got)
	}
	// kube-proxy 1.37's Service informer (cmd/kube-proxy/app/server.go).
	noProxyName, _ := labels.NewRequirement("service.kubernetes.io/service-proxy-name", selection.DoesNotExist, nil)
	noHeadless, _ := labels.NewRequirement("service.kubernetes.io/headless", selection.DoesNotExist, nil)
	kp := metav1.ListOptions{
		LabelSelector: labels.NewSelector().Add(*noProxyName, *noHeadless).String(),
		FieldSelector: fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone).String(),
	}
	l, err = svcs.List(ctx, kp)
	if err != nil {
		t.Fatalf("kube-proxy's list: %v", err)
	}
	if got := names(l); len(got) != 3 || !got["np"] || !got["cip"] || !got["kubernetes"] {
		t.Errorf("kube-proxy's selectors: %v", got)
	}
	kp.Watch, kp.ResourceVersion = true, l.ResourceVersion
	w, err := svcs.Watch(ctx, kp)
	if err != nil {
		t.Fatalf("kube-proxy's watch: %v", err)
	}
	w.Stop()
	all, err := c.CoreV1().Services("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=default,spec.clusterIP!=None"})
	if err != nil || len(all.Items) != 4 { // np, cip, other-proxy, kubernetes
		t.Errorf("all namespaces: %v %d", err, len(all.Items))
	}

	// Pods: status.podIP is the first of status.podIPs; spec.host is the
	// legacy name of spec.nodeName; status.podIPs is accepted but (as in
	// Kubernetes) not in the field set, so it equals "".
	p := testPod("p")
	p.Spec.NodeName = "n1"
	p.Spec.HostNetwork = true
	if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, _ = c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	p.Status.PodIP, p.Status.PodIPs = "10.244.0.5", []corev1.PodIP{{IP: "10.244.0.5"}}
	if _, err := c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for sel, want := range map[string]int{
		"spec.host=n1": 1, "spec.nodeName=n1": 1, "spec.hostNetwork=true": 1, "spec.restartPolicy=Always": 1,
		"spec.schedulerName=default-scheduler": 1, "spec.serviceAccountName=": 1, "status.phase=Pending": 1,
		"status.podIP=10.244.0.5": 1, "status.podIPs=10.244.0.5": 0, "status.podIPs=": 1, "status.nominatedNodeName=": 1,
	} {
		l, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil || len(l.Items) != want {
			t.Errorf("pods %s: %v, %d items, want %d", sel, err, len(l.Items), want)
		}
	}

	// Nodes, namespaces, events.
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "spec.unschedulable=true"}); err != nil || len(nl.Items) != 1 {
		t.Errorf("nodes spec.unschedulable=true: %v", err)
	}
	if nl, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Active,metadata.name=default"}); err != nil || len(nl.Items) != 1 {
		t.Errorf("namespaces status.phase: %v", err)
	}
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"},
		Reason: "Started", Type: "Normal", ReportingController: "svcnet.io/node", ReportingInstance: "n1"}
	if _, err := c.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"involvedObject.kind=Pod,involvedObject.name=p", "reason=Started", "type=Normal",
		"reportingComponent=svcnet.io/node", "source=svcnet.io/node"} { // source falls back to the reporting controller
		if el, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: sel}); err != nil || len(el.Items) != 1 {
			t.Errorf("events %s: %v", sel, err)
		}
	}

	// Unsupported labels: 400 with the conversion's words.
	for _, tc := range []struct {
		list func() error
		msg  string
	}{
		{func() error { _, err := svcs.List(ctx, metav1.ListOptions{FieldSelector: "spec.foo=1"}); return err }, "field label not supported: spec.foo"},
		{func() error {
			_, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=x"})
			return err
		}, "field label not supported: metadata.namespace"},
		{func() error {
			_, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "name=default"})
			return err
		}, "field label not supported: name"},
		// apps/v1 registers no conversion for ReplicaSet: apimachinery's default.
		{func() error {
			_, err := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{FieldSelector: "status.replicas=1"})
			return err
		}, `"status.replicas" is not a known field selector: only "metadata.name", "metadata.namespace"`},
		{func() error {
			_, err := c.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{FieldSelector: "data.x=1"})
			return err
		}, `"data.x" is not a known field selector: only "metadata.name", "metadata.namespace"`},
	} {
		err := tc.list()
		if !apierrors.IsBadRequest(err) || err.Error() != tc.msg {
			t.Errorf("got %v, want 400 %q", err, tc.msg)
		}
	}
}
