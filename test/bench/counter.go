package bench

import (
	"net/http"
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

// RequestCounts are request counts by kind, and the conflicts (409) among
// them.
type RequestCounts struct {
	Requests  map[RequestKey]int64
	Conflicts map[RequestKey]int64
}

// Sub returns c minus before.
func (c RequestCounts) Sub(before RequestCounts) RequestCounts {
	out := RequestCounts{Requests: map[RequestKey]int64{}, Conflicts: map[RequestKey]int64{}}
	for k, v := range c.Requests {
		if d := v - before.Requests[k]; d != 0 {
			out.Requests[k] = d
		}
	}
	for k, v := range c.Conflicts {
		if d := v - before.Conflicts[k]; d != 0 {
			out.Conflicts[k] = d
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
type RequestCounter struct {
	mu        sync.Mutex
	requests  map[RequestKey]int64
	conflicts map[RequestKey]int64
	infos     *request.RequestInfoFactory
}

// NewRequestCounter returns an empty counter.
func NewRequestCounter() *RequestCounter {
	return &RequestCounter{
		requests:  map[RequestKey]int64{},
		conflicts: map[RequestKey]int64{},
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
		c.mu.Lock()
		c.requests[key]++
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
	out := RequestCounts{Requests: make(map[RequestKey]int64, len(c.requests)), Conflicts: make(map[RequestKey]int64, len(c.conflicts))}
	for k, v := range c.requests {
		out.Requests[k] = v
	}
	for k, v := range c.conflicts {
		out.Conflicts[k] = v
	}
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
