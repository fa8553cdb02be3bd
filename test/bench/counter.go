package bench

import (
	"maps"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// RequestKey is one kind of API request: a verb as the API server's
// authorizer sees it (get, list, watch, create, update, patch, delete; or
// "discovery" for non-resource paths such as /apis) on a group-qualified
// resource and subresource ("appwrappers.workload.codeflare.dev",
// "completionrules.wrapup.dev/status").
type RequestKey struct {
	Verb     string
	Resource string
}

// IsWrite says whether the request changes an object.
func (k RequestKey) IsWrite() bool {
	switch k.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// RequestCounts are request counts by kind, the conflicts (409) among them,
// and the writes sent from within the counter's path function.
type RequestCounts struct {
	Requests  map[RequestKey]int64
	Conflicts map[RequestKey]int64
	OnPath    map[RequestKey]int64
}

// Sub returns c minus before.
func (c RequestCounts) Sub(before RequestCounts) RequestCounts {
	return RequestCounts{
		Requests:  subCounts(c.Requests, before.Requests),
		Conflicts: subCounts(c.Conflicts, before.Conflicts),
		OnPath:    subCounts(c.OnPath, before.OnPath),
	}
}

// subCounts is after minus before, key by key, without the keys that did
// not change.
func subCounts[K comparable, V int64 | float64](after, before map[K]V) map[K]V {
	out := map[K]V{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Total is the number of requests, and of writes among them.
func (c RequestCounts) Total() (all, writes int64) {
	for k, v := range c.Requests {
		all += v
		if k.IsWrite() {
			writes += v
		}
	}
	return all, writes
}

// Keys lists the request kinds counted, writes first, then by resource.
func (c RequestCounts) Keys() []RequestKey {
	keys := make([]RequestKey, 0, len(c.Requests))
	for k := range c.Requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].IsWrite() != keys[j].IsWrite() {
			return keys[i].IsWrite()
		}
		if keys[i].Resource != keys[j].Resource {
			return keys[i].Resource < keys[j].Resource
		}
		return keys[i].Verb < keys[j].Verb
	})
	return keys
}

// RequestCounter counts the requests that the clients of one rest.Config
// send, by kind. client-go's rest_client_requests_total counts every
// in-process client together (the benchmark, the AppWrapper controller and
// wrapup share a process) and only by HTTP method; wrapping wrapup's
// transport with a RequestCounter (rest.Config.WrapTransport) counts
// wrapup's own requests exactly.
//
// Writes sent from within the function named pathFunc (client-go sends a
// request on the caller's goroutine) are also counted apart: with
// wrapup's AppWrapper reconciler as pathFunc, those are the writes on the
// way from a finished trigger to the delete, whatever other goroutines
// (the Event recorder, a counter flusher) write besides.
type RequestCounter struct {
	mu        sync.Mutex
	requests  map[RequestKey]int64
	conflicts map[RequestKey]int64
	onPath    map[RequestKey]int64
	pathFunc  string
	infos     *request.RequestInfoFactory
}

// NewRequestCounter returns an empty counter; pathFunc is a fully
// qualified function name, as runtime.Frame.Function gives it, or "".
func NewRequestCounter(pathFunc string) *RequestCounter {
	return &RequestCounter{
		requests:  map[RequestKey]int64{},
		conflicts: map[RequestKey]int64{},
		onPath:    map[RequestKey]int64{},
		pathFunc:  pathFunc,
		infos: &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
	}
}

// Wrap is a transport.WrapperFunc for rest.Config.WrapTransport.
func (c *RequestCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		key := c.Classify(req)
		onPath := key.IsWrite() && c.pathFunc != "" && callerIs(c.pathFunc)
		c.mu.Lock()
		c.requests[key]++
		if onPath {
			c.onPath[key]++
		}
		c.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusConflict {
			c.mu.Lock()
			c.conflicts[key]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// callerIs says whether fn is on the calling goroutine's stack.
func callerIs(fn string) bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if f.Function == fn {
			return true
		}
		if !more {
			return false
		}
	}
}

// Classify names the kind of req as the API server would.
func (c *RequestCounter) Classify(req *http.Request) RequestKey {
	info, err := c.infos.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return RequestKey{Verb: "discovery", Resource: strings.TrimSuffix(req.URL.Path, "/")}
	}
	res := info.Resource
	if info.APIGroup != "" {
		res += "." + info.APIGroup
	}
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	return RequestKey{Verb: info.Verb, Resource: res}
}

// Snapshot returns the counts so far.
func (c *RequestCounter) Snapshot() RequestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return RequestCounts{Requests: maps.Clone(c.requests), Conflicts: maps.Clone(c.conflicts), OnPath: maps.Clone(c.onPath)}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
