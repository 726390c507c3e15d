package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/svcnet/svcnet/proxy"
)

// serviceEvents records the proxy modes' Service events as core/v1 Events
// (source component svcnet-proxy, host = the node), so that they show in
// `kubectl describe svc`. The Service is read first for its UID, which
// describe's event query matches on; by a list with a metadata.name field
// selector, because kube-proxy's role (system:node-proxier) may list and
// watch Services but not get them.
type serviceEvents struct {
	client kubernetes.Interface
	rec    record.EventRecorder
	log    *slog.Logger
}

var _ proxy.EventSink = (*serviceEvents)(nil)

// newServiceEvents starts an event broadcaster writing through client; stop
// it with the returned function.
func newServiceEvents(client kubernetes.Interface, node string, log *slog.Logger) (*serviceEvents, func()) {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "svcnet-proxy", Host: node})
	return &serviceEvents{client: client, rec: rec, log: log}, b.Shutdown
}

// ServiceEvent implements proxy.EventSink without blocking the sync loop.
func (e *serviceEvents) ServiceEvent(svc types.NamespacedName, eventType, reason, message string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := e.client.CoreV1().Services(svc.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + svc.Name})
		if err == nil && len(l.Items) == 0 {
			err = fmt.Errorf("service not found")
		}
		if err != nil {
			e.log.Warn("cannot record event on service", "service", svc.String(), "reason", reason, "err", err)
			return
		}
		e.rec.Event(&l.Items[0], eventType, reason, message)
	}()
}
