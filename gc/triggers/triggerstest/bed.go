// Package triggerstest runs trigger watches against client-go's fake
// dynamic client and fake discovery, for unit tests.
package triggerstest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/wrapup-dev/wrapup/gc/triggers"
)

var (
	// JobsGVR is the resource of the one kind the bed's API server serves.
	JobsGVR = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	// JobGK is its kind.
	JobGK = schema.GroupKind{Group: "batch", Kind: "Job"}
)

// Bed is started trigger watches over an API server that serves Jobs.
type Bed struct {
	W    *triggers.Watches
	Dyn  *dynamicfake.FakeDynamicClient
	Disc *fakediscovery.FakeDiscovery
	// Calls counts the discovery requests.
	Calls atomic.Int32
	// Stop stops the watches, and returns once they have.
	Stop func()

	mu        sync.Mutex
	discovery error // what discovery answers; nil for the resources
}

// NewBed starts watches with opts, stopped when the test ends.
func NewBed(t *testing.T, opts triggers.Options) *Bed {
	t.Helper()
	b := &Bed{}
	b.Dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{JobsGVR: "JobList"})
	b.Disc = &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "batch/v1", APIResources: []metav1.APIResource{{Name: "jobs", Kind: "Job", Namespaced: true}},
	}}}}
	b.Disc.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		b.Calls.Add(1)
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.discovery != nil {
			return true, nil, b.discovery
		}
		return false, nil, nil
	})
	mapper := apimeta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "batch", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, apimeta.RESTScopeNamespace)
	b.W = triggers.NewWatches(b.Dyn, mapper, b.Disc, opts)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = b.W.Start(ctx) }()
	// Stopped before the next test's bed starts: they share the metrics.
	b.Stop = func() { cancel(); <-b.W.Stopped() }
	t.Cleanup(b.Stop)
	return b
}

// Fail makes discovery answer err (nil: the resources again).
func (b *Bed) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.discovery = err
}
