package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
)

// A view is where observations come from: the controller's caches, the API
// server (the final check before a delete), or the reader of a tool. Each
// gathers the same things; decision.Decide then decides the same way on
// whatever any of them saw.
type view interface {
	triggerView
	// appWrapper reads the AppWrapper; nil when it does not exist.
	appWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error)
	rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error)
	// namespace reads a Namespace; nil when it does not exist.
	namespace(ctx context.Context, name string) (*corev1.Namespace, error)
	// ruleKind says it for the kind gk that rule names.
	ruleKind(rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind
	// worker reads, for an AppWrapper that MultiKueue dispatches, what the
	// decision needs of its worker cluster, and returns the view to read
	// its triggers through there (nil when they cannot be read there).
	worker(ctx context.Context, key types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, triggerView)
	// appWrapperVariable is the appWrapper variable for a rule that reads
	// fields of it.
	appWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error)
}

// triggerView is where triggers are read: the cluster's own, or a worker's.
type triggerView interface {
	// kind says how far triggers of gk can be read.
	kind(gk schema.GroupKind) decision.Kind
	// trigger reads the live trigger ref of aw, keeping at least fields.
	trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error)
}

// claimer is a triggerView that watches kinds for the AppWrapper it reads
// for.
type claimer interface {
	claim(gk schema.GroupKind, fields celpolicies.Fields) error
}

// gather builds the input of a decision on key from v. aw, when set, is
// the AppWrapper as v would read it (the answer to a write just made).
func gather(ctx context.Context, v view, policies *celpolicies.Cache, key types.NamespacedName, aw *awv1beta2.AppWrapper, in decision.Input) (decision.Input, error) {
	if aw == nil {
		var err error
		if aw, err = v.appWrapper(ctx, key); err != nil {
			return in, err
		}
		if aw == nil {
			return in, nil
		}
	}
	in.AppWrapper = aw
	rules, err := v.rules(ctx)
	if err != nil {
		return in, err
	}
	in.Rules = make([]decision.Rule, len(rules))
	in.Kinds = map[schema.GroupKind]decision.Kind{}
	for i := range rules {
		p, err := policies.Get(&rules[i])
		in.Rules[i] = decision.Rule{Rule: &rules[i], Policy: p, Err: err}
		if gk := decision.RuleKind(&rules[i]); gk.Kind != "" {
			if k, ok := in.Kinds[gk]; !ok || k.State == decision.KindWatched {
				in.Kinds[gk] = v.ruleKind(&rules[i], gk)
			}
		}
	}
	if len(rules) == 0 {
		return in, nil
	}
	// A rule with a namespaceSelector needs the Namespace's labels: without
	// them, a rule that excludes it could not be told from one that
	// selects it. Without such a rule, they change nothing, and the read
	// (one request per final check) is saved.
	if slices.ContainsFunc(rules, func(r wrapupv1alpha1.CompletionRule) bool { return r.Spec.NamespaceSelector != nil }) {
		ns, err := v.namespace(ctx, aw.Namespace)
		if err != nil {
			return in, err
		}
		if ns == nil {
			return in, fmt.Errorf("reading namespace %s: not found", aw.Namespace)
		}
		in.Namespace = ns
	}

	plan := decision.Plan(in)
	var tv triggerView = v
	if rule := plan.Rule; rule != nil && decision.WorkerToRead(in) {
		// MultiKueue dispatched it: its triggers are on a worker cluster.
		in.Worker, tv = v.worker(ctx, key, aw)
		plan = decision.Plan(in)
		if c, ok := tv.(claimer); ok && len(plan.Refs) == 0 {
			// Not read there yet (no copy of it, or not started): its
			// triggers' kinds are watched there all the same, so that the
			// components' creation brings it back.
			refs, _ := decision.FindTriggers(aw, rule.Rule)
			for _, ref := range refs {
				if err := c.claim(ref.Kind, decision.TriggerFields(rule.Policy, ref.Kind)); err != nil {
					return in, err
				}
			}
		}
	}
	for _, ref := range plan.Refs {
		t, err := tv.trigger(ctx, aw, ref, decision.TriggerFields(plan.Rule.Policy, ref.Kind))
		if in.Worker != nil {
			// On a worker, a kind that cannot be read there says nothing
			// of the rule here: the worker cannot be read for it.
			k := tv.kind(ref.Kind)
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
			// The API server does not serve the kind: as the controller's
			// watches would say.
			in.Kinds[ref.Kind] = decision.Kind{State: decision.KindNotServed, Message: err.Error()}
			continue
		}
		if err != nil {
			return in, err
		}
		in.Triggers = append(in.Triggers, t)
		if ref.Annotated {
			in.Kinds[ref.Kind] = tv.kind(ref.Kind)
		}
	}
	if plan.ReadAppWrapper {
		if in.AppWrapperVariable, err = v.appWrapperVariable(ctx, aw, plan.Rule.Policy); err != nil {
			return in, err
		}
		if st, ok := decision.StatusForRules(in); ok {
			// Under MultiKueue, the status of the copy that runs it.
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
			if err != nil {
				return in, err
			}
			in.AppWrapperVariable["status"] = m
		}
	}
	return in, nil
}

// readerView reads everything from one client.Reader: the API server for
// the final check, or a tool's client. Its triggers are read at version,
// or, when version gives none, at the template's version.
type readerView struct {
	r client.Reader
	// kinds, when set, says how far each kind can be read (the
	// controller's watches); otherwise every kind counts as watched, and a
	// kind the API server does not serve shows as its trigger's read error.
	kinds func(schema.GroupKind) decision.Kind
	// version, when set, gives the version to read a kind at.
	version func(schema.GroupKind) (string, bool)
	// labelled makes an object without the AppWrapper label absent, as it
	// is to the controller's label-filtered watches.
	labelled bool
	// ruleStatus takes what a rule's Ready condition says of its kind (not
	// served, not watchable by the controller) over kinds: for a reader
	// outside the controller, which cannot see the controller's watches.
	ruleStatus bool
	// slim says that an AppWrapper handed to gather may lack parts of its
	// spec and status (the controller's cache): a rule that reads them is
	// given the AppWrapper read from r.
	slim bool
	// workers, when set, reads worker clusters; without it, the worker of
	// an AppWrapper that MultiKueue dispatches cannot be read.
	workers func(ctx context.Context, aw *awv1beta2.AppWrapper) (*decision.Worker, triggerView)
}

func (v *readerView) worker(ctx context.Context, _ types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, triggerView) {
	if v.workers == nil {
		return &decision.Worker{Problem: "this reader has no credentials for worker clusters"}, nil
	}
	return v.workers(ctx, aw)
}

func (v *readerView) appWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error) {
	aw := &awv1beta2.AppWrapper{}
	if err := v.r.Get(ctx, key, aw); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading appwrapper %s: %w", key, err)
	}
	return aw, nil
}

func (v *readerView) rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	var list wrapupv1alpha1.CompletionRuleList
	if err := v.r.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	return list.Items, nil
}

func (v *readerView) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return readNamespace(ctx, v.r, name)
}

func readNamespace(ctx context.Context, r client.Reader, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}

func (v *readerView) kind(gk schema.GroupKind) decision.Kind {
	if v.kinds == nil {
		return decision.Kind{State: decision.KindWatched}
	}
	return v.kinds(gk)
}

func (v *readerView) ruleKind(rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind {
	if v.ruleStatus {
		if c := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady); c != nil &&
			c.ObservedGeneration == rule.Generation && c.Status == metav1.ConditionFalse {
			switch c.Reason {
			case wrapupv1alpha1.ReasonTriggerKindNotFound:
				return decision.Kind{State: decision.KindNotServed, Message: c.Message}
			case wrapupv1alpha1.ReasonTriggerKindNotWatchable:
				return decision.Kind{State: decision.KindNotWatchable, Message: c.Message}
			}
		}
	}
	return v.kind(gk)
}

func (v *readerView) trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, _ celpolicies.Fields) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	gvk := ref.GroupVersionKind()
	if v.version != nil {
		if version, ok := v.version(ref.Kind); ok {
			gvk.Version = version
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := v.r.Get(ctx, types.NamespacedName{Namespace: aw.Namespace, Name: ref.Name}, u); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			t.State = decision.TriggerAbsent
			return t, nil
		case apimeta.IsNoMatchError(err):
			return t, fmt.Errorf("reading trigger: %s is not served by the API server (is its CRD installed?): %w", gvk, err)
		}
		return t, fmt.Errorf("reading trigger %s %s: %w", ref.Kind.Kind, ref.Name, err)
	}
	if _, ok := u.GetLabels()[awv1beta2.AppWrapperLabel]; v.labelled && !ok {
		// The controller's watches list only labelled objects: to it, this
		// one does not exist.
		t.State = decision.TriggerAbsent
		t.Note = fmt.Sprintf("%s %s lacks the label %s, so wrapup's watch does not see it", ref.Kind.Kind, ref.Name, awv1beta2.AppWrapperLabel)
		return t, nil
	}
	stripMetadata(u)
	t.State, t.Object = decision.TriggerPresent, u
	return t, nil
}

func (v *readerView) appWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	if v.slim {
		return fullAppWrapperVariable(ctx, v.r, aw, p)
	}
	return appWrapperMap(aw)
}

// cachedMetadata are the fields of an AppWrapper's metadata that wrapup's
// cache keeps as they are (CacheOptions): not the annotations, the
// finalizers or the managedFields.
var cachedMetadata = celpolicies.FieldsOf("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
	"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "ownerReferences")

// fullAppWrapperVariable is the appWrapper variable of aw, which may be the
// cache's: a rule that reads its spec, its status or any of its metadata
// that the cache does not keep as it is is given the AppWrapper read from r.
func fullAppWrapperVariable(ctx context.Context, r client.Reader, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	fields := p.AppWrapperFields()
	if fields.Has("spec") || fields.Has("status") || fields.Has("metadata") && !cachedMetadata.Covers(p.AppWrapperMetadataFields()) {
		live := &awv1beta2.AppWrapper{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(aw), live); err != nil {
			return nil, fmt.Errorf("reading the AppWrapper for a rule that reads its spec or status: %w", err)
		}
		aw = live
	}
	return appWrapperMap(aw)
}

// appWrapperMap is the appWrapper variable: the AppWrapper as unstructured
// content, with its apiVersion and kind.
func appWrapperMap(aw *awv1beta2.AppWrapper) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(aw)
	if err != nil {
		return nil, fmt.Errorf("converting appwrapper: %w", err)
	}
	m["apiVersion"], m["kind"] = awv1beta2.GroupVersion.String(), "AppWrapper"
	return m, nil
}

// cacheView reads from the controller's caches: the manager's for
// AppWrappers, rules and Namespaces, the trigger watches for triggers. A
// rule that reads more of a trigger or of the AppWrapper than the caches
// keep is given what the API server has.
type cacheView struct {
	r *AppWrapperReconciler
	// key is the AppWrapper decided on: the owner of the watch of its
	// annotated trigger's kind.
	key types.NamespacedName
	// mem is the AppWrapper's memory entry, which remembers the watches
	// claimed for it.
	mem *awMemory
}

func (v *cacheView) appWrapper(ctx context.Context, key types.NamespacedName) (*awv1beta2.AppWrapper, error) {
	return (&readerView{r: v.r.Cache}).appWrapper(ctx, key)
}

func (v *cacheView) rules(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	return (&readerView{r: v.r.Cache}).rules(ctx)
}

func (v *cacheView) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	return readNamespace(ctx, v.r.Cache, name)
}

func (v *cacheView) kind(gk schema.GroupKind) decision.Kind { return v.r.Triggers.Kind(gk) }

func (v *cacheView) worker(ctx context.Context, key types.NamespacedName, aw *awv1beta2.AppWrapper) (*decision.Worker, triggerView) {
	w, c := v.r.readWorker(ctx, false, aw)
	if c == nil || w.Problem != "" {
		return w, nil
	}
	return w, &workerCacheView{r: v.r, key: key, mem: v.mem, c: c}
}

// workerCacheView reads triggers from the watches on a worker cluster,
// claimed for the AppWrapper key (of every kind it reads there: the rules
// claim kinds on this cluster's watches only).
type workerCacheView struct {
	r   *AppWrapperReconciler
	key types.NamespacedName
	mem *awMemory
	c   *workerConn
}

func (v *workerCacheView) kind(gk schema.GroupKind) decision.Kind { return v.c.triggers.Kind(gk) }

// claim watches gk on the worker for the AppWrapper.
func (v *workerCacheView) claim(gk schema.GroupKind, fields celpolicies.Fields) error {
	// Remembered before the claim is made, so that it is released with the
	// AppWrapper whatever happens to this reconcile.
	v.r.claimOnWorker(v.key, v.mem, v.c, gk)
	if err := v.c.triggers.Ensure(workerOwner(v.key, gk), gk, fields); err != nil && !KindState(err) {
		return fmt.Errorf("watching %s on worker cluster %s: %w", gk, v.c.cluster, err)
	}
	return nil
}

func (v *workerCacheView) trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	w := v.c.triggers
	if err := v.claim(ref.Kind, fields); err != nil {
		return t, err
	}
	if k := w.Kind(ref.Kind); k.State == decision.KindNotServed || k.State == decision.KindNotWatchable {
		return t, nil
	}
	return readCached(ctx, w, v.key, aw, ref, fields, v.r.workerLiveView(v.c))
}

// readCached reads the trigger ref of aw (the AppWrapper key) from the
// trigger cache tc, or through live when tc drops fields it reads.
func readCached(ctx context.Context, tc TriggerCache, key types.NamespacedName, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields, live triggerView) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	obj, synced, err := tc.Get(ref.Kind, aw.Namespace, ref.Name, fields)
	switch {
	case err == nil && !synced:
		// Its first list is under way: it tells this AppWrapper when done.
		tc.Wait(ref.Kind, key)
		t.State = decision.TriggerPending
		return t, nil
	case errors.Is(err, ErrFieldsNotKept):
		// A rule was changed to read more, and its informer has not been
		// started again yet: read this one from the API server.
		return live.trigger(ctx, aw, ref, fields)
	case err != nil:
		return t, err
	case obj == nil:
		t.State = decision.TriggerAbsent
	default:
		t.State, t.Object = decision.TriggerPresent, obj
	}
	return t, nil
}

func (v *cacheView) ruleKind(_ *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) decision.Kind {
	return v.kind(gk)
}

func (v *cacheView) trigger(ctx context.Context, aw *awv1beta2.AppWrapper, ref decision.Ref, fields celpolicies.Fields) (decision.Trigger, error) {
	t := decision.Trigger{Ref: ref}
	if ref.Annotated {
		// The rule does not name the kind: this AppWrapper's annotated
		// component does, so the AppWrapper holds the watch on it.
		owner := claimOwner(v.key, aw, ref.Kind)
		if owner != watchOwner(v.key) {
			// Remembered before the claim is made, so that it is released
			// with the AppWrapper whatever happens to this reconcile.
			v.mem.rememberClaim(ref.Kind)
		}
		if err := v.r.Triggers.Ensure(owner, ref.Kind, fields); err != nil && !KindState(err) {
			return t, err
		}
		if k := v.r.Triggers.Kind(ref.Kind); k.State == decision.KindNotServed || k.State == decision.KindNotWatchable {
			return t, nil
		}
	}
	return readCached(ctx, v.r.Triggers, v.key, aw, ref, fields, v.r.liveView())
}

// appWrapperVariable: wrapup's cache (CacheOptions) keeps of the
// annotations, spec and status only what wrapup reads; a rule that reads
// the annotations, spec or status is given the AppWrapper read from the
// API server.
func (v *cacheView) appWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, p *celpolicies.Policy) (map[string]any, error) {
	return fullAppWrapperVariable(ctx, v.r.APIReader, aw, p)
}
