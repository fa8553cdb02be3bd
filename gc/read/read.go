// Package read is the read side of wrapup's decisions: it gathers what a
// decision needs (Gather) through a View (the controller's caches, the API
// server, or a tool's reader), and finds MultiKueue's worker of an
// AppWrapper. The controllers in package gc and the explanations of
// package view both read through it; it writes nothing.
package read

import (
	"context"
	"fmt"
	"slices"
	"sync"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// A View is where observations come from: the controller's caches, the API
// server (the final check before a delete), or the reader of a tool.
// decision.Decide decides the same way on whatever any of them saw. An
// object that does not exist reads as nil.
type View interface {
	TriggerView
	AppWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error)
	// Record reads the CompletionRecord of aw's run (decision.RecordName).
	Record(ctx context.Context, aw *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRecord, error)
	Rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error)
	Namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// RuleKind says how far triggers of gk, the kind rule names, can be read.
	RuleKind(rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind
	// Worker reads what a decision needs of the worker cluster of an
	// AppWrapper that MultiKueue dispatches, and the view of its triggers
	// there (nil when they cannot be read there).
	Worker(ctx context.Context, key types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, TriggerView)
	// AppWrapperVariable is the appWrapper variable for a rule that reads it.
	AppWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error)
}

// TriggerView is where triggers are read, the cluster's own or a worker's:
// Kind says how far triggers of gk can be read, and Trigger reads the live
// trigger ref of aw, keeping at least fields.
type TriggerView interface {
	Kind(gk schema.GroupKind) decision.Kind
	Trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error)
}

// Claimer is a TriggerView that watches kinds for the AppWrapper it reads
// for: Gather claims a kind through it before reading triggers there.
type Claimer interface {
	Claim(gk schema.GroupKind, fields celpolicies.Fields) error
}

// Gather builds the input of a decision on key from v. aw, when set, is
// the AppWrapper as v would read it (the answer to a write just made).
func Gather(ctx context.Context, v View, policies *celpolicies.Cache, key types.NamespacedName, aw *awv1beta2.AppWrapper, in decision.Input) (decision.Input, error) {
	var err error
	if aw == nil {
		if aw, err = v.AppWrapper(ctx, key); err != nil || aw == nil {
			return in, err
		}
	}
	in.AppWrapper = aw
	// The run's memory, read after the AppWrapper it is of.
	rec, err := v.Record(ctx, aw)
	if err != nil {
		return in, err
	}
	in.Record = rec
	r, ahead := v.(*Reader)
	if ahead {
		defer r.readAhead(ctx, aw)()
	}
	rules, err := v.Rules(ctx)
	if err != nil {
		return in, err
	}
	in.Rules, in.Kinds = compiled(v, policies, rules)
	if len(rules) == 0 {
		return in, nil
	}
	if in.Namespace, err = namespaceFor(ctx, v, rules, aw.Namespace); err != nil {
		return in, err
	}
	if ahead {
		r.readBefore(rules, in.Namespace)
	}
	plan, err := readTriggers(ctx, v, key, &in)
	if err != nil || !plan.ReadAppWrapper {
		return in, err
	}
	return in, readAppWrapperVariable(ctx, v, plan.Rule.Policy, &in)
}

// compiled pairs each rule with its compiled policy, and says how far the
// kind each names can be read (as the first rule naming it that is not
// watched says).
func compiled(v View, policies *celpolicies.Cache, rules []wrapupv1alpha1.CompletionRule) ([]decision.Rule, map[schema.GroupKind]decision.Kind) {
	out := make([]decision.Rule, len(rules))
	kinds := map[schema.GroupKind]decision.Kind{}
	for i := range rules {
		p, err := policies.Get(&rules[i])
		out[i] = decision.Rule{Rule: &rules[i], Policy: p, Err: err}
		if gk := decision.RuleKind(&rules[i]); gk.Kind != "" {
			if k, ok := kinds[gk]; !ok || k.State == decision.KindWatched {
				kinds[gk] = v.RuleKind(&rules[i], gk)
			}
		}
	}
	return out, kinds
}

// namespaceFor reads the Namespace name when a rule has a
// namespaceSelector: without its labels, a rule that excludes it could not
// be told from one that selects it. Without such a rule, they change
// nothing, and the read (one request per final check) is saved: nil.
func namespaceFor(ctx context.Context, v View, rules []wrapupv1alpha1.CompletionRule, name string) (*corev1.Namespace, error) {
	if !slices.ContainsFunc(rules, func(r wrapupv1alpha1.CompletionRule) bool { return r.Spec.NamespaceSelector != nil }) {
		return nil, nil
	}
	ns, err := v.Namespace(ctx, name)
	if err == nil && ns == nil {
		err = fmt.Errorf("reading namespace %s: not found", name)
	}
	return ns, err
}

// readTriggers reads into in the triggers the decision on in reads, and
// says which: through v, or on the worker cluster of an AppWrapper
// MultiKueue dispatched (in.Worker), claiming their kinds there first.
func readTriggers(ctx context.Context, v View, key types.NamespacedName, in *decision.Input) (decision.Needs, error) {
	aw := in.AppWrapper
	plan := decision.Plan(*in)
	var tv TriggerView = v
	if rule := plan.Rule; rule != nil && decision.WorkerToRead(*in) {
		in.Worker, tv = v.Worker(ctx, key, aw)
		plan = decision.Plan(*in)
		if c, ok := tv.(Claimer); ok && len(plan.Refs) == 0 {
			// Nothing to read there yet: the kinds are watched all the
			// same, so that the components' creation brings it back.
			refs, _ := decision.FindTriggers(aw, rule.Rule)
			for _, ref := range refs {
				if err := c.Claim(ref.Kind, decision.TriggerFields(rule.Policy, ref.Kind)); err != nil {
					return plan, err
				}
			}
		}
	}
	for _, ref := range plan.Refs {
		t, err := tv.Trigger(ctx, aw, ref, decision.TriggerFields(plan.Rule.Policy, ref.Kind))
		if in.Worker != nil {
			// A kind that cannot be read on a worker says nothing of the
			// rule here: the worker cannot be read.
			k := tv.Kind(ref.Kind)
			switch {
			case apimeta.IsNoMatchError(err):
				in.Worker.Problem = fmt.Sprintf("the trigger kind %s is not served on worker cluster %s (is its CRD installed there?)", ref.Kind, in.Worker.Cluster)
				continue
			case err == nil && (k.State == decision.KindNotServed || k.State == decision.KindNotWatchable):
				in.Worker.Problem = fmt.Sprintf("wrapup cannot watch the trigger kind %s on worker cluster %s: %s", ref.Kind, in.Worker.Cluster, k.Message)
				continue
			}
		}
		if apimeta.IsNoMatchError(err) {
			in.Kinds[ref.Kind] = decision.Kind{State: decision.KindNotServed, Message: err.Error()}
			continue
		}
		if err != nil {
			return plan, err
		}
		in.Triggers = append(in.Triggers, t)
		if ref.Annotated {
			in.Kinds[ref.Kind] = tv.Kind(ref.Kind)
		}
	}
	return plan, nil
}

// readAppWrapperVariable reads the appWrapper variable for the rule of
// policy p; under MultiKueue, with the status of the copy that runs it.
func readAppWrapperVariable(ctx context.Context, v View, p *celpolicies.Policy, in *decision.Input) error {
	var err error
	if in.AppWrapperVariable, err = v.AppWrapperVariable(ctx, in.AppWrapper, p); err != nil {
		return err
	}
	if st, ok := decision.StatusForRules(*in); ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return err
		}
		in.AppWrapperVariable["status"] = m
	}
	return nil
}

// Reader reads everything from one client.Reader: the API server for
// the final check, or a tool's client.
type Reader struct {
	Client client.Reader
	// Kinds, when set, says how far each kind can be read (the
	// controller's watches); otherwise every kind counts as watched, and
	// one the API server does not serve shows as its trigger's read error.
	Kinds func(schema.GroupKind) decision.Kind
	// Version, when set, gives the version to read a kind at (else the
	// template's).
	Version func(schema.GroupKind) (string, bool)
	// Labelled makes an object without the AppWrapper label absent, as it
	// is to the controller's label-filtered watches.
	Labelled bool
	// RuleStatus takes what a rule's Ready condition says of its kind (not
	// served, not watchable) over Kinds: for a tool, blind to the watches.
	RuleStatus bool
	// Slim: an AppWrapper handed to Gather may lack parts of its spec and
	// status (the controller's cache): a rule reading them gets Client's.
	Slim bool
	// Workers, when set, reads worker clusters; without it, the worker of
	// an AppWrapper that MultiKueue dispatches cannot be read.
	Workers func(ctx context.Context, aw *awv1beta2.AppWrapper) (*decision.Worker, TriggerView)
	// ListRules, when set, lists the rules in place of Client: it must
	// answer with a read sent after it was called.
	ListRules func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error)
	// Ahead, when set, are the triggers to read while the rules are
	// listed; Go runs each such read (nil: in a goroutine of its own).
	Ahead *Ahead
	Go    func(func())

	// ahead are the reads of the Gather under way, until Trigger takes
	// them or readBefore drops them.
	ahead map[aheadKey]*aheadRead
}

// Ahead is what a final check reads ahead (Reader.Ahead): the triggers a
// decision on the caches read, which the plan on the rules as listed most
// likely reads again, and the resourceVersions of the rules (by UID) and
// of the Namespace ("" for none) that decision read.
//
// Gather sends the reads once it has the AppWrapper, as it sends every read,
// and returns only once every read ahead has. Trigger takes the answer to a
// read ahead of the same kind, version and name only if the rules listed
// (and the Namespace, when read) are at the resourceVersions the caches had:
// each was then committed before the check started, as was every change of
// the trigger made before it, which the read ahead, sent later, sees.
// Otherwise (a change may have come after the read ahead was answered) the
// trigger is read again after them, as if last: a check that sees a change
// of a rule or of the Namespace sees every earlier change of the trigger.
type Ahead struct {
	Refs      []decision.Ref
	Rules     map[types.UID]string
	Namespace string
}

// AheadOf is what a final check after the decision on in reads ahead: the
// triggers in read, if this cluster's (a worker's are read by its own view).
func AheadOf(in decision.Input) *Ahead {
	if in.Worker != nil || len(in.Triggers) == 0 {
		return nil
	}
	a := &Ahead{Rules: make(map[types.UID]string, len(in.Rules))}
	for _, t := range in.Triggers {
		a.Refs = append(a.Refs, t.Ref)
	}
	for _, r := range in.Rules {
		a.Rules[r.Rule.UID] = r.Rule.ResourceVersion
	}
	if in.Namespace != nil {
		a.Namespace = in.Namespace.ResourceVersion
	}
	return a
}

// aheadKey is the object a read ahead reads, in the AppWrapper's namespace.
type aheadKey struct {
	gvk  schema.GroupVersionKind
	name string
}

// aheadRead is the answer to a read ahead, once done is closed.
type aheadRead struct {
	done chan struct{}
	u    *unstructured.Unstructured
	err  error
}

// readAhead sends the reads of Ahead, while Gather lists the rules; Gather
// calls stop before it returns.
func (v *Reader) readAhead(ctx context.Context, aw *awv1beta2.AppWrapper) (stop func()) {
	if v.Ahead == nil || len(v.Ahead.Refs) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	v.ahead = map[aheadKey]*aheadRead{}
	for _, ref := range v.Ahead.Refs {
		k := aheadKey{v.triggerGVK(ref), ref.Name}
		if ref.Name == "" || v.ahead[k] != nil {
			continue
		}
		a := &aheadRead{done: make(chan struct{})}
		v.ahead[k] = a
		wg.Add(1)
		read := func() {
			defer wg.Done()
			defer close(a.done)
			defer func() {
				// Outside the reconcile, whose panics the controller
				// recovers: a panic is this read's error.
				if p := recover(); p != nil {
					a.err = fmt.Errorf("reading %s %s: panic: %v", k.gvk.Kind, k.name, p)
				}
			}()
			a.u, a.err = v.getTrigger(ctx, aw.Namespace, k.gvk, k.name)
		}
		if v.Go != nil {
			v.Go(read)
		} else {
			go read()
		}
	}
	return func() {
		cancel()
		wg.Wait()
		v.ahead = nil
	}
}

// readBefore drops the reads ahead unless rules and ns, as read, are
// those the caches had (Ahead): the triggers are then read after them.
func (v *Reader) readBefore(rules []wrapupv1alpha1.CompletionRule, ns *corev1.Namespace) {
	if v.ahead == nil {
		return
	}
	same := len(rules) == len(v.Ahead.Rules) && (ns == nil || ns.ResourceVersion == v.Ahead.Namespace)
	for i := 0; same && i < len(rules); i++ {
		rv, ok := v.Ahead.Rules[rules[i].UID]
		same = ok && rv == rules[i].ResourceVersion
	}
	if !same {
		clear(v.ahead) // still waited for by stop, never used
	}
}

func (v *Reader) Worker(ctx context.Context, _ types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, TriggerView) {
	if v.Workers == nil {
		return &decision.Worker{Problem: "this reader has no credentials for worker clusters"}, nil
	}
	return v.Workers(ctx, aw)
}

func (v *Reader) AppWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error) {
	return getOrNil(ctx, v.Client, key, &awv1beta2.AppWrapper{}, "appwrapper "+key.String())
}

// Record reads the CompletionRecord of aw's run.
func (v *Reader) Record(ctx context.Context, aw *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRecord, error) {
	return ReadRecord(ctx, v.Client, aw)
}

// ReadRecord reads the CompletionRecord of aw's run from r; nil when
// there is none.
func ReadRecord(ctx context.Context, r client.Reader, aw *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRecord, error) {
	key := types.NamespacedName{Namespace: aw.Namespace, Name: decision.RecordName(aw.Name, string(aw.UID))}
	return getOrNil(ctx, r, key, &wrapupv1alpha1.CompletionRecord{}, "CompletionRecord "+key.String())
}

func (v *Reader) Namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return ReadNamespace(ctx, v.Client, name)
}

// ReadNamespace reads the Namespace name through r; nil when it does not
// exist.
func ReadNamespace(ctx context.Context, r client.Reader, name string) (*corev1.Namespace, error) {
	return getOrNil(ctx, r, types.NamespacedName{Name: name}, &corev1.Namespace{}, "namespace "+name)
}

// getOrNil reads the object key, what, into obj through r; nil when it
// does not exist.
func getOrNil[T client.Object](ctx context.Context, r client.Reader, key types.NamespacedName, obj T, what string) (T, error) {
	var none T
	if err := r.Get(ctx, key, obj); apierrors.IsNotFound(err) {
		return none, nil
	} else if err != nil {
		return none, fmt.Errorf("reading %s: %w", what, err)
	}
	return obj, nil
}

func (v *Reader) Rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	var list wrapupv1alpha1.CompletionRuleList
	var err error
	if v.ListRules != nil {
		list.Items, err = v.ListRules(ctx)
	} else {
		err = v.Client.List(ctx, &list)
	}
	if err != nil {
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	return list.Items, nil
}

func (v *Reader) Kind(gk schema.GroupKind) decision.Kind {
	if v.Kinds == nil {
		return decision.Kind{State: decision.KindWatched}
	}
	return v.Kinds(gk)
}

func (v *Reader) RuleKind(rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind {
	if c := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady); v.RuleStatus && c != nil &&
		c.ObservedGeneration == rule.Generation && c.Status == metav1.ConditionFalse {
		switch c.Reason {
		case wrapupv1alpha1.ReasonTriggerKindNotFound:
			return decision.Kind{State: decision.KindNotServed, Message: c.Message}
		case wrapupv1alpha1.ReasonTriggerKindNotWatchable:
			return decision.Kind{State: decision.KindNotWatchable, Message: c.Message}
		}
	}
	return v.Kind(gk)
}

// triggerGVK is the version and kind ref's trigger is read at.
func (v *Reader) triggerGVK(ref decision.Ref) schema.GroupVersionKind {
	gvk := ref.GroupVersionKind()
	if v.Version != nil {
		if version, ok := v.Version(ref.Kind); ok {
			gvk.Version = version
		}
	}
	return gvk
}

func (v *Reader) getTrigger(ctx context.Context, namespace string, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, v.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, u)
}

func (v *Reader) Trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, _ celpolicies.Fields) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	gvk := v.triggerGVK(ref)
	var u *unstructured.Unstructured
	var err error
	if a := v.ahead[aheadKey{gvk, ref.Name}]; a != nil {
		delete(v.ahead, aheadKey{gvk, ref.Name})
		<-a.done
		u, err = a.u, a.err
	} else {
		u, err = v.getTrigger(ctx, aw.Namespace, gvk, ref.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		t.State = decision.TriggerAbsent
		return t, nil
	case apimeta.IsNoMatchError(err):
		return t, fmt.Errorf("reading trigger: %s is not served by the API server (is its CRD installed?): %w", gvk, err)
	case err != nil:
		return t, fmt.Errorf("reading trigger %s %s: %w", ref.Kind.Kind, ref.Name, err)
	}
	if _, ok := u.GetLabels()[awv1beta2.AppWrapperLabel]; v.Labelled && !ok {
		// Absent to the controller's label-filtered watches.
		t.State = decision.TriggerAbsent
		t.Note = fmt.Sprintf("%s %s lacks the label %s, so wrapup's watch does not see it", ref.Kind.Kind, ref.Name, awv1beta2.AppWrapperLabel)
		return t, nil
	}
	t.State, t.Object = decision.TriggerPresent, triggers.StripMetadata(u)
	return t, nil
}

func (v *Reader) AppWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	if v.Slim {
		return FullAppWrapperVariable(ctx, v.Client, aw, p)
	}
	return AppWrapperMap(aw)
}

// CachedMetadata are the fields of an AppWrapper's metadata that wrapup's
// cache keeps as they are (CacheOptions): not the annotations, the
// finalizers or the managedFields.
var CachedMetadata = celpolicies.FieldsOf("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "ownerReferences")

// FullAppWrapperVariable is the appWrapper variable of aw, which may be the
// cache's: a rule that reads its spec, its status or any of its metadata
// that the cache does not keep as it is is given the AppWrapper read from r.
func FullAppWrapperVariable(ctx context.Context, r client.Reader, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	fields := p.AppWrapperFields()
	if fields.Has("spec") || fields.Has("status") || fields.Has("metadata") && !CachedMetadata.Covers(p.AppWrapperMetadataFields()) {
		live := &awv1beta2.AppWrapper{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(aw), live); err != nil {
			return nil, fmt.Errorf("reading the AppWrapper for a rule that reads its spec or status: %w", err)
		}
		aw = live
	}
	return AppWrapperMap(aw)
}

// AppWrapperMap is the appWrapper variable: the AppWrapper as unstructured
// content, with its apiVersion and kind.
func AppWrapperMap(aw *awv1beta2.AppWrapper) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(aw)
	if err != nil {
		return nil, fmt.Errorf("converting appwrapper: %w", err)
	}
	m["apiVersion"], m["kind"] = awv1beta2.GroupVersion.String(), "AppWrapper"
	return m, nil
}
