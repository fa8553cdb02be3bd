package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
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
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// assignments remembers which rule decides for each AppWrapper, for the
// rules' matchedAppWrappers, and tells the rule controller of a change.
type assignments struct {
	mu     sync.Mutex
	byAW   map[types.NamespacedName]string
	counts map[string]int32
	events chan event.GenericEvent
}

// newAssignments returns an empty assignments.
func newAssignments() *assignments {
	return &assignments{byAW: map[types.NamespacedName]string{}, counts: map[string]int32{}, events: make(chan event.GenericEvent, 1024)}
}

// Set records that rule ("" for none) decides for aw.
func (a *assignments) Set(aw types.NamespacedName, rule string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.byAW[aw]
	if old == rule {
		return
	}
	if old != "" {
		if a.counts[old]--; a.counts[old] <= 0 {
			delete(a.counts, old)
		}
		a.Touch(old)
	}
	if rule == "" {
		delete(a.byAW, aw)
	} else {
		a.byAW[aw] = rule
		a.counts[rule]++
		a.Touch(rule)
	}
}

// Touch asks the rule controller to look at rule again.
func (a *assignments) Touch(rule string) {
	select {
	case a.events <- triggers.RuleEvent(rule):
	default: // the controller is behind; the next change or resync brings the count
	}
}

// Rule is the rule that decides for aw; "" for none.
func (a *assignments) Rule(aw types.NamespacedName) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byAW[aw]
}

// Count is how many AppWrappers rule decides for.
func (a *assignments) Count(rule string) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.counts[rule]
}

// ruleReconciler compiles rules, writes their Ready condition and
// matchedAppWrappers, and tells the watches which trigger kinds rules need.
type ruleReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Policies *celpolicies.Cache
	Watches  *triggers.Watches
	Assign   *assignments
	// Mapper and Schemas, when set, type-check a rule's expressions against
	// its trigger kind's published schema (status.typeChecking).
	Mapper     apimeta.RESTMapper
	Schemas    resolver.SchemaResolver
	Invalidate func() // when set, drops cached discovery when a CRD changes

	uids        sync.Map      // rule name -> UID, to drop compiled programs of deleted rules
	crdSeen     sync.Map      // group -> when a CRD of it last changed (time.Time), for next and typeCheck
	typeChecks  sync.Map      // rule name -> typeChecked
	schemaEpoch atomic.Uint64 // counts CRD changes, each of which may change a schema
}

// typeChecked is a rule's last type check, valid for the rule's UID and
// generation, its kind's version and schemaEpoch: resolving a schema and
// type-checking costs tens of milliseconds, and a rule is reconciled again
// on every change of its matchedAppWrappers.
type typeChecked struct {
	uid        types.UID
	generation int64
	gvk        schema.GroupVersionKind
	epoch      uint64
	result     *wrapupv1alpha1.TypeChecking
}

// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// SetupWithManager registers the reconciler and its watches.
func (r *ruleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiextensionsv1.SchemeGroupVersion.String(), Kind: "CustomResourceDefinition"}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("wrapup-rule").
		For(&wrapupv1alpha1.CompletionRule{}).
		WatchesMetadata(crd, handler.EnqueueRequestsFromMapFunc(r.rulesWaitingForKinds), builder.OnlyMetadata).
		WatchesRawSource(source.Channel(r.Assign.events, handler.Funcs{
			GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: e.Object.GetName()}}, matchedCountDelay)
			},
		})).
		WatchesRawSource(source.Channel(r.Watches.Gone(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// rulesWaitingForKinds notes that a CRD changed, and returns the rules of
// its group (waiting for their kind, or whose kind's schema may have
// changed) and the rules never reconciled.
func (r *ruleReconciler) rulesWaitingForKinds(ctx context.Context, crd client.Object) []ctrl.Request {
	_, group, _ := strings.Cut(crd.GetName(), ".") // a CRD is named plural.group
	r.crdSeen.Store(group, time.Now())
	r.schemaEpoch.Add(1)
	if r.Invalidate != nil {
		r.Invalidate()
	}
	r.Watches.Recheck(crd.GetName()) // a deleted CRD may have served a watched kind
	var rules wrapupv1alpha1.CompletionRuleList
	if err := r.Client.List(ctx, &rules); err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for i := range rules.Items {
		rule := &rules.Items[i]
		if apimeta.FindStatusCondition(rule.Status.Conditions, wrapupv1alpha1.ConditionReady) == nil ||
			rule.Spec.Trigger.Kind != "" && rule.Spec.Trigger.APIGroup == group {
			reqs = append(reqs, ctrl.Request{NamespacedName: types.NamespacedName{Name: rule.Name}})
		}
	}
	return reqs
}

// Reconcile compiles one rule and writes its status.
func (r *ruleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rule := &wrapupv1alpha1.CompletionRule{}
	err := r.Client.Get(ctx, req.NamespacedName, rule)
	if apierrors.IsNotFound(err) || err == nil && !rule.DeletionTimestamp.IsZero() {
		r.forget(req.Name)
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if old, ok := r.uids.Swap(rule.Name, rule.UID); ok && old.(types.UID) != rule.UID {
		r.Policies.Forget(old.(types.UID)) // deleted and re-created under the same name
	}
	orig := rule.DeepCopy()
	st, err := r.readiness(ctx, rule, orig)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.setOn(rule)
	rule.Status.MatchedAppWrappers = r.Assign.Count(rule.Name)
	if !equality.Semantic.DeepEqual(orig.Status, rule.Status) {
		err := r.Client.Status().Patch(ctx, rule, client.MergeFrom(orig))
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // deleted meanwhile: its deletion's event cleans up
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("writing rule status: %w", err)
		}
	}
	r.announce(ctx, rule, orig, st)
	return r.next(rule, st)
}

// ruleReadiness is what the rule controller finds of a rule: its Ready
// condition, the conditions beside it (nil: removed), and why its type
// check could not run.
type ruleReadiness struct {
	cond                           metav1.Condition
	watchable, unprotected, cached *metav1.Condition
	typeCheckErr                   error
}

// ready sets the Ready condition, its message cut to what a condition holds.
func (st *ruleReadiness) ready(status metav1.ConditionStatus, reason, message string) {
	st.cond.Status, st.cond.Reason, st.cond.Message = status, reason, decision.Truncate(message, 32*1024-8)
}

// readiness compiles rule, checks its selectors, ensures the watch of its
// trigger kind and type-checks it against the kind's schema (into
// rule.Status.TypeChecking; orig's stands for this generation when the
// schema cannot be read). An error is the reconcile's.
func (r *ruleReconciler) readiness(ctx context.Context, rule, orig *wrapupv1alpha1.CompletionRule) (ruleReadiness, error) {
	st := ruleReadiness{cond: metav1.Condition{Type: wrapupv1alpha1.ConditionReady, ObservedGeneration: rule.Generation}}
	rule.Status.TypeChecking = nil
	policy, err := r.Policies.Get(rule)
	reason := wrapupv1alpha1.ReasonInvalidExpression
	if err == nil {
		err, reason = selectorsError(rule), wrapupv1alpha1.ReasonInvalidSelector
	}
	switch {
	case err != nil:
		// A user's mistake, which only an edit fixes: no error to retry and
		// log with a stack trace; the rule's status and a Warning Event say it.
		r.Watches.Release(triggers.RuleOwner(rule.Name))
		st.ready(metav1.ConditionFalse, reason, err.Error())
		return st, nil
	case rule.Spec.Trigger.Kind == "":
		// The trigger is the annotated component: its AppWrapper holds the watch.
		r.Watches.Release(triggers.RuleOwner(rule.Name))
		st.ready(metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled, "expressions compiled; the trigger is the component annotated "+wrapupv1alpha1.TriggerAnnotation)
		st.watchable = r.annotatedKindsCondition(rule)
		return st, nil
	}
	gk := decision.RuleKind(rule)
	fields := decision.TriggerFields(policy, gk)
	err = r.Watches.Ensure(triggers.RuleOwner(rule.Name), gk, fields)
	var nf *triggers.KindNotFoundError
	switch k := r.Watches.Kind(gk); {
	case errors.As(err, &nf):
		st.ready(metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotFound,
			fmt.Sprintf("trigger kind %s is not served by the API server (is its CRD installed?); the rule starts working when it is", gk))
	case err != nil && k.State != decision.KindNotWatchable:
		return st, err
	case err != nil:
		st.ready(metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotWatchable, err.Error())
	case k.State == decision.KindNotWatchable:
		st.ready(metav1.ConditionFalse, wrapupv1alpha1.ReasonTriggerKindNotWatchable, fmt.Sprintf("wrapup may not list and watch %s "+
			"(grant it through the ClusterRole label wrapup.dev/aggregate-to-trigger-kinds): %s; the rule starts working when it may", gk, k.Message))
	default:
		if r.Watches.StatusUnprotected(gk) {
			st.unprotected = &metav1.Condition{Type: wrapupv1alpha1.ConditionTriggerStatusProtected, Status: metav1.ConditionFalse,
				Reason: wrapupv1alpha1.ReasonNoStatusSubresource, ObservedGeneration: rule.Generation,
				Message: fmt.Sprintf("the API server serves %s with no status subresource: whoever may update one (not only its controller) writes its status, "+
					"and so can finish the AppWrapper it is the trigger of; give its CRD subresources.status (see docs/security.md)", gk)}
		}
		if !r.Watches.Keeps(gk, fields) {
			st.cached = &metav1.Condition{Type: wrapupv1alpha1.ConditionTriggerCached, Status: metav1.ConditionFalse,
				Reason: wrapupv1alpha1.ReasonFieldsReadLive, ObservedGeneration: rule.Generation,
				Message: fmt.Sprintf("the rule reads %s of its %s triggers, which their informer, started before the rule, does not keep: "+
					"each decision reads the trigger from the API server, until wrapup restarts (the informer it starts keeps what every rule then reads)", fields, gk)}
		}
		st.ready(metav1.ConditionTrue, wrapupv1alpha1.ReasonCompiled, fmt.Sprintf("expressions compiled; watching %s triggers", gk))
		rule.Status.TypeChecking, st.typeCheckErr = r.typeCheck(ctx, rule, gk)
		if st.typeCheckErr != nil && orig.Status.ObservedGeneration == rule.Generation {
			rule.Status.TypeChecking = orig.Status.TypeChecking.DeepCopy()
		}
		if tc := rule.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
			st.cond.Message += fmt.Sprintf("; %d expression(s) have warnings against the %s schema: types or cost (see status.typeChecking)", len(tc.ExpressionWarnings), gk)
		}
	}
	return st, nil
}

// setOn sets st's conditions on rule (removing those st has none of), its
// observedGeneration when Ready, and the Ready gauge.
func (st ruleReadiness) setOn(rule *wrapupv1alpha1.CompletionRule) {
	beside := []*metav1.Condition{st.watchable, st.unprotected, st.cached}
	for i, typ := range []string{wrapupv1alpha1.ConditionTriggerKindsWatchable, wrapupv1alpha1.ConditionTriggerStatusProtected, wrapupv1alpha1.ConditionTriggerCached} {
		if beside[i] != nil {
			apimeta.SetStatusCondition(&rule.Status.Conditions, *beside[i])
		} else {
			apimeta.RemoveStatusCondition(&rule.Status.Conditions, typ)
		}
	}
	apimeta.SetStatusCondition(&rule.Status.Conditions, st.cond)
	ready := 0.0
	if st.cond.Status == metav1.ConditionTrue {
		ready = 1
		rule.Status.ObservedGeneration = rule.Generation
	}
	ruleReadyGauge.WithLabelValues(rule.Name).Set(ready)
}

// announce emits the Events of the rule's status as written: new type-check
// warnings, an unprotected status newly found, and a changed Ready condition.
func (r *ruleReconciler) announce(ctx context.Context, rule, orig *wrapupv1alpha1.CompletionRule, st ruleReadiness) {
	if tc := rule.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 &&
		!equality.Semantic.DeepEqual(orig.Status.TypeChecking, tc) {
		for _, w := range tc.ExpressionWarnings {
			r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, wrapupv1alpha1.ReasonTypeCheckWarning, "TypeCheck", "%s", decision.Truncate(w.FieldRef+": "+w.Warning, decision.MaxMessage))
		}
	}
	if st.unprotected != nil && apimeta.FindStatusCondition(orig.Status.Conditions, wrapupv1alpha1.ConditionTriggerStatusProtected) == nil {
		r.Recorder.Eventf(rule, nil, corev1.EventTypeWarning, st.unprotected.Reason, "Watch", "%s", decision.Truncate(st.unprotected.Message, decision.MaxMessage))
	}
	prev := apimeta.FindStatusCondition(orig.Status.Conditions, wrapupv1alpha1.ConditionReady)
	if prev == nil || prev.Status != st.cond.Status || prev.Reason != st.cond.Reason || prev.Message != st.cond.Message {
		eventType := corev1.EventTypeNormal
		if st.cond.Status != metav1.ConditionTrue {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(rule, nil, eventType, st.cond.Reason, "Compile", "%s", decision.Truncate(st.cond.Message, decision.MaxMessage))
		logf.FromContext(ctx).Info("Rule status", "rule", klog.KObj(rule), "ready", st.cond.Status, "reason", st.cond.Reason)
	}
}

// next is when the rule controller looks at rule again.
func (r *ruleReconciler) next(rule *wrapupv1alpha1.CompletionRule, st ruleReadiness) (ctrl.Result, error) {
	switch {
	case st.cond.Reason == wrapupv1alpha1.ReasonTriggerKindNotFound:
		// Besides the CRD events: discovery can lag a CRD's Established
		// condition by a little.
		if t, ok := r.crdSeen.Load(rule.Spec.Trigger.APIGroup); ok && time.Since(t.(time.Time)) < crdSettle {
			return ctrl.Result{RequeueAfter: kindNotFoundSoon}, nil
		}
		return ctrl.Result{RequeueAfter: kindNotFoundRecheck}, nil
	case st.cond.Reason == wrapupv1alpha1.ReasonTriggerKindNotWatchable:
		// No informer runs for a kind wrapup may not list: nothing tells
		// the rule of a grant but asking again (Ensure does, once its
		// last answer is older than triggers.NotWatchableRecheck).
		return ctrl.Result{RequeueAfter: triggers.NotWatchableRecheck + time.Second}, nil
	case st.typeCheckErr != nil:
		var lag *schemaLagError
		if errors.As(st.typeCheckErr, &lag) {
			return ctrl.Result{RequeueAfter: schemaLagRecheck}, nil
		}
		// The rule works; only its type check waits, with the controller's backoff.
		return ctrl.Result{}, st.typeCheckErr
	}
	return ctrl.Result{}, nil
}

// How soon a rule is looked at again: after a change of the AppWrappers it
// decides for, matchedCountDelay, so that the changes meanwhile make one
// status write, not one per AppWrapper finished; while its trigger kind is
// not served, every kindNotFoundRecheck (one discovery request) besides the
// CRD events, and every kindNotFoundSoon for crdSettle after a CRD of its
// group changed; while its kind's schema lags its CRD (a *schemaLagError),
// every schemaLagRecheck.
const (
	matchedCountDelay   = 2 * time.Second
	kindNotFoundRecheck = 15 * time.Second
	kindNotFoundSoon    = 250 * time.Millisecond
	crdSettle           = 10 * time.Second
	schemaLagRecheck    = time.Second
)

// selectorsError is the error of a selector of rule that does not parse.
func selectorsError(rule *wrapupv1alpha1.CompletionRule) error {
	if ps := decision.SelectorProblems(rule); len(ps) > 0 {
		return fmt.Errorf("%s: %s (the rule blocks every lower-priority rule for the AppWrappers it would apply to)", ps[0].Field, ps[0].Message)
	}
	return nil
}

// annotatedKindsCondition is the TriggerKindsWatchable condition of a rule
// that names no kind: False while some AppWrapper it decides for annotates
// a component of a kind wrapup cannot watch; nil when none does.
func (r *ruleReconciler) annotatedKindsCondition(rule *wrapupv1alpha1.CompletionRule) *metav1.Condition {
	msgs := r.Watches.UnwatchableClaims(func(aw types.NamespacedName) bool { return r.Assign.Rule(aw) == rule.Name })
	if len(msgs) == 0 {
		return nil
	}
	sort.Strings(msgs)
	if len(msgs) > 8 {
		msgs = append(msgs[:8], fmt.Sprintf("and %d more", len(msgs)-8))
	}
	return &metav1.Condition{Type: wrapupv1alpha1.ConditionTriggerKindsWatchable, Status: metav1.ConditionFalse, ObservedGeneration: rule.Generation,
		Reason:  wrapupv1alpha1.ReasonTriggerKindNotWatchable,
		Message: decision.Truncate("AppWrappers annotate trigger components of kinds wrapup cannot watch; they wait: "+strings.Join(msgs, "; "), 32*1024-8)}
}

// typeCheck returns the rule's status.typeChecking: its expressions checked
// against gk's published schema (celpolicies.TypeChecking); nil without one
// (the expressions are dynamically typed, as always at run time). A schema
// not read for a moment's trouble (transient) is an error, and so is one
// missing just after a CRD of gk's group changed, as the API server
// publishes a CRD's schema a little after the CRD is established (a
// *schemaLagError). Both invalidate the cached discovery, which keeps a
// failed fetch of the OpenAPI document and the paths as they were, so that
// the next try reads afresh.
func (r *ruleReconciler) typeCheck(ctx context.Context, rule *wrapupv1alpha1.CompletionRule, gk schema.GroupKind) (*wrapupv1alpha1.TypeChecking, error) {
	if r.Mapper == nil || r.Schemas == nil {
		return nil, nil
	}
	mapping, err := r.Mapper.RESTMapping(gk)
	if apimeta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("type-checking rule %s: mapping %s: %w", rule.Name, gk, err)
	}
	gvk, epoch := mapping.GroupVersionKind, r.schemaEpoch.Load()
	if v, ok := r.typeChecks.Load(rule.Name); ok {
		if c := v.(typeChecked); c.uid == rule.UID && c.generation == rule.Generation && c.gvk == gvk && c.epoch == epoch {
			return c.result.DeepCopy(), nil
		}
	}
	s, err := r.Schemas.ResolveSchema(gvk)
	if err != nil {
		absent := errors.Is(err, resolver.ErrSchemaNotFound) || apierrors.IsNotFound(err)
		t, seen := r.crdSeen.Load(gk.Group)
		switch {
		case absent && (!seen || time.Since(t.(time.Time)) >= crdSettle):
			logf.FromContext(ctx).V(2).Info("No schema to type-check against", "kind", gvk.String(), "err", err.Error())
			return nil, nil
		case !absent && !transient(err):
			// Not a moment's trouble (a document that does not parse,
			// /openapi/v3 refused): as without a schema.
			logf.FromContext(ctx).Info("Could not read the schema to type-check against; the rule is not type-checked", "kind", gvk.String(), "err", err.Error())
			return nil, nil
		}
		if r.Invalidate != nil {
			r.Invalidate()
		}
		if absent {
			return nil, &schemaLagError{gvk: gvk}
		}
		return nil, fmt.Errorf("type-checking rule %s: reading the %s schema: %w", rule.Name, gvk, err)
	}
	result := celpolicies.TypeChecking(rule, gvk, s)
	r.typeChecks.Store(rule.Name, typeChecked{uid: rule.UID, generation: rule.Generation, gvk: gvk, epoch: epoch, result: result.DeepCopy()})
	return result, nil
}

// transient says whether err is a moment's trouble, which a later read
// may not meet: no answer (a network error, a timeout), or a 408, 429 or
// 5xx one. Any other answer (a 4xx, a document that does not parse) is
// met again. The other side of rejected (counters.go), for reads.
func transient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	var netErr net.Error
	return errors.As(err, &netErr) || utilnet.IsProbableEOF(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded)
}

// schemaLagError: a CRD of the kind's group changed a moment ago, and the
// API server does not publish the kind's schema yet.
type schemaLagError struct{ gvk schema.GroupVersionKind }

// Error says which schema is not published.
func (e *schemaLagError) Error() string {
	return fmt.Sprintf("the API server does not publish the %s schema yet", e.gvk)
}

// forget drops what the controller holds of a rule that is gone.
func (r *ruleReconciler) forget(name string) {
	r.typeChecks.Delete(name)
	if uid, ok := r.uids.LoadAndDelete(name); ok {
		r.Policies.Forget(uid.(types.UID))
	}
	r.Watches.Release(triggers.RuleOwner(name))
	ruleReadyGauge.DeleteLabelValues(name)
}
