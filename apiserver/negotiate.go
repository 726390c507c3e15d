package apiserver

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// MaxRequestBodyBytes is the largest request body accepted (as in
// kube-apiserver: 3 MiB); larger bodies get 413.
const MaxRequestBodyBytes = 3 * 1024 * 1024

// output is the negotiated response format.
type output struct {
	info runtime.SerializerInfo
	// as is "" for the object itself, "Table" or "PartialObjectMetadata".
	as string
}

func serializerFor(mediaType string) (runtime.SerializerInfo, bool) {
	for _, info := range Codecs.SupportedMediaTypes() {
		if info.MediaType == mediaType {
			return info, true
		}
	}
	return runtime.SerializerInfo{}, false
}

// negotiate picks the response format from the Accept header: the first
// listed type the server can produce. An empty header or */* means JSON.
// Table and PartialObjectMetadata requests (as=...;g=meta.k8s.io) are
// supported in JSON, YAML and protobuf; other as= values are skipped.
func negotiate(r *http.Request, unstructuredObj bool) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		info, _ := serializerFor(runtime.ContentTypeJSON)
		return output{info: info}, nil
	}
	for _, clause := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(clause))
		if err != nil {
			continue
		}
		if mt == "*/*" || mt == "application/*" {
			mt = runtime.ContentTypeJSON
		}
		if unstructuredObj && mt == runtime.ContentTypeProtobuf {
			continue
		}
		info, ok := serializerFor(mt)
		if !ok {
			continue
		}
		as := params["as"]
		switch as {
		case "":
		case "Table", "PartialObjectMetadata", "PartialObjectMetadataList":
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") {
				continue
			}
			if params["v"] != "v1" {
				continue
			}
		default:
			continue
		}
		return output{info: info, as: as}, nil
	}
	return output{}, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "", fmt.Sprintf("only the following media types are accepted: %s", strings.Join(supportedTypes(), ", ")), 0, false)
}

func supportedTypes() []string {
	var out []string
	for _, info := range Codecs.SupportedMediaTypes() {
		out = append(out, info.MediaType)
	}
	return out
}

// readBody reads the request body, enforcing MaxRequestBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > MaxRequestBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxRequestBodyBytes))
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	if len(data) > MaxRequestBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxRequestBodyBytes))
	}
	return data, nil
}

func contentType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return runtime.ContentTypeJSON
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ct
	}
	return mt
}

func unsupportedMediaType(ct string, allowed []string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(allowed, ", ")), 0, false)
}

// decodeBody decodes a request body of the given kind. strict rejects
// unknown and duplicate fields (fieldValidation=Strict).
func decodeBody(r *http.Request, body []byte, into runtime.Object, gvk schema.GroupVersionKind, strict bool) (runtime.Object, error) {
	ct := contentType(r)
	if u, ok := into.(*unstructured.Unstructured); ok {
		switch ct {
		case runtime.ContentTypeJSON, runtime.ContentTypeYAML:
		default:
			return nil, unsupportedMediaType(ct, []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML})
		}
		js, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded: %v", err))
		}
		if err := u.UnmarshalJSON(js); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded: %v", err))
		}
		if got := u.GroupVersionKind(); got != gvk {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", u.GetAPIVersion(), gvk.GroupVersion()))
		}
		return u, nil
	}
	info, ok := serializerFor(ct)
	if !ok {
		return nil, unsupportedMediaType(ct, supportedTypes())
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, apierrors.NewBadRequest("the body of the request was empty")
	}
	dec := info.Serializer
	if strict && info.StrictSerializer != nil {
		dec = info.StrictSerializer
	}
	obj, got, err := dec.Decode(body, &gvk, into)
	if err != nil {
		// kube-apiserver's wording for undecodable bodies and strict
		// decoding errors alike.
		return nil, apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, gvk.Kind, err))
	}
	if got != nil && (got.Kind != gvk.Kind || got.GroupVersion() != gvk.GroupVersion()) {
		if got.GroupVersion() != gvk.GroupVersion() {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", got.GroupVersion(), gvk.GroupVersion()))
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", got.Kind, gvk.Kind))
	}
	if obj != into {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s)", gvk.Kind))
	}
	return obj, nil
}

// writeObject encodes obj in the negotiated format for group version gv.
func writeObject(w http.ResponseWriter, out output, code int, obj runtime.Object, gv schema.GroupVersion) {
	enc := Codecs.EncoderForVersion(out.info.Serializer, gv)
	if _, ok := obj.(*metav1.Table); ok {
		enc = Codecs.EncoderForVersion(out.info.Serializer, metav1.SchemeGroupVersion)
	}
	if _, ok := obj.(*metav1.PartialObjectMetadataList); ok {
		enc = Codecs.EncoderForVersion(out.info.Serializer, metav1.SchemeGroupVersion)
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		enc = Codecs.EncoderForVersion(out.info.Serializer, metav1.SchemeGroupVersion)
	}
	var buf bytes.Buffer
	if data, ok, err := encodeUnstructured(obj); ok {
		if err == nil && out.info.MediaType == runtime.ContentTypeYAML {
			data, err = yaml.JSONToYAML(data)
		}
		if err != nil {
			writeError(w, apierrors.NewInternalError(fmt.Errorf("encode response: %w", err)))
			return
		}
		buf.Write(data)
	} else if err := enc.Encode(obj, &buf); err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("encode response: %w", err)))
		return
	}
	w.Header().Set("Content-Type", out.info.MediaType)
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// writeError writes err as a metav1.Status in JSON.
func writeError(w http.ResponseWriter, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		var se apierrors.APIStatus
		if e, ok2 := err.(interface{ Unwrap() error }); ok2 {
			if s, ok3 := e.Unwrap().(apierrors.APIStatus); ok3 {
				se = s
			}
		}
		if se == nil {
			se = apierrors.NewInternalError(err)
		}
		st = se
	}
	status := st.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	if status.Code == 0 {
		status.Code = http.StatusInternalServerError
	}
	info, _ := serializerFor(runtime.ContentTypeJSON)
	var buf bytes.Buffer
	_ = info.Serializer.Encode(&status, &buf)
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(buf.Bytes())
}
