package speaker

import (
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// nodeInterfaces lists the names of this node's network interfaces, up or
// not, as MetalLB's announcer does.
func nodeInterfaces() ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ifs))
	for i, ifi := range ifs {
		out[i] = ifi.Name
	}
	return out, nil
}

// announceFailed is MetalLB's check before announcing in layer 2: when the
// advertisements name interfaces (ifs is not nil) and none of them exists
// on this node, each address gets a Warning event announceFailed on the
// Service, with MetalLB's message, and true is returned. The responder
// still gets the addresses (it answers on an interface as soon as one of
// that name appears), but no ServiceL2Status is written for them.
func (l *Layer2) announceFailed(in *ServiceInput, ifs []string) bool {
	if ifs == nil {
		return false
	}
	list := l.Interfaces
	if list == nil {
		list = nodeInterfaces
	}
	have, err := list()
	if err != nil {
		return false // cannot tell; announce as asked
	}
	for _, name := range ifs {
		if slices.Contains(have, name) {
			return false
		}
	}
	if l.Recorder != nil {
		for _, ip := range in.IPs {
			l.Recorder.Eventf(in.Service, corev1.EventTypeWarning, "announceFailed",
				"the interfaces specified by LB IP %q doesn't exist in assigned node %q with protocol %q", ip.String(), in.MyNode, l.Name())
		}
	}
	return true
}
