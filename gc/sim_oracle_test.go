package gc

// The simulation's oracle: what must hold of wrapup's writes, judged from
// the simulated world's truth (the API server's objects, what happened to
// each trigger, the AppWrapper controller model's state, the rules the
// world holds and the changes made to them), apart from the decision code
// it checks. It never takes a record's word for what happened: it judges
// each CompletionRecord write when it is made, from the world, and keeps
// its own account of each run (simRun), which later writes and deletions
// are judged against; the AppWrapper's own wrapup.dev/* labels and
// annotations, which its tenant writes, count for nothing.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
	"github.com/wrapup-dev/wrapup/test/util"
)

// simChecks is what the oracle knows of wrapup's acts, and counts.
type simChecks struct {
	// runs are the outcomes wrapup recorded, as the oracle judged them
	// when they were written, by AppWrapper UID: the latest of each.
	runs map[types.UID]*simRun
	// uncounted are the outcomes recorded in the current reconcile (their
	// write answered) that wrapup has not counted yet.
	uncounted []string
	// lastWrite is the AppWrapper and the time of wrapup's last answered
	// CompletionRecord write: a mirror follows it in the same reconcile.
	lastWrite simWriteMark
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

	// written counts new outcomes recorded (replaced: of them, those
	// written over a cleared, failed or earlier version's record);
	// cleared and restamped, the other record updates; lostAnswers, the
	// answers to outcome writes that were lost (those outcomes are not
	// counted).
	written, replaced, cleared, restamped, lostAnswers int
	deletes, explained, settled, histories             int
	// ...of records naming several candidates, and of settled AppWrappers
	// with several.
	manyWritten, manyCleared, manyDeletes, settledMany, manyDecisions int
	// creates, updates and alreadyExists count the CompletionRecord
	// writes by kind, and the creates answered AlreadyExists.
	creates, updates, alreadyExists int
	// deletedAgain counts deletions of a recorded success whose run
	// started again (before its TTL); held, deletions and stamps that a
	// change of the action in force made later than the run's own TTL;
	// tornDown counts triggers the kubelet made terminal while they were
	// deleted; ttlFinished, records of a Job seen while its own TTL
	// deletes it.
	deletedAgain, held, tornDown, ttlFinished int
	// forgeries counts the tenants' writes of wrapup.dev/* metadata;
	// blind, the decisions decided again on rewritten metadata; mirrors,
	// wrapup's mirror patches.
	forgeries, blind, mirrors int
	// echoes counts the AppWrapper watch events dropped as the echoes of
	// wrapup's own deletions.
	echoes   int
	verdicts map[decision.Verdict]int
}

// simWriteMark names a record write: of which AppWrapper, when.
type simWriteMark struct {
	uid types.UID
	at  time.Time
}

func (c *simChecks) init() {
	c.runs = map[types.UID]*simRun{}
	c.deleted = map[types.UID]int{}
	c.deletedKeys = map[types.NamespacedName]types.UID{}
	c.verdicts = map[decision.Verdict]int{}
}

func (c *simChecks) add(o *simChecks) {
	c.written += o.written
	c.replaced += o.replaced
	c.cleared += o.cleared
	c.restamped += o.restamped
	c.lostAnswers += o.lostAnswers
	c.deletes += o.deletes
	c.explained += o.explained
	c.settled += o.settled
	c.manyWritten += o.manyWritten
	c.manyCleared += o.manyCleared
	c.manyDeletes += o.manyDeletes
	c.settledMany += o.settledMany
	c.manyDecisions += o.manyDecisions
	c.creates += o.creates
	c.updates += o.updates
	c.alreadyExists += o.alreadyExists
	c.deletedAgain += o.deletedAgain
	c.held += o.held
	c.tornDown += o.tornDown
	c.ttlFinished += o.ttlFinished
	c.forgeries += o.forgeries
	c.blind += o.blind
	c.mirrors += o.mirrors
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
	out := fmt.Sprintf("%d outcomes recorded (%d over an earlier record), %d cleared, %d restamped, %d lost answers to outcome writes; "+
		"%d CompletionRecord creates (%d AlreadyExists), %d updates; %d deletions (%d of a success whose run started again, %d later than the run's own TTL by a change of the action in force); "+
		"%d explain checks, %d settled AppWrappers checked; of several candidates: %d decisions, %d records written, %d cleared, %d deletions, %d settled AppWrappers; "+
		"%d triggers made terminal while deleted, %d records of a Job its own TTL deletes; %d tenant writes of wrapup.dev/* metadata, %d decisions decided again on rewritten metadata, %d mirrors; "+
		"%d echoes of wrapup's deletions dropped; verdicts:",
		c.written, c.replaced, c.cleared, c.restamped, c.lostAnswers, c.creates, c.alreadyExists, c.updates, c.deletes, c.deletedAgain, c.held,
		c.explained, c.settled, c.manyDecisions, c.manyWritten, c.manyCleared, c.manyDeletes, c.settledMany,
		c.tornDown, c.ttlFinished, c.forgeries, c.blind, c.mirrors, c.echoes)
	for _, v := range vs {
		out += fmt.Sprintf(" %s %d", v, c.verdicts[decision.Verdict(v)])
	}
	return out
}

// --- the rules, as the world holds them ---

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
// ones (the ConfigMap, which has no object the world serves wrapup: see
// acts). None when it takes none of them, or when it takes several and
// its policy is One.
func candidates(r simRule, m *simAW) []*simTrig {
	if r.kind == "" && m.configMap {
		return []*simTrig{{index: m.configIndex, kind: "ConfigMap", base: m.key.Name + "-config", name: m.key.Name + "-config", annotated: true}}
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

// simDeployed says whether the AppWrapper controller may have created
// aw's components: not while it is Suspended or not yet started.
func simDeployed(aw *awv1beta2.AppWrapper) bool {
	return aw.Status.Phase != awv1beta2.AppWrapperSuspended && aw.Status.Phase != ""
}

// watchable says whether wrapup can read the trigger rule r takes in aw
// (of the model m): not the annotated ConfigMap, a kind it may not watch,
// while the components exist; before they do, there is nothing to read
// and the record alone decides.
func watchable(aw *awv1beta2.AppWrapper, r simRule, m *simAW) bool {
	return !(r.kind == "" && m.configMap && simDeployed(aw))
}

// simPolicy is the policy a record of rule r says decided: One when unset.
func simPolicy(r simRule) string {
	if r.policy == "" {
		return "One"
	}
	return r.policy
}

// simActionFor is rule r's action after outcome o.
func simActionFor(r simRule, o wrapupv1alpha1.Outcome) wrapupv1alpha1.ActionSpec {
	a := r.onSuccess
	if o == wrapupv1alpha1.OutcomeFailed {
		a = r.onFailure
	}
	if a.Action == "" {
		a.Action = wrapupv1alpha1.ActionDeleteAll
	}
	return a
}

// --- the candidates, as the world knows them ---

// simCand is a candidate as the world knows it: its component, its live
// object (nil when there is none of this AppWrapper's), and what the rule
// says of it: Absent, Running, Succeeded, Failed, Error or TornDown.
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
	case !aw.DeletionTimestamp.IsZero():
		w.fail("%s %s, which is being deleted", what, client.ObjectKeyFromObject(aw))
	case simIgnored(aw):
		w.fail("%s %s, which is annotated %s", what, client.ObjectKeyFromObject(aw), wrapupv1alpha1.IgnoreAnnotation)
	case !found:
		w.fail("%s %s, which no rule selects", what, client.ObjectKeyFromObject(aw))
	case !usable:
		w.fail("%s %s, whose deciding rule %s cannot act (%+v)", what, client.ObjectKeyFromObject(aw), r.name, r)
	case !applies(r, m):
		w.fail("%s %s, whose deciding rule %s (kind %q, policy %q) does not take its components %s as the trigger", what, client.ObjectKeyFromObject(aw), r.name, r.kind, r.policy, m.describe())
	case !watchable(aw, r, m):
		w.fail("%s %s, whose deciding rule %s takes its annotated ConfigMap, which wrapup may not watch, as the trigger", what, client.ObjectKeyFromObject(aw), r.name)
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

func uidOf(t *unstructured.Unstructured) string {
	if t == nil {
		return "none"
	}
	return string(t.GetUID())
}

// --- runs: the outcomes recorded, as the oracle judged them ---

// simRun is an outcome wrapup recorded for an AppWrapper, as the oracle
// judged it when it was written: the outcome the world showed then, the
// triggers that decided it, when; and the action in force for it (the
// world's winning rule's, for that outcome) at each change since.
type simRun struct {
	outcome wrapupv1alpha1.Outcome
	// finishedAt is the record's finish time (the time of its write, to
	// the microsecond the API server keeps).
	finishedAt time.Time
	// triggers are the candidates that decided it, by component index,
	// with the UID of their object then ("" when the AppWrapper's phase
	// decided without one).
	triggers []simRecTrig
	// many: the rule that decided had several candidates.
	many bool
	// retries are the AppWrapper's status.retries when it was recorded,
	// deploys the deployments its controller had begun then.
	retries int32
	deploys int
	// cleared: wrapup cleared the outcome since.
	cleared bool
	// forces are the actions in force for the run, each from when the
	// world changed to it: the first is the one when it was recorded.
	forces []simForce
}

type simRecTrig struct {
	index int
	uid   types.UID
}

func (run *simRun) describe() string {
	if run == nil {
		return "none"
	}
	parts := make([]string, len(run.triggers))
	for i, t := range run.triggers {
		parts[i] = fmt.Sprintf("%d=%s", t.index, t.uid)
	}
	s := fmt.Sprintf("%s(%s at %s)", run.outcome, strings.Join(parts, ","), run.finishedAt.Sub(simStart))
	if run.cleared {
		s += " cleared"
	}
	return s
}

// open is the run of aw whose outcome stands (recorded, not cleared); nil
// when there is none.
func (w *simWorld) open(uid types.UID) *simRun {
	if run := w.checks.runs[uid]; run != nil && !run.cleared {
		return run
	}
	return nil
}

// recordedAmong are the candidates of cs whose component index the run
// names, each with the UID the run names for it: those the record is
// final for, whichever rule takes them now.
func recordedAmong(run *simRun, cs []simCand) []simCand {
	var out []simCand
	for _, c := range cs {
		for _, t := range run.triggers {
			if t.index == c.t.index {
				c.recorded = t.uid
				out = append(out, c)
			}
		}
	}
	return out
}

// newAttempt says why the AppWrapper controller is making a new attempt
// at aw (of the model m) since run was recorded, whichever rule decides
// now and whichever components it takes: it reset aw (its retries grew),
// the components it deploys now were deployed since (after a reset, or
// after Kueue suspended it and admitted it again), or a component whose
// trigger decided has a new object; "" when it is not. aw's phase Failed
// is final: no attempt follows. (An attempt made since and torn down
// again, Kueue having suspended aw once more, is no attempt under way.)
func (w *simWorld) newAttempt(aw *awv1beta2.AppWrapper, m *simAW, run *simRun) string {
	if aw.Status.Phase == awv1beta2.AppWrapperFailed {
		return ""
	}
	if aw.Status.Retries > run.retries {
		return fmt.Sprintf("retries %d, %d when recorded", aw.Status.Retries, run.retries)
	}
	if m.deploys > run.deploys && simDeployed(aw) {
		return fmt.Sprintf("deployed %d times, %d when recorded", m.deploys, run.deploys)
	}
	for _, t := range run.triggers {
		for i := range m.trigs {
			if m.trigs[i].index != t.index {
				continue
			}
			if live := w.live(m, &m.trigs[i]); live != nil && live.GetUID() != t.uid {
				if tr := w.truth[live.GetUID()]; tr != nil && tr.aw == aw.UID {
					return fmt.Sprintf("component %d's trigger %s replaced by %s", t.index, t.uid, live.GetUID())
				}
			}
		}
	}
	return ""
}

// simForce is the action in force for a recorded run, as the world holds
// it: the winning rule's (name and UID), its action for the outcome and
// its TTL, and its dryRun; none when no rule can act on the AppWrapper
// (no rule, a blocked or ambiguous one, the opt-out, a deletion), which
// stamps nothing.
type simForce struct {
	at      time.Time
	none    bool
	rule    string
	ruleUID types.UID
	action  wrapupv1alpha1.Action
	ttl     time.Duration
	dryRun  bool
}

func (f simForce) deletes() bool {
	return !f.none && f.action == wrapupv1alpha1.ActionDeleteAll && !f.dryRun
}

// same says whether f and o are the same action in force.
func (f simForce) same(o simForce) bool {
	f.at, o.at = time.Time{}, time.Time{}
	return f == o
}

func (f simForce) String() string {
	if f.none {
		return "none"
	}
	return fmt.Sprintf("%s(%s) %s ttl %s dryRun %v", f.rule, f.ruleUID, f.action, f.ttl, f.dryRun)
}

// force is the action in force now for a run of aw whose outcome is o.
func (w *simWorld) force(aw *awv1beta2.AppWrapper, o wrapupv1alpha1.Outcome) simForce {
	f := simForce{at: w.now}
	m := w.models[aw.UID]
	r, found, usable := w.winner(aw)
	if m == nil || !aw.DeletionTimestamp.IsZero() || simIgnored(aw) || !found || !usable || !applies(r, m) || !watchable(aw, r, m) {
		f.none = true
		return f
	}
	f.rule, f.ruleUID = r.name, w.rules[r.name].UID
	if _, ok := aw.Labels[kueue.MultiKueueOriginLabel]; ok {
		// MultiKueue's copy on a worker: recorded only, whatever the rule.
		f.action = wrapupv1alpha1.ActionUpdateStatus
		return f
	}
	a := simActionFor(r, o)
	f.action, f.ttl, f.dryRun = a.Action, time.Duration(ptr.Deref(a.TTLSecondsAfterFinished, 0))*time.Second, r.dryRun
	return f
}

// noteForces keeps, for every run whose outcome stands, the action in
// force when the world changed it (a rule created, edited or deleted, a
// Namespace relabelled, an AppWrapper changed).
func (w *simWorld) noteForces() {
	for _, uid := range slices.Sorted(maps.Keys(w.checks.runs)) {
		run := w.checks.runs[uid]
		m := w.models[uid]
		if run.cleared || m == nil {
			continue
		}
		aw, ok := w.aws.get(m.key)
		if !ok || aw.UID != uid {
			continue
		}
		if f := w.force(aw, run.outcome); !run.forces[len(run.forces)-1].same(f) {
			run.forces = append(run.forces, f)
		}
	}
}

// dueBound is the earliest time the deletion of run may be due under the
// action in force now (the last of run.forces), by the rule that no
// change makes a deletion sooner: the run's own TTL counts from its
// finish; a change of the rule's own action (its TTL, its action, its
// dryRun) whose TTL from the finish is not before the due time so far
// takes effect at once, and so does another rule taking the run over
// whose TTL from the finish is not before that due time nor before the
// takeover (a run kept past its due, by no rule or a rule that kept it,
// is not deleted the instant another takes it over); any other change
// counts its TTL from when it was made (wrapup sees it then, or later).
// wrapup
// may see only some of the world's changes (two in a row within a cache's
// lag): the bound is the earliest over every sequence of them it may have
// seen, from the one in force at the record to the one in force now.
// deletes is false when the action in force now deletes nothing.
func (run *simRun) dueBound() (due time.Time, deletes bool) {
	natural := func(f simForce) time.Time { return run.finishedAt.Add(f.ttl) }
	type state struct {
		f       simForce
		due     time.Time
		deletes bool
	}
	var seen []state
	for i, f := range run.forces {
		if f.none {
			continue
		}
		if i == 0 {
			seen = append(seen, state{f, natural(f), f.deletes()})
			continue
		}
		best := state{f: f}
		for _, s := range seen {
			var next state
			switch {
			case f.same(s.f):
				next = state{f, s.due, s.deletes}
			case !f.deletes():
				next = state{f: f}
			case s.deletes && f.rule == s.f.rule && f.ruleUID == s.f.ruleUID && !natural(f).Before(s.due):
				// The rule's own action, made later.
				next = state{f, natural(f), true}
			case s.deletes && !natural(f).Before(s.due) && !natural(f).Before(f.at):
				// Another rule takes over a run that was not due yet
				// when it did: its TTL from the finish, no sooner than
				// the one it took over from.
				next = state{f, natural(f), true}
			default:
				from := f.at
				if from.Before(run.finishedAt) {
					from = run.finishedAt
				}
				next = state{f, from.Add(f.ttl), true}
			}
			if next.deletes && (!best.deletes || next.due.Before(best.due)) {
				best = next
			}
		}
		seen = append(seen, best)
	}
	if len(seen) == 0 || !run.forces[len(run.forces)-1].same(seen[len(seen)-1].f) {
		return time.Time{}, false
	}
	last := seen[len(seen)-1]
	return last.due, last.deletes
}

// --- CompletionRecord writes ---

// simMirrorKeys are the AppWrapper's labels and annotations that mirror
// its run's record, as label/ or annotation/ key.
var simMirrorKeys = []string{"label/" + wrapupv1alpha1.OutcomeLabel, "annotation/" + wrapupv1alpha1.RuleAnnotation,
	"annotation/" + wrapupv1alpha1.FinishedAtAnnotation, "annotation/" + wrapupv1alpha1.MessageAnnotation}

// recordedTriggers are the triggers cr says decided.
func recordedTriggers(cr *wrapupv1alpha1.CompletionRecord) []simRecTrig {
	var out []simRecTrig
	for _, t := range cr.Triggers {
		if t.Decided {
			out = append(out, simRecTrig{index: int(t.ComponentIndex), uid: t.UID})
		}
	}
	return out
}

// recordOf is the stored CompletionRecord of the AppWrapper aw; nil when
// there is none.
func (w *simWorld) recordOf(aw *awv1beta2.AppWrapper) *wrapupv1alpha1.CompletionRecord {
	cr, _ := w.crecs.get(types.NamespacedName{Namespace: aw.Namespace, Name: RecordName(aw.Name, string(aw.UID))})
	return cr
}

// standing says whether cr holds an outcome wrapup decided for aw that
// stands: of aw's UID, written by this version (a rule UID), not cleared.
func standing(cr *wrapupv1alpha1.CompletionRecord, aw *awv1beta2.AppWrapper) bool {
	return cr != nil && cr.AppWrapper.UID == aw.UID && cr.RuleUID != "" && cr.Cleared == nil
}

// checkCompletionRecord judges a CompletionRecord write of wrapup's (old:
// the record it replaces, nil for a create), before it lands: a new
// outcome, the outcome cleared, or the action in force stamped anew. It
// returns whether the write records an outcome (one to count).
func (w *simWorld) checkCompletionRecord(cr, old *wrapupv1alpha1.CompletionRecord) (outcome bool) {
	key := types.NamespacedName{Namespace: cr.Namespace, Name: cr.AppWrapper.Name}
	aw, ok := w.aws.get(key)
	switch {
	case !ok || aw.UID != cr.AppWrapper.UID:
		// Every write follows a final check that read the AppWrapper,
		// in a world that did not change since.
		w.fail("wrapup wrote the CompletionRecord %s/%s of AppWrapper %s (%s), which does not exist", cr.Namespace, cr.Name, key, cr.AppWrapper.UID)
		return false
	case cr.Name != RecordName(aw.Name, string(aw.UID)):
		w.fail("wrapup wrote the CompletionRecord of %s under the name %s", key, cr.Name)
		return false
	case old != nil && old.AppWrapper.UID != cr.AppWrapper.UID:
		w.fail("wrapup replaced the CompletionRecord %s of AppWrapper %s with one of %s", cr.Name, old.AppWrapper.UID, cr.AppWrapper.UID)
		return false
	}
	for k, o := range w.crecs.objs {
		if o.AppWrapper.UID == aw.UID && k.Name != cr.Name {
			w.fail("wrapup wrote a second CompletionRecord %s of %s (%s), beside %s", cr.Name, key, aw.UID, k.Name)
		}
	}
	// wrapup's labels from what it decided alone; none of the tenant's
	// wrapup.dev/* labels.
	for k, v := range cr.Labels {
		switch {
		case !strings.HasPrefix(k, wrapupv1alpha1.GroupVersion.Group+"/"):
		case k == wrapupv1alpha1.OutcomeLabel && v == string(cr.Outcome):
		case k == wrapupv1alpha1.RecordAppWrapperLabel && v == aw.Name:
		case k == wrapupv1alpha1.RecordRuleLabel && v == cr.Rule:
		default:
			w.fail("wrapup wrote the CompletionRecord %s with the label %s=%q", cr.Name, k, v)
		}
	}
	if _, ok := cr.Labels[wrapupv1alpha1.RecordAppWrapperLabel]; ok != (len(validation.IsValidLabelValue(aw.Name)) == 0) {
		w.fail("wrapup wrote the CompletionRecord %s of %s (%d characters) with its AppWrapper label: %v", cr.Name, aw.Name, len(aw.Name), ok)
	}
	for k := range cr.AppWrapper.Labels {
		if strings.HasPrefix(k, wrapupv1alpha1.GroupVersion.Group+"/") {
			w.fail("wrapup copied the AppWrapper's label %s onto its CompletionRecord %s", k, cr.Name)
		}
	}
	m := w.models[aw.UID]
	switch {
	case old == nil || old.Cleared != nil && cr.Cleared == nil || old.RuleUID == "":
		w.checkOutcome(aw, m, cr, old)
		return true
	case cr.Cleared != nil:
		w.checkClear(aw, m, cr, old)
	case !old.FinishedAt.Equal(&cr.FinishedAt) || old.Outcome != cr.Outcome || !reflect.DeepEqual(recordedTriggers(old), recordedTriggers(cr)):
		w.checkOutcome(aw, m, cr, old)
		return true
	default:
		w.checkStamp(aw, m, cr, old)
	}
	return false
}

// checkRetention checks that cr keeps to the retention of its rule r, as
// the world holds it: kept after its AppWrapper by the history TTL, or,
// with history off, gone with it (an ownerReference).
func (w *simWorld) checkRetention(aw *awv1beta2.AppWrapper, r simRule, cr *wrapupv1alpha1.CompletionRecord) {
	owned := len(cr.OwnerReferences) == 1 && cr.OwnerReferences[0].UID == aw.UID && cr.OwnerReferences[0].Kind == "AppWrapper"
	switch {
	case r.noHistory && (!owned || cr.Retention.TTLSecondsAfterFinished != 0):
		w.fail("wrapup wrote the CompletionRecord %s under rule %s, whose history is off, with retention %+v and owners %+v",
			cr.Name, r.name, cr.Retention, cr.OwnerReferences)
	case !r.noHistory && (len(cr.OwnerReferences) > 0 || cr.Retention.TTLSecondsAfterFinished != r.historyTTL()):
		w.fail("wrapup wrote the CompletionRecord %s under rule %s, which keeps history %ds, with retention %+v and owners %+v",
			cr.Name, r.name, r.historyTTL(), cr.Retention, cr.OwnerReferences)
	}
}

// checkStampOf checks that cr stamps the action in force f for its run,
// due no sooner than bound.
func (w *simWorld) checkStampOf(cr *wrapupv1alpha1.CompletionRecord, f simForce, bound time.Time, what string) {
	a := cr.Action
	if f.none || a.Rule != f.rule || a.RuleUID != f.ruleUID || a.Action != f.action || a.DryRun != f.dryRun ||
		time.Duration(ptr.Deref(a.TTLSecondsAfterFinished, 0))*time.Second != f.ttl {
		w.fail("%s stamps %s's %s (ttl %v, dryRun %v), not the action in force %s", what, a.Rule, a.Action, ptr.Deref(a.TTLSecondsAfterFinished, -1), a.DryRun, f)
		return
	}
	switch {
	case !f.deletes() && (a.DeleteAfter != nil || a.Since != nil):
		w.fail("%s stamps a deletion (since %v, after %v) under %s, which deletes nothing", what, a.Since, a.DeleteAfter, f)
	case f.deletes() && (a.DeleteAfter == nil || a.Since == nil):
		w.fail("%s stamps no deletion under %s", what, f)
	case f.deletes() && a.Since.Add(f.ttl).Before(bound):
		w.fail("%s stamps the deletion at %s, before %s: sooner than the changes of the action in force allow", what, a.Since.Add(f.ttl).Sub(simStart), bound.Sub(simStart))
	case f.deletes() && !a.DeleteAfter.Time.Equal(ceilSecond(a.Since.Add(f.ttl))):
		w.fail("%s says the deletion is due at %s, its TTL since %s is %s", what, a.DeleteAfter.UTC().Format(time.RFC3339Nano),
			a.Since.UTC().Format(time.RFC3339Nano), f.ttl)
	}
}

// ceilSecond is t rounded up to the second.
func ceilSecond(t time.Time) time.Time {
	r := t.Truncate(time.Second)
	if r.Before(t) {
		r = r.Add(time.Second)
	}
	return r
}

// checkOutcome judges a new outcome recorded (over old, when it replaces
// a record): it is the outcome the world shows, under the rule that
// decides now, its policy over all its candidates, and final; it is
// wrapup's own (its time, its message); it is the only one the run has.
func (w *simWorld) checkOutcome(aw *awv1beta2.AppWrapper, m *simAW, cr, old *wrapupv1alpha1.CompletionRecord) {
	key := client.ObjectKeyFromObject(aw)
	r, cs, ok := w.decides(aw, m, "wrapup recorded an outcome of")
	if !ok {
		return
	}
	phase := aw.Status.Phase
	run := w.open(aw.UID)
	what := fmt.Sprintf("wrapup recorded %s on %s", describeCR(cr), key)
	switch {
	case old != nil && old.Cleared == nil && old.RuleUID != "":
		// Over a standing record: only a failure that a new attempt
		// replaced.
		w.checks.replaced++
		if run == nil || old.Outcome != wrapupv1alpha1.OutcomeFailed || run.outcome != old.Outcome || phase == awv1beta2.AppWrapperFailed {
			w.fail("%s, over the standing record %s (the oracle's %s), phase %s", what, describeCR(old), run.describe(), phase)
			return
		}
		replaced := w.newAttempt(aw, m, run) != ""
		for _, d := range recordedAmong(run, cs) {
			replaced = replaced || d.obj != nil && d.uid() != d.recorded
		}
		if !replaced {
			w.fail("%s, over the failure %s that no new attempt replaced: candidates %s", what, run.describe(), describeCands(cs))
			return
		}
	case run != nil:
		w.fail("%s over %s, while the oracle holds the outcome %s standing", what, describeCR(old), run.describe())
		return
	case old != nil:
		w.checks.replaced++
	}
	finished := w.now.UTC().Truncate(time.Microsecond)
	switch {
	case !cr.FinishedAt.Time.Equal(finished):
		w.fail("%s, finished at %s: not when wrapup saw it (%s)", what, cr.FinishedAt.UTC().Format(time.RFC3339Nano), finished.Format(time.RFC3339Nano))
	case strings.Contains(cr.Message, simForgedMarker):
		w.fail("%s, with a tenant's message %q", what, cr.Message)
	case cr.Rule != r.name || cr.RuleUID != w.rules[r.name].UID:
		w.fail("%s under rule %s (%s); the rule that decides is %s (%s)", what, cr.Rule, cr.RuleUID, r.name, w.rules[r.name].UID)
	case string(cr.Policy) != simPolicy(r):
		w.fail("%s under policy %q; rule %s's is %q", what, cr.Policy, r.name, simPolicy(r))
	}
	w.checkRetention(aw, r, cr)
	rts := recordedTriggers(cr)
	ds, own := deciders(rts, cs)
	if !own {
		w.fail("%s, which does not name its decisive candidates among %s under rule %s (policy %q)", what, describeCands(cs), r.name, r.policy)
		return
	}
	for _, d := range ds {
		if d.recorded != d.uid() {
			w.fail("%s, naming %s for component %d, whose object is %q", what, d.recorded, d.t.index, d.uid())
			return
		}
	}
	if len(cs) > 1 {
		w.checks.manyWritten++
		if !w.checkManyRecord(aw, r, cs, ds, cr) {
			return
		}
	} else if !w.checkOneRecord(aw, r, ds[0], cr, what) {
		return
	}
	f := w.force(aw, cr.Outcome)
	run = &simRun{outcome: cr.Outcome, finishedAt: finished, triggers: rts, many: len(cs) > 1, retries: aw.Status.Retries, deploys: m.deploys, forces: []simForce{f}}
	bound, _ := run.dueBound()
	w.checkStampOf(cr, f, bound, what)
	if a := cr.Action.Since; a != nil && !a.Time.Equal(finished) {
		w.fail("%s, its TTL counted from %s: a new record's counts from its finish", what, a.Sub(simStart))
	}
	if cr.AppWrapper.Retries != aw.Status.Retries {
		w.fail("%s, with retries %d: the AppWrapper's are %d", what, cr.AppWrapper.Retries, aw.Status.Retries)
	}
	w.checks.runs[aw.UID] = run
	w.checks.written++
	for _, d := range ds {
		if d.obj != nil && d.obj.GetDeletionTimestamp() != nil {
			w.checks.ttlFinished++
		}
	}
}

// checkOneRecord checks a record written for the single candidate c of
// rule r.
func (w *simWorld) checkOneRecord(aw *awv1beta2.AppWrapper, r simRule, c simCand, cr *wrapupv1alpha1.CompletionRecord, what string) bool {
	t, e := c.obj, c.eval
	phase := aw.Status.Phase
	same := t != nil && t.GetUID() == c.recorded
	if cr.Outcome == wrapupv1alpha1.OutcomeFailed && e == string(wrapupv1alpha1.OutcomeSucceeded) {
		w.fail("%s, whose trigger succeeded", what)
		return false
	}
	ok := false
	switch cr.Outcome {
	case wrapupv1alpha1.OutcomeSucceeded:
		ok = same && e == string(wrapupv1alpha1.OutcomeSucceeded) ||
			c.recorded == "" && t == nil && phase == awv1beta2.AppWrapperSucceeded
	case wrapupv1alpha1.OutcomeFailed:
		ok = phase == awv1beta2.AppWrapperFailed && e != "Error" ||
			same && e == string(wrapupv1alpha1.OutcomeFailed) && !w.willRetry(aw, []simCand{c})
	}
	if !ok {
		w.fail("%s: trigger %v, rule %s says %s, phase %s, retries %d", what, uidOf(t), r.name, e, phase, aw.Status.Retries)
	}
	return ok
}

// deciders are the candidates of cs that the recorded triggers rts name,
// each with the UID named; ok is false when they are not candidates of
// cs, each once: one for a single candidate; one or more of several.
func deciders(rts []simRecTrig, cs []simCand) ([]simCand, bool) {
	if len(rts) == 0 || len(cs) == 1 && len(rts) != 1 {
		return nil, false
	}
	var out []simCand
	seen := map[int]bool{}
	for _, rt := range rts {
		found := false
		for _, c := range cs {
			if c.t.index == rt.index && !seen[rt.index] {
				c.recorded = rt.uid
				out = append(out, c)
				seen[rt.index], found = true, true
			}
		}
		if !found {
			return nil, false
		}
	}
	return out, true
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
func (w *simWorld) checkManyRecord(aw *awv1beta2.AppWrapper, r simRule, cs, ds []simCand, cr *wrapupv1alpha1.CompletionRecord) bool {
	phase := aw.Status.Phase
	n := counts(cs)
	every := len(ds) == len(cs)
	dn := counts(ds)
	succeeded := r.policy == "All" && n["Succeeded"] == len(cs) || r.policy == "Any" && n["Succeeded"] > 0
	ok := false
	switch cr.Outcome {
	case wrapupv1alpha1.OutcomeSucceeded:
		ok = r.policy == "All" && every && n["Succeeded"] == len(cs) ||
			r.policy == "Any" && len(ds) == 1 && dn["Succeeded"] == 1 ||
			phase == awv1beta2.AppWrapperSucceeded && every && n["Succeeded"]+n["Absent"] == len(cs)
	case wrapupv1alpha1.OutcomeFailed:
		if succeeded {
			w.fail("wrapup recorded %s on %s, whose candidates %s succeeded under policy %s", describeCR(cr), client.ObjectKeyFromObject(aw), describeCands(cs), r.policy)
			return false
		}
		final := !w.willRetry(aw, ds)
		ok = final && r.policy == "All" && len(ds) == 1 && dn["Failed"] == 1 ||
			final && r.policy == "Any" && every && n["Failed"] == len(cs) ||
			phase == awv1beta2.AppWrapperFailed && every && n["Error"] == 0
	}
	if !ok {
		w.fail("wrapup recorded %s on %s: rule %s, policy %s, candidates %s, phase %s, retries %d",
			describeCR(cr), client.ObjectKeyFromObject(aw), r.name, r.policy, describeCands(cs), phase, aw.Status.Retries)
	}
	return ok
}

// simSameBut says whether a and b are the same record but for the fields
// strip clears (and their metadata's resourceVersion).
func simSameBut(a, b *wrapupv1alpha1.CompletionRecord, strip func(*wrapupv1alpha1.CompletionRecord)) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	a.ResourceVersion, b.ResourceVersion = "", ""
	strip(a)
	strip(b)
	return apiequality.Semantic.DeepEqual(a, b)
}

// checkClear judges the outcome cleared: the record stands, and the world
// shows a cause: a trigger it names runs again (under the rule that
// decides now) in an AppWrapper that did not fail, or, after a failure, a
// new attempt replaced one. The record is kept as it was, as history.
func (w *simWorld) checkClear(aw *awv1beta2.AppWrapper, m *simAW, cr, old *wrapupv1alpha1.CompletionRecord) {
	key := client.ObjectKeyFromObject(aw)
	run := w.open(aw.UID)
	if run == nil || old.Cleared != nil || old.Outcome != run.outcome {
		w.fail("wrapup cleared the record %s of %s, which the oracle holds as %s", describeCR(old), key, w.checks.runs[aw.UID].describe())
		return
	}
	if _, ok := cr.Labels[wrapupv1alpha1.OutcomeLabel]; ok {
		w.fail("wrapup cleared the record %s of %s and kept its outcome label: a search by outcome would find it", describeCR(old), key)
	}
	if !simSameBut(cr, old, func(c *wrapupv1alpha1.CompletionRecord) {
		c.Cleared = nil
		delete(c.Labels, wrapupv1alpha1.OutcomeLabel)
	}) {
		w.fail("wrapup cleared the record %s of %s and changed it besides (-old +new):\n%s", describeCR(old), key, cmp.Diff(old, cr))
	}
	r, cs, ok := w.decides(aw, m, "wrapup cleared the record of")
	if !ok {
		return
	}
	run.cleared = true
	w.checks.cleared++
	if run.many {
		w.checks.manyCleared++
	}
	phase := aw.Status.Phase
	cause := run.outcome == wrapupv1alpha1.OutcomeFailed && w.newAttempt(aw, m, run) != ""
	for _, d := range recordedAmong(run, cs) {
		cause = cause || phase != awv1beta2.AppWrapperFailed && (d.recorded != "" && d.uid() == d.recorded && d.eval == "Running" ||
			run.outcome == wrapupv1alpha1.OutcomeFailed && d.obj != nil && d.uid() != d.recorded)
	}
	if !cause {
		w.fail("wrapup cleared the record %s of %s without cause: candidates %s, rule %s, phase %s", run.describe(), key, describeCands(cs), r.name, phase)
	}
}

// checkStamp judges a new stamp of the action in force for a standing
// record: the world's action in force now, due no sooner than the
// changes of it allow.
func (w *simWorld) checkStamp(aw *awv1beta2.AppWrapper, m *simAW, cr, old *wrapupv1alpha1.CompletionRecord) {
	key := client.ObjectKeyFromObject(aw)
	run := w.open(aw.UID)
	if run == nil || old.Outcome != run.outcome {
		w.fail("wrapup stamped the record %s of %s, which the oracle holds as %s", describeCR(old), key, w.checks.runs[aw.UID].describe())
		return
	}
	if !simSameBut(cr, old, func(c *wrapupv1alpha1.CompletionRecord) { c.Action = wrapupv1alpha1.RecordedAction{} }) {
		w.fail("wrapup stamped the record %s of %s and changed it besides (-old +new):\n%s", describeCR(old), key, cmp.Diff(old, cr))
	}
	if apiequality.Semantic.DeepEqual(cr.Action, old.Action) {
		w.fail("wrapup rewrote the record %s of %s without a change", describeCR(old), key)
	}
	if _, _, ok := w.decides(aw, m, "wrapup stamped the record of"); !ok {
		return
	}
	w.noteForces()
	f := run.forces[len(run.forces)-1]
	bound, _ := run.dueBound()
	w.checkStampOf(cr, f, bound, fmt.Sprintf("wrapup's stamp of %s on %s", run.describe(), key))
	if f.deletes() && bound.After(run.finishedAt.Add(f.ttl)) {
		w.checks.held++
	}
	w.checks.restamped++
}

// checkMirror checks a patch of wrapup's on the AppWrapper cur, which
// turns it into next: the mirror of the record it has just written, and
// nothing else.
func (w *simWorld) checkMirror(cur, next *awv1beta2.AppWrapper, data []byte) {
	key := client.ObjectKeyFromObject(cur)
	w.checks.mirrors++
	if rv := patchPrecondition(data); rv != "" {
		w.fail("wrapup's mirror on %s carries the resourceVersion %s: no decision reads it, a conflict would only cost a write", key, rv)
	}
	if w.checks.lastWrite != (simWriteMark{cur.UID, w.now}) {
		w.fail("wrapup patched %s (%s) with no CompletionRecord written before in the reconcile: %s", key, cur.UID, data)
		return
	}
	strip := func(aw *awv1beta2.AppWrapper) *awv1beta2.AppWrapper {
		// As the API server keeps it (times to the second).
		raw, err := json.Marshal(aw)
		if err != nil {
			w.fail("%v", err)
		}
		aw = &awv1beta2.AppWrapper{}
		if err := json.Unmarshal(raw, aw); err != nil {
			w.fail("%v", err)
		}
		aw.ResourceVersion = ""
		delete(aw.Labels, wrapupv1alpha1.OutcomeLabel)
		for _, k := range []string{wrapupv1alpha1.RuleAnnotation, wrapupv1alpha1.FinishedAtAnnotation, wrapupv1alpha1.MessageAnnotation} {
			delete(aw.Annotations, k)
		}
		if len(aw.Labels) == 0 {
			aw.Labels = nil
		}
		if len(aw.Annotations) == 0 {
			aw.Annotations = nil
		}
		return aw
	}
	if !apiequality.Semantic.DeepEqual(strip(cur), strip(next)) {
		w.fail("wrapup's mirror on %s changes more than the mirror's keys: %s", key, data)
	}
	want := map[string]string{}
	if cr := w.recordOf(cur); standing(cr, cur) {
		want["label/"+wrapupv1alpha1.OutcomeLabel] = string(cr.Outcome)
		want["annotation/"+wrapupv1alpha1.RuleAnnotation] = cr.Rule
		want["annotation/"+wrapupv1alpha1.MessageAnnotation] = cr.Message
		want["annotation/"+wrapupv1alpha1.FinishedAtAnnotation] = cr.FinishedAt.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	}
	for _, k := range simMirrorKeys {
		kind, name, _ := strings.Cut(k, "/")
		got, ok := next.Labels[name]
		if kind == "annotation" {
			got, ok = next.Annotations[name]
		}
		if v, wanted := want[k]; ok != wanted || got != v {
			w.fail("wrapup's mirror on %s says %s=%q (set %v), the record it wrote %q (set %v)", key, k, got, ok, v, wanted)
		}
	}
}

// --- deletions ---

// checkDelete checks a deletion of wrapup's of cur, before it lands: the
// run's outcome was recorded (and judged so when it was), it stands, the
// world still shows it final, the rule that decides now deletes after it,
// and it is due: no sooner than the run's TTL, the changes of the action
// in force, and the AppWrapper's own hold allow.
func (w *simWorld) checkDelete(cur *awv1beta2.AppWrapper) {
	w.checks.deletes++
	key := client.ObjectKeyFromObject(cur)
	m := w.models[cur.UID]
	r, cs, ok := w.decides(cur, m, "wrapup deleted")
	if !ok {
		return
	}
	run := w.open(cur.UID)
	if run == nil {
		w.fail("wrapup deleted %s, whose run has no outcome recorded (the oracle's %s)", key, w.checks.runs[cur.UID].describe())
		return
	}
	if cr := w.recordOf(cur); !standing(cr, cur) || cr.Outcome != run.outcome {
		w.fail("wrapup deleted %s on the outcome %s, and its CompletionRecord is %s", key, run.describe(), describeCR(cr))
	}
	if run.many {
		w.checks.manyDeletes++
	}
	phase := cur.Status.Phase
	ds := recordedAmong(run, cs)
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
	}
	// The outcome is the world's: each trigger that decided it finished
	// so, or the AppWrapper's phase said so.
	for _, t := range run.triggers {
		if t.uid != "" {
			tr := w.truth[t.uid]
			if tr == nil || tr.aw != cur.UID || tr.outcome != run.outcome && !(run.outcome == wrapupv1alpha1.OutcomeFailed && phase == awv1beta2.AppWrapperFailed) {
				w.fail("wrapup deleted %s on the outcome %s, which the history of trigger %s (%+v) does not bear out", key, run.describe(), t.uid, tr)
			}
		} else if run.outcome == wrapupv1alpha1.OutcomeFailed && phase != awv1beta2.AppWrapperFailed ||
			run.outcome == wrapupv1alpha1.OutcomeSucceeded && phase != awv1beta2.AppWrapperSucceeded {
			w.fail("wrapup deleted %s on the outcome %s, with no trigger %d, in phase %s", key, run.describe(), t.index, phase)
		}
	}
	if run.outcome == wrapupv1alpha1.OutcomeFailed {
		if w.willRetry(cur, ds) {
			w.fail("wrapup deleted the failed %s while the AppWrapper controller retries it (phase %s, retries %d of %d)", key, phase, cur.Status.Retries, simRetryLimit(cur))
		}
		if why := w.newAttempt(cur, m, run); why != "" {
			w.fail("wrapup deleted %s on the failure %s while the AppWrapper controller makes a new attempt (%s; rule %s, candidates %s)", key, run.describe(), why, r.name, describeCands(cs))
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
	a := simActionFor(r, run.outcome)
	if a.Action == wrapupv1alpha1.ActionUpdateStatus || r.dryRun {
		w.fail("wrapup deleted %s, but rule %s says %s (dryRun %v) for %s", key, r.name, a.Action, r.dryRun, run.outcome)
	}
	if again := w.simStartedAgain(cur, m, run); again != "" {
		// A success recorded, then a new attempt: the components are
		// torn down and would run again; the TTL has nothing left to keep.
		w.checks.deletedAgain++
	} else {
		w.noteForces()
		ttl := time.Duration(ptr.Deref(a.TTLSecondsAfterFinished, 0)) * time.Second
		if w.now.Before(run.finishedAt.Add(ttl)) {
			w.fail("wrapup deleted %s %s before the TTL of %s after %s", key, run.finishedAt.Add(ttl).Sub(w.now), ttl, run.describe())
		}
		bound, deletes := run.dueBound()
		switch {
		case !deletes:
			w.fail("wrapup deleted %s, whose run %s has no action in force that deletes (%s)", key, run.describe(), run.forces[len(run.forces)-1])
		case w.now.Before(bound):
			w.fail("wrapup deleted %s %s before the changes of the action in force allow (due at %s; run %s, actions in force %v)",
				key, bound.Sub(w.now), bound.Sub(simStart), run.describe(), run.forces)
		case bound.After(run.finishedAt.Add(ttl)):
			w.checks.held++
		}
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

// simStartedAgain says, for an AppWrapper cur (of the model m) whose
// success run is recorded, why its run started again; "" when it did not:
// Kueue suspended it or is suspending it, the AppWrapper controller resets
// it (or resumes it after that), or, while it is not finished, the
// AppWrapper controller made a new attempt (newAttempt: it reset it, or a
// component whose trigger decided has a new object).
func (w *simWorld) simStartedAgain(cur *awv1beta2.AppWrapper, m *simAW, run *simRun) string {
	if run.outcome != wrapupv1alpha1.OutcomeSucceeded {
		return ""
	}
	switch p := cur.Status.Phase; {
	case p == awv1beta2.AppWrapperSuspending, p == awv1beta2.AppWrapperSuspended, p == awv1beta2.AppWrapperResetting, p == awv1beta2.AppWrapperResuming:
		return string(p)
	case cur.Spec.Suspend && p == awv1beta2.AppWrapperRunning:
		return "suspended"
	case p == awv1beta2.AppWrapperFailed, p == awv1beta2.AppWrapperSucceeded:
		return ""
	}
	return w.newAttempt(cur, m, run)
}

// --- once the world settled ---

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
// completion was lost: an AppWrapper whose run finished (its record
// stands, or its candidates finished as the rule's policy says) under a
// rule that deletes after that outcome is gone, and an UpdateStatus (or
// dry-run) one has its outcome recorded; and that what wrapup remembers
// and watches is bounded by the AppWrappers there are.
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
		run := w.open(aw.UID)
		// The oracle's account and the API server's agree.
		if cr := w.recordOf(aw); standing(cr, aw) != (run != nil) || run != nil && cr.Outcome != run.outcome {
			w.fail("%s: its CompletionRecord is %s, the oracle holds %s", k, describeCR(cr), w.checks.runs[aw.UID].describe())
			return
		}
		r, found, usable := w.winner(aw)
		if m == nil || !found || !usable || !applies(r, m) || !watchable(aw, r, m) || simIgnored(aw) {
			continue
		}
		cs := w.cands(aw, r, m)
		if len(cs) > 1 {
			w.checks.settledMany++
		}
		var outcome wrapupv1alpha1.Outcome
		phase := aw.Status.Phase
		if run != nil {
			errs, again, replaced := false, false, false
			for _, d := range recordedAmong(run, cs) {
				errs = errs || d.eval == "Error"
				again = again || phase != awv1beta2.AppWrapperFailed && d.recorded != "" && d.uid() == d.recorded && d.eval == "Running"
				replaced = replaced || d.obj != nil && d.uid() != d.recorded
			}
			switch {
			case errs:
				// A runtime error is "not finished", whatever was recorded.
				continue
			case again:
				w.fail("%s: the record %s stands, and rule %s says its trigger runs again (candidates %s)", k, run.describe(), r.name, describeCands(cs))
				return
			case run.outcome == wrapupv1alpha1.OutcomeFailed && (replaced && phase != awv1beta2.AppWrapperFailed || w.newAttempt(aw, m, run) != ""):
				// A new attempt, evaluated afresh.
				outcome = settledOutcome(r, cs, phase)
				if outcome == "" {
					w.fail("%s: the failure %s stands, and a new attempt replaced its trigger (candidates %s)", k, run.describe(), describeCands(cs))
					return
				}
			default:
				outcome = run.outcome
			}
		} else {
			outcome = settledOutcome(r, cs, phase)
		}
		if outcome == "" {
			continue
		}
		a := simActionFor(r, outcome)
		_, workerCopy := aw.Labels[kueue.MultiKueueOriginLabel]
		if a.Action != wrapupv1alpha1.ActionUpdateStatus && !r.dryRun && !workerCopy {
			w.fail("lost completion: %s (phase %s, candidates %s, record %s) finished %s under rule %s (%+v) and was not deleted",
				k, phase, describeCands(cs), run.describe(), outcome, r.name, r)
			return
		}
		if run == nil || run.outcome != outcome {
			w.fail("lost completion: %s finished %s under rule %s (%s, dryRun %v) and its outcome recorded is %s",
				k, outcome, r.name, a.Action, r.dryRun, run.describe())
			return
		}
	}
}

// --- every decision ---

// checkDecision checks every decision the controller makes: it asks for
// no more than its verdict allows; view.Explain, on the same
// observations, decides as the controller did; and the AppWrapper's
// wrapup.dev/* metadata, rewritten, changes nothing.
func (w *simWorld) checkDecision(stage string, in decision.Input, d decision.Decision) {
	// Every decision asks for no more than its verdict allows.
	if err := decision.CheckVerdict(d); err != nil {
		w.fail("a %s decision on %s: %v", stage, client.ObjectKeyFromObject(in.AppWrapper), err)
	}
	w.checks.verdicts[d.Verdict]++
	if len(d.Candidates) > 0 {
		w.checks.manyDecisions++
	}
	if w.checkBlind(stage, in, d) {
		w.checks.blind++
	}
	w.checkExplain(stage, in, d)
}

// checkExplain checks that view.Explain, gathering what it reads from the API
// server with the controller's memory, decides as the controller did on
// the same observations: whenever the controller's view is the API
// server's (a fresh decision on an AppWrapper the cache holds as it is;
// a cached one when every cache has caught up).
func (w *simWorld) checkExplain(stage string, in decision.Input, d decision.Decision) {
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
		for _, c := range []*simCache{w.awCache, w.trigCache, w.ruleCache, w.nsCache, w.crecCache} {
			if len(c.pending) > 0 {
				return
			}
		}
		if !w.wr.triggers.synced() {
			return
		}
	}
	v := &read.Reader{Client: w.reader(true, true), Labelled: true}
	v.Kinds = view.ServedKinds(context.Background(), v.Client, nil, nil)
	ein, err := read.Gather(context.Background(), v, w.explainPolicies, client.ObjectKeyFromObject(aw), nil,
		decision.Input{Now: in.Now, FailureSeen: in.FailureSeen, HoldStart: in.HoldStart, FailureGracePeriod: in.FailureGracePeriod})
	if err != nil {
		w.fail("explain of %s: %v", client.ObjectKeyFromObject(aw), err)
		return
	}
	ex := view.ExplainInput(context.Background(), ein)
	w.checks.explained++
	if ex.Verdict != d.Verdict || ex.Outcome != d.Outcome || ex.WillRecord() != d.WillRecord() || ex.Clear != d.Clear ||
		(ex.Stamp == nil) != (d.Stamp == nil) || !ex.DueAt.Equal(d.DueAt) {
		w.fail("explain of %s says %s (outcome %q, record %v, clear %v, stamp %v, due %s: %s); the controller's %s decision %s (outcome %q, record %v, clear %v, stamp %v, due %s: %s)",
			client.ObjectKeyFromObject(aw), ex.Verdict, ex.Outcome, ex.WillRecord(), ex.Clear, ex.Stamp != nil, ex.DueAt.Sub(simStart), ex.Reason,
			stage, d.Verdict, d.Outcome, d.WillRecord(), d.Clear, d.Stamp != nil, d.DueAt.Sub(simStart), d.Reason)
	}
}

// simBlindKeys are the wrapup.dev/* labels and annotations a tenant may
// write on an AppWrapper that no decision may read: the mirror's, those
// an earlier version read (its record's trigger, candidates and
// AppWrapper UID), the CompletionRecord's own labels, and any other.
// (wrapup.dev/ignore, the opt-out, and wrapup.dev/trigger, which is said
// to be misplaced there, are the tenant's to set, and are read.)
var simBlindKeys = append([]string{"label/" + wrapupv1alpha1.OutcomeLabel, "label/" + wrapupv1alpha1.RecordAppWrapperLabel,
	"label/" + wrapupv1alpha1.RecordRuleLabel, "label/wrapup.dev/run", "annotation/" + wrapupv1alpha1.RuleAnnotation,
	"annotation/" + wrapupv1alpha1.FinishedAtAnnotation, "annotation/" + wrapupv1alpha1.MessageAnnotation, "annotation/wrapup.dev/anything"},
	func() []string {
		var out []string
		for _, k := range util.LegacyRecordKeys {
			out = append(out, "annotation/"+k)
		}
		return out
	}()...)

// rewriteRecordKeys rewrites, on aw, one to four of simBlindKeys at
// random: deleted, or set to a value a tenant might write (an outcome, a
// time, a rule, a trigger's or an AppWrapper's UID, a record of
// candidates, something that does not parse).
func rewriteRecordKeys(rng *rand.Rand, aw *awv1beta2.AppWrapper, uids []types.UID) {
	values := []string{"Succeeded", "Failed", "", "bogus", "r0", "r1", "made-up",
		simStart.Format(time.RFC3339Nano), simStart.Add(-24 * time.Hour).Format(time.RFC3339Nano), "2999-01-01T00:00:00.000000000Z",
		"batch/Job/" + aw.Name + "-trigger", "0 batch/v1 Job x", "All:", strings.Repeat("x", 300), simForgedMarker}
	for _, uid := range uids {
		values = append(values, string(uid), "All:0="+string(uid), "Any:1="+string(uid)+",2=", "One:0="+string(uid))
	}
	if aw.Labels == nil {
		aw.Labels = map[string]string{}
	}
	if aw.Annotations == nil {
		aw.Annotations = map[string]string{}
	}
	for range 1 + rng.Intn(4) {
		kind, name, _ := strings.Cut(simBlindKeys[rng.Intn(len(simBlindKeys))], "/")
		set := aw.Labels
		if kind == "annotation" {
			set = aw.Annotations
		}
		if rng.Intn(4) == 0 {
			delete(set, name)
		} else {
			set[name] = values[rng.Intn(len(values))]
		}
	}
}

// checkBlind decides again on in with the AppWrapper's wrapup.dev/*
// metadata rewritten (rewriteRecordKeys), and fails when the decision
// differs from d in anything but the time its evaluations took: no write
// a tenant can make on the AppWrapper's metadata changes a decision or a
// CompletionRecord. It says whether it decided again.
func (w *simWorld) checkBlind(stage string, in decision.Input, d decision.Decision) bool {
	return checkTenantBlind(&w.simKernel, w.blindRng, stage, in, d, w.uidPool())
}

// uidPool is a few UIDs a tenant may know: of triggers, of AppWrappers.
func (w *simWorld) uidPool() []types.UID {
	var out []types.UID
	for _, uid := range slices.Sorted(maps.Keys(w.truth)) {
		out = append(out, uid)
	}
	for _, uid := range slices.Sorted(maps.Keys(w.models)) {
		out = append(out, uid)
	}
	if len(out) > 12 {
		out = out[len(out)-12:]
	}
	return out
}

// checkTenantBlind is checkBlind, for either world (k fails it).
func checkTenantBlind(k *simKernel, rng *rand.Rand, stage string, in decision.Input, d decision.Decision, uids []types.UID) bool {
	if in.AppWrapper == nil || in.AppWrapperVariable != nil {
		// (A rule that reads the AppWrapper may read its metadata: that
		// is the rule's word, not wrapup's.)
		return false
	}
	forged := in
	forged.AppWrapper = in.AppWrapper.DeepCopy()
	for _, t := range in.Triggers {
		if t.Object != nil {
			uids = append(uids, t.Object.GetUID())
		}
	}
	uids = append(uids, in.AppWrapper.UID)
	rewriteRecordKeys(rng, forged.AppWrapper, uids)
	again := decision.Decide(context.Background(), forged)
	if a, b := untimed(d), untimed(again); !reflect.DeepEqual(a, b) {
		k.fail("a %s decision on %s changes when its tenant rewrites its wrapup.dev/* metadata (labels %v, annotations %v): %s (%s), store %v; then %s (%s), store %v",
			stage, client.ObjectKeyFromObject(in.AppWrapper), forged.AppWrapper.Labels, forged.AppWrapper.Annotations,
			d.Verdict, d.Reason, describeCR(d.Store), again.Verdict, again.Reason, describeCR(again.Store))
	}
	return true
}

// untimed is d without the times its evaluations took, which no decision
// reads, and without the words on the rules' standings, which quote the
// AppWrapper's labels for people (a selector that does not select it).
func untimed(d decision.Decision) decision.Decision {
	d.Rules = slices.Clone(d.Rules)
	for i := range d.Rules {
		d.Rules[i].Why = ""
	}
	if e := d.Evaluation; e != nil {
		c := *e
		c.Took = 0
		d.Evaluation = &c
	}
	d.Candidates = slices.Clone(d.Candidates)
	for i := range d.Candidates {
		if e := d.Candidates[i].Evaluation; e != nil {
			c := *e
			c.Took = 0
			d.Candidates[i].Evaluation = &c
		}
	}
	return d
}

// describeCR says what a CompletionRecord holds, for traces and messages.
func describeCR(cr *wrapupv1alpha1.CompletionRecord) string {
	if cr == nil {
		return "none"
	}
	parts := make([]string, 0, len(cr.Triggers))
	for _, t := range cr.Triggers {
		if t.Decided {
			parts = append(parts, fmt.Sprintf("%d=%s", t.ComponentIndex, t.UID))
		}
	}
	s := fmt.Sprintf("%s(%s:%s by %s at %s, %s of %s", cr.Outcome, cr.Policy, strings.Join(parts, ","), cr.Rule, cr.FinishedAt.Sub(simStart), cr.Action.Action, cr.Action.Rule)
	if a := cr.Action.Since; a != nil {
		s += fmt.Sprintf(" ttl %ds since %s", ptr.Deref(cr.Action.TTLSecondsAfterFinished, 0), a.Sub(simStart))
	}
	if cr.Action.DryRun {
		s += " dryRun"
	}
	s += ")"
	switch {
	case cr.RuleUID == "":
		s += " (an earlier version's)"
	case cr.Cleared != nil:
		s += fmt.Sprintf(" cleared at %s", cr.Cleared.At.Sub(simStart))
	}
	return s
}
