package seeds

import (
	"regexp"
	"strings"
	"time"
)

// 24: init containers that wait for Services by name. The pod stays in
// Init:0/2 while neither Service exists (its first init container's log
// says it is waiting), goes to Init:1/2 once the first Service is created
// and runs once the second one is; the init containers end Completed.
func initContainersWaitForServices(s *scenario) {
	s.apply("init-wait.yaml")
	status := func() string {
		out, _ := s.c.kubectl("get", "pod", "orders", "--no-headers")
		return out
	}
	s.eventually(60*time.Second, "orders in Init:0/2, waiting for catalog", func() ([]string, string, bool) {
		out := status()
		logs, _ := s.c.kubectl("logs", "orders", "-c", "wait-for-catalog")
		return []string{"kubectl get pod orders; kubectl logs orders -c wait-for-catalog"}, out + logs,
			regexp.MustCompile(`^orders\s+0/1\s+Init:0/2\s`).MatchString(out) && strings.Contains(logs, "waiting for catalog")
	})
	s.kubectl("create", "service", "clusterip", "catalog", "--tcp=80:8080")
	s.eventually(60*time.Second, "orders in Init:1/2 once catalog exists", func() ([]string, string, bool) {
		out := status()
		return []string{"kubectl get pod orders"}, out, regexp.MustCompile(`^orders\s+0/1\s+Init:1/2\s`).MatchString(out)
	})
	s.kubectl("create", "service", "clusterip", "ledger", "--tcp=80:8080")
	s.eventually(60*time.Second, "orders Running once ledger exists", func() ([]string, string, bool) {
		out := status()
		return []string{"kubectl get pod orders"}, out, regexp.MustCompile(`^orders\s+1/1\s+Running\s`).MatchString(out)
	})
	if out := s.kubectl("logs", "orders", "-c", "orders"); !strings.Contains(out, "orders is running") {
		s.errorf([]string{"kubectl logs orders -c orders"}, out, "the app container did not run")
	}
	out := s.kubectl("get", "pod", "orders", "-o", `jsonpath={range .status.initContainerStatuses[*]}{.name}={.state.terminated.reason} {end}`)
	if strings.TrimSpace(out) != "wait-for-catalog=Completed wait-for-ledger=Completed" {
		s.errorf([]string{"kubectl get pod orders -o jsonpath=..."}, out, "want both init containers Completed")
	}
	s.kubectl("delete", "pod", "orders", "--wait=false")
	s.kubectl("delete", "service", "catalog", "ledger")
}
