package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UserAgent is sent by httpGet probes, as the kubelet of the API level
// svcnet targets does.
const UserAgent = "kube-probe/1.37"

// Target says where a pod's probes connect and how exec probes run.
type Target struct {
	// PodIP is the default host of httpGet and tcpSocket probes.
	PodIP string
	// Ports are the container's ports, for named probe ports.
	Ports []v1.ContainerPort
	// Dial opens connections; it must dial from where the probed address is
	// reachable (the node agent dials from the node's network namespace).
	// nil means net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Exec runs an exec probe's command in the container and returns its
	// exit code.
	Exec func(ctx context.Context, cmd []string) (int, error)
}

// Run performs one check of p against t within p's timeout. The returned
// string is the failure message, in the kubelet's words where it has them.
func Run(ctx context.Context, p *v1.Probe, timeout time.Duration, t Target) (Result, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return runHTTP(ctx, p.HTTPGet, timeout, t)
	case p.TCPSocket != nil:
		return runTCP(ctx, p.TCPSocket, t)
	case p.Exec != nil:
		if t.Exec == nil {
			return Unknown, "exec probes are not supported here"
		}
		code, err := t.Exec(ctx, p.Exec.Command)
		if err != nil {
			if ctx.Err() != nil {
				return Failure, fmt.Sprintf("command %q timed out", strings.Join(p.Exec.Command, " "))
			}
			return Unknown, err.Error()
		}
		if code != 0 {
			return Failure, fmt.Sprintf("command %q exited with %d", strings.Join(p.Exec.Command, " "), code)
		}
		return Success, ""
	case p.GRPC != nil:
		return Unknown, "grpc probes are not supported by svcnet"
	}
	return Unknown, "probe has no handler"
}

// ResolvePort turns a probe port (number or container port name) into a number.
func ResolvePort(p intstr.IntOrString, ports []v1.ContainerPort) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	for _, cp := range ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("couldn't find port: %s", p.StrVal)
}

func (t Target) dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if t.Dial != nil {
		return t.Dial
	}
	var d net.Dialer
	return d.DialContext
}

func runTCP(ctx context.Context, a *v1.TCPSocketAction, t Target) (Result, string) {
	port, err := ResolvePort(a.Port, t.Ports)
	if err != nil {
		return Failure, err.Error()
	}
	host := a.Host
	if host == "" {
		host = t.PodIP
	}
	c, err := t.dialer()(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, fmt.Sprintf("dial tcp %s: %v", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	_ = c.Close()
	return Success, ""
}

func runHTTP(ctx context.Context, a *v1.HTTPGetAction, timeout time.Duration, t Target) (Result, string) {
	port, err := ResolvePort(a.Port, t.Ports)
	if err != nil {
		return Failure, err.Error()
	}
	host := a.Host
	if host == "" {
		host = t.PodIP
	}
	scheme := strings.ToLower(string(a.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := a.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if pu, err := url.Parse(path); err == nil {
		u.Path, u.RawQuery = pu.Path, pu.RawQuery
	} else {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Failure, err.Error()
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "*/*")
	for _, h := range a.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:       t.dialer(),
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // kubelet probes skip verification too
			DisableKeepAlives: true,
			Proxy:             nil,
		},
		// Redirects to the same host are followed; others count as success,
		// as in the kubelet.
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if r.URL.Hostname() != via[0].URL.Hostname() || len(via) >= 10 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, fmt.Sprintf("Get %q: %v", u.String(), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10*1024))
	if resp.StatusCode >= 200 && resp.StatusCode < 400 {
		return Success, ""
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode)
}
