package decision

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// A rule whose trigger policy is All or Any decides over several
// candidates. Each is read and evaluated as a single trigger is; the policy
// combines their states into one outcome, and the record keeps which
// candidates decided it (Record.Triggers), so that what holds for a single
// trigger holds for each of them: the record is final for the candidates
// that decided it, only one of them seen running again clears it, and
// after a failure a new attempt (one of them re-created) is evaluated
// afresh.

// settled is what a policy makes of its candidates' states.
type settled struct {
	// outcome is "" while the candidates have not decided.
	outcome wrapupv1alpha1.Outcome
	// deciders index the candidates whose states decide it.
	deciders []int
	// failure: the outcome is Failed by the candidates' states, final only
	// once the AppWrapper controller will not retry.
	failure bool
}

// settle combines the candidates' states under policy: All succeeds once
// every candidate succeeded and fails as soon as one failed; Any succeeds
// as soon as one succeeded and fails once every one failed. A candidate
// not read, absent, running, or whose evaluation failed, has not finished.
func settle(policy wrapupv1alpha1.TriggerPolicy, cs []observed) settled {
	var succeeded, failed []int
	for i, c := range cs {
		switch c.state {
		case liveSucceeded:
			succeeded = append(succeeded, i)
		case liveFailed:
			failed = append(failed, i)
		}
	}
	switch policy {
	case wrapupv1alpha1.TriggerPolicyAny:
		if len(succeeded) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded[:1]}
		}
		if len(failed) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed, failure: true}
		}
	default: // All
		if len(failed) > 0 {
			return settled{outcome: wrapupv1alpha1.OutcomeFailed, deciders: failed[:1], failure: true}
		}
		if len(succeeded) == len(cs) {
			return settled{outcome: wrapupv1alpha1.OutcomeSucceeded, deciders: succeeded}
		}
	}
	return settled{}
}

// failureKey is what the controller remembers a failure of the candidates
// by: the UIDs of those that failed, sorted.
func failureKey(cs []observed, deciders []int) types.UID {
	uids := make([]string, len(deciders))
	for k, i := range deciders {
		uids[k] = string(cs[i].info.UID)
	}
	sort.Strings(uids)
	return types.UID(strings.Join(uids, ","))
}

func (c *observed) stateWord() string {
	switch c.state {
	case liveRunning:
		return "Running"
	case liveSucceeded:
		return "Succeeded"
	case liveFailed:
		return "Failed"
	case liveError:
		return "Error"
	case liveAbsent:
		return "Absent"
	case liveTornDown:
		return "TornDown"
	}
	return "Unknown"
}

func (c *observed) name() string {
	if c.info.Name != "" {
		return c.info.Kind.Kind + " " + c.info.Name
	}
	return c.info.Kind.Kind + " " + c.info.Template
}

// decideMany decides for an AppWrapper whose winning rule has several
// candidates (policy All or Any).
func (d *Decision) decideMany(ctx context.Context, in Input, w *Rule, refs []Ref) {
	aw := in.AppWrapper
	rule := w.Rule
	policy := Policy(rule)
	d.Policy = policy
	grace := in.FailureGracePeriod
	if grace <= 0 {
		grace = DefaultFailureGracePeriod
	}
	if deployed(aw) && d.annotatedKindUnusable(in, refs) {
		return
	}
	cs, n := d.observeMany(ctx, in, w, refs)
	v := d.settleMany(in, policy, cs, n)
	if d.Recorded != nil {
		// The run's record is final for the candidates it names.
		d.decideRecorded(in, rule, policy, cs, grace, func() bool {
			v := settle(policy, cs)
			switch {
			case v.outcome == wrapupv1alpha1.OutcomeSucceeded:
				d.recordMany(in, rule, v.outcome, cs, v.deciders, "")
				return true
			case v.failure:
				if final, _, _ := failureFinality(aw, d.FailureSeen.At, in.Now, grace); final {
					d.recordMany(in, rule, v.outcome, cs, v.deciders, "")
					return true
				}
			}
			return false
		})
		return
	}
	d.decideManyAfresh(in, rule, policy, cs, v, n, grace)
}

// annotatedKindUnusable decides, when a kind of the annotated triggers refs
// is not served or not watchable, that the AppWrapper waits for it, and
// says whether it did. The kinds are claimed (d.Claims) either way.
func (d *Decision) annotatedKindUnusable(in Input, refs []Ref) bool {
	for _, ref := range refs {
		if ref.Annotated && !containsKind(d.Claims, ref.Kind) {
			d.Claims = append(d.Claims, ref.Kind)
		}
	}
	for _, gk := range d.Claims {
		if k, ok := in.Kinds[gk]; ok && !k.usable() {
			d.Verdict = VerdictTriggerNotWatchable
			d.Reason = fmt.Sprintf("the annotated triggers' kind %s is not served by the API server (is its CRD installed?)", gk)
			if k.State == KindNotWatchable {
				d.Reason = fmt.Sprintf("wrapup cannot watch the annotated triggers' kind %s: %s", gk, k.Message)
			}
			for _, ref := range refs {
				c := Candidate{TriggerInfo: TriggerInfo{Ref: ref}, State: "Unknown"}
				if ref.Kind == gk {
					c.Problem = d.Reason
				}
				d.Candidates = append(d.Candidates, c)
			}
			d.Requeue = NotWatchableRetry
			d.warn(WarningTriggerKindNotWatched, d.Reason)
			return true
		}
	}
	return false
}

// manyCounts counts the candidates not read yet (unknown), whose
// evaluation failed (errs), and not controlled by the AppWrapper.
type manyCounts struct{ unknown, errs, notOwned int }

// observeMany observes each candidate refs of rule w, with the Warnings
// they call for, into d.Candidates.
func (d *Decision) observeMany(ctx context.Context, in Input, w *Rule, refs []Ref) ([]observed, manyCounts) {
	rule := w.Rule
	cs := make([]observed, len(refs))
	var n manyCounts
	for i, ref := range refs {
		cs[i] = observeCandidate(ctx, in, w.Policy, ref)
		c := &cs[i]
		switch {
		case c.notOwned:
			n.notOwned++
			d.warn(WarningTriggerNotOwned, c.info.Problem)
		case c.state == liveError:
			n.errs++
			d.warn(WarningEvaluationError, rule.Name, c.name(), c.eval.Error)
		case c.state == liveUnknown:
			n.unknown++
		}
	}
	d.Candidates = make([]Candidate, len(cs))
	for i := range cs {
		d.Candidates[i] = Candidate{TriggerInfo: cs[i].info, Evaluation: cs[i].eval, State: cs[i].stateWord()}
	}
	return cs, n
}

// settleMany settles the candidates cs under policy, and keeps what the
// controller remembers of a failure, which follows the candidates that
// failed.
func (d *Decision) settleMany(in Input, policy wrapupv1alpha1.TriggerPolicy, cs []observed, n manyCounts) settled {
	now := in.Now
	v := settle(policy, cs)
	if v.failure && policy == wrapupv1alpha1.TriggerPolicyAll {
		// The failed candidate whose failure the controller remembers
		// decides: its grace runs from when it was first seen.
		for i := range cs {
			if cs[i].state == liveFailed && cs[i].info.UID != "" && cs[i].info.UID == in.FailureSeen.TriggerUID {
				v.deciders = []int{i}
			}
		}
	}
	switch {
	case v.failure:
		key := failureKey(cs, v.deciders)
		first := now
		if in.FailureSeen.TriggerUID == key && !in.FailureSeen.At.IsZero() && in.FailureSeen.At.Before(first) {
			first = in.FailureSeen.At
		}
		d.FailureSeen = &FailureSeen{TriggerUID: key, At: first}
	case n.unknown == 0 && n.errs == 0:
		d.FailureSeen = nil
	}
	return v
}

// decideManyAfresh decides for an AppWrapper whose run has no record, on
// the candidates cs settled as v.
func (d *Decision) decideManyAfresh(in Input, rule *wrapupv1alpha1.CompletionRule, policy wrapupv1alpha1.TriggerPolicy, cs []observed, v settled, n manyCounts, grace time.Duration) {
	aw, now := in.AppWrapper, in.Now
	phase := aw.Status.Phase
	switch {
	case v.outcome == wrapupv1alpha1.OutcomeSucceeded:
		d.recordMany(in, rule, v.outcome, cs, v.deciders, "")
		return
	case v.failure:
		final, wait, why := failureFinality(aw, d.FailureSeen.At, now, grace)
		if !final {
			d.Verdict, d.After, d.Requeue = VerdictWaitingForRetries, wait, wait
			d.Reason = fmt.Sprintf("%s failed and %s", joinNames(cs, v.deciders), why)
			return
		}
		d.recordMany(in, rule, v.outcome, cs, v.deciders, "")
		return
	case n.unknown > 0:
		d.Verdict, d.Requeue = VerdictWaitingForTrigger, PendingRetry
		d.Reason = fmt.Sprintf("%d of %d triggers were not read (their cache has not listed yet); wrapup looks again when it has", n.unknown, len(cs))
		return
	case phase == awv1beta2.AppWrapperFailed && n.errs == 0:
		// The AppWrapper controller gave up and tears the components down.
		msg := failedPhaseMessage(aw)
		d.recordMany(in, rule, wrapupv1alpha1.OutcomeFailed, cs, allOf(cs), msg)
		return
	case phase == awv1beta2.AppWrapperSucceeded && n.errs == 0 && n.notOwned == 0 && noneUnfinished(cs):
		// Every pod succeeded, as the AppWrapper controller saw it, and the
		// triggers that are not there any more (their own TTL) succeeded.
		d.recordMany(in, rule, wrapupv1alpha1.OutcomeSucceeded, cs, allOf(cs), "the AppWrapper controller marked the AppWrapper Succeeded")
		return
	}
	d.Verdict = VerdictWaitingForTrigger
	var running []string
	for i := range cs {
		if cs[i].state != liveSucceeded {
			running = append(running, cs[i].name())
		}
	}
	d.Reason = fmt.Sprintf("policy %s: %d of %d triggers have not finished (%s); wrapup evaluates again when one changes",
		policy, len(running), len(cs), Truncate(strings.Join(running, ", "), MaxMessage/2))
	if n.errs > 0 {
		d.Reason += fmt.Sprintf("; %d evaluation(s) failed, which counts as not finished (Warning Event EvaluationError)", n.errs)
	}
}

// recordMany decides to record outcome for the candidates deciders of cs,
// with message, or, when message is "", their messages joined.
func (d *Decision) recordMany(in Input, rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome, cs []observed, deciders []int, message string) {
	ts := make([]RecordedTrigger, len(deciders))
	var msgs []string
	for k, i := range deciders {
		ts[k] = RecordedTrigger{Index: cs[i].info.Index, UID: cs[i].info.UID}
		d.Candidates[i].Decided = true
		if cs[i].eval != nil && cs[i].eval.Message != "" {
			msgs = append(msgs, cs[i].name()+": "+cs[i].eval.Message)
		}
	}
	if message == "" {
		message = Truncate(strings.Join(msgs, "; "), MaxMessage)
	}
	d.recordRec(in, rule, &Record{Outcome: outcome, Rule: rule.Name, RuleUID: rule.UID, FinishedAt: in.Now.UTC().Truncate(time.Microsecond), Message: message,
		Triggers: ts, Policy: Policy(rule), Retries: in.AppWrapper.Status.Retries, DeployedAt: deployedAt(in.AppWrapper)})
}

func allOf(cs []observed) []int {
	out := make([]int, len(cs))
	for i := range cs {
		out[i] = i
	}
	return out
}

// noneUnfinished says that every candidate finished (succeeded, or failed
// by the rule) or is not there.
func noneUnfinished(cs []observed) bool {
	for i := range cs {
		if cs[i].state != liveSucceeded && cs[i].state != liveFailed && cs[i].state != liveAbsent {
			return false
		}
	}
	return true
}

func joinNames(cs []observed, idx []int) string {
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = cs[i].name()
	}
	return Truncate(strings.Join(names, ", "), MaxMessage/2)
}

func containsKind(list []schema.GroupKind, gk schema.GroupKind) bool {
	for _, k := range list {
		if k == gk {
			return true
		}
	}
	return false
}
