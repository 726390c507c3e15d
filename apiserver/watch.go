package apiserver

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/svcnet/svcnet/registry"
	"github.com/svcnet/svcnet/storage"
)

// InitialEventsAnnotation marks the bookmark that ends the initial events of
// a streaming list (sendInitialEvents=true).
const InitialEventsAnnotation = metav1.InitialEventsAnnotationKey

// handleWatch streams watch events. Semantics follow kube-apiserver:
//   - sendInitialEvents=true: an ADDED event per existing object, then (with
//     allowWatchBookmarks) a BOOKMARK annotated k8s.io/initial-events-end,
//     then changes;
//   - resourceVersion "" or "0" (without sendInitialEvents=false): ADDED
//     events for the current state, then changes;
//   - resourceVersion N: changes after N; 410 Expired if N was compacted.
//
// allowWatchBookmarks adds periodic BOOKMARK events; timeoutSeconds ends the
// watch (default: a random 30-60 minutes).
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request, req request) error {
	out, err := negotiate(r, req.res.isUnstructured())
	if err != nil {
		return err
	}
	if out.info.StreamSerializer == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("no streaming support for content type %s", out.info.MediaType))
	}
	q := r.URL.Query()
	filter, err := s.selectors(r, req.res)
	if err != nil {
		return err
	}
	if req.name != "" {
		inner, name := filter, req.name
		filter = func(obj runtime.Object) bool {
			acc, err := meta.Accessor(obj)
			return err == nil && acc.GetName() == name && (inner == nil || inner(obj))
		}
	}
	rv := q.Get("resourceVersion")
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	var sendInitial *bool
	if v := q.Get("sendInitialEvents"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid sendInitialEvents %q", v))
		}
		sendInitial = &b
	}
	// apimachinery's rules for watch options, as kube-apiserver applies them
	// (it does not require allowWatchBookmarks for sendInitialEvents; without
	// it the initial events just end without their bookmark).
	lo := &metainternalversion.ListOptions{Watch: true, ResourceVersion: rv, SendInitialEvents: sendInitial,
		ResourceVersionMatch: metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")), Continue: q.Get("continue")}
	if errs := metainternalversionvalidation.ValidateListOptions(lo, true); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	initial := (sendInitial != nil && *sendInitial) || (sendInitial == nil && (rv == "" || rv == "0"))
	timeout := time.Duration(1800+rand.IntN(1800)) * time.Second
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", v))
		}
		timeout = time.Duration(n) * time.Second
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()

	var initialItems []runtime.Object
	var fromRev int64
	if initial {
		list, err := req.res.List(ctx, req.namespace, registry.ListOptions{Filter: filter, ReadOnly: true, ResourceVersion: rv})
		if err != nil {
			return err
		}
		initialItems, _ = meta.ExtractList(list)
		lm, _ := meta.ListAccessor(list)
		fromRev, _ = strconv.ParseInt(lm.GetResourceVersion(), 10, 64)
	} else if n, perr := strconv.ParseUint(rv, 10, 63); perr != nil {
		// kube-apiserver answers a watch from a malformed resourceVersion
		// with a bare 500 carrying the field error.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: fmt.Sprintf("resourceVersion: Invalid value: %q: %v", rv, perr)}}
	} else {
		fromRev = int64(n)
	}
	progress := time.Duration(0)
	if bookmarks && out.as == "" {
		progress = s.cfg.BookmarkInterval
	}
	events, err := req.res.Storage.Watch(ctx, req.res.Prefix(req.namespace), fromRev, storage.WatchOptions{Filter: filter, ProgressInterval: progress})
	if err != nil {
		return err
	}

	flusher, _ := w.(http.Flusher)
	mediaType := out.info.MediaType
	if mediaType == "application/vnd.kubernetes.protobuf" {
		mediaType += ";stream=watch"
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	framer := out.info.StreamSerializer.Framer.NewFrameWriter(w)
	evEnc := out.info.StreamSerializer.Serializer
	embedded := Codecs.EncoderForVersion(out.info.Serializer, req.gv)
	metaEnc := Codecs.EncoderForVersion(out.info.Serializer, metav1.SchemeGroupVersion)
	first := true
	// One object buffer and one event buffer for the whole watch: a
	// streaming list sends every object of the collection through here.
	var buf, evBuf bytes.Buffer
	// send writes one event. flush pushes it to the client at once (live
	// events); the initial events of a streaming list are flushed once, after
	// the last of them, instead of one write per object.
	send := func(typ string, obj runtime.Object, flush bool) error {
		enc := embedded
		if out.as == "Table" && typ != string(storage.Error) && typ != string(storage.Bookmark) {
			t, err := s.toTable(r, req.res, []runtime.Object{obj}, first)
			if err != nil {
				return err
			}
			first = false
			obj, enc = t, metaEnc
		} else if out.as == "PartialObjectMetadata" && typ != string(storage.Error) {
			obj, enc = partialMeta(obj), metaEnc
		}
		buf.Reset()
		if data, ok, err := encodeUnstructured(obj); ok {
			if err != nil {
				return err
			}
			buf.Write(data)
		} else if err := enc.Encode(obj, &buf); err != nil {
			return err
		}
		evBuf.Reset()
		if err := evEnc.Encode(&metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: buf.Bytes()}}, &evBuf); err != nil {
			return err
		}
		if _, err := framer.Write(evBuf.Bytes()); err != nil {
			return err
		}
		if flush && flusher != nil {
			flusher.Flush()
		}
		return nil
	}
	bookmark := func(rev int64, end bool) error {
		obj := req.res.Info.New()
		acc, _ := meta.Accessor(obj)
		acc.SetResourceVersion(strconv.FormatInt(rev, 10))
		if end {
			acc.SetAnnotations(map[string]string{InitialEventsAnnotation: "true"})
		}
		return send(string(storage.Bookmark), obj, true)
	}
	for _, it := range initialItems {
		if err := send(string(storage.Added), it, false); err != nil {
			return nil
		}
	}
	initialItems = nil // the list is sent; let it go
	if sendInitial != nil && *sendInitial && bookmarks {
		if err := bookmark(fromRev, true); err != nil {
			return nil
		}
	} else if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			var err error
			switch ev.Type {
			case storage.Bookmark:
				if out.as == "" {
					err = bookmark(ev.Revision, false)
				}
			default:
				err = send(string(ev.Type), ev.Object, true)
			}
			if err != nil {
				s.log.Debug("watch ended", "resource", req.res.Info.GVR.Resource, "err", err)
				return nil
			}
		}
	}
}
