package interop

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcnet/svcnet/internal/testbed"
)

// listSemantics runs one script of LISTs — whole, paginated across a write,
// at a resourceVersion, and invalid — against the real kube-apiserver and
// against svcnet's API server, and compares what each answered: the items,
// whether a continue token and a remaining count came back, how the list's
// resourceVersion relates to the first page's, and for errors the code,
// reason, causes and message (numbers masked). svcnet answers LISTs from its
// list cache, so this is where its consistency is held to kube-apiserver's
// watch cache.
func (c *realCluster) listSemantics(t *testing.T) {
	ns := testbed.NewNetNS(t, "rlist")
	data := t.TempDir()
	ns.Start(c.svcnet, "apiserver", "--data-dir", data, "--service-cluster-ip-range", serviceCIDR)
	kubeconfig := filepath.Join(data, "kubeconfig")
	var cfg *rest.Config
	waitFor(t, time.Minute, "svcnet admin kubeconfig", func() error {
		var err error
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		return err
	})
	cfg.Dial = nsDialer(ns)
	cfg.WarningHandler = rest.NoWarnings{}
	svcnet := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	waitFor(t, time.Minute, "svcnet apiserver /readyz and the kubernetes Service", func() error {
		_, err := svcnet.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err
	})
	theirs := listScript(t, c.admin)
	ours := listScript(t, svcnet)
	for i := range max(len(theirs), len(ours)) {
		var r, o string
		if i < len(theirs) {
			r = theirs[i]
		}
		if i < len(ours) {
			o = ours[i]
		}
		if r != o {
			t.Errorf("step %d:\n kube-apiserver: %s\n svcnet:         %s", i, r, o)
		} else {
			t.Logf("step %d: %s", i, r)
		}
	}
}

var digits = regexp.MustCompile(`[0-9]+`)

// listScript runs the script against one API server and returns one line per
// step.
func listScript(t *testing.T, cs kubernetes.Interface) []string {
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "listsem"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace listsem: %v", err)
	}
	svcs := cs.CoreV1().Services("listsem")
	var out []string
	create := func(name string, labels map[string]string) {
		t.Helper()
		_, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	for i := range 7 {
		create(fmt.Sprintf("ls-%d", i), map[string]string{"listsem": "yes", "even": strconv.FormatBool(i%2 == 0)})
	}
	var firstRV string
	describe := func(what string, l *corev1.ServiceList, err error) string {
		if err != nil {
			return describeErr(what, err)
		}
		var names []string
		for _, it := range l.Items {
			names = append(names, it.Name)
		}
		rem := "no remaining count"
		if l.RemainingItemCount != nil {
			rem = fmt.Sprintf("%d remaining", *l.RemainingItemCount)
		}
		rv := "a resourceVersion"
		switch {
		case l.ResourceVersion == "":
			rv = "no resourceVersion"
		case l.ResourceVersion == firstRV:
			rv = "the first page's resourceVersion"
		}
		return fmt.Sprintf("%s: %v, continue %v, %s, %s", what, names, l.Continue != "", rem, rv)
	}
	list := func(what string, opts metav1.ListOptions) *corev1.ServiceList {
		l, err := svcs.List(ctx, opts)
		out = append(out, describe(what, l, err))
		return l
	}
	list("whole, selected", metav1.ListOptions{LabelSelector: "listsem=yes"})
	list("whole, even", metav1.ListOptions{LabelSelector: "listsem=yes,even=true"})
	p1 := list("page 1 of 3", metav1.ListOptions{Limit: 3})
	firstRV = p1.ResourceVersion
	// A write between pages is not seen by the later pages.
	create("ls-7", map[string]string{"listsem": "yes"})
	p2 := list("page 2 of 3", metav1.ListOptions{Limit: 3, Continue: p1.Continue})
	list("page 3 of 3", metav1.ListOptions{Limit: 3, Continue: p2.Continue})
	list("page 1 of 3, selected", metav1.ListOptions{Limit: 3, LabelSelector: "even=true"})
	// kube-apiserver's legacy rule: a first page at a resourceVersion is
	// read at exactly that revision.
	list("page 1 at its resourceVersion", metav1.ListOptions{Limit: 3, ResourceVersion: firstRV})
	list("whole, exact at page 1's resourceVersion", metav1.ListOptions{LabelSelector: "listsem=yes", ResourceVersion: firstRV, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	list("whole, consistent", metav1.ListOptions{LabelSelector: "listsem=yes"})
	// resourceVersion "0" may be stale: only whether it answers is compared.
	_, err := svcs.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	out = append(out, fmt.Sprintf("resourceVersion 0: error %v", err != nil))

	rv, _ := strconv.ParseInt(firstRV, 10, 64)
	future := strconv.FormatInt(rv+1000000, 10)
	for _, c := range []struct {
		what string
		opts metav1.ListOptions
	}{
		{"a future resourceVersion", metav1.ListOptions{ResourceVersion: future}},
		{"a future resourceVersion, not older than", metav1.ListOptions{ResourceVersion: future, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{"a future resourceVersion, exact", metav1.ListOptions{ResourceVersion: future, ResourceVersionMatch: metav1.ResourceVersionMatchExact}},
		{"a future resourceVersion, one page", metav1.ListOptions{ResourceVersion: future, Limit: 2}},
		{"a malformed continue token", metav1.ListOptions{Limit: 2, Continue: "garbage"}},
		{"continue with a resourceVersion", metav1.ListOptions{Limit: 2, Continue: p1.Continue, ResourceVersion: firstRV}},
		{"exact without a resourceVersion", metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchExact}},
		{"not older than without a resourceVersion", metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{"exact at resourceVersion 0", metav1.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact}},
		{"an unknown resourceVersionMatch", metav1.ListOptions{ResourceVersion: firstRV, ResourceVersionMatch: "Newest"}},
		{"a malformed resourceVersion", metav1.ListOptions{ResourceVersion: "abc"}},
	} {
		list(c.what, c.opts)
	}
	// Watches: their option rules, and a streaming list's events up to the
	// bookmark that ends the initial state.
	yes, no := true, false
	for _, c := range []struct {
		what string
		opts metav1.ListOptions
	}{
		{"watch, initial events", metav1.ListOptions{LabelSelector: "even=true", SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{"watch, initial events at page 1's resourceVersion", metav1.ListOptions{LabelSelector: "even=true", SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, ResourceVersion: firstRV}},
		{"watch, initial events without resourceVersionMatch", metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true}},
		{"watch, initial events without bookmarks", metav1.ListOptions{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}},
		{"watch, no initial events, not older than", metav1.ListOptions{SendInitialEvents: &no, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, ResourceVersion: firstRV}},
		{"watch, resourceVersionMatch without sendInitialEvents", metav1.ListOptions{ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, ResourceVersion: firstRV}},
		{"watch, exact", metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchExact, ResourceVersion: firstRV}},
		{"watch, a malformed resourceVersion", metav1.ListOptions{ResourceVersion: "abc"}},
	} {
		out = append(out, watchOutcome(ctx, svcs, c.what, c.opts))
	}
	_ = cs.CoreV1().Namespaces().Delete(ctx, "listsem", metav1.DeleteOptions{})
	return out
}

// watchOutcome starts a watch and describes its answer: the error, or the
// events until the bookmark that ends the initial state (or 3 s).
func watchOutcome(ctx context.Context, svcs typedcorev1.ServiceInterface, what string, opts metav1.ListOptions) string {
	timeout := int64(3)
	opts.TimeoutSeconds = &timeout
	w, err := svcs.Watch(ctx, opts)
	if err != nil {
		return describeErr(what, err)
	}
	defer w.Stop()
	var evs []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				evs = append(evs, "BOOKMARK(initial-events-end)")
				break
			}
			continue
		}
		if ev.Type == watch.Error {
			evs = append(evs, fmt.Sprintf("ERROR %v", digits.ReplaceAllString(fmt.Sprint(apierrors.FromObject(ev.Object)), "N")))
			break
		}
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			evs = append(evs, string(ev.Type))
			continue
		}
		evs = append(evs, string(ev.Type)+" "+m.GetName())
	}
	return fmt.Sprintf("%s: %v", what, evs)
}

// describeErr describes an API error: code, reason, causes and message, with
// numbers masked (revisions differ between the two servers).
func describeErr(what string, err error) string {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		return what + ": " + err.Error()
	}
	s := st.Status()
	var causes []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			causes = append(causes, string(c.Type)+" "+c.Field+" "+digits.ReplaceAllString(c.Message, "N"))
		}
	}
	return fmt.Sprintf("%s: error %d %s %q causes %q", what, s.Code, s.Reason, digits.ReplaceAllString(s.Message, "N"), causes)
}
