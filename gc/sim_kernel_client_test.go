package gc

// What wrapup reads and writes through in a simulated world, as the
// simulation kernel gives it: a client.Reader over what the world serves,
// the API calls' faults and errors, the Event recorder and the counters. A
// world's writer is a thin adapter over the kernel's store
// (sim_kernel_store_test.go) that runs the world's oracle on each write.

import (
	"context"
	"fmt"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

var (
	simAppWrappers       = awv1beta2.GroupVersion.WithResource("appwrappers").GroupResource()
	simCompletionRecords = wrapupv1alpha1.GroupVersion.WithResource("completionrecords").GroupResource()
	simNamespaces        = schema.GroupResource{Resource: "namespaces"}
)

// newAWStore is the API server's AppWrappers.
func newAWStore(k *simKernel) *simStore[*awv1beta2.AppWrapper] {
	return newSimStore(k, simAppWrappers, "aw", func() *awv1beta2.AppWrapper { return &awv1beta2.AppWrapper{} })
}

// simUnavailable is the error of an API call that a fault refused.
func simUnavailable() error { return apierrors.NewServiceUnavailable("simulated outage") }

// simLostAnswer is the error of an API call applied whose answer a fault lost.
func simLostAnswer() error { return apierrors.NewTimeoutError("simulated lost answer", 1) }

// mergePatchData is the body of patch, a JSON merge patch (the only kind
// the kernel's store applies) of obj.
func mergePatchData(obj client.Object, patch client.Patch) ([]byte, error) {
	if patch.Type() != types.MergePatchType {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the simulated API server applies JSON merge patches, not %s", patch.Type()))
	}
	return patch.Data(obj)
}

// simReader is a client.Reader on what a world serves, as its API server
// or one of its caches answers: a copy of the object, or NotFound.
type simReader struct {
	// name names the reader in its errors.
	name string
	// fail, when set, is asked first on each call: the error of a call
	// that fails now (a fault, a cluster out of reach), nil else.
	fail func(what string) error
	// aw, ns: the AppWrapper, the Namespace of a name (nil when none).
	aw func(types.NamespacedName) *awv1beta2.AppWrapper
	ns func(string) *corev1.Namespace
	// rules, aws: what a list of them gives, in order; nil: no list of them.
	rules func() []*wrapupv1alpha1.CompletionRule
	aws   func() []*awv1beta2.AppWrapper
	// other reads what else the world serves (trigger objects,
	// CompletionRecords); nil: nothing.
	other func(key client.ObjectKey, obj client.Object) error
	// mapper is the RESTMapper of the kinds served (view.ServedKinds);
	// nil: none.
	mapper apimeta.RESTMapper
}

var _ client.Reader = (*simReader)(nil)

func (r *simReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.fail != nil {
		if err := r.fail("GET " + key.String()); err != nil {
			return err
		}
	}
	switch o := obj.(type) {
	case *awv1beta2.AppWrapper:
		if r.aw == nil {
			break
		}
		aw := r.aw(key)
		if aw == nil {
			return apierrors.NewNotFound(simAppWrappers, key.Name)
		}
		aw.DeepCopyInto(o)
		return nil
	case *corev1.Namespace:
		if r.ns == nil {
			break
		}
		ns := r.ns(key.Name)
		if ns == nil {
			return apierrors.NewNotFound(simNamespaces, key.Name)
		}
		ns.DeepCopyInto(o)
		return nil
	default:
		if r.other != nil {
			return r.other(key, obj)
		}
	}
	return fmt.Errorf("%s does not read %T", r.name, obj)
}

func (r *simReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	if r.fail != nil {
		if err := r.fail("LIST"); err != nil {
			return err
		}
	}
	switch l := list.(type) {
	case *wrapupv1alpha1.CompletionRuleList:
		if r.rules == nil {
			break
		}
		l.Items = nil
		for _, rule := range r.rules() {
			l.Items = append(l.Items, *rule.DeepCopy())
		}
		return nil
	case *awv1beta2.AppWrapperList:
		if r.aws == nil {
			break
		}
		l.Items = nil
		for _, aw := range r.aws() {
			l.Items = append(l.Items, *aw.DeepCopy())
		}
		return nil
	}
	return fmt.Errorf("%s does not list %T", r.name, list)
}

// RESTMapper lets view.Explain tell served kinds from others.
func (r *simReader) RESTMapper() apimeta.RESTMapper { return r.mapper }

// simNoWrites is the part of a world's client.Writer for what wrapup
// never does there.
type simNoWrites struct{}

func (simNoWrites) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return fmt.Errorf("wrapup creates no %T here", obj)
}
func (simNoWrites) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return fmt.Errorf("wrapup updates no %T here", obj)
}
func (simNoWrites) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return fmt.Errorf("wrapup deletes nothing in bulk")
}
func (simNoWrites) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("wrapup applies nothing")
}

// simRecorder is the Event recorder: it traces and counts the Events
// wrapup emits on AppWrappers, and fails the history on one that
// events.k8s.io would refuse (and so lose): a note over decision.MaxMessage
// bytes, an action over 128.
type simRecorder struct{ k *simKernel }

func (r simRecorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	aw, _ := regarding.(*awv1beta2.AppWrapper)
	msg := fmt.Sprintf(note, args...)
	if len(msg) > decision.MaxMessage || len(action) > 128 {
		r.k.fail("an Event too large for events.k8s.io: action %d bytes, note %d bytes", len(action), len(msg))
	}
	if aw != nil {
		r.k.logf("event %s %s on %s/%s: %s", eventtype, reason, aw.Namespace, aw.Name, decision.Truncate(msg, 160))
		r.k.emitted[aw.Namespace+"/"+aw.Name+"/"+reason]++
	}
}

// simCounters counts, and traces, what wrapup adds to the rules' counters.
type simCounters struct{ k *simKernel }

func (c simCounters) Add(_ context.Context, rule string, outcome wrapupv1alpha1.Outcome) {
	c.k.counted++
	c.k.logf("counter %s %s +1", rule, outcome)
}
