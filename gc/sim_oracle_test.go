package gc

// The simulation's oracle: what must hold of wrapup's writes, computed from
// the simulated world's truth (the API server's objects, what happened to
// each trigger, the AppWrapper controller model's state), apart from the
// decision code it checks.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/gc/view"
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

	// loopStart and loopCount count the reconciles of the current second.
	loopStart time.Time
	loopCount int
	// things counts what the world did, to stop a history that never settles.
	things int
	// polls counts reconciles per AppWrapper once the world stood still.
	polls map[types.NamespacedName]int

	written, cleared, lostRecordWrites     int
	deletes, explained, settled, histories int
	// ...of records naming several candidates, and of settled AppWrappers
	// with several.
	manyWritten, manyCleared, manyDeletes, settledMany, manyDecisions int
	// crecWrites counts CompletionRecord writes; crecLate, deletions
	// without one, past the deadline for writing it.
	crecWrites, crecLate int
	// deletedAgain counts deletions of a recorded success whose run
	// started again (before its TTL); tornDown counts triggers the
	// kubelet made terminal while they were deleted.
	deletedAgain, tornDown int
	// forgedDeletes counts deletions of AppWrappers a tenant forged a
	// record on; forgedRecords, CompletionRecords written of a forged
	// record (which the world bore out).
	forgedDeletes, forgedRecords int
	// echoes counts the AppWrapper watch events dropped as the echoes of
	// wrapup's own writes.
	echoes   int
	verdicts map[decision.Verdict]int
}

func (c *simChecks) init() {
	c.open = map[[2]types.UID]bool{}
	c.recordedAt = map[[2]types.UID]time.Time{}
	c.deleted = map[types.UID]int{}
	c.deletedKeys = map[types.NamespacedName]types.UID{}
	c.verdicts = map[decision.Verdict]int{}
}

func (c *simChecks) add(o *simChecks) {
	c.written += o.written
	c.cleared += o.cleared
	c.deletes += o.deletes
	c.explained += o.explained
	c.settled += o.settled
	c.lostRecordWrites += o.lostRecordWrites
	c.manyWritten += o.manyWritten
	c.manyCleared += o.manyCleared
	c.manyDeletes += o.manyDeletes
	c.crecWrites += o.crecWrites
	c.crecLate += o.crecLate
	c.deletedAgain += o.deletedAgain
	c.tornDown += o.tornDown
	c.forgedDeletes += o.forgedDeletes
	c.forgedRecords += o.forgedRecords
	c.settledMany += o.settledMany
	c.manyDecisions += o.manyDecisions
	c.echoes += o.echoes
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
	out := fmt.Sprintf("%d records written, %d cleared, %d deletions, %d lost answers to record writes, %d explain checks, %d settled AppWrappers checked; "+
		"of several candidates: %d decisions, %d records written, %d cleared, %d deletions, %d settled AppWrappers; "+
		"%d CompletionRecord writes, %d deletions without one past its deadline; %d triggers made terminal while deleted, %d successes deleted as their run started again; %d deletions of AppWrappers with a forged record, %d CompletionRecords of a forged record borne out; %d echoes of wrapup's own writes dropped; verdicts:",
		c.written, c.cleared, c.deletes, c.lostRecordWrites, c.explained, c.settled, c.manyDecisions, c.manyWritten, c.manyCleared, c.manyDeletes, c.settledMany,
		c.crecWrites, c.crecLate, c.tornDown, c.deletedAgain, c.forgedDeletes, c.forgedRecords, c.echoes)
	for _, v := range vs {
		out += fmt.Sprintf(" %s %d", v, c.verdicts[decision.Verdict(v)])
	}
	return out
}

// winner is the rule that decides for aw now: the highest priority (then
// the first name) of the rules that apply to it, whose selectors select it
// (or do not parse) and which have a candidate among its components: one
// of the kind the rule names, or, for a rule that names none, an annotated
// one. usable is false when it cannot act.
func (w *simWorld) winner(aw *awv1beta2.AppWrapper) (spec simRule, found, usable bool) {
	names := sortedKeys(w.rules)
	sort.SliceStable(names, func(i, j int) bool {
		return w.ruleSpecs[names[i]].priority > w.ruleSpecs[names[j]].priority
	})
	ns := w.nss[aw.Namespace]
	m := w.models[aw.UID]
	for _, name := range names {
		r := w.ruleSpecs[name]
		if r.team != "" && ns.Labels["team"] != r.team {
			continue
		}
		if m != nil && !hasCandidate(r, m) {
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
	if rec.AppWrapperUID != "" && rec.AppWrapperUID != aw.UID {
		return true
	}
	uids := []types.UID{rec.TriggerUID}
	if len(rec.Triggers) > 0 {
		uids = nil
		for _, t := range rec.Triggers {
			if t.UID != "" {
				uids = append(uids, t.UID)
			}
		}
	}
	named := false
	for _, uid := range uids {
		if uid == "" {
			continue
		}
		named = true
		if tr := w.truth[uid]; tr == nil || tr.aw != aw.UID {
			return true
		}
	}
	return !named && rec.FinishedAt.Before(aw.CreationTimestamp.Time)
}

// simGroups are the API groups of the trigger kinds.
var simGroups = map[string]string{"Job": "batch", "Pod": "", "RayJob": "ray.io"}

// simIgnored says whether aw is opted out: the world writes "True" and "yes".
func simIgnored(aw *awv1beta2.AppWrapper) bool {
	v, ok := aw.Annotations[wrapupv1alpha1.IgnoreAnnotation]
	return ok && (v == "True" || v == "yes")
}

// hasCandidate says whether m has a component rule r could take as its
// trigger: one of its kind, or, when it names none, an annotated one (the
// ConfigMap included). A rule applies only then.
func hasCandidate(r simRule, m *simAW) bool {
	if r.kind == "" && m.configMap {
		return true
	}
	for _, t := range m.trigs {
		if r.kind == "" && t.annotated || r.kind != "" && r.kind == t.kind {
			return true
		}
	}
	return false
}

// candidates are the trigger components of m that rule r takes as its
// candidates: those of its kind, or, when it names none, the annotated
// ones. None when it takes none of them, when it takes a ConfigMap (which
// wrapup may not watch), or when it takes several and its policy is One.
func candidates(r simRule, m *simAW) []*simTrig {
	if r.kind == "" && m.configMap {
		return nil
	}
	var out []*simTrig
	for i := range m.trigs {
		t := &m.trigs[i]
		if r.kind == "" && t.annotated || r.kind != "" && r.kind == t.kind {
			out = append(out, t)
		}
	}
	if len(out) > 1 && !r.many() {
		// Of several of its kind, the one annotated as the trigger, if
		// exactly one is; else ambiguous.
		var annotated []*simTrig
		for _, t := range out {
			if t.annotated {
				annotated = append(annotated, t)
			}
		}
		if r.kind != "" && len(annotated) == 1 {
			return annotated
		}
		return nil
	}
	return out
}

// applies says whether rule r takes m's trigger components as its trigger
// (or its candidates).
func applies(r simRule, m *simAW) bool { return len(candidates(r, m)) > 0 }

// simCand is a candidate as the world knows it: its component, its live
// object (nil when there is none of this AppWrapper's), and what the rule
// says of it: Absent, Running, Succeeded, Failed or Error.
type simCand struct {
	t    *simTrig
	obj  *unstructured.Unstructured
	eval string
	// recorded is, for a candidate that a record names, the UID it names.
	recorded types.UID
}

func (c *simCand) uid() types.UID {
	if c.obj == nil {
		return ""
	}
	return c.obj.GetUID()
}

// cands are rule r's candidates in aw (of the model m), as they are now.
func (w *simWorld) cands(aw *awv1beta2.AppWrapper, r simRule, m *simAW) []simCand {
	ts := candidates(r, m)
	out := make([]simCand, len(ts))
	for i, t := range ts {
		c := simCand{t: t, eval: "Absent"}
		if o := w.live(m, t); o != nil {
			if tr := w.truth[o.GetUID()]; tr != nil && tr.aw == aw.UID {
				c.obj, c.eval = o, evaluate(r, o)
			}
		}
		out[i] = c
	}
	return out
}

// deciders are the candidates of cs (of a rule of policy policy) that rec
// names, with the UIDs it names; ok is false when rec is not a record of
// these candidates: a record of a single trigger names its component and no
// candidates; one of several candidates (a rule All or Any with several)
// names candidates only, each once, the first of them as its trigger, and
// the policy that decided, the rule's.
func deciders(rec *decision.Record, policy string, cs []simCand) ([]simCand, bool) {
	if len(cs) == 1 {
		if len(rec.Triggers) > 0 || rec.TriggerRef != cs[0].t.ref() {
			return nil, false
		}
		c := cs[0]
		c.recorded = rec.TriggerUID
		return []simCand{c}, true
	}
	if len(rec.Triggers) == 0 || string(rec.Policy) != policy {
		return nil, false
	}
	var out []simCand
	seen := map[int]bool{}
	for _, rt := range rec.Triggers {
		found := false
		for _, c := range cs {
			if c.t.index == rt.Index && !seen[rt.Index] {
				c.recorded = rt.UID
				out = append(out, c)
				seen[rt.Index], found = true, true
			}
		}
		if !found {
			return nil, false
		}
	}
	if rec.TriggerRef != out[0].t.ref() || rec.TriggerUID != out[0].recorded {
		return nil, false
	}
	if len(out) > 1 && len(out) != len(cs) {
		// Every candidate decided it, and the rule has others now.
		return nil, false
	}
	return out, true
}

// recKey names what a record was written for: its trigger component and
// the UID of its object, or the candidates it names.
func recKey(rec *decision.Record) types.UID {
	if len(rec.Triggers) > 0 {
		return types.UID(rec.TriggerRef + " " + simTriggersOf(rec))
	}
	return types.UID(rec.TriggerRef + " " + string(rec.TriggerUID))
}

// evaluate is what rule r says of trigger t: Running, Succeeded, Failed or
// Error; TornDown for a trigger being torn down (deleted, or a Pod
// disrupted), which is no completion whatever its status says.
func evaluate(r simRule, t *unstructured.Unstructured) string {
	if tornDownTrig(t) {
		return "TornDown"
	}
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
// about to: one of the failed triggers ds (those a failure is recorded
// or about to be recorded for) is reset while retries are left.
func (w *simWorld) willRetry(aw *awv1beta2.AppWrapper, ds []simCand) bool {
	switch aw.Status.Phase {
	case awv1beta2.AppWrapperResetting, awv1beta2.AppWrapperResuming:
		return true
	case awv1beta2.AppWrapperRunning:
		for _, d := range ds {
			if t := d.obj; t != nil && t.GetKind() != "RayJob" && trigState(t) == wrapupv1alpha1.OutcomeFailed && aw.Status.Retries < simRetryLimit(aw) {
				return true
			}
		}
	}
	return false
}

// decides checks that the rule deciding for aw now can act on it, and
// returns it with its candidates.
func (w *simWorld) decides(aw *awv1beta2.AppWrapper, m *simAW, what string) (simRule, []simCand, bool) {
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
		w.fail("%s %s, whose deciding rule %s (kind %q, policy %q) does not take its components %s as the trigger", what, client.ObjectKeyFromObject(aw), r.name, r.kind, r.policy, m.describe())
	default:
		return r, w.cands(aw, r, m), true
	}
	return r, nil, false
}

// describeCands says what the candidates are, for messages.
func describeCands(cs []simCand) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d=%s:%s", c.t.index, c.uid(), c.eval)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// counts counts the candidates of cs in each state.
func counts(cs []simCand) map[string]int {
	n := map[string]int{}
	for _, c := range cs {
		n[c.eval]++
	}
	return n
}

// checkRecordWrite checks a patch of wrapup's that turns cur into next.
func (w *simWorld) checkRecordWrite(cur, next *awv1beta2.AppWrapper) {
	before, after := decision.ReadRecord(cur), decision.ReadRecord(next)
	if after.Same(before) {
		w.fail("wrapup patched %s without changing its record", client.ObjectKeyFromObject(cur))
		return
	}
	m := w.models[cur.UID]
	if m != nil && m.forged != nil {
		// A tenant's forgery: wrapup's record writes on it are counted,
		// not weighed.
		if after != nil {
			w.checks.written++
		}
		return
	}
	r, cs, ok := w.decides(cur, m, "wrapup changed the record of")
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(cur)
	phase := cur.Status.Phase
	if before != nil {
		delete(w.checks.open, [2]types.UID{cur.UID, recKey(before)})
	}
	if after == nil {
		w.checks.cleared++
		ds, own := deciders(before, r.policy, cs)
		if !own {
			w.fail("wrapup cleared the record %s of %s, which is not a record of its candidates %s under rule %s (policy %q)",
				describeRecord(before), key, describeCands(cs), r.name, r.policy)
			return
		}
		if len(before.Triggers) > 0 {
			w.checks.manyCleared++
		}
		cause := false
		for _, d := range ds {
			// The trigger that decided runs again, or (after a failure) a new
			// attempt replaced it.
			cause = cause || phase != awv1beta2.AppWrapperFailed && (d.recorded != "" && d.uid() == d.recorded && d.eval == "Running" ||
				before.Outcome == wrapupv1alpha1.OutcomeFailed && d.obj != nil && d.uid() != d.recorded)
		}
		if !cause {
			w.fail("wrapup cleared the record %s of %s without cause: candidates %s, rule %s, phase %s",
				describeRecord(before), key, describeCands(cs), r.name, phase)
		}
		return
	}
	if before != nil && !w.foreign(cur, before) && recKey(before) == recKey(after) {
		w.fail("wrapup recorded %s on %s again, over %s, with no clear between", describeRecord(after), key, describeRecord(before))
	}
	open := [2]types.UID{cur.UID, recKey(after)}
	if w.checks.open[open] {
		w.fail("wrapup recorded trigger %s of %s twice", recKey(after), key)
	}
	w.checks.open[open] = true
	w.checks.recordedAt[open] = w.now
	w.checks.written++
	ds, own := deciders(after, r.policy, cs)
	if !own {
		w.fail("wrapup recorded %s on %s, which is not a record of its candidates %s under rule %s (policy %q)",
			describeRecord(after), key, describeCands(cs), r.name, r.policy)
		return
	}
	for _, d := range ds {
		if d.recorded != d.uid() {
			w.fail("wrapup recorded %s on %s, naming %s for component %d, whose object is %q", describeRecord(after), key, d.recorded, d.t.index, d.uid())
			return
		}
	}
	if len(cs) > 1 {
		w.checks.manyWritten++
		w.checkManyRecord(cur, r, cs, ds, after)
		return
	}
	t, e := cs[0].obj, cs[0].eval
	same := t != nil && t.GetUID() == after.TriggerUID
	if after.Outcome == wrapupv1alpha1.OutcomeFailed && e == string(wrapupv1alpha1.OutcomeSucceeded) {
		w.fail("wrapup recorded %s on %s, whose trigger succeeded", describeRecord(after), key)
	}
	ok = false
	switch after.Outcome {
	case wrapupv1alpha1.OutcomeSucceeded:
		ok = same && e == string(wrapupv1alpha1.OutcomeSucceeded) ||
			after.TriggerUID == "" && t == nil && phase == awv1beta2.AppWrapperSucceeded
	case wrapupv1alpha1.OutcomeFailed:
		ok = phase == awv1beta2.AppWrapperFailed ||
			same && e == string(wrapupv1alpha1.OutcomeFailed) && !w.willRetry(cur, ds)
	}
	if !ok {
		w.fail("wrapup recorded %s on %s: trigger %v, rule %s says %s, phase %s, retries %d",
			describeRecord(after), key, uidOf(t), r.name, e, phase, cur.Status.Retries)
	}
}

// checkManyRecord checks a record written for the several candidates cs
// of rule r (policy All or Any), naming ds as the candidates that decided:
//   - All succeeded once every candidate succeeded (the record names them
//     all), and failed once one candidate's failure is final (it names that
//     one);
//   - Any succeeded once one candidate succeeded (it names that one), and
//     failed once every candidate's failure is final (it names them all);
//   - a Failed AppWrapper failed, unless its candidates succeeded as the
//     policy wants, and a Succeeded one succeeded when no candidate is
//     unfinished; the record then names every candidate; a candidate whose
//     evaluation errs is unfinished, and decides neither.
func (w *simWorld) checkManyRecord(cur *awv1beta2.AppWrapper, r simRule, cs, ds []simCand, rec *decision.Record) {
	phase := cur.Status.Phase
	n := counts(cs)
	every := len(ds) == len(cs)
	dn := counts(ds)
	succeeded := r.policy == "All" && n["Succeeded"] == len(cs) || r.policy == "Any" && n["Succeeded"] > 0
	ok := false
	switch rec.Outcome {
	case wrapupv1alpha1.OutcomeSucceeded:
		ok = r.policy == "All" && every && n["Succeeded"] == len(cs) ||
			r.policy == "Any" && len(ds) == 1 && dn["Succeeded"] == 1 ||
			phase == awv1beta2.AppWrapperSucceeded && every && n["Succeeded"]+n["Absent"] == len(cs)
	case wrapupv1alpha1.OutcomeFailed:
		if succeeded {
			w.fail("wrapup recorded %s on %s, whose candidates %s succeeded under policy %s", describeRecord(rec), client.ObjectKeyFromObject(cur), describeCands(cs), r.policy)
			return
		}
		final := !w.willRetry(cur, ds)
		ok = final && r.policy == "All" && len(ds) == 1 && dn["Failed"] == 1 ||
			final && r.policy == "Any" && every && n["Failed"] == len(cs) ||
			phase == awv1beta2.AppWrapperFailed && every && n["Error"] == 0
	}
	if !ok {
		w.fail("wrapup recorded %s on %s: rule %s, policy %s, candidates %s, phase %s, retries %d",
			describeRecord(rec), client.ObjectKeyFromObject(cur), r.name, r.policy, describeCands(cs), phase, cur.Status.Retries)
	}
}

func uidOf(t *unstructured.Unstructured) string {
	if t == nil {
		return "none"
	}
	return string(t.GetUID())
}

// checkDelete checks a deletion of wrapup's of cur, before it lands.
// checkCompletionRecord checks a CompletionRecord write (old: the record
// it replaces, nil for a create): it is of an AppWrapper that exists (or
// existed: a cache that has not seen the deletion yet), in its namespace,
// under the name of its name and UID, and it says what the AppWrapper's
// record says; it never replaces another AppWrapper's record, nor the same
// run's.
func (w *simWorld) checkCompletionRecord(cr, old *wrapupv1alpha1.CompletionRecord) {
	w.checks.crecWrites++
	key := types.NamespacedName{Namespace: cr.Namespace, Name: cr.AppWrapper.Name}
	aw, ok := w.aws.get(key)
	if !ok || aw.UID != cr.AppWrapper.UID {
		aw, ok = w.goneAWs[cr.AppWrapper.UID]
	}
	switch {
	case !ok || aw.UID != cr.AppWrapper.UID:
		w.fail("wrapup wrote the CompletionRecord %s/%s of AppWrapper %s (%s), which does not exist", cr.Namespace, cr.Name, key, cr.AppWrapper.UID)
		return
	case cr.Name != RecordName(aw.Name, string(aw.UID)):
		w.fail("wrapup wrote the CompletionRecord of %s under the name %s", key, cr.Name)
	case old != nil && old.AppWrapper.UID != cr.AppWrapper.UID:
		w.fail("wrapup replaced the CompletionRecord %s of AppWrapper %s with one of %s", cr.Name, old.AppWrapper.UID, cr.AppWrapper.UID)
	case old != nil && old.Outcome == cr.Outcome && old.Rule == cr.Rule && old.FinishedAt.UnixMicro() == cr.FinishedAt.UnixMicro():
		w.fail("wrapup rewrote the CompletionRecord %s of the same run (%s at %s)", cr.Name, cr.Outcome, cr.FinishedAt.UTC().Format(time.RFC3339))
	}
	rec := decision.ReadRecord(aw)
	if rec == nil || rec.Outcome != cr.Outcome || rec.FinishedAt.UnixMicro() != cr.FinishedAt.UnixMicro() {
		w.fail("wrapup wrote the CompletionRecord %s (%s by %s at %s), which the AppWrapper's record %s does not say",
			cr.Name, cr.Outcome, cr.Rule, cr.FinishedAt.UTC().Format(time.RFC3339Nano), describeRecord(rec))
		return
	}
	// Its retention and count limit are a rule's that exists (the one that
	// decides), never one a record names alone.
	if w.rules[cr.Rule] == nil {
		w.fail("wrapup wrote the CompletionRecord %s under rule %s, which does not exist (the AppWrapper's record names %s)", cr.Name, cr.Rule, rec.Rule)
	}
	// No CompletionRecord of a forged record that the world does not bear
	// out: finished while the AppWrapper existed, and the outcome its
	// trigger truly had, or its phase says.
	if m := w.models[aw.UID]; m != nil && m.forged != nil && rec.Same(m.forged) {
		w.checks.forgedRecords++
		borne := !rec.FinishedAt.After(w.now.Add(decision.HistorySkew)) && !rec.FinishedAt.Before(aw.CreationTimestamp.Add(-decision.HistorySkew)) &&
			(rec.Outcome == wrapupv1alpha1.OutcomeFailed && aw.Status.Phase == awv1beta2.AppWrapperFailed ||
				rec.Outcome == wrapupv1alpha1.OutcomeSucceeded && aw.Status.Phase == awv1beta2.AppWrapperSucceeded)
		for _, uid := range append([]types.UID{rec.TriggerUID}, recordedUIDs(rec)...) {
			if tr := w.truth[uid]; uid != "" && tr != nil && tr.aw == aw.UID && tr.outcome == rec.Outcome {
				borne = borne || !rec.FinishedAt.After(w.now.Add(decision.HistorySkew)) && !rec.FinishedAt.Before(aw.CreationTimestamp.Add(-decision.HistorySkew))
			}
		}
		if !borne {
			w.fail("wrapup wrote the CompletionRecord %s of the record %s a tenant forged, which the world does not bear out (phase %s)",
				cr.Name, describeRecord(rec), aw.Status.Phase)
		}
	}
}

func recordedUIDs(rec *decision.Record) []types.UID {
	var out []types.UID
	for _, t := range rec.Triggers {
		out = append(out, t.UID)
	}
	return out
}

// checkHistoryBeforeDelete: a deletion under a rule that keeps history
// (the rule that deletes, deleter, whichever rule recorded the outcome)
// comes after the run's CompletionRecord, or past the deadline for it.
func (w *simWorld) checkHistoryBeforeDelete(cur *awv1beta2.AppWrapper, rec *decision.Record, deleter string) {
	rule := w.rules[deleter]
	if rule == nil {
		return
	}
	if _, keep := decision.History(rule); !keep {
		return
	}
	cr := w.crecs.objs[types.NamespacedName{Namespace: cur.Namespace, Name: RecordName(cur.Name, string(cur.UID))}]
	if cr != nil && cr.AppWrapper.UID == cur.UID && cr.Outcome == rec.Outcome && cr.FinishedAt.UnixMicro() == rec.FinishedAt.UnixMicro() {
		return
	}
	if !w.now.Before(rec.FinishedAt.Add(HistoryWriteDeadline)) {
		w.checks.crecLate++
		return
	}
	w.fail("wrapup deleted %s %s after its run finished, before the run's CompletionRecord was written (it has %+v)",
		client.ObjectKeyFromObject(cur), w.now.Sub(rec.FinishedAt), cr)
}

func (w *simWorld) checkDelete(cur *awv1beta2.AppWrapper) {
	w.checks.deletes++
	key := client.ObjectKeyFromObject(cur)
	m := w.models[cur.UID]
	if m != nil && m.forged != nil {
		// A tenant forged a record on it, which may say it is finished:
		// the tenant's act, as deleting it themselves would be.
		w.checks.forgedDeletes++
		return
	}
	r, cs, ok := w.decides(cur, m, "wrapup deleted")
	if !ok {
		return
	}
	rec := decision.ReadRecord(cur)
	if rec == nil {
		w.fail("wrapup deleted %s, which carries no record", key)
		return
	}
	ds, own := deciders(rec, r.policy, cs)
	if !own {
		w.fail("wrapup deleted %s on the record %s (ref %q), which is not a record of its candidates %s under rule %s (policy %q)",
			key, describeRecord(rec), rec.TriggerRef, describeCands(cs), r.name, r.policy)
		return
	}
	if len(rec.Triggers) > 0 {
		w.checks.manyDeletes++
	}
	w.checkHistoryBeforeDelete(cur, rec, r.name)
	phase := cur.Status.Phase
	for _, d := range ds {
		switch {
		case d.eval == "Error":
			w.fail("wrapup deleted %s while rule %s's evaluation of its trigger %d (%s) errs", key, r.name, d.t.index, d.uid())
		case d.obj != nil && d.uid() == d.recorded && phase != awv1beta2.AppWrapperFailed &&
			d.eval != string(wrapupv1alpha1.OutcomeSucceeded) && d.eval != string(wrapupv1alpha1.OutcomeFailed) && d.eval != "TornDown":
			// (A trigger torn down after its outcome was recorded keeps
			// the record's meaning.)
			w.fail("wrapup deleted %s while rule %s says its trigger %d (%s) is %s", key, r.name, d.t.index, d.uid(), d.eval)
		}
		// The record tells the truth.
		if d.recorded != "" {
			tr := w.truth[d.recorded]
			if tr == nil || tr.aw != cur.UID || tr.outcome != rec.Outcome && !(rec.Outcome == wrapupv1alpha1.OutcomeFailed && phase == awv1beta2.AppWrapperFailed) {
				w.fail("wrapup deleted %s on the record %s, which the history of trigger %s (%+v) does not bear out", key, describeRecord(rec), d.recorded, tr)
			}
		} else if rec.Outcome == wrapupv1alpha1.OutcomeFailed && phase != awv1beta2.AppWrapperFailed ||
			rec.Outcome == wrapupv1alpha1.OutcomeSucceeded && phase != awv1beta2.AppWrapperSucceeded {
			w.fail("wrapup deleted %s on the record %s, with no trigger %d, in phase %s", key, describeRecord(rec), d.t.index, phase)
		}
	}
	if rec.Outcome == wrapupv1alpha1.OutcomeFailed {
		if w.willRetry(cur, ds) {
			w.fail("wrapup deleted the failed %s while the AppWrapper controller retries it (phase %s, retries %d of %d)", key, phase, cur.Status.Retries, simRetryLimit(cur))
		}
		for _, d := range ds {
			if d.obj != nil && d.uid() != d.recorded && phase != awv1beta2.AppWrapperFailed {
				w.fail("wrapup deleted %s on a failure of trigger %d (%s) while a new attempt (%s) runs", key, d.t.index, d.recorded, d.uid())
			}
		}
	}
	if _, ok := cur.Labels[kueue.MultiKueueOriginLabel]; ok {
		w.fail("wrapup deleted %s, MultiKueue's copy on a worker cluster (label %s): the manager would dispatch the run again", key, kueue.MultiKueueOriginLabel)
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
	if again := simStartedAgain(cur, rec, ds); again != "" {
		// A success recorded, then a new attempt: the components are
		// torn down and would run again; the TTL has nothing left to keep.
		w.checks.deletedAgain++
		ttl = 0
	}
	if w.now.Before(rec.FinishedAt.Add(ttl)) {
		w.fail("wrapup deleted %s %s before the TTL of %s after %s", key, rec.FinishedAt.Add(ttl).Sub(w.now), ttl, describeRecord(rec))
	}
	if since, ok := w.deletesSince[r.name+"/"+string(rec.Outcome)]; ok && w.now.Before(since.Add(ttl)) {
		// An action change is not retroactive.
		w.fail("wrapup deleted %s %s before the TTL of %s after rule %s started deleting after a %s (at %s), on the record %s",
			key, since.Add(ttl).Sub(w.now), ttl, r.name, rec.Outcome, since.Sub(simStart), describeRecord(rec))
	}
	if at, ok := w.checks.recordedAt[[2]types.UID{cur.UID, recKey(rec)}]; ok && w.now.Before(at.Add(ttl)) {
		w.fail("wrapup deleted %s %s before the TTL of %s after it recorded %s", key, at.Add(ttl).Sub(w.now), ttl, describeRecord(rec))
	}
	if hold := simDuration(cur, awv1beta2.DeletionOnFailureGracePeriodAnnotation, 0); hold > 0 &&
		phase == awv1beta2.AppWrapperFailed && !cur.Spec.Suspend {
		// The hold the user asked for runs from when the AppWrapper
		// controller first started it (its condition's time moves on
		// after the teardown).
		if m.holdStart.IsZero() || w.now.Before(m.holdStart.Add(hold)) {
			w.fail("wrapup deleted the failed %s before the end of its deletion hold of %s (started: %v)", key, hold, !m.holdStart.IsZero())
		}
	}
}

// simStartedAgain says, for an AppWrapper cur whose success rec (of the
// candidates ds) is recorded, why its run started again; "" when it did
// not: Kueue suspended it or is suspending it, the AppWrapper controller
// resets it (or resumes it after that), or a candidate that decided was
// replaced by a new object.
func simStartedAgain(cur *awv1beta2.AppWrapper, rec *decision.Record, ds []simCand) string {
	if rec.Outcome != wrapupv1alpha1.OutcomeSucceeded {
		return ""
	}
	switch p := cur.Status.Phase; {
	case p == awv1beta2.AppWrapperSuspending, p == awv1beta2.AppWrapperSuspended, p == awv1beta2.AppWrapperResetting, p == awv1beta2.AppWrapperResuming:
		return string(p)
	case cur.Spec.Suspend && p == awv1beta2.AppWrapperRunning:
		return "suspended"
	}
	for _, d := range ds {
		if d.obj != nil && d.uid() != d.recorded {
			return "replaced"
		}
	}
	return ""
}

// settledOutcome is how the candidates cs of rule r finished, in a world
// that stands still (a failure is final by now), when nothing is recorded
// for them: under All, Failed once one failed, Succeeded once every one
// succeeded; under Any, Succeeded once one succeeded, Failed once every one
// failed (one candidate: as it finished); else Failed when the AppWrapper
// controller failed the AppWrapper, Succeeded when it marked it Succeeded
// and no candidate is unfinished. A candidate whose evaluation errs is
// unfinished.
func settledOutcome(r simRule, cs []simCand, phase awv1beta2.AppWrapperPhase) wrapupv1alpha1.Outcome {
	n := counts(cs)
	policy := r.policy
	if len(cs) == 1 {
		policy = "All" // the same as Any, for one
	}
	switch {
	case policy == "All" && n["Failed"] > 0, policy == "Any" && n["Failed"] == len(cs):
		return wrapupv1alpha1.OutcomeFailed
	case policy == "All" && n["Succeeded"] == len(cs), policy == "Any" && n["Succeeded"] > 0:
		return wrapupv1alpha1.OutcomeSucceeded
	case n["Error"] > 0:
	case phase == awv1beta2.AppWrapperFailed:
		return wrapupv1alpha1.OutcomeFailed
	case phase == awv1beta2.AppWrapperSucceeded && n["Succeeded"]+n["Absent"] == len(cs):
		return wrapupv1alpha1.OutcomeSucceeded
	}
	return ""
}

// checkSettled checks, once the world stopped changing, that no
// completion was lost: an AppWrapper whose trigger (or candidates, as the
// rule's policy says) finished under a DeleteAll rule is gone, and an
// UpdateStatus (or dry-run) one carries its record.
func (w *simWorld) checkSettled() {
	// What the controller remembers is bounded by the AppWrappers there are.
	if n := w.wr.r.memory.Len(); n > len(w.aws.objs) {
		w.fail("the controller remembers %d AppWrappers, %d exist", n, len(w.aws.objs))
	}
	// So are the watches it holds for them: of AppWrappers that exist, on
	// kinds of their annotated components.
	owners := slices.SortedFunc(maps.Keys(w.wr.triggers.claims), func(a, b triggers.Owner) int { return strings.Compare(a.String(), b.String()) })
	for _, owner := range owners {
		key := owner.AppWrapper
		if owner.Rule != "" {
			continue // a rule's
		}
		gk := w.wr.triggers.claims[owner]
		aw := w.aws.objs[key]
		if aw == nil || w.models[aw.UID] == nil {
			w.fail("the controller watches %s for %s (%s), which does not exist", gk, key, owner)
			break
		}
		m := w.models[aw.UID]
		annotated := m.configMap && gk == simConfigMapGK
		for _, t := range m.trigs {
			annotated = annotated || t.annotated && gk == schema.GroupKind{Group: simGroups[t.kind], Kind: t.kind}
		}
		if !annotated {
			w.fail("the controller watches %s for %s (%s), which annotates no component of that kind (%s)", gk, key, owner, m.describe())
			break
		}
	}
	if w.counted > w.checks.written || w.checks.written-w.counted > w.checks.lostRecordWrites {
		w.fail("%d records written, %d counted (%d write answers lost)", w.checks.written, w.counted, w.checks.lostRecordWrites)
	}
	keys := make([]string, 0, len(w.aws.objs))
	for k := range w.aws.objs {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	for _, k := range keys {
		var aw *awv1beta2.AppWrapper
		for key, a := range w.aws.objs {
			if key.String() == k {
				aw = a
			}
		}
		m := w.models[aw.UID]
		w.checks.settled++
		r, found, usable := w.winner(aw)
		if m == nil || m.forged != nil || !found || !usable || !applies(r, m) || simIgnored(aw) {
			continue
		}
		cs := w.cands(aw, r, m)
		if len(cs) > 1 {
			w.checks.settledMany++
		}
		rec := decision.ReadRecord(aw)
		var ds []simCand
		if rec != nil {
			var own bool
			if ds, own = deciders(rec, r.policy, cs); !own || w.foreign(aw, rec) {
				// Copied from an earlier AppWrapper, or written for other
				// candidates: it says nothing of these.
				rec = nil
			}
		}
		errs, replaced := false, false
		for _, d := range ds {
			errs = errs || d.eval == "Error"
			replaced = replaced || d.obj != nil && d.uid() != d.recorded
		}
		var outcome wrapupv1alpha1.Outcome
		switch {
		case rec != nil && errs:
			// A runtime error is "not finished", whatever was recorded.
		case rec != nil && rec.Outcome == wrapupv1alpha1.OutcomeSucceeded:
			outcome = rec.Outcome
		case rec != nil && !replaced:
			outcome = rec.Outcome
		default:
			outcome = settledOutcome(r, cs, aw.Status.Phase)
		}
		if outcome == "" {
			continue
		}
		a := r.onSuccess
		if outcome == wrapupv1alpha1.OutcomeFailed {
			a = r.onFailure
		}
		_, workerCopy := aw.Labels[kueue.MultiKueueOriginLabel]
		if a.Action != wrapupv1alpha1.ActionUpdateStatus && !r.dryRun && !workerCopy {
			w.fail("lost completion: %s (phase %s, candidates %s, record %s) finished %s under rule %s (%+v) and was not deleted",
				k, aw.Status.Phase, describeCands(cs), describeRecord(rec), outcome, r.name, r)
			return
		}
		if rec == nil || rec.Outcome != outcome {
			w.fail("lost completion: %s finished %s under rule %s (%s, dryRun %v) and carries the record %s",
				k, outcome, r.name, a.Action, r.dryRun, describeRecord(rec))
			return
		}
	}
}

// checkExplain checks that view.Explain, gathering what it reads from the API
// server with the controller's memory, decides as the controller did on
// the same observations: whenever the controller's view is the API
// server's (a fresh decision on an AppWrapper the cache holds as it is;
// a cached one when every cache has caught up).
func (w *simWorld) checkExplain(stage string, in decision.Input, d decision.Decision) {
	// Every decision asks for no more than its verdict allows.
	if err := decision.CheckVerdict(d); err != nil {
		w.fail("a %s decision on %s: %v", stage, client.ObjectKeyFromObject(in.AppWrapper), err)
	}
	w.checks.verdicts[d.Verdict]++
	if len(d.Candidates) > 0 {
		w.checks.manyDecisions++
	}
	aw := in.AppWrapper
	if aw == nil {
		return
	}
	if w.wr.deleted[aw.UID] {
		// Its deletion is made, and cannot be undone: the events that
		// follow it (wrapup's own, the teardown's) need no decision.
		w.fail("a %s decision on %s (%s), which this process deleted", stage, client.ObjectKeyFromObject(aw), aw.UID)
	}
	cur, ok := w.aws.get(client.ObjectKeyFromObject(aw))
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
	v := &view.Reader{Client: w.reader(true, true), Labelled: true}
	v.Kinds = view.ServedKinds(context.Background(), v.Client, nil, nil)
	ein, err := view.Gather(context.Background(), v, w.explainPolicies, client.ObjectKeyFromObject(aw), nil,
		decision.Input{Now: in.Now, FailureSeen: in.FailureSeen, HoldStart: in.HoldStart, FailureGracePeriod: in.FailureGracePeriod})
	if err != nil {
		w.fail("explain of %s: %v", client.ObjectKeyFromObject(aw), err)
		return
	}
	ex := view.ExplainInput(context.Background(), ein)
	w.checks.explained++
	if ex.Verdict != d.Verdict || ex.Outcome != d.Outcome || ex.WillRecord() != d.WillRecord() || ex.Clear != d.Clear {
		w.fail("explain of %s says %s (outcome %q, record %v, clear %v: %s); the controller's %s decision %s (outcome %q, record %v, clear %v: %s)",
			client.ObjectKeyFromObject(aw), ex.Verdict, ex.Outcome, ex.WillRecord(), ex.Clear, ex.Reason,
			stage, d.Verdict, d.Outcome, d.WillRecord(), d.Clear, d.Reason)
	}
}
