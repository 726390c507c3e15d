package apiserver

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/allocator"
	"github.com/svcnet/svcnet/registry"
)

var eventsResource = schema.GroupResource{Resource: "events"}

// repairEventSource returns the reporting controller and action that
// kube-apiserver's repair controllers put on the Events of a conflict: the
// ClusterIP repair ("ipallocator-repair-controller", ClusterIPAllocation)
// or the NodePort repair ("portallocator-repair-controller",
// PortAllocation), told apart by the reason.
func repairEventSource(reason string) (controller, action string) {
	switch reason {
	case "PortOutOfRange", "PortAlreadyAllocated":
		return "portallocator-repair-controller", "PortAllocation"
	case "IPAddressNotAllocated", "IPAddressWrongReference":
		return "ipallocator-repair-controller", "IPAddressAllocation"
	}
	return "ipallocator-repair-controller", "ClusterIPAllocation"
}

// recordRepairConflict writes a conflict found by the allocator repair as a
// Warning Event on the Service, as kube-apiserver's repair controllers do
// through the events.k8s.io recorder (eventTime, action, reporting
// controller and instance set; no source, count or timestamps).
func (s *Server) recordRepairConflict(ctx context.Context, c allocator.Conflict) error {
	st, ok := s.byGR[eventsResource]
	if !ok {
		return fmt.Errorf("events resource not served")
	}
	controller, action := repairEventSource(c.Reason)
	host, _ := os.Hostname()
	now := time.Now()
	ns := c.Service.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", c.Service.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      c.Service,
		Reason:              c.Reason,
		Message:             c.Message,
		Type:                corev1.EventTypeWarning,
		EventTime:           metav1.NewMicroTime(now),
		Action:              action,
		ReportingController: controller,
		ReportingInstance:   controller + "-" + host,
	}
	if _, err := st.Create(ctx, ns, ev, registry.WriteOptions{FieldManager: controller}); err != nil {
		return fmt.Errorf("record %s event on service %s/%s: %w", c.Reason, ns, c.Service.Name, err)
	}
	return nil
}
