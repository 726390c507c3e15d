package apiserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/storage"
)

// writeListEncoded writes a LIST the list cache answered, in protobuf or
// JSON, from its items' memoized encodings: once an unchanged object has been
// listed, listing it again copies its bytes instead of encoding it again. The
// bytes are exactly what the generic encoder writes (TestListEncodedMatches).
// It reports false, having written nothing, when it cannot answer (no
// memoized encodings, another media type or output form, a list type whose
// layout it does not know); the caller then encodes the list as usual.
func writeListEncoded(w http.ResponseWriter, out output, info registry.ResourceInfo, gv schema.GroupVersion, lr *storage.ListResult) bool {
	if out.as != "" || lr.Encoded == nil || len(lr.Encoded) != len(lr.Items) {
		return false
	}
	list := info.NewList()
	layout, ok := listLayoutOf(list)
	if !ok {
		return false
	}
	gvks, _, err := Scheme.ObjectKinds(list)
	if err != nil {
		return false
	}
	var gvk schema.GroupVersionKind
	for _, k := range gvks {
		if k.GroupVersion() == gv {
			gvk = k
		}
	}
	if gvk.Kind == "" {
		return false
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return false
	}
	lm.SetResourceVersion(strconv.FormatInt(lr.ResourceVersion, 10))
	lm.SetContinue(lr.Continue)
	lm.SetRemainingItemCount(lr.RemainingItemCount)
	var body []byte
	switch out.info.MediaType {
	case runtime.ContentTypeProtobuf:
		body, ok = protobufList(list, gvk, lr, layout)
	case runtime.ContentTypeJSON:
		body, ok = jsonList(list, gvk, lr)
	default:
		return false
	}
	if !ok {
		return false
	}
	w.Header().Set("Content-Type", out.info.MediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}

// listLayout is what the fast path needs to know of a list type.
type listLayout struct {
	// itemsField is the protobuf field number of Items.
	itemsField uint64
}

var listLayouts sync.Map // reflect.Type → listLayout (or false)

// listLayoutOf checks that a list type is a generated k8s.io/api list: Items
// a slice of structs whose pointers marshal themselves to protobuf, and a
// protobuf field number for Items.
func listLayoutOf(list runtime.Object) (listLayout, bool) {
	t := reflect.TypeOf(list)
	if v, ok := listLayouts.Load(t); ok {
		l, ok := v.(listLayout)
		return l, ok
	}
	l, ok := findListLayout(t)
	if ok {
		listLayouts.Store(t, l)
	} else {
		listLayouts.Store(t, false)
	}
	return l, ok
}

func findListLayout(t reflect.Type) (listLayout, bool) {
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return listLayout{}, false
	}
	if _, ok := reflect.New(t.Elem()).Interface().(interface{ Marshal() ([]byte, error) }); !ok {
		return listLayout{}, false
	}
	f, ok := t.Elem().FieldByName("Items")
	if !ok || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Struct {
		return listLayout{}, false
	}
	if _, ok := reflect.New(f.Type.Elem()).Interface().(interface{ Marshal() ([]byte, error) }); !ok {
		return listLayout{}, false
	}
	// protobuf:"bytes,2,rep,name=items"
	parts := strings.Split(f.Tag.Get("protobuf"), ",")
	if len(parts) < 3 || parts[0] != "bytes" || parts[2] != "rep" {
		return listLayout{}, false
	}
	var n uint64
	for _, c := range parts[1] {
		if c < '0' || c > '9' {
			return listLayout{}, false
		}
		n = n*10 + uint64(c-'0')
	}
	// The list's other fields (TypeMeta is not in protobuf; ListMeta is
	// field 1) must come before Items, as they do in every generated list.
	if n < 2 || f.Tag.Get("json") != "items" {
		return listLayout{}, false
	}
	return listLayout{itemsField: n}, true
}

// protobufList is the protobuf serializer's output for the list: the "k8s\0"
// prefix and a runtime.Unknown whose Raw is the list message, whose Items are
// each item's own message bytes.
func protobufList(list runtime.Object, gvk schema.GroupVersionKind, lr *storage.ListResult, layout listLayout) ([]byte, bool) {
	head, err := list.(interface{ Marshal() ([]byte, error) }).Marshal()
	if err != nil {
		return nil, false
	}
	parts := make([][]byte, len(lr.Items))
	size := len(head)
	for i, obj := range lr.Items {
		m, ok := obj.(interface{ Marshal() ([]byte, error) })
		if !ok {
			return nil, false
		}
		b, err := lr.Encoded[i].Get("protobuf", m.Marshal)
		if err != nil {
			return nil, false
		}
		parts[i] = b
		size += len(b) + 2*binary.MaxVarintLen64
	}
	raw := make([]byte, 0, size)
	raw = append(raw, head...)
	tag := layout.itemsField<<3 | 2 // length-delimited
	for _, b := range parts {
		raw = binary.AppendUvarint(raw, tag)
		raw = binary.AppendUvarint(raw, uint64(len(b)))
		raw = append(raw, b...)
	}
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}, Raw: raw}
	env, err := unk.Marshal()
	if err != nil {
		return nil, false
	}
	return append([]byte("k8s\x00"), env...), true
}

// jsonList is the JSON serializer's output for the list: the list with its
// kind and metadata, each item's own JSON in "items", and a newline.
func jsonList(list runtime.Object, gvk schema.GroupVersionKind, lr *storage.ListResult) ([]byte, bool) {
	list.GetObjectKind().SetGroupVersionKind(gvk)
	head, err := json.Marshal(list)
	if err != nil || !bytes.HasSuffix(head, []byte(`,"items":null}`)) {
		return nil, false
	}
	head = head[:len(head)-len(`null}`)]
	parts := make([][]byte, len(lr.Items))
	size := len(head) + 3
	for i, obj := range lr.Items {
		b, err := lr.Encoded[i].Get("json", func() ([]byte, error) { return json.Marshal(obj) })
		if err != nil {
			return nil, false
		}
		parts[i] = b
		size += len(b) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, head...)
	buf = append(buf, '[')
	for i, b := range parts {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, b...)
	}
	buf = append(buf, "]}\n"...)
	return buf, true
}
