package seeds

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var (
	runningOn = regexp.MustCompile(`Running on: (\S+) \|`)
	setCookie = regexp.MustCompile(`(?mi)^Set-Cookie: (INGRESSCOOKIE=[^;\r\n]+)([^\r\n]*)`)
)

// 23: the seed's cookie-affinity Ingress (seed 001), applied as written,
// served by the Ingress controller of svcnet up: the default IngressClass is
// given to it, its status names the control-plane node's address, a first
// request from the machine (the node network) gets an INGRESSCOOKIE cookie
// with a 48-hour Expires, requests that send it back stay on one pod while
// new clients spread over all three, other hosts get the default backend's
// 404, and when the cookie's pod goes away the session moves to a live one.
func ingressCookieAffinity(s *scenario) {
	// The tutorial's file (docs/tutorial.md, section 13).
	example, _ := filepath.Abs(filepath.Join("..", "..", "docs", "examples", "ingress-cookie.yaml"))
	s.kubectl("apply", "-f", example)
	pods, _ := s.waitPods("app=my-app", 3)
	class := s.kubectl("get", "ingress", "my-ingress", "-o", "jsonpath={.spec.ingressClassName}")
	if class != "svcnet" {
		s.errorf([]string{"kubectl get ingress my-ingress -o jsonpath={.spec.ingressClassName}"}, class, "the default IngressClass svcnet was not given to the seed's Ingress")
	}
	addr := nodeIP(1)
	s.eventually(60*time.Second, "kubectl get ingress shows the controller's address", func() ([]string, string, bool) {
		out, _ := s.c.kubectl("get", "ingress", "my-ingress")
		return []string{"kubectl get ingress my-ingress"}, out, strings.Contains(out, "example.com") && strings.Contains(out, addr) && strings.Contains(out, "svcnet")
	})
	url := "http://" + addr + "/"
	curl := func(extra ...string) (string, error) {
		return s.c.onLab(append([]string{"curl", "-sS", "-m", "3", "-i", "-H", "Host: example.com"}, append(extra, url)...)...)
	}
	// A first request: the cookie and the pod that answered.
	var first string
	s.eventually(60*time.Second, "the Ingress answers for example.com with a session cookie", func() ([]string, string, bool) {
		out, err := curl()
		first = out
		return []string{"curl -i -H 'Host: example.com' " + url}, out, err == nil && strings.Contains(out, " 200 ") && setCookie.MatchString(out)
	})
	m := setCookie.FindStringSubmatch(first)
	cookie, attrs := m[1], m[2]
	if !strings.Contains(attrs, "Expires=") || !strings.Contains(attrs, "Path=/") {
		s.errorf([]string{"curl -i -H 'Host: example.com' " + url}, first, "the session cookie has no Expires or Path=/ (session-cookie-expires 172800)")
	}
	if mm := regexp.MustCompile(`Expires=([^;]+)`).FindStringSubmatch(attrs); mm != nil {
		exp, err := time.Parse(time.RFC1123, mm[1])
		if want := time.Now().Add(48 * time.Hour); err != nil || exp.Before(want.Add(-5*time.Minute)) || exp.After(want.Add(5*time.Minute)) {
			s.errorf([]string{"curl -i"}, first, "the cookie expires at %q, want about 48 hours from now (%v)", mm[1], err)
		}
	}
	pod := runningOn.FindStringSubmatch(first)[1]
	// With the cookie: always the same pod, and no new cookie.
	for i := 0; i < 10; i++ {
		out, err := curl("-H", "Cookie: "+cookie)
		got := runningOn.FindStringSubmatch(out)
		if err != nil || got == nil || got[1] != pod {
			s.failf([]string{"curl -i -H 'Host: example.com' -H 'Cookie: " + cookie + "' " + url}, out, err, "a request with the session cookie did not reach %s", pod)
		}
		if setCookie.MatchString(out) {
			s.errorf([]string{"curl -i -H 'Cookie: " + cookie + "'"}, out, "a request with a valid session cookie was given a new one")
		}
	}
	// Without it: new sessions spread over every pod.
	seen := map[string]bool{}
	var outs []string
	for i := 0; i < 60 && len(seen) < len(pods); i++ {
		out, err := curl()
		if got := runningOn.FindStringSubmatch(out); err == nil && got != nil {
			seen[got[1]] = true
		}
		outs = append(outs, out)
	}
	if len(seen) != len(pods) {
		s.errorf([]string{"curl -i -H 'Host: example.com' " + url + " (x60, no cookie)"}, strings.Join(outs, "\n"), "new sessions reached %d of %d pods", len(seen), len(pods))
	}
	// Another host: no rule names it and no default backend is set.
	if out, err := s.c.onLab("curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: other.example", url); err != nil || out != "404" {
		s.errorf([]string{"curl -H 'Host: other.example' " + url}, out, "want the default backend's 404")
	}
	// From a pod, by the same address: the controller is on its node's
	// network, which every pod reaches.
	if out, err := s.c.inPod("default", pods[0], "curl", "-sS", "-m", "3", "-H", "Host: example.com", url); err != nil || !runningOn.MatchString(out) {
		s.errorf([]string{"kubectl exec " + pods[0] + " -- curl -H 'Host: example.com' " + url}, out, "a pod does not reach the Ingress")
	}
	// The cookie's pod goes away: the session moves to a live pod (the
	// Service's L4 affinity loses its pod the same way, seed 001).
	s.kubectl("delete", "pod", pod, "--wait=true")
	s.eventually(60*time.Second, "a request with the old cookie reaches a live pod", func() ([]string, string, bool) {
		out, err := curl("-H", "Cookie: "+cookie)
		got := runningOn.FindStringSubmatch(out)
		return []string{"curl -i -H 'Cookie: " + cookie + "' " + url}, out, err == nil && got != nil && got[1] != pod
	})
	ingressTLS(s, addr)
	s.kubectl("delete", "-f", example, "--wait=true")
	s.eventually(30*time.Second, "example.com is not served once the Ingress is gone", func() ([]string, string, bool) {
		out, err := s.c.onLab("curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: example.com", url)
		return []string{"curl -H 'Host: example.com' " + url}, out, err == nil && out == "404"
	})
}

// ingressTLS is the tutorial's TLS step (docs/tutorial.md, section 13): a
// self-signed certificate made with openssl, `kubectl create secret tls`,
// `kubectl create ingress ... tls=SECRET`, then curl over HTTPS with that
// certificate as its CA (SNI secure.example.com to the node's port 443),
// and plain HTTP redirected to HTTPS.
func ingressTLS(s *scenario, addr string) {
	dir := s.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	gen := []string{"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
		"-subj", "/CN=secure.example.com", "-addext", "subjectAltName=DNS:secure.example.com", "-keyout", key, "-out", crt}
	if out, err := exec.Command(gen[0], gen[1:]...).CombinedOutput(); err != nil {
		s.failf(gen, string(out), err, "openssl could not make a certificate")
	}
	s.kubectl("create", "secret", "tls", "secure-tls", "--cert", crt, "--key", key)
	s.kubectl("create", "ingress", "secure", "--rule=secure.example.com/*=my-service:80,tls=secure-tls")
	https := []string{"curl", "-sS", "-m", "3", "--cacert", crt, "--resolve", "secure.example.com:443:" + addr, "https://secure.example.com/"}
	s.eventually(60*time.Second, "secure.example.com answers over HTTPS with its certificate", func() ([]string, string, bool) {
		out, err := s.c.onLab(https...)
		return https, out, err == nil && runningOn.MatchString(out)
	})
	redirect := []string{"curl", "-sS", "-m", "3", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "-H", "Host: secure.example.com", "http://" + addr + "/"}
	if out, err := s.c.onLab(redirect...); err != nil || out != "308 https://secure.example.com/" {
		s.errorf(redirect, out, "want plain HTTP for the TLS host redirected: 308 https://secure.example.com/")
	}
	s.kubectl("delete", "ingress", "secure")
	s.kubectl("delete", "secret", "secure-tls")
}
