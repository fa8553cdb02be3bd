package gc

// The simulation's oracle: what must hold of wrapup's writes, computed from
// the simulated world's truth (the API server's objects, what happened to
// each trigger, the AppWrapper controller model's state), apart from the
// decision code it checks.

import (
	"context"
	"fmt"
	"sort"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// simChecks counts what the oracle saw.
type simChecks struct {
	// open: a record of (AppWrapper UID, trigger UID) written and not cleared.
	open map[[2]types.UID]bool
	// recordedAt is when each record was written.
	recordedAt map[[2]types.UID]time.Time
	// deleted counts wrapup's deletions of each AppWrapper.
	deleted map[types.UID]int
	// deletedKeys: the AppWrapper of each name whose deletion wrapup made.
	deletedKeys map[types.NamespacedName]types.UID
	events      map[string]int

	// loopStart and loopCount count the reconciles of the current second.
	loopStart time.Time
	loopCount int
	// things counts what the world did, to stop a history that never settles.
	things int
	// polls counts reconciles per AppWrapper once the world stood still.
	polls map[types.NamespacedName]int

	written, cleared, counted, lostRecordWrites int
	deletes, explained, settled, histories      int
	verdicts                                    map[decision.Verdict]int
}

func (c *simChecks) init() {
	c.open = map[[2]types.UID]bool{}
	c.recordedAt = map[[2]types.UID]time.Time{}
	c.deleted = map[types.UID]int{}
	c.deletedKeys = map[types.NamespacedName]types.UID{}
	c.events = map[string]int{}
	c.verdicts = map[decision.Verdict]int{}
}

func (c *simChecks) add(o *simChecks) {
	c.written += o.written
	c.cleared += o.cleared
	c.counted += o.counted
	c.deletes += o.deletes
	c.explained += o.explained
	c.settled += o.settled
	c.lostRecordWrites += o.lostRecordWrites
	c.histories++
	for v, n := range o.verdicts {
		c.verdicts[v] += n
	}
}

func (c *simChecks) summary() string {
	vs := make([]string, 0, len(c.verdicts))
	for v := range c.verdicts {
		vs = append(vs, string(v))
	}
	sort.Strings(vs)
	out := fmt.Sprintf("%d records written, %d cleared, %d deletions, %d lost answers to record writes, %d explain checks, %d settled AppWrappers checked; verdicts:",
		c.written, c.cleared, c.deletes, c.lostRecordWrites, c.explained, c.settled)
	for _, v := range vs {
		out += fmt.Sprintf(" %s %d", v, c.verdicts[decision.Verdict(v)])
	}
	return out
}

// winner is the rule that decides for aw now: the highest priority (then
// the first name) whose selectors select it, or whose selector does not
// parse. usable is false when it cannot act.
func (w *simWorld) winner(aw *awv1beta2.AppWrapper) (spec simRule, found, usable bool) {
	names := sortedKeys(w.rules)
	sort.SliceStable(names, func(i, j int) bool {
		return w.ruleSpecs[names[i]].priority > w.ruleSpecs[names[j]].priority
	})
	ns := w.nss[aw.Namespace]
	for _, name := range names {
		r := w.ruleSpecs[name]
		if r.team != "" && ns.Labels["team"] != r.team {
			continue
		}
		if r.badSel {
			return r, true, false
		}
		if r.benchOnly && aw.Labels["role"] != "bench" {
			continue
		}
		return r, true, !r.broken && r.kind != "EvalRun"
	}
	return simRule{}, false, false
}

// foreign says whether rec, on aw, was written for another AppWrapper (a
// copy in a saved manifest it was created again from).
func (w *simWorld) foreign(aw *awv1beta2.AppWrapper, rec *decision.Record) bool {
	if rec.TriggerUID == "" {
		return rec.FinishedAt.Before(aw.CreationTimestamp.Time)
	}
	tr := w.truth[rec.TriggerUID]
	return tr == nil || tr.aw != aw.UID
}

// simGroups are the API groups of the trigger kinds.
var simGroups = map[string]string{"Job": "batch", "Pod": "", "RayJob": "ray.io"}

// simIgnored says whether aw is opted out: the world writes "True" and "yes".
func simIgnored(aw *awv1beta2.AppWrapper) bool {
	v, ok := aw.Annotations[wrapupv1alpha1.IgnoreAnnotation]
	return ok && (v == "True" || v == "yes")
}

// applies says whether rule r takes m's trigger component as its trigger.
func applies(r simRule, m *simAW) bool {
	if r.kind == "" {
		return m.annotated && !m.configMap
	}
	return r.kind == m.kind
}

// evaluate is what rule r says of trigger t: Running, Succeeded, Failed or
// Error.
func evaluate(r simRule, t *unstructured.Unstructured) string {
	if r.success == "error" {
		return "Error"
	}
	st := trigState(t)
	switch {
	case st == wrapupv1alpha1.OutcomeSucceeded && r.success == "":
		return string(wrapupv1alpha1.OutcomeSucceeded)
	case st == wrapupv1alpha1.OutcomeFailed:
		return string(wrapupv1alpha1.OutcomeFailed)
	}
	return "Running"
}

// willRetry says whether the AppWrapper controller is retrying aw, or is
// about to: its failed trigger is reset while retries are left.
func (w *simWorld) willRetry(aw *awv1beta2.AppWrapper, m *simAW) bool {
	switch aw.Status.Phase {
	case awv1beta2.AppWrapperResetting, awv1beta2.AppWrapperResuming:
		return true
	case awv1beta2.AppWrapperRunning:
		t := w.trigger(m)
		return t != nil && m.kind != "RayJob" && trigState(t) == wrapupv1alpha1.OutcomeFailed && aw.Status.Retries < simRetryLimit(aw)
	}
	return false
}

// decides checks that the rule deciding for aw now can act on it.
func (w *simWorld) decides(aw *awv1beta2.AppWrapper, m *simAW, what string) (simRule, bool) {
	r, found, usable := w.winner(aw)
	switch {
	case m == nil:
		w.fail("%s %s: an AppWrapper the world does not know", what, client.ObjectKeyFromObject(aw))
	case simIgnored(aw):
		w.fail("%s %s, which is annotated %s", what, client.ObjectKeyFromObject(aw), wrapupv1alpha1.IgnoreAnnotation)
	case !found:
		w.fail("%s %s, which no rule selects", what, client.ObjectKeyFromObject(aw))
	case !usable:
		w.fail("%s %s, whose deciding rule %s cannot act (%+v)", what, client.ObjectKeyFromObject(aw), r.name, r)
	case !applies(r, m):
		w.fail("%s %s, whose deciding rule %s does not take its %s component (annotated %v) as the trigger", what, client.ObjectKeyFromObject(aw), r.name, m.kind, m.annotated)
	default:
		return r, true
	}
	return r, false
}

// checkRecordWrite checks a patch of wrapup's that turns cur into next.
func (w *simWorld) checkRecordWrite(cur, next *awv1beta2.AppWrapper) {
	before, after := decision.ReadRecord(cur), decision.ReadRecord(next)
	if after.Same(before) {
		w.fail("wrapup patched %s without changing its record", client.ObjectKeyFromObject(cur))
		return
	}
	m := w.models[cur.UID]
	r, ok := w.decides(cur, m, "wrapup changed the record of")
	if !ok {
		return
	}
	t := w.trigger(m)
	if before != nil {
		delete(w.checks.open, [2]types.UID{cur.UID, before.TriggerUID})
	}
	if after == nil {
		w.checks.cleared++
		switch {
		case t != nil && t.GetUID() == before.TriggerUID && evaluate(r, t) == "Running" && cur.Status.Phase != awv1beta2.AppWrapperFailed:
		case t != nil && t.GetUID() != before.TriggerUID && before.Outcome == wrapupv1alpha1.OutcomeFailed && cur.Status.Phase != awv1beta2.AppWrapperFailed:
		default:
			w.fail("wrapup cleared the record %s of %s without cause: trigger %v, rule %s says %s, phase %s",
				describeRecord(before), client.ObjectKeyFromObject(cur), uidOf(t), r.name, evalOf(r, t), cur.Status.Phase)
		}
		return
	}
	key := [2]types.UID{cur.UID, after.TriggerUID}
	if w.checks.open[key] {
		w.fail("wrapup recorded trigger %s of %s twice", after.TriggerUID, client.ObjectKeyFromObject(cur))
	}
	w.checks.open[key] = true
	w.checks.recordedAt[key] = w.now
	w.checks.written++
	same := t != nil && t.GetUID() == after.TriggerUID
	if after.Outcome == wrapupv1alpha1.OutcomeFailed && t != nil && evaluate(r, t) == string(wrapupv1alpha1.OutcomeSucceeded) {
		w.fail("wrapup recorded %s on %s, whose trigger succeeded", describeRecord(after), client.ObjectKeyFromObject(cur))
	}
	ok = false
	switch after.Outcome {
	case wrapupv1alpha1.OutcomeSucceeded:
		ok = same && evaluate(r, t) == string(wrapupv1alpha1.OutcomeSucceeded) ||
			after.TriggerUID == "" && t == nil && cur.Status.Phase == awv1beta2.AppWrapperSucceeded
	case wrapupv1alpha1.OutcomeFailed:
		ok = cur.Status.Phase == awv1beta2.AppWrapperFailed ||
			same && evaluate(r, t) == string(wrapupv1alpha1.OutcomeFailed) && !w.willRetry(cur, m)
	}
	if !ok {
		w.fail("wrapup recorded %s on %s: trigger %v, rule %s says %s, phase %s, retries %d",
			describeRecord(after), client.ObjectKeyFromObject(cur), uidOf(t), r.name, evalOf(r, t), cur.Status.Phase, cur.Status.Retries)
	}
}

func uidOf(t *unstructured.Unstructured) string {
	if t == nil {
		return "none"
	}
	return string(t.GetUID())
}

func evalOf(r simRule, t *unstructured.Unstructured) string {
	if t == nil {
		return "nothing"
	}
	return evaluate(r, t)
}

// checkDelete checks a deletion of wrapup's of cur, before it lands.
func (w *simWorld) checkDelete(cur *awv1beta2.AppWrapper) {
	w.checks.deletes++
	key := client.ObjectKeyFromObject(cur)
	m := w.models[cur.UID]
	r, ok := w.decides(cur, m, "wrapup deleted")
	if !ok {
		return
	}
	rec := decision.ReadRecord(cur)
	if rec == nil {
		w.fail("wrapup deleted %s, which carries no record", key)
		return
	}
	if want := simGroups[m.kind] + "/" + m.kind + "/" + m.template(); rec.TriggerRef != want {
		w.fail("wrapup deleted %s on a record of %q, not of its trigger %s", key, rec.TriggerRef, want)
	}
	t := w.trigger(m)
	phase := cur.Status.Phase
	if t != nil && t.GetUID() == rec.TriggerUID && phase != awv1beta2.AppWrapperFailed {
		if e := evaluate(r, t); e != string(wrapupv1alpha1.OutcomeSucceeded) && e != string(wrapupv1alpha1.OutcomeFailed) {
			w.fail("wrapup deleted %s while rule %s says its trigger is %s", key, r.name, e)
		}
	}
	// The record tells the truth.
	if rec.TriggerUID != "" {
		tr := w.truth[rec.TriggerUID]
		if tr == nil || tr.aw != cur.UID || tr.outcome != rec.Outcome && !(rec.Outcome == wrapupv1alpha1.OutcomeFailed && phase == awv1beta2.AppWrapperFailed) {
			w.fail("wrapup deleted %s on the record %s, which the trigger's history (%+v) does not bear out", key, describeRecord(rec), tr)
		}
	} else if rec.Outcome == wrapupv1alpha1.OutcomeFailed && phase != awv1beta2.AppWrapperFailed ||
		rec.Outcome == wrapupv1alpha1.OutcomeSucceeded && phase != awv1beta2.AppWrapperSucceeded {
		w.fail("wrapup deleted %s on the record %s, with no trigger, in phase %s", key, describeRecord(rec), phase)
	}
	if rec.Outcome == wrapupv1alpha1.OutcomeFailed {
		switch {
		case w.willRetry(cur, m):
			w.fail("wrapup deleted the failed %s while the AppWrapper controller retries it (phase %s, retries %d of %d)", key, phase, cur.Status.Retries, simRetryLimit(cur))
		case t != nil && t.GetUID() != rec.TriggerUID && phase != awv1beta2.AppWrapperFailed:
			w.fail("wrapup deleted %s on a failure of trigger %s while a new attempt (%s) runs", key, rec.TriggerUID, t.GetUID())
		}
	}
	a := r.onSuccess
	if rec.Outcome == wrapupv1alpha1.OutcomeFailed {
		a = r.onFailure
	}
	if a.Action == wrapupv1alpha1.ActionUpdateStatus || r.dryRun {
		w.fail("wrapup deleted %s, but rule %s says %s (dryRun %v) for %s", key, r.name, a.Action, r.dryRun, rec.Outcome)
	}
	ttl := time.Duration(0)
	if a.TTLSecondsAfterFinished != nil {
		ttl = time.Duration(*a.TTLSecondsAfterFinished) * time.Second
	}
	if w.now.Before(rec.FinishedAt.Add(ttl)) {
		w.fail("wrapup deleted %s %s before the TTL of %s after %s", key, rec.FinishedAt.Add(ttl).Sub(w.now), ttl, describeRecord(rec))
	}
	if at, ok := w.checks.recordedAt[[2]types.UID{cur.UID, rec.TriggerUID}]; ok && w.now.Before(at.Add(ttl)) {
		w.fail("wrapup deleted %s %s before the TTL of %s after it recorded %s", key, at.Add(ttl).Sub(w.now), ttl, describeRecord(rec))
	}
	if hold := simDuration(cur, awv1beta2.DeletionOnFailureGracePeriodAnnotation, 0); hold > 0 &&
		phase == awv1beta2.AppWrapperFailed && !cur.Spec.Suspend {
		c := apimeta.FindStatusCondition(cur.Status.Conditions, string(awv1beta2.DeletingResources))
		if c == nil || w.now.Before(c.LastTransitionTime.Add(hold)) {
			w.fail("wrapup deleted the failed %s before the end of its deletion hold of %s (started: %v)", key, hold, c != nil)
		}
	}
}

// checkSettled checks, once the world stopped changing, that no
// completion was lost: an AppWrapper whose trigger finished under a
// DeleteAll rule is gone, and an UpdateStatus (or dry-run) one carries its
// record.
func (w *simWorld) checkSettled() {
	// What the controller remembers is bounded by the AppWrappers there are.
	if n := w.wr.r.memory.Len(); n > len(w.aws) {
		w.fail("the controller remembers %d AppWrappers, %d exist", n, len(w.aws))
	}
	if w.checks.counted > w.checks.written || w.checks.written-w.checks.counted > w.checks.lostRecordWrites {
		w.fail("%d records written, %d counted (%d write answers lost)", w.checks.written, w.checks.counted, w.checks.lostRecordWrites)
	}
	keys := make([]string, 0, len(w.aws))
	for k := range w.aws {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	for _, k := range keys {
		var aw *awv1beta2.AppWrapper
		for key, a := range w.aws {
			if key.String() == k {
				aw = a
			}
		}
		m := w.models[aw.UID]
		w.checks.settled++
		r, found, usable := w.winner(aw)
		if m == nil || !found || !usable || !applies(r, m) || simIgnored(aw) {
			continue
		}
		t := w.trigger(m)
		rec := decision.ReadRecord(aw)
		if rec != nil && w.foreign(aw, rec) {
			rec = nil // copied from an earlier AppWrapper: it says nothing of this one
		}
		var outcome wrapupv1alpha1.Outcome
		switch {
		case t != nil && evaluate(r, t) == "Error":
			// A runtime error is "not finished", whatever was recorded.
		case rec != nil && rec.Outcome == wrapupv1alpha1.OutcomeSucceeded:
			outcome = rec.Outcome
		case rec != nil && (t == nil || t.GetUID() == rec.TriggerUID):
			outcome = rec.Outcome
		case t != nil && evaluate(r, t) == "Error":
		case t != nil && evaluate(r, t) == string(wrapupv1alpha1.OutcomeSucceeded):
			outcome = wrapupv1alpha1.OutcomeSucceeded
		case t != nil && evaluate(r, t) == string(wrapupv1alpha1.OutcomeFailed):
			outcome = wrapupv1alpha1.OutcomeFailed
		case aw.Status.Phase == awv1beta2.AppWrapperFailed:
			outcome = wrapupv1alpha1.OutcomeFailed
		case t == nil && aw.Status.Phase == awv1beta2.AppWrapperSucceeded:
			outcome = wrapupv1alpha1.OutcomeSucceeded
		}
		if outcome == "" {
			continue
		}
		a := r.onSuccess
		if outcome == wrapupv1alpha1.OutcomeFailed {
			a = r.onFailure
		}
		if a.Action != wrapupv1alpha1.ActionUpdateStatus && !r.dryRun {
			w.fail("lost completion: %s (phase %s, trigger %v %s, record %s) finished %s under rule %s (%+v) and was not deleted",
				k, aw.Status.Phase, uidOf(t), evalOf(r, t), describeRecord(rec), outcome, r.name, r)
			return
		}
		if rec == nil || rec.Outcome != outcome {
			w.fail("lost completion: %s finished %s under rule %s (%s, dryRun %v) and carries the record %s",
				k, outcome, r.name, a.Action, r.dryRun, describeRecord(rec))
			return
		}
	}
}

// checkExplain checks that Explain, gathering what it reads from the API
// server with the controller's memory, decides as the controller did on
// the same observations: whenever the controller's view is the API
// server's (a fresh decision on an AppWrapper the cache holds as it is;
// a cached one when every cache has caught up).
func (w *simWorld) checkExplain(stage string, in decision.Input, d decision.Decision) {
	w.checks.verdicts[d.Verdict]++
	aw := in.AppWrapper
	if aw == nil {
		return
	}
	cur, ok := w.aws[client.ObjectKeyFromObject(aw)]
	if !ok || cur.ResourceVersion != aw.ResourceVersion {
		return
	}
	if stage == "cached" {
		for _, c := range []*simCache{w.awCache, w.trigCache, w.ruleCache, w.nsCache} {
			if len(c.pending) > 0 {
				return
			}
		}
		if !w.wr.triggers.synced() {
			return
		}
	}
	v := &readerView{r: &simReader{w: w, fresh: true, noFaults: true}, labelled: true}
	v.kinds = explainKinds(v.r)
	ein, err := gather(context.Background(), v, w.explainPolicies, client.ObjectKeyFromObject(aw), nil,
		decision.Input{Now: in.Now, FailureSeen: in.FailureSeen, FailureGracePeriod: in.FailureGracePeriod})
	if err != nil {
		w.fail("explain of %s: %v", client.ObjectKeyFromObject(aw), err)
		return
	}
	ex := explainInput(context.Background(), ein)
	w.checks.explained++
	if ex.Verdict != d.Verdict || ex.Outcome != d.Outcome || ex.WillRecord() != d.WillRecord() || ex.Clear != d.Clear {
		w.fail("explain of %s says %s (outcome %q, record %v, clear %v: %s); the controller's %s decision %s (outcome %q, record %v, clear %v: %s)",
			client.ObjectKeyFromObject(aw), ex.Verdict, ex.Outcome, ex.WillRecord(), ex.Clear, ex.Reason,
			stage, d.Verdict, d.Outcome, d.WillRecord(), d.Clear, d.Reason)
	}
}
