package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// APIProfile is a CPU profile of kube-apiserver being taken.
type APIProfile struct {
	done chan struct{}
	err  error
	// Start and End bound the profile, once Wait has returned.
	Start, End time.Time
	// Path is the file the profile is written to.
	Path string
}

// Wait waits for the profile and returns its error.
func (p *APIProfile) Wait() error {
	<-p.done
	return p.err
}

// ProfileAPIServer starts a CPU profile of the API server cfg points at,
// from delay after ready (polled every 20 ms) first says yes, for the
// given length, written to path. kube-apiserver serves /debug/pprof with
// --profiling, its default (k8s.io/apiserver pkg/server/routes,
// Profiling.Install), to a user allowed the non-resource URL, as cfg's
// administrator is.
func ProfileAPIServer(ctx context.Context, cfg *rest.Config, path string, ready func() bool, delay, length time.Duration) *APIProfile {
	p := &APIProfile{done: make(chan struct{}), Path: path}
	go func() {
		defer close(p.done)
		p.err = p.take(ctx, cfg, ready, delay, length)
	}()
	return p
}

func (p *APIProfile) take(ctx context.Context, cfg *rest.Config, ready func() bool, delay, length time.Duration) error {
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return ready(), nil }); err != nil {
		return err
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	// The server profiles for length from the request's arrival: End is
	// Start plus length, not the answer's arrival.
	p.Start = time.Now()
	p.End = p.Start.Add(length)
	b, err := dc.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(length/time.Second))).DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("the API server's profile: %w", err)
	}
	return os.WriteFile(p.Path, b, 0o644)
}

// APIPart is a part of kube-apiserver's work in a CPU profile: the samples
// whose stack holds one of Funcs (full names, as pprof shows them).
type APIPart struct {
	Name  string
	Funcs []string
}

// APIParts are the parts of kube-apiserver's work that the throughput
// benchmark reports per completion. The handlers' parts include the
// garbage collector's assists their allocations pay for; Background GC is
// the collector's own workers.
var APIParts = []APIPart{
	{Name: "patches (Store.Update)", Funcs: []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Update"}},
	{Name: "creates: records, Events (Store.Create)", Funcs: []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Create"}},
	{Name: "deletes (Store.Delete)", Funcs: []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Delete"}},
	{Name: "LISTs (Store.List)", Funcs: []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).List"}},
	{Name: "GETs (Store.Get)", Funcs: []string{"k8s.io/apiserver/pkg/registry/generic/registry.(*Store).Get"}},
	{Name: "watches served (WatchServer)", Funcs: []string{"k8s.io/apiserver/pkg/endpoints/handlers.(*WatchServer).HandleHTTP"}},
	{Name: "etcd's events decoded for the watch caches", Funcs: []string{"k8s.io/apiserver/pkg/storage/etcd3.(*watchChan).prepareObjs"}},
	{Name: "background GC", Funcs: []string{"runtime.gcBgMarkWorker"}},
}

// ProfileParts reads the CPU profile at path and returns its total CPU
// time and that of each part (a sample counts once in a part, however
// many of its functions its stack holds).
func ProfileParts(path string, parts []APIPart) (total time.Duration, byPart []time.Duration, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		return 0, nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			cpu = i
		}
	}
	if cpu < 0 {
		return 0, nil, fmt.Errorf("%s has no cpu nanoseconds", path)
	}
	byPart = make([]time.Duration, len(parts))
	in := make([]bool, len(parts))
	for _, s := range p.Sample {
		v := time.Duration(s.Value[cpu])
		total += v
		clear(in)
		for _, loc := range s.Location {
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				for i, part := range parts {
					for _, f := range part.Funcs {
						if line.Function.Name == f {
							in[i] = true
						}
					}
				}
			}
		}
		for i := range parts {
			if in[i] {
				byPart[i] += v
			}
		}
	}
	return total, byPart, nil
}
