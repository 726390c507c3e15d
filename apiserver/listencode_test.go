package apiserver

import (
	"bytes"
	"math/rand"
	"net/http/httptest"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/meta"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/storage"
)

// TestListEncodedMatches: for every typed resource, lists of random objects
// written from memoized item encodings are byte for byte what the generic
// encoder writes, in protobuf and JSON, the first time and the second.
func TestListEncodedMatches(t *testing.T) {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), Codecs)
	checked := 0
	for _, def := range builtinResources() {
		info := def.info
		if _, typed := info.New().(interface{ Marshal() ([]byte, error) }); !typed {
			continue
		}
		gv := info.GVR.GroupVersion()
		for round := range 3 {
			lr := &storage.ListResult{ResourceVersion: int64(1000 + round), Encoded: []*storage.Encoded{}}
			if round == 2 {
				lr.Continue = "tok" + strconv.Itoa(round)
				lr.RemainingItemCount = new(int64(17))
			}
			for range round * 3 {
				o := info.New()
				f.Fill(o)
				o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				lr.Items = append(lr.Items, o)
				lr.Encoded = append(lr.Encoded, &storage.Encoded{})
			}
			list := info.NewList()
			if err := meta.SetList(list, lr.Items); err != nil {
				t.Fatal(err)
			}
			lm, _ := meta.ListAccessor(list)
			lm.SetResourceVersion(strconv.FormatInt(lr.ResourceVersion, 10))
			lm.SetContinue(lr.Continue)
			lm.SetRemainingItemCount(lr.RemainingItemCount)
			for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
				si, _ := serializerFor(mt)
				out := output{info: si}
				want := httptest.NewRecorder()
				writeObject(want, out, 200, list, gv)
				for pass := range 2 {
					got := httptest.NewRecorder()
					if !writeListEncoded(got, out, info, gv, lr) {
						t.Fatalf("%s %s: not written from encodings", info.GVR, mt)
					}
					if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
						t.Fatalf("%s %s pass %d, %d items: differs from the generic encoder\n got %q\nwant %q", info.GVR, mt, pass, len(lr.Items), got.Body.Bytes(), want.Body.Bytes())
					}
				}
				checked++
			}
		}
	}
	if checked < 60 {
		t.Errorf("only %d lists checked", checked)
	}
	// Table and metadata-only output are not written from item encodings.
	si, _ := serializerFor(runtime.ContentTypeJSON)
	if writeListEncoded(httptest.NewRecorder(), output{info: si, as: "Table"}, builtinResources()[0].info, schema.GroupVersion{Version: "v1"}, &storage.ListResult{Encoded: []*storage.Encoded{}}) {
		t.Error("a Table was written from item encodings")
	}
}
