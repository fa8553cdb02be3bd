package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Assignments remembers which rule decides for each AppWrapper, for the
// rules' matchedAppWrappers counters, and tells the rule controller when a
// rule's count changes.
type Assignments struct {
	mu     sync.Mutex
	byAW   map[types.NamespacedName]string
	counts map[string]int32
	events chan event.GenericEvent
}

// NewAssignments returns an empty Assignments.
func NewAssignments() *Assignments {
	return &Assignments{
		byAW:   map[types.NamespacedName]string{},
		counts: map[string]int32{},
		events: make(chan event.GenericEvent, 1024),
	}
}

// Set records that rule ("" for none) decides for aw.
func (a *Assignments) Set(aw types.NamespacedName, rule string) {
	a.mu.Lock()
	old, had := a.byAW[aw]
	if had && old == rule || !had && rule == "" {
		a.mu.Unlock()
		return
	}
	if had {
		a.counts[old]--
		if a.counts[old] <= 0 {
			delete(a.counts, old)
		}
	}
	if rule == "" {
		delete(a.byAW, aw)
	} else {
		a.byAW[aw] = rule
		a.counts[rule]++
	}
	a.mu.Unlock()
	for _, name := range []string{old, rule} {
		if name == "" {
			continue
		}
		select {
		case a.events <- event.GenericEvent{Object: &wrapupv1alpha1.CompletionRule{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		default: // the controller is behind; the next change or resync brings the count
		}
	}
}

// Count is how many AppWrappers rule decides for.
func (a *Assignments) Count(rule string) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[rule]
}

// Event reasons on rules.
const (
	ReasonRuleInvalid      = wrapupv1alpha1.ReasonInvalidExpression
	ReasonRuleKindNotFound = wrapupv1alpha1.ReasonTriggerKindNotFound
	ReasonRuleReady        = wrapupv1alpha1.ReasonCompiled
	ReasonTypeCheckWarning = "TypeCheckWarning"
)

// RuleReconciler compiles rules, writes their Ready condition and
// matchedAppWrappers, and tells the watches which trigger kinds rules need.
type RuleReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Policies *celpolicies.Cache
	Watches  *Watches
	Assign   *Assignments
	// Mapper and Schemas, when set, type-check a rule's expressions against
	// its trigger kind's published schema (status.typeChecking).
	Mapper  apimeta.RESTMapper
	Schemas resolver.SchemaResolver
	// Invalidate, when set, drops cached discovery when a CRD changes.
	Invalidate func()

	uids sync.Map // rule name -> UID, to drop compiled programs of deleted rules
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// SetupWithManager registers the reconciler and its watches.
func (r *RuleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return ctrl.NewControllerManagedBy(mgr).
		Named("wrapup-rule").
		For(&wrapupv1alpha1.CompletionRule{}).
		// A CRD that appears may serve a trigger kind a rule is waiting for.
		WatchesMetadata(crd, handler.EnqueueRequestsFromMapFunc(r.rulesWaitingForKinds), builder.OnlyMetadata).
		WatchesRawSource(source.Channel(r.Assign.events, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.Watches.Gone(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *RuleReconciler) rulesWaitingForKinds(ctx context.Context, _ client.Object) []ctrl.Request {
	if r.Invalidate != nil {
		r.Invalidate()
	}
	// A deleted CRD may have served a watched kind.
	r.Watches.Recheck()
	var rules wrapupv1alpha1.CompletionRuleList
	if err := r.Client.List(ctx, &rules); err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for i := range rules.Items {
		// Rules waiting for their kind, and rules whose kind's schema may
		// have changed (type checking).
		c := apimeta.FindStatusCondition(rules.Items[i].Status.Conditions, wrapupv1alpha1.ConditionReady)
		if c == nil || c.Reason == wrapupv1alpha1.ReasonTriggerKindNotFound || rules.Items[i].Spec.Trigger.Kind != "" {
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Name: rules.Items[i].Name}})
		}
	}
	return reqs
}

func ruleOwner(name string) string { return "rule/" + name }

// Reconcile compiles one rule and writes its status.
func (r *RuleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rule := &wrapupv1alpha1.CompletionRule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rule); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("rule", klog.KObj(rule))
	if !rule.DeletionTimestamp.IsZero() {
		r.forget(rule.Name)
		return ctrl.Result{}, nil
	}
	if old, ok := r.uids.Swap(rule.Name, rule.UID); ok && old.(types.UID) != rule.UID {
		r.Policies.Forget(old.(types.UID)) // deleted and re-created under the same name
	}
	orig := rule.DeepCopy()

	cond := metav1.Condition{Type: wrapupv1alpha1.ConditionReady, ObservedGeneration: rule.Generation}
	var terminal error
	rule.Status.TypeChecking = nil
	policy, compileErr := r.Policies.Get(rule)
	switch {
	case compileErr != nil:
		r.Watches.Release(ruleOwner(rule.Name))
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, wrapupv1alpha1.ReasonInvalidExpression, truncate(compileErr.Error(), 32*1024-8)
		terminal = compileErr
	case rule.Spec.Trigger.Kind != "":
		gk := schema.GroupKind{Group: rule.Spec.Trigger.APIGroup, Kind: rule.Spec.Trigger.Kind}
		err := r.Watches.Ensure(ruleOwner(rule.Name), gk, policy.ObjectFields(gk))
		var nf *KindNotFoundError
		switch {
		case errors.As(err, &nf):
			cond.Status, cond.Reason = metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotFound
			cond.Message = fmt.Sprintf("trigger kind %s is not served by the API server (is its CRD installed?); the rule starts working when it is", gk)
		case err != nil:
			return ctrl.Result{}, err
		default:
			cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled, fmt.Sprintf("expressions compiled; watching %s triggers", gk)
			rule.Status.TypeChecking = r.typeCheck(ctx, rule, gk)
			if tc := rule.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
				cond.Message += fmt.Sprintf("; %d expression(s) do not type-check against the %s schema (see status.typeChecking)", len(tc.ExpressionWarnings), gk)
			}
		}
	default:
		// The trigger is the annotated component: its AppWrapper holds the watch.
		r.Watches.Release(ruleOwner(rule.Name))
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled, "expressions compiled; the trigger is the component annotated "+wrapupv1alpha1.TriggerAnnotation
	}

	prev := apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady)
	changed := prev == nil || prev.Status != cond.Status || prev.Reason != cond.Reason || prev.Message != cond.Message
	apimeta.SetStatusCondition(&rule.Status.Conditions, cond)
	if cond.Status == metav1.ConditionTrue {
		rule.Status.ObservedGeneration = rule.Generation
	}
	rule.Status.MatchedAppWrappers = r.Assign.Count(rule.Name)
	if !equality.Semantic.DeepEqual(orig.Status, rule.Status) {
		if err := r.Client.Status().Patch(ctx, rule, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, fmt.Errorf("writing rule status: %w", err)
		}
	}
	if tc := rule.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 &&
		!equality.Semantic.DeepEqual(orig.Status.TypeChecking, tc) {
		for _, w := range tc.ExpressionWarnings {
			r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, ReasonTypeCheckWarning, "TypeCheck", "%s: %s", w.FieldRef, w.Warning)
		}
	}
	if changed {
		eventType := corev1.EventTypeNormal
		if cond.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(rule, nil, eventType, cond.Reason, "Compile", "%s", cond.Message)
		log.Info("Rule status", "ready", cond.Status, "reason", cond.Reason)
	}
	if terminal != nil {
		// A user's mistake: retrying cannot fix it, the next edit will.
		return ctrl.Result{}, reconcile.TerminalError(terminal)
	}
	if cond.Reason == wrapupv1alpha1.ReasonTriggerKindNotFound {
		// CRD events bring the rule back when its kind appears; discovery
		// can lag the CRD's Established condition, so look again later too.
		return ctrl.Result{RequeueAfter: kindNotFoundRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// kindNotFoundRecheck is how often a rule whose trigger kind is not served
// looks again, besides the CRD events: one discovery request.
const kindNotFoundRecheck = 15 * time.Second

// typeCheck checks the rule's expressions against the trigger kind's schema.
// Without a published schema, nothing is checked (the expressions are
// dynamically typed, as always at run time).
func (r *RuleReconciler) typeCheck(ctx context.Context, rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) *wrapupv1alpha1.TypeChecking {
	if r.Mapper == nil || r.Schemas == nil {
		return nil
	}
	mapping, err := r.Mapper.RESTMapping(gk)
	if err != nil {
		return nil
	}
	s, err := r.Schemas.ResolveSchema(mapping.GroupVersionKind)
	if err != nil {
		logf.FromContext(ctx).V(2).Info("No schema to type-check against", "kind", mapping.GroupVersionKind.String(), "err", err.Error())
		return nil
	}
	warnings := celpolicies.TypeCheck(&rule.Spec, s, gk.Kind)
	if len(warnings) > maxTypeCheckWarnings {
		warnings = warnings[:maxTypeCheckWarnings]
	}
	for i := range warnings {
		warnings[i].Warning = truncate(warnings[i].Warning, 4000)
	}
	return &wrapupv1alpha1.TypeChecking{Schema: mapping.GroupVersionKind.String(), ExpressionWarnings: warnings}
}

const maxTypeCheckWarnings = 32

func (r *RuleReconciler) forget(name string) {
	if uid, ok := r.uids.LoadAndDelete(name); ok {
		r.Policies.Forget(uid.(types.UID))
	}
	r.Watches.Release(ruleOwner(name))
}

// truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
