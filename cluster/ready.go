package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
)

// Ready means usable: Up prints the export line only once every node's
// proxy has synced its rules and cluster DNS answers, through the kube-dns
// Service, from every node. Nodes being Ready and the DNS pods being Ready
// is not enough: until a node's proxy has programmed the kube-dns
// endpoints, pods on that node get "connection refused" from 10.96.0.10.

// proxyHealthzPort is where every node's proxy serves /healthz (its
// --healthz-bind-address default, on all the node's addresses).
const proxyHealthzPort = 10256

// proxySynced reports whether the proxy serving /healthz at addr is healthy
// and has synced its data plane at least once (kube-proxy's body carries
// the time of the last successful sync; Go's zero time before the first).
func proxySynced(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy /healthz at %s: %s: %s", addr, resp.Status, body)
	}
	var h struct {
		LastUpdated string `json:"lastUpdated"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("proxy /healthz at %s: %w: %s", addr, err, body)
	}
	if h.LastUpdated == "" || strings.HasPrefix(h.LastUpdated, "0001-01-01") {
		return fmt.Errorf("proxy at %s has not synced yet", addr)
	}
	return nil
}

// inNetNS runs f on an OS thread inside the named network namespace (one
// of the node namespaces) and returns its error. Sockets opened by f stay
// in that namespace.
func inNetNS(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		h, err := netns.GetFromName(name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter netns %s: %w", name, err)
			return
		}
		ferr := f()
		// A thread that cannot go back is left locked: it ends with the
		// goroutine instead of serving others from the wrong namespace.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// dnsAnswers asks server, over UDP and over TCP, for the kubernetes
// Service's A record (AAAA with aaaa: the kubernetes Service has the
// cluster's primary family) and wants an answer.
func dnsAnswers(server string, aaaa bool) error {
	m := new(dns.Msg)
	qtype := dns.TypeA
	if aaaa {
		qtype = dns.TypeAAAA
	}
	m.SetQuestion("kubernetes.default.svc.cluster.local.", qtype)
	var errs []error
	for _, proto := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: time.Second}
		r, _, err := c.Exchange(m, net.JoinHostPort(server, "53"))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", proto, err))
		case r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0:
			errs = append(errs, fmt.Errorf("%s: %s with %d answers", proto, dns.RcodeToString[r.Rcode], len(r.Answer)))
		}
	}
	return errors.Join(errs...)
}

// waitUsable waits until every node's proxy has synced and cluster DNS
// answers from every node namespace.
func waitUsable(ctx context.Context, cfg Config, fams []familyNet) error {
	deadline := time.Now().Add(60 * time.Second)
	for i := 1; i <= cfg.Nodes; i++ {
		ns := fmt.Sprintf("%s-node-%d", cfg.Prefix, i)
		addr := net.JoinHostPort(fams[0].nodeIP(i).String(), strconv.Itoa(proxyHealthzPort))
		checks := []struct {
			what string
			f    func() error
		}{
			{"proxy synced", func() error { return proxySynced(ctx, addr) }},
			{"cluster DNS answers", func() error {
				return inNetNS(ns, func() error {
					var errs []error
					for _, f := range fams {
						errs = append(errs, dnsAnswers(f.dnsIP.String(), fams[0].v6))
					}
					return errors.Join(errs...)
				})
			}},
		}
		for _, c := range checks {
			for {
				err := c.f()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("node %s: %s: not after 60s: %w (see %s/logs)", NodeName(cfg.Prefix, i), c.what, err, cfg.DataDir)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	return nil
}
