package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/svcnet/svcnet/apiserver/apiservertest"
)

// fuzzResources are the resources the fuzz target writes to: a typed one with
// allocation (Service), one with a deep spec (Pod) and a plain one (ConfigMap).
var fuzzResources = []string{"services", "pods", "configmaps"}

// fuzzContentTypes are the request body media types, the patch types included;
// any of them is sent with any verb so that mismatches are exercised too.
var fuzzContentTypes = []string{
	"application/json",
	"application/yaml",
	"application/vnd.kubernetes.protobuf",
	"application/json-patch+json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
	"application/apply-patch+yaml",
}

const fuzzTarget = "fuzz-target"

func fuzzObjects(name string) []runtime.Object {
	return []runtime.Object{
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "fuzz"}},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "fuzz"}, Ports: []corev1.ServicePort{{Port: 80}}}},
		&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "fuzz"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "fuzz"}},
			Data:       map[string]string{"k": "v"}},
	}
}

func encodeAs(t testing.TB, obj runtime.Object, ct string) []byte {
	t.Helper()
	js, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	switch ct {
	case "application/yaml", "application/apply-patch+yaml":
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			t.Fatal(err)
		}
		return y
	case "application/vnd.kubernetes.protobuf":
		var buf bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	return js
}

// FuzzDecodeRequest sends create (POST), update (PUT) and patch (PATCH)
// requests with arbitrary bodies, content types and label/field selectors
// through the real apiserver (TLS, authentication, authorization, decoding,
// validation, storage in etcd) and checks that:
//   - the server answers (no hang, no dropped connection) and never with a
//     5xx: a recovered panic is a 500 and fails the test as well;
//   - every non-2xx answer is a metav1.Status in JSON whose code is the
//     HTTP code and is a 4xx;
//   - a rejected request stored nothing: the resource's object count and the
//     target object's resourceVersion are unchanged;
//   - a list with the same selectors answers 200 or a 400 Status.
//
// The seed corpus runs in every `go test`; explore further with
//
//	go test -run '^$' -fuzz FuzzDecodeRequest -fuzztime 60s -parallel 1 ./apiserver/
func FuzzDecodeRequest(f *testing.F) {
	// Seeds: valid bodies of each kind in each encoding, for each verb.
	for ri := range fuzzResources {
		for ci, ct := range fuzzContentTypes[:3] {
			for op := 0; op < 2; op++ {
				name := "seed-new"
				if op == 1 {
					name = fuzzTarget
				}
				f.Add(uint8(op), uint8(ri), uint8(ci), encodeAs(f, fuzzObjects(name)[ri], ct), "", "")
			}
		}
		f.Add(uint8(2), uint8(ri), uint8(4), []byte(`{"metadata":{"labels":{"x":"y"}}}`), "", "")
		f.Add(uint8(2), uint8(ri), uint8(5), []byte(`{"metadata":{"labels":{"x":"z"}}}`), "", "")
		f.Add(uint8(2), uint8(ri), uint8(3), []byte(`[{"op":"add","path":"/metadata/labels/y","value":"1"}]`), "", "")
		f.Add(uint8(2), uint8(ri), uint8(6), encodeAs(f, fuzzObjects(fuzzTarget)[ri], "application/apply-patch+yaml"), "", "")
	}
	svc := func(spec string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"bad"},"spec":` + spec + `}`)
	}
	// Deeply nested documents.
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	f.Add(uint8(0), uint8(0), uint8(0), svc(deep), "", "")
	f.Add(uint8(0), uint8(0), uint8(1), svc(deep), "", "")
	f.Add(uint8(2), uint8(0), uint8(4), []byte(`{"spec":`+deep+`}`), "", "")
	f.Add(uint8(2), uint8(0), uint8(5), []byte(`{"spec":`+deep+`}`), "", "")
	f.Add(uint8(2), uint8(0), uint8(6), []byte("spec:\n  a:\n"+strings.Repeat("- ", 5000)+"x\n"), "", "")
	deepObj := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep","annotations":`+deepObj+`}}`), "", "")
	f.Add(uint8(2), uint8(0), uint8(3), []byte(`[{"op":"add","path":"/metadata/labels","value":`+deepObj+`}]`), "", "")
	// Huge lists: many ports (rejected by validation), many data keys, and
	// one body just over the request size limit. The ports stay at 2,000:
	// each unnamed port is one validation error and apimachinery's
	// NewInvalid joins the messages in quadratic time (20,000 ports take
	// ~8 s of CPU, as in kube-apiserver, which builds the same message).
	var ports []string
	for i := 0; i < 2000; i++ {
		ports = append(ports, fmt.Sprintf(`{"port":%d}`, i%65535+1))
	}
	f.Add(uint8(0), uint8(0), uint8(0), svc(`{"ports":[`+strings.Join(ports, ",")+`]}`), "", "")
	var keys []string
	for i := 0; i < 20000; i++ {
		keys = append(keys, fmt.Sprintf(`"k%d":"v"`, i))
	}
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{`+strings.Join(keys, ",")+`}}`), "", "")
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"huge"},"data":{"k":"`+strings.Repeat("x", 3*1024*1024)+`"}}`), "", "")
	// Invalid UTF-8 in names, labels, data and in a YAML body.
	f.Add(uint8(0), uint8(2), uint8(0), []byte("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"u\xff\xfe\"},\"data\":{\"k\":\"\xc3\x28\"}}"), "", "")
	f.Add(uint8(0), uint8(2), uint8(0), []byte("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"utf\"},\"data\":{\"k\":\"\xc3\x28\"}}"), "", "")
	f.Add(uint8(0), uint8(2), uint8(1), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y\xff\n"), "", "")
	f.Add(uint8(2), uint8(0), uint8(4), []byte("{\"metadata\":{\"labels\":{\"\xff\":\"\xfe\"}}}"), "", "")
	// Truncated and corrupted protobuf.
	for ri := range fuzzResources {
		pb := encodeAs(f, fuzzObjects("pb")[ri], "application/vnd.kubernetes.protobuf")
		f.Add(uint8(0), uint8(ri), uint8(2), pb[:len(pb)/2], "", "")
		f.Add(uint8(0), uint8(ri), uint8(2), pb[:5], "", "")
		bad := append([]byte(nil), pb...)
		bad[len(bad)/3] ^= 0xff
		f.Add(uint8(0), uint8(ri), uint8(2), bad, "", "")
	}
	f.Add(uint8(0), uint8(0), uint8(2), []byte("k8s\x00\x0a\xff\xff\xff\xff\x0f"), "", "")
	// Wrong kind and apiVersion, and bodies of another resource.
	f.Add(uint8(0), uint8(0), uint8(0), []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"wk"}}`), "", "")
	f.Add(uint8(0), uint8(0), uint8(0), []byte(`{"apiVersion":"apps/v1","kind":"Service","metadata":{"name":"wv"}}`), "", "")
	f.Add(uint8(0), uint8(0), uint8(0), []byte(`{"apiVersion":"v2","kind":"Service","metadata":{"name":"wv"}}`), "", "")
	f.Add(uint8(1), uint8(2), uint8(0), []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"fuzz-target"}}`), "", "")
	f.Add(uint8(0), uint8(1), uint8(2), encodeAs(f, fuzzObjects("wrong")[2], "application/vnd.kubernetes.protobuf"), "", "")
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`{"kind":"ConfigMap","metadata":{"name":"nov"}}`), "", "")
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`[]`), "", "")
	f.Add(uint8(0), uint8(2), uint8(0), []byte(`null`), "", "")
	f.Add(uint8(1), uint8(0), uint8(0), []byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"other-name"}}`), "", "")
	f.Add(uint8(2), uint8(0), uint8(6), []byte("apiVersion: v1\nkind: Pod\n"), "", "")
	f.Add(uint8(2), uint8(0), uint8(3), []byte(`[{"op":"remove","path":"/metadata"}]`), "", "")
	f.Add(uint8(2), uint8(0), uint8(3), []byte(`[{"op":"replace","path":"/spec/ports","value":7}]`), "", "")
	// Odd selectors.
	for _, sel := range [][2]string{
		{"app in (a,b", ""}, {"!!x", "spec.type=="}, {"a=b,,c", "metadata.name!=,x"}, {"x notin ()", "=="},
		{"a\xffb=c", "metadata.name=\xff"}, {strings.Repeat("a=b,", 5000) + "a=b", strings.Repeat("metadata.name=x,", 3000)},
		{"(((", "metadata.name\\=x"}, {"app=fuzz", "metadata.namespace=default,spec.type!=ExternalName"},
		{"a>1,b<x", "status.phase=Running"}, {"", "no.such.field=1"},
	} {
		f.Add(uint8(0), uint8(0), uint8(0), svc(`{}`), sel[0], sel[1])
		f.Add(uint8(2), uint8(1), uint8(4), []byte(`{}`), sel[0], sel[1])
	}

	srv := apiservertest.Start(f)
	hc, err := rest.HTTPClientFor(srv.Config)
	if err != nil {
		f.Fatal(err)
	}
	hc.Timeout = 30 * time.Second
	base := strings.TrimSuffix(srv.Config.Host, "/") + "/api/v1/namespaces/default/"
	for ri, res := range fuzzResources {
		body := encodeAs(f, fuzzObjects(fuzzTarget)[ri], "application/json")
		resp, err := hc.Post(base+res, "application/json", bytes.NewReader(body))
		if err != nil {
			f.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			f.Fatalf("create %s/%s: %d %s", res, fuzzTarget, resp.StatusCode, b)
		}
	}

	// state is the number of objects of res and the target's resourceVersion.
	state := func(t *testing.T, res string) (int, string) {
		t.Helper()
		resp, err := hc.Get(base + res)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var items struct {
			Items []metav1.PartialObjectMetadata `json:"items"`
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("list %s: %d %s", res, resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, &items); err != nil {
			t.Fatalf("list %s: %v", res, err)
		}
		rv := ""
		for _, it := range items.Items {
			if it.Name == fuzzTarget {
				rv = it.ResourceVersion
			}
		}
		return len(items.Items), rv
	}
	// checkAnswer fails on a 5xx and on an error answer that is not a 4xx
	// metav1.Status; it reports whether the answer was a 2xx.
	checkAnswer := func(t *testing.T, what string, resp *http.Response, body []byte) bool {
		t.Helper()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return true
		}
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.APIVersion != "v1" {
			t.Fatalf("%s: %d answer is not a metav1.Status (%v): %.300q", what, resp.StatusCode, err, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Status with Content-Type %q", what, ct)
		}
		if int(st.Code) != resp.StatusCode || st.Status != metav1.StatusFailure {
			t.Errorf("%s: HTTP %d but Status code %d status %q", what, resp.StatusCode, st.Code, st.Status)
		}
		if resp.StatusCode < 400 || resp.StatusCode >= 500 {
			t.Fatalf("%s: bad input answered %d: %s", what, resp.StatusCode, st.Message)
		}
		return false
	}

	f.Fuzz(func(t *testing.T, op, ri, ci uint8, body []byte, labelSel, fieldSel string) {
		res := fuzzResources[int(ri)%len(fuzzResources)]
		ct := fuzzContentTypes[int(ci)%len(fuzzContentTypes)]
		method, target := []string{http.MethodPost, http.MethodPut, http.MethodPatch}[int(op)%3], base+res
		if method != http.MethodPost {
			target += "/" + fuzzTarget
		}
		q := url.Values{"fieldManager": {"fuzz"}}
		if labelSel != "" {
			q.Set("labelSelector", labelSel)
		}
		if fieldSel != "" {
			q.Set("fieldSelector", fieldSel)
		}
		what := fmt.Sprintf("%s %s (%s, %d bytes)", method, res, ct, len(body))

		before, rvBefore := state(t, res)
		req, err := http.NewRequest(method, target+"?"+q.Encode(), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if checkAnswer(t, what, resp, answer) {
			// Keep the store small: remove what a create added.
			if method == http.MethodPost {
				var m metav1.PartialObjectMetadata
				if err := json.Unmarshal(answer, &m); err != nil || m.Name == "" {
					t.Fatalf("%s: 2xx answer without an object: %v %.300q", what, err, answer)
				}
				dreq, _ := http.NewRequest(http.MethodDelete, base+res+"/"+url.PathEscape(m.Name)+"?gracePeriodSeconds=0", nil)
				dresp, err := hc.Do(dreq)
				if err != nil {
					t.Fatal(err)
				}
				db, _ := io.ReadAll(dresp.Body)
				dresp.Body.Close()
				if dresp.StatusCode != http.StatusOK && dresp.StatusCode != http.StatusAccepted {
					t.Fatalf("delete %s/%s: %d %s", res, m.Name, dresp.StatusCode, db)
				}
			}
		} else if after, rvAfter := state(t, res); after != before || rvAfter != rvBefore {
			t.Fatalf("%s: rejected with %d but the store changed: %d objects (was %d), %s resourceVersion %q (was %q)",
				what, resp.StatusCode, after, before, fuzzTarget, rvAfter, rvBefore)
		}

		// The same selectors on a list.
		lresp, err := hc.Get(base + res + "?" + q.Encode())
		if err != nil {
			t.Fatalf("list with selectors: %v", err)
		}
		lb, _ := io.ReadAll(lresp.Body)
		lresp.Body.Close()
		if !checkAnswer(t, "list "+res+" "+q.Encode(), lresp, lb) && lresp.StatusCode != http.StatusBadRequest {
			t.Errorf("list %s with selectors %q: %d, want 200 or 400", res, q.Encode(), lresp.StatusCode)
		}
	})
}
