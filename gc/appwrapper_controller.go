package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
)

// Event reasons on AppWrappers.
const (
	ReasonSucceeded        = "TriggerSucceeded"
	ReasonFailed           = "TriggerFailed"
	ReasonDeleted          = "Deleted"
	ReasonWouldDelete      = "WouldDelete"
	ReasonEvaluationError  = "EvaluationError"
	ReasonTriggerNotOwned  = "TriggerNotOwned"
	ReasonTriggerKindError = "TriggerKindNotWatched"
	ReasonOutcomeCleared   = "OutcomeCleared"
)

// DefaultFailureGracePeriod is how long a Running AppWrapper with a failed
// trigger is given to start a retry before the failure is taken as final:
// the AppWrapper controller's default failureGracePeriod (1m) plus the
// period at which it re-checks the components of a Running AppWrapper (1m).
// An AppWrapper's own failureGracePeriod annotation replaces the first part.
const DefaultFailureGracePeriod = time.Minute + appWrapperRecheckPeriod

// AppWrapperReconciler finishes one AppWrapper: it picks the winning rule,
// finds the trigger, evaluates it, records the outcome, waits the TTL and acts.
type AppWrapperReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Policies  *celpolicies.Cache
	Watches   *Watches
	Assign    *Assignments
	Counters  *RuleCounters
	// FailureGracePeriod defaults to DefaultFailureGracePeriod.
	FailureGracePeriod time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Workers is MaxConcurrentReconciles; default DefaultWorkers.
	Workers int

	// firstFailed remembers when a trigger (by UID) was first seen failed
	// while its AppWrapper was still Running.
	firstFailed sync.Map
}

// SetupWithManager registers the reconciler and its watches.
func (r *AppWrapperReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.FailureGracePeriod == 0 {
		r.FailureGracePeriod = DefaultFailureGracePeriod
	}
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("wrapup-appwrapper").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		For(&awv1beta2.AppWrapper{}).
		Watches(&wrapupv1alpha1.CompletionRule{},
			handler.EnqueueRequestsFromMapFunc(r.allAppWrappers),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{},
			handler.EnqueueRequestsFromMapFunc(r.appWrappersInNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(r.Watches.Events(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *AppWrapperReconciler) allAppWrappers(ctx context.Context, _ client.Object) []ctrl.Request {
	return r.listAppWrappers(ctx)
}

func (r *AppWrapperReconciler) appWrappersInNamespace(ctx context.Context, ns client.Object) []ctrl.Request {
	return r.listAppWrappers(ctx, client.InNamespace(ns.GetName()))
}

func (r *AppWrapperReconciler) listAppWrappers(ctx context.Context, opts ...client.ListOption) []ctrl.Request {
	var list awv1beta2.AppWrapperList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "Listing AppWrappers")
		return nil
	}
	reqs := make([]ctrl.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}

func watchOwner(key types.NamespacedName) string { return "appwrapper/" + key.String() }

// Reconcile finishes one AppWrapper.
func (r *AppWrapperReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	aw := &awv1beta2.AppWrapper{}
	if err := r.Client.Get(ctx, req.NamespacedName, aw); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := logf.FromContext(ctx).WithValues("appWrapper", klog.KObj(aw))
	ctx = logf.IntoContext(ctx, log)

	if !aw.DeletionTimestamp.IsZero() || aw.Status.Phase == awv1beta2.AppWrapperTerminating ||
		aw.Annotations[wrapupv1alpha1.IgnoreAnnotation] == "true" {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}

	rule, err := r.pickRule(ctx, aw)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.Assign.Set(req.NamespacedName, ruleName(rule))
	if rule == nil {
		r.Watches.Release(watchOwner(req.NamespacedName))
		return ctrl.Result{}, nil
	}
	log = log.WithValues("rule", rule.Name)
	ctx = logf.IntoContext(ctx, log)
	policy, err := r.Policies.Get(rule)
	if err != nil {
		return ctrl.Result{}, nil // pickRule skips such rules; the rule reconciler reports it
	}

	ref, err := findTrigger(aw, rule)
	if err != nil {
		var nt *noTriggerError
		if errors.As(err, &nt) {
			r.Recorder.Eventf(aw, nil, corev1.EventTypeWarning, nt.reason, "FindTrigger", "%s", nt.message)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if rule.Spec.Trigger.Kind == "" {
		// The rule does not name the kind: this AppWrapper's annotated
		// component does, so the AppWrapper holds the watch on it.
		if err := r.Watches.Ensure(watchOwner(req.NamespacedName), ref.Kind, policy.ObjectFields(ref.Kind)); err != nil {
			r.Recorder.Eventf(aw, nil, corev1.EventTypeWarning, ReasonTriggerKindError, "WatchTrigger", "%v", err)
			return ctrl.Result{}, nil
		}
	} else {
		r.Watches.Release(watchOwner(req.NamespacedName))
	}

	rec, recorded := readRecord(aw)
	outcome, res, trigger, wait, err := r.decide(ctx, aw, rule, policy, ref, rec, recorded, false)
	if err != nil || outcome == "" {
		if err == nil && recorded && trigger != nil {
			// The trigger is live and not finished (re-created by a retry,
			// its status went back, or the AppWrapper controller started a
			// retry): the recorded outcome no longer holds, and any pending
			// deletion is cancelled.
			if err := r.clearRecord(ctx, aw, rec); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{RequeueAfter: wait}, err
	}

	// fresh: aw is the API server's answer to the record's patch, as fresh
	// as a read.
	fresh := false
	if !recorded || rec.Outcome != outcome {
		triggerUID := ""
		if trigger != nil {
			triggerUID = string(trigger.GetUID())
		}
		rec = record{Outcome: outcome, Rule: rule.Name, FinishedAt: r.Now().UTC().Truncate(time.Second), Message: res.Message, TriggerUID: triggerUID}
		if err := r.writeRecord(ctx, aw, rule, rec); err != nil {
			return ctrl.Result{}, err
		}
		fresh = true
	}

	action := actionFor(rule, outcome)
	if action.Action == wrapupv1alpha1.ActionUpdateStatus {
		return ctrl.Result{}, nil
	}
	if rule.Spec.DryRun {
		return ctrl.Result{}, nil
	}
	ttl := time.Duration(0)
	if action.TTLSecondsAfterFinished != nil {
		ttl = time.Duration(*action.TTLSecondsAfterFinished) * time.Second
	}
	if left := timeLeft(rec.FinishedAt, ttl, r.Now()); left > 0 {
		log.V(2).Info("Waiting for the TTL", "left", left)
		return ctrl.Result{RequeueAfter: left}, nil
	}
	return r.deleteAfterCheck(ctx, aw, fresh, rule, outcome, rec)
}

// decide evaluates the trigger of aw under rule. It returns the final
// outcome ("" while the trigger is not finished, or its failure is not yet
// final), the evaluation, the live trigger (nil when it cannot be read) and,
// when not final, how long to wait before looking again (0: until an event).
// With fresh, objects are read from the API server rather than the caches.
func (r *AppWrapperReconciler) decide(ctx context.Context, aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule,
	policy *celpolicies.Policy, ref triggerRef, rec record, recorded, fresh bool) (wrapupv1alpha1.Outcome, celpolicies.Result, *unstructured.Unstructured, time.Duration, error) {
	var res celpolicies.Result
	if aw.Status.Phase == awv1beta2.AppWrapperFailed {
		// The AppWrapper controller gave up (retry limit, fatal error) and
		// tears the components down: the AppWrapper is finished, whatever
		// the trigger's last state, unless its success was recorded before.
		if recorded && rec.Outcome == wrapupv1alpha1.OutcomeSucceeded {
			return wrapupv1alpha1.OutcomeSucceeded, celpolicies.Result{Message: rec.Message}, nil, 0, nil
		}
		msg := "the AppWrapper controller marked the AppWrapper Failed"
		if c := apimeta.FindStatusCondition(aw.Status.Conditions, string(awv1beta2.Unhealthy)); c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		return wrapupv1alpha1.OutcomeFailed, celpolicies.Result{Outcome: celpolicies.OutcomeFailed, Message: msg}, nil, 0, nil
	}
	if ref.Name == "" {
		return "", res, nil, 0, nil // the AppWrapper controller has not created it yet
	}
	trigger, err := r.readTrigger(ctx, ref, aw.Namespace, policy.ObjectFields(ref.Kind), fresh)
	if errors.Is(err, errNotSynced) {
		// The informer's first list is under way: its events may already
		// have been handled for this AppWrapper, so look again shortly.
		return "", res, nil, notSyncedRetry, nil
	}
	if err != nil || trigger == nil {
		return "", res, nil, 0, err
	}
	if !ownedBy(trigger, aw) {
		r.Recorder.Eventf(aw, nil, corev1.EventTypeWarning, ReasonTriggerNotOwned, "ReadTrigger",
			"%s %s is not controlled by this AppWrapper: it is not taken as the trigger", ref.Kind, ref.Name)
		return "", res, nil, 0, nil
	}
	awMap, err := r.appWrapperVariable(ctx, aw, policy, fresh)
	if err != nil {
		return "", res, nil, 0, err
	}
	start := time.Now()
	res, err = policy.Evaluate(ctx, ref.Kind, trigger.Object, awMap)
	evaluationSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		// Not finished: a runtime error never finishes anything.
		evaluationErrorsTotal.WithLabelValues(rule.Name).Inc()
		r.Recorder.Eventf(aw, nil, corev1.EventTypeWarning, ReasonEvaluationError, "Evaluate",
			"rule %s on %s %s: %v (taken as not finished)", rule.Name, ref.Kind, ref.Name, err)
		return "", res, trigger, 0, nil
	}
	switch res.Outcome {
	case celpolicies.OutcomeSucceeded:
		return wrapupv1alpha1.OutcomeSucceeded, res, trigger, 0, nil
	case celpolicies.OutcomeFailed:
		// A failure is final only once the AppWrapper controller will not
		// retry: checked on every pass, a recorded failure included, so that
		// a retry that starts late (Resetting) still wins.
		firstSeen := r.Now()
		if recorded && rec.Outcome == wrapupv1alpha1.OutcomeFailed && rec.TriggerUID == string(trigger.GetUID()) {
			firstSeen = rec.FinishedAt
		}
		if v, loaded := r.firstFailed.LoadOrStore(trigger.GetUID(), firstSeen); loaded && v.(time.Time).Before(firstSeen) {
			firstSeen = v.(time.Time)
		}
		final, wait := failureIsFinal(aw, firstSeen, r.Now(), r.FailureGracePeriod)
		if !final {
			logf.FromContext(ctx).V(2).Info("Trigger failed; waiting for the AppWrapper controller's retry", "phase", aw.Status.Phase, "wait", wait)
			return "", res, trigger, wait, nil
		}
		return wrapupv1alpha1.OutcomeFailed, res, trigger, 0, nil
	default:
		return "", res, trigger, 0, nil
	}
}

// errNotSynced says that the trigger kind's informer has not listed yet.
var errNotSynced = errors.New("trigger informer not synced")

// notSyncedRetry is how soon an AppWrapper whose trigger informer has not
// listed yet is looked at again.
const notSyncedRetry = time.Second

// appWrapperVariable is the appWrapper variable of an evaluation: nil when
// the policy does not read it. wrapup's cache (CacheOptions) keeps of the
// spec and status only what wrapup reads: a policy that reads either is
// given the AppWrapper read from the API server.
func (r *AppWrapperReconciler) appWrapperVariable(ctx context.Context, aw *awv1beta2.AppWrapper, policy *celpolicies.Policy, fresh bool) (map[string]any, error) {
	f := policy.AppWrapperFields()
	if f.Empty() {
		return nil, nil
	}
	if !fresh && (f.Has("spec") || f.Has("status")) {
		live := &awv1beta2.AppWrapper{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(aw), live); err != nil {
			return nil, fmt.Errorf("reading the AppWrapper for a rule that reads its spec or status: %w", err)
		}
		aw = live
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(aw)
	if err != nil {
		return nil, fmt.Errorf("converting appwrapper: %w", err)
	}
	m["apiVersion"], m["kind"] = awv1beta2.GroupVersion.String(), "AppWrapper"
	return m, nil
}

// readTrigger reads the live trigger from the informer cache, or with fresh
// from the API server. It returns nil when the object does not exist.
func (r *AppWrapperReconciler) readTrigger(ctx context.Context, ref triggerRef, namespace string, fields celpolicies.Fields, fresh bool) (*unstructured.Unstructured, error) {
	if !fresh {
		obj, synced, err := r.Watches.Get(ref.Kind, namespace, ref.Name, fields)
		if err == nil && !synced {
			return nil, errNotSynced
		}
		if !errors.Is(err, ErrFieldsNotKept) {
			return obj, err
		}
		// The rule changed to read more, and its informer has not been
		// started again yet: read this one from the API server.
	}
	gvr, ok := r.Watches.Resource(ref.Kind)
	if !ok {
		return nil, fmt.Errorf("reading trigger: kind %s is not watched", ref.Kind)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvr.GroupVersion().WithKind(ref.Kind.Kind))
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading trigger %s %s: %w", ref.Kind, ref.Name, err)
	}
	return u, nil
}

// ownedBy says whether aw controls obj: only then is obj a component of aw
// rather than a same-named object someone else made.
func ownedBy(obj metav1.Object, aw *awv1beta2.AppWrapper) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == aw.UID && ref.Kind == "AppWrapper" &&
		schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).Group == awv1beta2.GroupVersion.Group
}

// deleteAfterCheck is the final sanity check before a deletion: the
// AppWrapper (unless fresh says that cached is the API server's answer to
// a write just made) and its trigger are read again from the API server, the rule is
// re-evaluated, and the AppWrapper is deleted only if the same outcome still
// holds, with a UID precondition and Background propagation (so the
// AppWrapper controller's finalizer tears the components down and Kueue
// releases the quota only after the pods are gone).
func (r *AppWrapperReconciler) deleteAfterCheck(ctx context.Context, cached *awv1beta2.AppWrapper, fresh bool, rule *wrapupv1alpha1.CompletionRule,
	outcome wrapupv1alpha1.Outcome, rec record) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	aw := cached
	if !fresh {
		aw = &awv1beta2.AppWrapper{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), aw); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if aw.UID != cached.UID || !aw.DeletionTimestamp.IsZero() || aw.Annotations[wrapupv1alpha1.IgnoreAnnotation] == "true" {
		return ctrl.Result{}, nil
	}
	freshRule, err := r.pickRule(ctx, aw)
	if err != nil {
		return ctrl.Result{}, err
	}
	if freshRule == nil || freshRule.Name != rule.Name {
		log.V(2).Info("The winning rule changed; not deleting")
		return ctrl.Result{Requeue: true}, nil
	}
	policy, err := r.Policies.Get(freshRule)
	if err != nil {
		return ctrl.Result{}, nil
	}
	ref, err := findTrigger(aw, freshRule)
	if err != nil {
		return ctrl.Result{}, nil
	}
	rec2, recorded := readRecord(aw)
	if recorded {
		rec = rec2
	}
	again, _, _, _, err := r.decide(ctx, aw, freshRule, policy, ref, rec, recorded, true)
	if err != nil {
		return ctrl.Result{}, err
	}
	if again != outcome {
		log.Info("Outcome no longer holds on a fresh read; not deleting", "was", outcome, "now", again)
		return ctrl.Result{Requeue: true}, nil
	}
	uid := aw.UID
	err = r.Client.Delete(ctx, aw, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("deleting appwrapper: %w", err)
	}
	r.firstFailed.Delete(types.UID(rec.TriggerUID))
	actionsTotal.WithLabelValues(rule.Name, "Deleted").Inc()
	triggerToActionSeconds.WithLabelValues(rule.Name).Observe(r.Now().Sub(rec.FinishedAt).Seconds())
	log.Info("Deleted finished AppWrapper", "outcome", outcome)
	r.Recorder.Eventf(aw, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete",
		"rule %s: trigger %s; AppWrapper deleted with its components", rule.Name, outcome)
	return ctrl.Result{}, nil
}

func (r *AppWrapperReconciler) pickRule(ctx context.Context, aw *awv1beta2.AppWrapper) (*wrapupv1alpha1.CompletionRule, error) {
	var rules wrapupv1alpha1.CompletionRuleList
	if err := r.Client.List(ctx, &rules); err != nil {
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	if len(rules.Items) == 0 {
		return nil, nil
	}
	ns := &corev1.Namespace{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: aw.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace: %w", err)
	}
	ptrs := make([]*wrapupv1alpha1.CompletionRule, len(rules.Items))
	for i := range rules.Items {
		ptrs[i] = &rules.Items[i]
	}
	return winningRule(ptrs, aw.Labels, ns.Labels, func(rule *wrapupv1alpha1.CompletionRule) bool {
		_, err := r.Policies.Get(rule)
		return err == nil
	}), nil
}

func (r *AppWrapperReconciler) forget(key types.NamespacedName) {
	r.Watches.Release(watchOwner(key))
	r.Assign.Set(key, "")
}

func ruleName(rule *wrapupv1alpha1.CompletionRule) string {
	if rule == nil {
		return ""
	}
	return rule.Name
}

func actionFor(rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome) wrapupv1alpha1.ActionSpec {
	a := rule.Spec.OnSuccess
	if outcome == wrapupv1alpha1.OutcomeFailed {
		a = rule.Spec.OnFailure
	}
	if a.Action == "" {
		a.Action = wrapupv1alpha1.ActionDeleteAll
	}
	return a
}

// record is the outcome wrapup wrote on an AppWrapper's metadata.
type record struct {
	Outcome    wrapupv1alpha1.Outcome
	Rule       string
	FinishedAt time.Time
	Message    string
	TriggerUID string
}

func readRecord(aw *awv1beta2.AppWrapper) (record, bool) {
	o := wrapupv1alpha1.Outcome(aw.Labels[wrapupv1alpha1.OutcomeLabel])
	if o != wrapupv1alpha1.OutcomeSucceeded && o != wrapupv1alpha1.OutcomeFailed {
		return record{}, false
	}
	at, err := time.Parse(time.RFC3339, aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation])
	if err != nil {
		return record{}, false
	}
	return record{
		Outcome:    o,
		Rule:       aw.Annotations[wrapupv1alpha1.RuleAnnotation],
		FinishedAt: at,
		Message:    aw.Annotations[wrapupv1alpha1.MessageAnnotation],
		TriggerUID: aw.Annotations[wrapupv1alpha1.TriggerUIDAnnotation],
	}, true
}

// maxMessage bounds the message annotation.
const maxMessage = 1024

// writeRecord records an outcome on the AppWrapper's metadata (never its
// status, which its controller owns), then emits the Event, bumps the rule's
// counters and the metrics.
func (r *AppWrapperReconciler) writeRecord(ctx context.Context, aw *awv1beta2.AppWrapper, rule *wrapupv1alpha1.CompletionRule, rec record) error {
	orig := aw.DeepCopy()
	if aw.Labels == nil {
		aw.Labels = map[string]string{}
	}
	if aw.Annotations == nil {
		aw.Annotations = map[string]string{}
	}
	msg := truncate(rec.Message, maxMessage)
	aw.Labels[wrapupv1alpha1.OutcomeLabel] = string(rec.Outcome)
	aw.Annotations[wrapupv1alpha1.RuleAnnotation] = rec.Rule
	aw.Annotations[wrapupv1alpha1.FinishedAtAnnotation] = rec.FinishedAt.Format(time.RFC3339)
	aw.Annotations[wrapupv1alpha1.MessageAnnotation] = msg
	if rec.TriggerUID != "" {
		aw.Annotations[wrapupv1alpha1.TriggerUIDAnnotation] = rec.TriggerUID
	} else {
		delete(aw.Annotations, wrapupv1alpha1.TriggerUIDAnnotation)
	}
	if err := r.Client.Patch(ctx, aw, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("recording outcome: %w", client.IgnoreNotFound(err))
	}
	outcomesTotal.WithLabelValues(rule.Name, string(rec.Outcome)).Inc()
	reason := ReasonSucceeded
	if rec.Outcome == wrapupv1alpha1.OutcomeFailed {
		reason = ReasonFailed
	}
	action := actionFor(rule, rec.Outcome)
	what := "the AppWrapper is deleted"
	if ttl := action.TTLSecondsAfterFinished; ttl != nil && *ttl > 0 {
		what = fmt.Sprintf("the AppWrapper is deleted in %ds", *ttl)
	}
	switch {
	case action.Action == wrapupv1alpha1.ActionUpdateStatus:
		what = "outcome recorded only (UpdateStatus)"
		actionsTotal.WithLabelValues(rule.Name, "StatusOnly").Inc()
	case rule.Spec.DryRun:
		what = "dry run: the AppWrapper would be deleted"
		actionsTotal.WithLabelValues(rule.Name, ReasonWouldDelete).Inc()
		r.Recorder.Eventf(aw, nil, corev1.EventTypeNormal, ReasonWouldDelete, "Delete", "rule %s (dryRun): would delete the AppWrapper", rule.Name)
	}
	note := fmt.Sprintf("rule %s: trigger %s; %s", rule.Name, rec.Outcome, what)
	if msg != "" {
		note += ": " + msg
	}
	r.Recorder.Eventf(aw, nil, corev1.EventTypeNormal, reason, "RecordOutcome", "%s", note)
	logf.FromContext(ctx).Info("Recorded outcome", "outcome", rec.Outcome, "message", msg)
	r.Counters.Add(ctx, rule.Name, rec.Outcome)
	return nil
}

// clearRecord removes an outcome that no longer holds.
func (r *AppWrapperReconciler) clearRecord(ctx context.Context, aw *awv1beta2.AppWrapper, rec record) error {
	orig := aw.DeepCopy()
	delete(aw.Labels, wrapupv1alpha1.OutcomeLabel)
	for _, k := range []string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.FinishedAtAnnotation, wrapupv1alpha1.MessageAnnotation, wrapupv1alpha1.TriggerUIDAnnotation} {
		delete(aw.Annotations, k)
	}
	if err := r.Client.Patch(ctx, aw, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("clearing outcome: %w", client.IgnoreNotFound(err))
	}
	r.firstFailed.Delete(types.UID(rec.TriggerUID))
	r.Recorder.Eventf(aw, nil, corev1.EventTypeNormal, ReasonOutcomeCleared, "ClearOutcome",
		"the trigger is running again (re-created or reset): the recorded outcome %s is cleared", rec.Outcome)
	return nil
}
