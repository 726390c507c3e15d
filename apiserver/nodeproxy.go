package apiserver

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// podProxySubresources are the pod subresources proxied to the node agent.
var podProxySubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true}

// handlePodProxy forwards pods/log, pods/exec, pods/attach and
// pods/portforward to the node agent of the pod's node, as kube-apiserver
// does towards the kubelet: to http://<node InternalIP>:<kubelet port> at
// /containerLogs/..., /exec/..., /attach/..., /portForward/.... Protocol
// upgrades (SPDY, WebSocket) pass through.
func (s *Server) handlePodProxy(w http.ResponseWriter, r *http.Request, req request) error {
	obj, err := req.res.Get(r.Context(), req.namespace, req.name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("pod %s does not have a host assigned", pod.Name))
	}
	nobj, err := s.byGR[nodesGR].Get(r.Context(), "", pod.Spec.NodeName)
	if err != nil {
		return err
	}
	node := nobj.(*corev1.Node)
	host := ""
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && host == "" {
				host = a.Address
			}
		}
	}
	if host == "" {
		return apierrors.NewBadRequest(fmt.Sprintf("node %s has no address", node.Name))
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port == 0 {
		port = 10250
	}
	q := r.URL.Query()
	container := q.Get("container")
	if container == "" && req.sub != "portforward" {
		if len(pod.Spec.Containers) != 1 {
			names := []string{}
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names))
		}
		container = pod.Spec.Containers[0].Name
	}
	target := &url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port))}
	out := url.Values{}
	switch req.sub {
	case "log":
		target.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
		for _, k := range []string{"follow", "previous", "timestamps", "tailLines", "limitBytes", "sinceSeconds", "sinceTime"} {
			if v := q.Get(k); v != "" {
				out.Set(k, v)
			}
		}
	case "exec", "attach":
		target.Path = fmt.Sprintf("/%s/%s/%s/%s", req.sub, pod.Namespace, pod.Name, container)
		out["command"] = q["command"]
		for from, to := range map[string]string{"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"} {
			if v := q.Get(from); v == "true" || v == "1" {
				out.Set(to, "1")
			}
		}
	case "portforward":
		target.Path = fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name)
		out["ports"] = q["ports"]
	}
	target.RawQuery = out.Encode()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = target
			pr.Out.Host = target.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach node %s: %v", node.Name, err)))
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}
