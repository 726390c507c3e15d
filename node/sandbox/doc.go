// Package sandbox runs pods as plain Linux processes in their own
// namespaces, without a container runtime.
//
// A pod sandbox is:
//   - a named network namespace (ip netns) whose eth0 is one end of a veth
//     pair; the other end is attached to the node's bridge (cni0 by default)
//     in hairpin mode, so that a pod's connection to a Service can be sent
//     back to the pod itself.
//     eth0 gets an address from the node's pod CIDR (IPAM, persisted on
//     disk) and a default route via the bridge's address, the first host
//     address of the pod CIDR;
//   - an infra process ("pause"), started as `ip netns exec <ns> <svcnet>
//     sandbox-init ...` in a new UTS and mount namespace. It sets the
//     hostname to the pod's hostname, bind-mounts the pod's own
//     /etc/resolv.conf, /etc/hosts and /etc/hostname (and, for nginx pods, a
//     private /usr/share/nginx/html) over the node's, and the pod's volumes
//     (Spec.Mounts, read-only where asked), and then waits. Its namespaces
//     are the pod's namespaces.
//
// A host-network pod (CreateHost) has no network namespace or address of
// its own; its infra process is cloned in the caller's network namespace
// with new UTS and mount namespaces, so that its hostname and volumes are
// its own too and nothing is ever mounted in the node's mount namespace.
//
// Containers are processes started with nsenter into the infra process's
// network, UTS and mount namespaces (`nsenter -t <pid> -n -u -m --wd=<dir>
// -- <argv>`), each in its own process group, with stdout and stderr written
// to a per-instance log file. Exec into a pod works the same way.
//
// Everything happens in the network namespace the caller runs in (the
// node's) and the namespaces created here; nothing touches the root
// namespace unless the caller runs there. The programs ip, nsenter and (for
// hostPort) iptables-restore must be installed.
package sandbox
