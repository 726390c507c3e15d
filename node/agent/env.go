package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcnet/svcnet/node/envvars"
)

// defaultPath is the PATH a container gets when it sets none; images
// normally set it, and here the "image" is the node's filesystem.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Expand replaces $(VAR) references in s with values from lookup, as
// Kubernetes does for env values, command and args: "$$" is an escaped "$",
// and a reference to an unknown variable is left as written.
func Expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envInput is what a container's environment depends on.
type envInput struct {
	pod      *v1.Pod
	c        *v1.Container
	services []*v1.Service
	hostname string
	podIP    string
	hostIP   string
	client   kubernetes.Interface
}

// containerEnv builds the environment as the kubelet does: the container's
// envFrom and env (in order, each value expanded against what precedes it
// and the Service variables), then the Service variables it did not set,
// then HOSTNAME, PATH and HOME defaults a container runtime would provide.
// It returns the environment as KEY=VALUE strings, and a lookup for
// expanding command and args.
func containerEnv(ctx context.Context, in envInput) ([]string, func(string) (string, bool), error) {
	svc := envvars.ForPod(in.pod.Namespace, in.pod.Spec.EnableServiceLinks, in.services)
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	lookup := func(k string) (string, bool) {
		if v, ok := vals[k]; ok {
			return v, true
		}
		v, ok := svc[k]
		return v, ok
	}
	ns := in.pod.Namespace
	for _, ef := range in.c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := in.client.CoreV1().ConfigMaps(ns).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if isOptional(ef.ConfigMapRef.Optional) {
					continue
				}
				return nil, nil, fmt.Errorf("configmap %q not found", ef.ConfigMapRef.Name)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s, err := in.client.CoreV1().Secrets(ns).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if isOptional(ef.SecretRef.Optional) {
					continue
				}
				return nil, nil, fmt.Errorf("secret %q not found", ef.SecretRef.Name)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range in.c.Env {
		if e.ValueFrom == nil {
			set(e.Name, Expand(e.Value, lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, in, e.ValueFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			set(e.Name, v)
		}
	}
	var svcKeys []string
	for k := range svc {
		if _, ok := vals[k]; !ok {
			svcKeys = append(svcKeys, k)
		}
	}
	sort.Strings(svcKeys)
	for _, k := range svcKeys {
		set(k, svc[k])
	}
	for k, v := range map[string]string{"HOSTNAME": in.hostname, "PATH": defaultPath, "HOME": "/root"} {
		if _, ok := vals[k]; !ok {
			set(k, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, lookup, nil
}

func isOptional(b *bool) bool { return b != nil && *b }

func valueFrom(ctx context.Context, in envInput, src *v1.EnvVarSource) (string, bool, error) {
	ns := in.pod.Namespace
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(in, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil:
		r := src.ConfigMapKeyRef
		cm, err := in.client.CoreV1().ConfigMaps(ns).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("configmap %q not found", r.Name)
		}
		v, ok := cm.Data[r.Key]
		if !ok && !isOptional(r.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", r.Key, ns, r.Name)
		}
		return v, ok, nil
	case src.SecretKeyRef != nil:
		r := src.SecretKeyRef
		s, err := in.client.CoreV1().Secrets(ns).Get(ctx, r.Name, metav1.GetOptions{})
		if err != nil {
			if isOptional(r.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("secret %q not found", r.Name)
		}
		v, ok := s.Data[r.Key]
		if !ok && !isOptional(r.Optional) {
			return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", r.Key, ns, r.Name)
		}
		return string(v), ok, nil
	case src.ResourceFieldRef != nil:
		return "", false, fmt.Errorf("resourceFieldRef is not supported by svcnet")
	}
	return "", false, nil
}

func fieldValue(in envInput, path string) (string, error) {
	p := in.pod
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return in.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return in.hostIP, nil
	}
	for _, pre := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels", p.Labels}, {"metadata.annotations", p.Annotations}} {
		if path == pre.prefix {
			keys := make([]string, 0, len(pre.m))
			for k := range pre.m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var lines []string
			for _, k := range keys {
				lines = append(lines, fmt.Sprintf("%s=%q", k, pre.m[k]))
			}
			return strings.Join(lines, "\n"), nil
		}
		if strings.HasPrefix(path, pre.prefix+"['") && strings.HasSuffix(path, "']") {
			return pre.m[path[len(pre.prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}
